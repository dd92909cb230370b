"""Reliability tests of the kind PyTorch, fairseq and OpenNMT keep.

- golden outputs of a frozen tiny checkpoint (``golden_tiny.json``, written once by
  ``tools/make_golden_tiny.py``): any change of the model's arithmetic shows here;
- batch invariance: a sentence alone decodes as it does inside a padded bucket;
- degenerate shapes: lengths 0 and 1, batch size equal to the sequence length;
- causal masking with fewer queries than keys (a cached decoding step);
- beam search against a hand-computed probability table;
- train/eval parity with dropout 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from attnkit.attention.kv_cache import KVCache
from attnkit.attention.masking import causal_mask
from attnkit.attention.multihead import MultiHeadAttention
from attnkit.inference.beam_search import BeamSearch
from attnkit.inference.decoding import greedy_decode
from attnkit.models.transformer import TransformerConfig, build_transformer

BOS, EOS, PAD = 2, 3, 1
GOLDEN = json.loads((Path(__file__).parent / "golden_tiny.json").read_text())


def _golden_model():
    model = build_transformer(
        TransformerConfig(**GOLDEN["config"]), GOLDEN["src_vocab"], GOLDEN["tgt_vocab"]
    )
    model.load_state_dict({k: torch.tensor(v) for k, v in GOLDEN["state_dict"].items()})
    return model.eval()


def test_golden_outputs_of_a_frozen_checkpoint():
    model = _golden_model()
    src, src_len = torch.tensor(GOLDEN["src"]), torch.tensor(GOLDEN["src_len"])
    with torch.no_grad():
        logits, _ = model(src, torch.tensor(GOLDEN["dec_in"]), src_len)
    torch.testing.assert_close(logits, torch.tensor(GOLDEN["logits"]), rtol=0, atol=2e-5)
    greedy = greedy_decode(model, src, src_len, bos_id=BOS, eos_id=EOS, max_len=6)
    assert greedy.tokens == GOLDEN["greedy"] and greedy.finished == GOLDEN["greedy_finished"]
    beams = BeamSearch(3, 6, BOS, EOS)(model, src, src_len)
    for hyps, expected in zip(beams, GOLDEN["beam"], strict=True):
        assert [h.tokens for h in hyps] == [e["tokens"] for e in expected]
        assert [h.finished for h in hyps] == [e["finished"] for e in expected]
        for h, e in zip(hyps, expected, strict=True):
            assert h.log_prob == pytest.approx(e["log_prob"], abs=1e-4)


def _bucket_with(sentence: list[int], others: list[list[int]]):
    rows = [sentence, *others]
    width = max(len(r) for r in rows) + 2  # extra padding on every row
    src = torch.full((len(rows), width), PAD)
    for i, r in enumerate(rows):
        src[i, : len(r)] = torch.tensor(r)
    return src, torch.tensor([len(r) for r in rows])


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_sentence_alone_decodes_as_inside_a_padded_bucket(search):
    model = _golden_model()
    sentence = [4, 5, 6, EOS]
    others = [[7, 8, 9, 9, 8, 7, EOS], [9, EOS], [5, 5, 5, 5, 5, EOS]]
    alone = (torch.tensor([sentence]), torch.tensor([len(sentence)]))
    bucket = _bucket_with(sentence, others)
    if search == "greedy":
        a = greedy_decode(model, *alone, bos_id=BOS, eos_id=EOS, max_len=7)
        b = greedy_decode(model, *bucket, bos_id=BOS, eos_id=EOS, max_len=7)
        assert a.tokens[0] == b.tokens[0] and a.finished[0] == b.finished[0]
    else:
        a = BeamSearch(3, 7, BOS, EOS)(model, *alone)[0]
        b = BeamSearch(3, 7, BOS, EOS)(model, *bucket)[0]
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for x, y in zip(a, b, strict=True):
            assert x.log_prob == pytest.approx(y.log_prob, abs=1e-5)


def test_degenerate_shapes():
    model = _golden_model()
    # length 1 (only <eos>) and a padded row of length 1 next to a longer one
    out = greedy_decode(
        model, torch.tensor([[EOS, PAD, PAD], [4, 5, EOS]]), torch.tensor([1, 3]),
        bos_id=BOS, eos_id=EOS, max_len=4,
    )  # fmt: skip
    assert len(out.tokens) == 2 and all(len(t) <= 4 for t in out.tokens)
    # batch size equal to the sequence length: the batch axis and the time axis must not mix
    torch.manual_seed(0)
    src = torch.randint(4, 10, (5, 5))
    lens = torch.tensor([5, 4, 3, 2, 1])
    with torch.no_grad():
        full, _ = model(src, src.clone(), lens)
        for i in range(5):
            row, _ = model(src[i : i + 1], src[i : i + 1].clone(), lens[i : i + 1])
            torch.testing.assert_close(full[i : i + 1], row, rtol=1e-5, atol=1e-6)
    # a key length of 0: the row attends nothing and gets a zero output, never NaN
    mha = MultiHeadAttention(8, 2).eval()
    X = torch.randn(2, 3, 8)
    with torch.no_grad():
        Y, weights = mha(X, X, X, torch.tensor([0, 3]), need_weights=True)
    assert torch.isfinite(Y).all()
    assert torch.equal(weights[0], torch.zeros(2, 3, 3))
    torch.testing.assert_close(Y[0], mha.W_o(torch.zeros(3, 8)))  # zero heads, then W_o
    # empty (0-token) targets are refused with a message, not an index error
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        greedy_decode(model, src, lens, bos_id=BOS, eos_id=EOS, max_len=0)


def test_causal_mask_with_fewer_queries_than_keys_is_a_cached_step():
    mask = causal_mask(2, 5)  # the last 2 of 5 positions
    assert mask.tolist() == [[True, True, True, True, False], [True] * 5]
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    X = torch.randn(1, 5, 8)
    with torch.no_grad():
        full, full_weights = mha(X, causal=True, need_weights=True)  # (1, 5, 8)
        cache = KVCache()
        mha(X[:, :3], causal=True, cache=cache)  # positions 0..2 into the cache
        step, weights = mha(X[:, 3:], causal=True, cache=cache, need_weights=True)  # 3 and 4
    assert len(cache) == 5 and weights.shape == (1, 2, 2, 5)
    torch.testing.assert_close(step, full[:, 3:], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights, full_weights[:, :, 3:], rtol=1e-5, atol=1e-6)
    assert (weights[..., 0, 4] == 0).all()  # query 3 does not see key 4


class _TableDecoder(nn.Module):
    """log P(next | previous token) from a fixed table: a Markov chain over 5 tokens."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("log_p", table.log())

    def init_state(self, enc_outputs, src_len, *args):
        return [enc_outputs]

    def reorder_state(self, state, index):
        return [state[0].index_select(0, index)]

    def forward(self, X, state):
        return self.log_p[X[:, -1]].unsqueeze(1), state  # (B, 1, V)


class _TableModel(nn.Module):
    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.encoder = lambda src, src_len: src.float()[..., None]
        self.decoder = _TableDecoder(table)


def test_beam_search_against_a_hand_computed_table():
    a, b, c = 0, 1, 4  # tokens; 2 = <bos>, 3 = <eos>
    table = torch.full((5, 5), 1e-12, dtype=torch.float64)
    table[BOS, [a, b, c, EOS]] = torch.tensor([0.5, 0.4, 0.05, 0.05], dtype=torch.float64)
    table[a, [a, b, c, EOS]] = torch.tensor([0.2, 0.2, 0.2, 0.4], dtype=torch.float64)
    table[b, [a, b, c, EOS]] = torch.tensor([0.05, 0.025, 0.9, 0.025], dtype=torch.float64)
    table[c, [a, b, c, EOS]] = torch.tensor([0.05, 0.03, 0.02, 0.9], dtype=torch.float64)
    model = _TableModel(table / table.sum(1, keepdim=True))
    src, src_len = torch.zeros(1, 1, dtype=torch.long), torch.tensor([1])
    # by hand: greedy takes a (0.5) then <eos> (0.4): P = 0.2. A beam of 2 keeps b (0.4),
    # extends it to b c (0.36) over a <eos> (0.2), then b c <eos> = 0.324 > 0.2.
    greedy = greedy_decode(model, src, src_len, bos_id=BOS, eos_id=EOS, max_len=3)
    assert greedy.tokens == [[a]] and greedy.finished == [True]
    hyps = BeamSearch(2, 3, BOS, EOS)(model, src, src_len)[0]
    assert [h.tokens for h in hyps] == [[b, c], [a]]
    assert [h.finished for h in hyps] == [True, True]
    assert hyps[0].log_prob == pytest.approx(math.log(0.4 * 0.9 * 0.9), abs=1e-5)
    assert hyps[1].log_prob == pytest.approx(math.log(0.5 * 0.4), abs=1e-5)
    # with a length penalty the shorter one wins: 0.2 / 1^a vs 0.324 over a longer length
    strong = BeamSearch(2, 3, BOS, EOS, length_penalty=2.0)(model, src, src_len)[0]
    expected = sorted(
        [([b, c], math.log(0.324) / ((5 + 3) / 6) ** 2), ([a], math.log(0.2) / ((5 + 2) / 6) ** 2)],
        key=lambda t: -t[1],
    )
    assert [h.tokens for h in strong] == [t for t, _ in expected]
    assert [h.score for h in strong] == pytest.approx([s for _, s in expected], abs=1e-5)


def test_train_and_eval_agree_with_dropout_zero():
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0)
    model = build_transformer(cfg, 12, 12)
    src = torch.randint(4, 12, (3, 6))
    tgt = torch.randint(4, 12, (3, 5))
    lens = torch.tensor([6, 4, 2])
    with torch.no_grad():
        train_out, _ = model.train()(src, tgt, lens)
        eval_out, _ = model.eval()(src, tgt, lens)
    torch.testing.assert_close(train_out, eval_out, rtol=1e-5, atol=1e-6)
