"""Additive and scaled dot-product attention: book values, float64 references, fast == exact."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import AdditiveAttention, DotProductAttention, scaled_dot_product


def book_toy():
    keys = torch.ones(2, 10, 2)
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    return keys, values, torch.tensor([2, 6])


def reference_attention(q, k, v, keep):
    """float64: softmax(q k^T / sqrt(d)) v with masked keys removed, zero rows if none."""
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~keep, float("-inf"))
    w = torch.softmax(scores, -1).nan_to_num(0.0)
    return w @ v.double(), w


def test_book_toy_example_additive_and_dot():
    keys, values, lens = book_toy()
    add = AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1).eval()
    out = add(torch.normal(0, 1, (2, 1, 20)), keys, values, lens)
    expected = torch.tensor([[[2.0, 3, 4, 5]], [[10.0, 11, 12, 13]]])
    torch.testing.assert_close(out, expected)
    dot = DotProductAttention(dropout=0.5).eval()
    torch.testing.assert_close(dot(torch.normal(0, 1, (2, 1, 2)), keys, values, lens), expected)
    # weights: uniform over the valid keys, zero after
    w = add.attention_weights
    torch.testing.assert_close(w[0, 0, :2], torch.full((2,), 0.5))
    assert (w[0, 0, 2:] == 0).all() and (w[1, 0, 6:] == 0).all()


@settings(max_examples=30, deadline=None)
@given(
    B=st.integers(1, 3),
    Q=st.integers(1, 5),
    K=st.integers(1, 6),
    per_query=st.booleans(),
    data=st.data(),
)
def test_dot_product_fast_and_exact_paths_match_reference(B, Q, K, per_query, data):
    D = 8
    q, k, v = torch.randn(B, Q, D), torch.randn(B, K, D), torch.randn(B, K, 5)
    n = B * Q if per_query else B
    lens = torch.tensor(data.draw(st.lists(st.integers(0, K), min_size=n, max_size=n)))
    lens = lens.reshape((B, Q) if per_query else (B,))
    keep = torch.arange(K) < (lens.unsqueeze(-1) if per_query else lens[:, None, None])
    ref_out, ref_w = reference_attention(q, k, v, keep.expand(B, Q, K))
    attn = DotProductAttention().eval()
    fast = attn(q, k, v, lens)
    assert attn.attention_weights is None  # fused path keeps nothing
    exact, weights = attn(q, k, v, lens, need_weights=True)
    torch.testing.assert_close(fast.double(), ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(exact.double(), ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, exact, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.double(), ref_w, atol=1e-6, rtol=1e-6)
    assert attn.attention_weights is weights  # kept too


@settings(max_examples=20, deadline=None)
@given(B=st.integers(1, 3), K=st.integers(2, 6), data=st.data())
def test_outputs_ignore_padded_keys_and_values(B, K, data):
    lens = torch.tensor(data.draw(st.lists(st.integers(1, K), min_size=B, max_size=B)))
    q, k, v = torch.randn(B, 3, 4), torch.randn(B, K, 4), torch.randn(B, K, 2)
    pad = ~(torch.arange(K) < lens[:, None])  # (B, K)
    k2 = torch.where(pad[..., None], torch.randn(B, K, 4) * 50, k)
    v2 = torch.where(pad[..., None], torch.randn(B, K, 2) * 50, v)
    dot = DotProductAttention().eval()
    torch.testing.assert_close(dot(q, k, v, lens), dot(q, k2, v2, lens), atol=1e-5, rtol=1e-5)
    add = AdditiveAttention(4, 4, 6).eval()
    torch.testing.assert_close(add(q, k, v, lens), add(q, k2, v2, lens), atol=1e-5, rtol=1e-5)


def test_fully_masked_rows_give_zero_output_on_both_paths():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 3)
    lens = torch.tensor([0, 2])
    dot = DotProductAttention().eval()
    for need in (False, True):
        out = dot(q, k, v, lens, need_weights=need)
        if need:
            out, weights = out
            assert (weights[0] == 0).all() and torch.isfinite(weights).all()
        assert (out[0] == 0).all() and torch.isfinite(out).all()
    add = AdditiveAttention(4, 4, 6).eval()
    assert (add(q, k, v, lens)[0] == 0).all()


def test_additive_matches_float64_formula_and_gradcheck():
    torch.manual_seed(1)
    add = AdditiveAttention(3, 4, 5).double().eval()
    q = torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 6, 2, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([3, 6])
    # formula: w_v^T tanh(W_q q + W_k k)
    Wq, Wk, wv = add.W_q.weight, add.W_k.weight, add.w_v.weight
    scores = torch.einsum(
        "h,bqkh->bqk", wv[0], torch.tanh((q @ Wq.T)[:, :, None] + (k @ Wk.T)[:, None])
    )
    keep = (torch.arange(6) < lens[:, None, None]).expand(2, 2, 6)
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
    torch.testing.assert_close(add(q, k, v, lens), w @ v)
    assert torch.autograd.gradcheck(lambda q, k, v: add(q, k, v, lens), (q, k, v))


def test_dot_product_gradcheck_both_paths():
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 2, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([2, 5])
    dot = DotProductAttention().eval()
    for need in (False, True):
        assert torch.autograd.gradcheck(
            lambda q, k, v, need=need: dot(q, k, v, lens, need_weights=need), (q, k, v)
        )  # with need_weights: the output and the weights, both differentiable


def test_dropout_only_in_training():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 3)
    dot = DotProductAttention(dropout=0.5)
    torch.testing.assert_close(dot.eval()(q, k, v), dot.eval()(q, k, v))
    dot.train()
    torch.manual_seed(0)
    a, _ = dot(q, k, v, need_weights=True)
    assert not torch.allclose(a, dot.eval()(q, k, v, need_weights=True)[0])


def test_scaled_dot_product_4d_with_broadcast_mask():
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    mask = (torch.arange(5) < torch.tensor([2, 5])[:, None])[:, None, None, :]  # (B, 1, 1, K)
    fast, none = scaled_dot_product(q, k, v, mask)
    exact, w = scaled_dot_product(q, k, v, mask, need_weights=True)
    assert none is None and w.shape == (2, 4, 3, 5)
    torch.testing.assert_close(fast, exact, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        (
            (torch.randn(2, 1, 3), torch.randn(2, 4, 2), torch.randn(2, 4, 2)),
            ValueError,
            "same width D",
        ),
        (
            (torch.randn(2, 1, 2), torch.randn(3, 4, 2), torch.randn(3, 4, 2)),
            ValueError,
            "batch size",
        ),
        (
            (torch.randn(2, 1, 2), torch.randn(2, 4, 2), torch.randn(2, 3, 2)),
            ValueError,
            "same length K",
        ),
        ((torch.randn(1, 2), torch.randn(2, 4, 2), torch.randn(2, 4, 2)), ValueError, "3-D"),
        (
            (torch.ones(2, 1, 2, dtype=torch.long), torch.randn(2, 4, 2), torch.randn(2, 4, 2)),
            TypeError,
            "floating",
        ),
    ],
)
def test_dot_product_input_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        DotProductAttention()(*args)


def test_additive_errors():
    with pytest.raises(ValueError, match="key_size must be a positive int, got 0"):
        AdditiveAttention(0, 2, 3)
    add = AdditiveAttention(2, 20, 8)
    with pytest.raises(ValueError, match=r"expected queries \(\.\.\., 20\)"):
        add(torch.randn(2, 1, 19), torch.ones(2, 10, 2), torch.ones(2, 10, 4))
    with pytest.raises(ValueError, match=r"must lie in \[0, 10\]"):
        add(
            torch.randn(2, 1, 20), torch.ones(2, 10, 2), torch.ones(2, 10, 4), torch.tensor([2, 11])
        )
