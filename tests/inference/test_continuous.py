"""Continuous batching: rows that join a decoding batch (``TransformerDecoder.append_rows``)
decode as they would alone, and ``continuous_greedy`` gives every sentence the tokens of
greedy decoding on its own, whatever the batch size and refill threshold (float64)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.inference.continuous import continuous_greedy, supports_continuous
from attnkit.inference.decoding import greedy_decode
from attnkit.models import transformer_step
from attnkit.models.registry import build_model
from attnkit.models.transformer import TransformerConfig, build_transformer

V_SRC, V_TGT, BOS, EOS = 13, 11, 1, 2


def _model(pre_norm: bool = True, seed: int = 0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        d_model=16, num_heads=2, num_layers=2, d_ff=32, dropout=0.0, pre_norm=pre_norm, bias=True
    )
    model = build_transformer(cfg, V_SRC, V_TGT).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or "bias" in name or "final_norm" in name:
                p.add_(0.3 * torch.randn_like(p))
        model.decoder.dense.bias[EOS] += 1.0  # some sentences end with <eos>, some at max_len
    return model


def _sources(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n right-padded sources of 1-8 tokens: (n, S) long, (n,) lengths."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (n,), generator=g)
    src = torch.randint(3, V_SRC, (n, int(lengths.max())), generator=g)
    src[torch.arange(src.shape[1]) >= lengths[:, None]] = 0
    return src, lengths


def _alone(model, src, src_len, max_len: int):
    """(tokens, finished) of each sentence decoded on its own."""
    res = [
        greedy_decode(
            model, src[i : i + 1, : int(src_len[i])], src_len[i : i + 1],
            bos_id=BOS, eos_id=EOS, max_len=max_len,
        )  # fmt: skip
        for i in range(len(src_len))
    ]
    return [r.tokens[0] for r in res], [r.finished[0] for r in res]


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("pre_norm", [True, False])
def test_joined_rows_decode_as_they_would_alone(lean, pre_norm, monkeypatch):
    """Group A decodes 3 positions, group B (longer sources) 1; joined, both go on with
    fixed tokens: every row's logits are its own, alone, at its own positions."""
    if not lean:
        monkeypatch.setattr(transformer_step, "applies", lambda *a: False)
    model, dec = _model(pre_norm), None
    dec = model.decoder
    src, src_len = _sources(5, seed=1)
    feed = torch.randint(3, V_TGT, (5, 6), generator=torch.Generator().manual_seed(2))
    groups = [slice(0, 3), slice(3, 5)]
    steps_before = [3, 1]

    @torch.no_grad()
    def run(rows: slice, n: int, state=None):
        s, lens = src[rows], src_len[rows]
        s = s[:, : int(lens.max())]
        if state is None:
            state = dec.init_state(model.encoder(s, lens), lens)
        out = []
        for t in range(n):
            logits, state = dec(feed[rows, t : t + 1], state)
            out.append(logits)
        return torch.cat(out, 1), state

    alone = [run(slice(i, i + 1), 6)[0] for i in range(5)]  # (1, 6, V) each
    (_, a), (_, b) = (run(g, n) for g, n in zip(groups, steps_before, strict=True))
    state = dec.append_rows(a, b)
    assert state[2][0].self_attention.start.tolist() == [0, 0, 0, 2, 2]
    with torch.no_grad():
        for t in range(3):  # A at positions 3-5, B at 1-3
            y = torch.cat([feed[0:3, 3 + t : 4 + t], feed[3:5, 1 + t : 2 + t]])
            logits, state = dec(y, state)
            for i in range(5):
                want = alone[i][0, (3 if i < 3 else 1) + t]
                torch.testing.assert_close(logits[i, 0], want, rtol=1e-10, atol=1e-10)
    # the rows of A leave: the columns every row of B pads go with them, and B decodes on
    # (its position 4, in place in the kept buffer) as it would alone
    held = len(state[2][0])
    state = dec.reorder_state(state, torch.tensor([3, 4]))
    cache = state[2][0].self_attention
    assert cache.start is None and len(cache) == held - 2
    with torch.no_grad():
        logits, state = dec(feed[3:5, 4:5], state)
    for i in (3, 4):
        torch.testing.assert_close(logits[i - 3, 0], alone[i][0, 4], rtol=1e-10, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(
    count=st.integers(1, 23),
    batch_size=st.integers(1, 9),
    refill=st.integers(1, 9),
    max_len=st.integers(1, 14),
    seed=st.integers(0, 3),
)
def test_every_sentence_gets_its_tokens_alone(count, batch_size, refill, max_len, seed):
    model = _model(pre_norm=seed % 2 == 0, seed=seed)
    src, src_len = _sources(count, seed)
    calls = []

    def encode(first: int, n: int):
        calls.append((first, n))
        lens = src_len[first : first + n]
        return src[first : first + n, : int(lens.max())], lens

    tokens, finished = continuous_greedy(
        model, encode, count, bos_id=BOS, eos_id=EOS, max_len=max_len,
        batch_size=batch_size, refill=refill,
    )  # fmt: skip
    assert (tokens, finished) == _alone(model, src, src_len, max_len)
    # every sentence encoded once, in queue order, never more than batch_size at once
    assert [f for f, _ in calls] == [sum(n for _, n in calls[:i]) for i in range(len(calls))]
    assert sum(n for _, n in calls) == count and max(n for _, n in calls) <= batch_size


def test_both_endings_and_refills_happen():
    """The property test's cases include sentences ending with <eos> and at max_len, and
    joins into a running batch (not only fresh batches)."""
    model = _model(seed=1)
    src, src_len = _sources(40, seed=5)
    joins = []
    real = model.decoder.append_rows

    def spy(a, b):
        joins.append((a[0].shape[0], b[0].shape[0]))
        return real(a, b)

    model.decoder.append_rows = spy
    tokens, finished = continuous_greedy(
        model, lambda f, n: (src[f : f + n], src_len[f : f + n]), 40,
        bos_id=BOS, eos_id=EOS, max_len=12, batch_size=8, refill=2,
    )  # fmt: skip
    assert {True, False} <= set(finished)
    assert joins and all(a + b <= 8 for a, b in joins)
    assert (tokens, finished) == _alone(model, src, src_len, 12)


def test_mode_is_restored_and_an_empty_queue_decodes_nothing():
    model = _model().train()
    out = continuous_greedy(
        model, lambda f, n: None, 0, bos_id=BOS, eos_id=EOS, max_len=5, batch_size=4
    )
    assert out == ([], []) and model.training


def test_errors_name_the_argument():
    rnn = build_model("bahdanau", {"embed_size": 8, "num_hiddens": 8}, V_SRC, V_TGT)
    assert not supports_continuous(rnn) and supports_continuous(_model())
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=5, batch_size=4)
    with pytest.raises(TypeError, match="decoder has append_rows, got EncoderDecoder with Seq2Seq"):
        continuous_greedy(rnn, lambda f, n: None, 1, **kw)
    with pytest.raises(TypeError, match="encode must be callable, got int"):
        continuous_greedy(_model(), 3, 1, **kw)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        continuous_greedy(_model(), lambda f, n: None, 1, **{**kw, "batch_size": 0})
    with pytest.raises(ValueError, match="refill must be a positive int, got 0"):
        continuous_greedy(_model(), lambda f, n: None, 1, refill=0, **kw)
    model = _model()
    src, src_len = _sources(2, 0)
    fresh = model.decoder.init_state(model.encoder(src, src_len), src_len)
    with pytest.raises(ValueError, match="append_rows joins states that have decoded"):
        model.decoder.append_rows(fresh, fresh)
