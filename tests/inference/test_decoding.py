"""Batched greedy decoding: equal to one sentence at a time, <eos> pruning, attention."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnkit.inference.decoding import greedy_decode, translate
from attnkit.models.seq2seq import Decoder, Encoder, EncoderDecoder

BOS, EOS = 2, 3


@pytest.mark.parametrize("arch", ["seq2seq", "bahdanau"])
def test_batched_equals_one_at_a_time(tiny_model, arch):
    model = tiny_model(arch, seed=1)
    torch.manual_seed(1)
    lengths = torch.tensor([9, 5, 3, 7, 2, 9, 1, 4])
    src = torch.randint(4, 30, (8, 9))
    src[torch.arange(9) >= lengths[:, None]] = 1  # <pad>
    batched = greedy_decode(
        model, src, lengths, bos_id=BOS, eos_id=EOS, max_len=12, return_attention=arch == "bahdanau"
    )
    for i in range(8):
        one = greedy_decode(
            model,
            src[i : i + 1, : lengths[i]],
            lengths[i : i + 1],
            bos_id=BOS,
            eos_id=EOS,
            max_len=12,
            return_attention=arch == "bahdanau",
        )
        assert batched.tokens[i] == one.tokens[0]
        assert batched.finished[i] == one.finished[0]
        if arch == "bahdanau":
            torch.testing.assert_close(batched.attention[i], one.attention[0], atol=1e-5, rtol=0)
    assert model.training  # mode restored


class _Scripted(nn.Module):
    """Row b emits token 10 + step until step ``stop[b]``, then <eos>; counts its calls."""

    def __init__(self, stop):
        super().__init__()
        self.stop = torch.tensor(stop)
        self.rows_seen: list[int] = []

    def forward(self, X, state):
        rows, step = state  # original row ids (B',), step count
        self.rows_seen.append(len(rows))
        tok = torch.where(self.stop[rows] == step, EOS, 10 + step)
        logits = torch.nn.functional.one_hot(tok, 20).float().unsqueeze(1)  # (B', 1, V)
        return logits, (rows, step + 1)


class _ScriptedDecoder(Decoder):
    def __init__(self, stop):
        super().__init__()
        self.inner = _Scripted(stop)
        self.w = nn.Parameter(torch.zeros(1))

    def init_state(self, enc_outputs, *args):
        return (torch.arange(len(self.inner.stop)), 0)

    def forward(self, X, state):
        return self.inner(X, state)

    def reorder_state(self, state, index):
        return (state[0][index], state[1])


class _NullEncoder(Encoder):
    def forward(self, X, *args):
        return None


def test_rows_stop_at_eos_and_are_dropped():
    model = EncoderDecoder(_NullEncoder(), _ScriptedDecoder([2, 0, 5, 1]))
    src, src_len = torch.zeros(4, 3, dtype=torch.long), torch.tensor([3, 3, 3, 3])
    res = greedy_decode(model, src, src_len, bos_id=BOS, eos_id=EOS, max_len=4)
    assert res.tokens == [[10, 11], [], [10, 11, 12, 13], [10]]
    assert res.finished == [True, True, False, True]
    # finished rows leave the batch: 4, 3 (row 1 done), 2 (row 3 done), 1 (row 0 done)
    assert model.decoder.inner.rows_seen == [4, 3, 2, 1]
    calls = []
    greedy_decode(model, src, src_len, bos_id=BOS, eos_id=EOS, max_len=2, on_step=calls.append)
    assert len(calls) == 2


def test_attention_rows_are_distributions_over_the_source(tiny_model):
    model = tiny_model("bahdanau")
    src = torch.tensor([[5, 6, 7, 3, 1, 1], [8, 3, 1, 1, 1, 1]])
    res = greedy_decode(
        model, src, torch.tensor([4, 2]), bos_id=BOS, eos_id=EOS, max_len=5, return_attention=True
    )
    for i, n in enumerate([4, 2]):
        att = res.attention[i]
        steps = len(res.tokens[i]) + int(res.finished[i])
        assert att.shape == (steps, n)
        torch.testing.assert_close(att.sum(-1), torch.ones(steps))
    with pytest.raises(ValueError, match="records no attention"):
        greedy_decode(
            tiny_model("seq2seq"),
            src,
            torch.tensor([4, 2]),
            bos_id=BOS,
            eos_id=EOS,
            max_len=3,
            return_attention=True,
        )


def test_translate_keeps_input_order(tiny_data, tiny_model):
    model = tiny_model("bahdanau")
    sentences = ["the girl is good .", "we wash the pen .", "they are sad ."]
    hyps = translate(model, tiny_data, sentences, batch_size=2)
    singles = [translate(model, tiny_data, [s])[0] for s in sentences]
    assert hyps == singles
    assert [h.text for h in hyps] == [tiny_data.detokenize(h.ids) for h in hyps]
    assert translate(model, tiny_data, []) == []
    with pytest.raises(TypeError, match="list of str"):
        translate(model, tiny_data, "they are sad .")
    with pytest.raises(ValueError, match="empty sentence"):
        translate(model, tiny_data, [" "])


def test_input_validation(tiny_model):
    model = tiny_model("seq2seq")
    src = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"src_len must have shape \(B,\) = \(2,\)"):
        greedy_decode(model, src, torch.tensor([3]), bos_id=BOS, eos_id=EOS, max_len=3)
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        greedy_decode(model, src, torch.tensor([3, 3]), bos_id=BOS, eos_id=EOS, max_len=0)
    with pytest.raises(TypeError, match=r"src must be a \(B, S\) long tensor, got dtype"):
        greedy_decode(model, src.float(), torch.tensor([3, 3]), bos_id=BOS, eos_id=EOS, max_len=3)
    with pytest.raises(ValueError, match=r"src must be a \(B, S\) long tensor, got shape"):
        greedy_decode(model, src[0], torch.tensor([3, 3]), bos_id=BOS, eos_id=EOS, max_len=3)
    with pytest.raises(TypeError, match=r"max_len must be a positive int, got 3\.0 \(float\)"):
        greedy_decode(model, src, torch.tensor([3, 3]), bos_id=BOS, eos_id=EOS, max_len=3.0)
    with pytest.raises(TypeError, match="return_attention must be a bool"):
        greedy_decode(model, src, torch.tensor([3, 3]), bos_id=BOS, eos_id=EOS, max_len=3,
                      return_attention=1)  # fmt: skip
    with pytest.raises(ValueError, match="eos_id must be a non-negative int, got -1"):
        greedy_decode(model, src, torch.tensor([3, 3]), bos_id=BOS, eos_id=-1, max_len=3)
    with pytest.raises(TypeError, match="EncoderDecoder"):
        greedy_decode(nn.Linear(2, 2), src, torch.tensor([3, 3]), bos_id=BOS, eos_id=EOS, max_len=3)


def test_suppressed_ids_are_never_chosen_by_greedy_or_beam():
    """Marian's pad (bad_words_ids): its logits are -inf before the argmax / after the
    log-softmax, so the next best token is chosen; <eos> cannot be suppressed."""
    from attnkit.inference.beam_search import BeamSearch
    from attnkit.models.transformer import TransformerConfig, build_transformer

    torch.manual_seed(0)
    model = build_transformer(TransformerConfig(d_model=16, num_heads=2, d_ff=32), 12, 12).eval()
    src, src_len = torch.tensor([[4, 5, 6, 3], [7, 8, 3, 1]]), torch.tensor([4, 3])
    plain = greedy_decode(model, src, src_len, bos_id=2, eos_id=3, max_len=8)
    banned = sorted({t for row in plain.tokens for t in row})[:2]
    assert banned  # the plain decode emits them
    res = greedy_decode(model, src, src_len, bos_id=2, eos_id=3, max_len=8, suppress=banned)
    assert not {t for row in res.tokens for t in row} & set(banned)
    with torch.no_grad():  # the first step's choice is the best id not suppressed
        logits, _ = model.decoder(torch.full((2, 1), 2), model.decoder.init_state(
            model.encoder(src, src_len), src_len))  # fmt: skip
    first = logits[:, 0].index_fill(-1, torch.tensor(banned), float("-inf")).argmax(-1)
    assert [row[0] if row else 3 for row in res.tokens] == first.tolist()
    beams = BeamSearch(3, 8, 2, 3, suppress=banned)(model, src, src_len)
    assert not {t for hyps in beams for h in hyps for t in h.tokens} & set(banned)
    with pytest.raises(ValueError, match="suppress must not hold the <eos> id 3"):
        greedy_decode(model, src, src_len, bos_id=2, eos_id=3, max_len=8, suppress=[3])
    with pytest.raises(TypeError, match="suppress must be a sequence of token ids, got int"):
        BeamSearch(2, 8, 2, 3, suppress=5)


def test_a_forced_eos_ends_every_sentence_at_the_limit():
    """transformers' forced_eos_token_id: at the last step only <eos> is chosen (greedy) or
    continues a hypothesis at no cost (beam search); what ends earlier is unchanged."""
    from attnkit.inference.beam_search import BeamSearch
    from attnkit.models.transformer import TransformerConfig, build_transformer

    torch.manual_seed(0)
    model = build_transformer(TransformerConfig(d_model=16, num_heads=2, d_ff=32), 12, 12).eval()
    src, src_len = torch.tensor([[4, 5, 6, 3], [7, 8, 3, 1]]), torch.tensor([4, 3])
    for steps in (1, 3, 6):
        kw = dict(bos_id=2, eos_id=3, max_len=steps)
        plain = greedy_decode(model, src, src_len, **kw)
        forced = greedy_decode(model, src, src_len, force_eos=True, **kw)
        assert all(forced.finished)
        for p, f, done in zip(plain.tokens, forced.tokens, plain.finished, strict=True):
            assert f == (p if done else p[: steps - 1])
        for k in (1, 3):
            beams = BeamSearch(k, steps, 2, 3, force_eos=True)(model, src, src_len)
            assert all(h.finished and len(h.tokens) < steps for hyps in beams for h in hyps)
        one = BeamSearch(1, steps, 2, 3, force_eos=True)(model, src, src_len)
        assert [hyps[0].tokens for hyps in one] == forced.tokens  # a beam of 1 is greedy
    with pytest.raises(TypeError, match="force_eos must be a bool"):
        BeamSearch(2, 8, 2, 3, force_eos=1)
