"""key_padded_attention: values and gradients against a float64 loop; MHA routing; errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import MultiHeadAttention, key_padding
from attnkit.attention.key_padding import key_padded_attention


def reference(q, k, v, lens):
    """Plain float64 loop: each (row, head) attends to its first lens[b] keys; 0 if none."""
    q, k, v = q.double(), k.double(), v.double()
    out = torch.zeros(*q.shape[:3], v.shape[-1], dtype=torch.float64)
    for b, n in enumerate(lens.tolist()):
        if n == 0:
            continue
        s = q[b] @ k[b, :, :n].transpose(-1, -2) / math.sqrt(q.shape[-1])  # (H, Q, n)
        out[b] = torch.softmax(s, -1) @ v[b, :, :n]
    return out + 0 * (q.sum() + k.sum() + v.sum())  # keep a graph when every row is empty


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 4),
    H=st.integers(1, 3),
    Q=st.integers(1, 6),
    K=st.integers(1, 7),
    data=st.data(),
)
def test_values_and_grads_match_reference(B, H, Q, K, data):
    lens = torch.tensor(data.draw(st.lists(st.integers(0, K), min_size=B, max_size=B)))
    g = torch.Generator().manual_seed(B * 100 + H * 10 + K)
    q, k, v = (torch.randn(B, H, T, 4, generator=g) for T in (Q, K, K))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = key_padded_attention(q, k, v, lens)
    torch.testing.assert_close(out.double(), reference(q, k, v, lens), atol=1e-5, rtol=1e-5)
    grad = torch.randn(out.shape, generator=g)
    got = torch.autograd.grad(out, (q, k, v), grad)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    want = torch.autograd.grad(reference(q64, k64, v64, lens), (q64, k64, v64), grad.double())
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)
    for b, n in enumerate(lens.tolist()):  # padded keys/values get exactly zero gradient
        assert torch.all(got[1][b, :, n:] == 0) and torch.all(got[2][b, :, n:] == 0)
        if n == 0:
            assert torch.all(out[b] == 0) and torch.all(got[0][b] == 0)


def test_gradcheck_float64():
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(3, 2, T, 3, generator=g, dtype=torch.float64, requires_grad=True)
        for T in (4, 5, 5)
    )
    lens = torch.tensor([5, 0, 2])
    assert torch.autograd.gradcheck(lambda q, k, v: key_padded_attention(q, k, v, lens), (q, k, v))


def test_equals_masked_sdpa_on_strided_heads():
    """Heads split from a fused (B, T, 3, H, Dh) projection, as MultiHeadAttention makes them."""
    g = torch.Generator().manual_seed(1)
    qkv = torch.randn(4, 9, 3, 2, 8, generator=g, requires_grad=True)
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # (B, H, T, Dh), not contiguous
    lens = torch.tensor([9, 3, 1, 6])
    mask = (torch.arange(9) < lens[:, None])[:, None, None, :]
    ours = key_padded_attention(q, k, v, lens)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, sdpa, atol=1e-6, rtol=1e-5)
    (ga,) = torch.autograd.grad(ours.square().sum(), qkv)
    (gb,) = torch.autograd.grad(sdpa.square().sum(), qkv)
    torch.testing.assert_close(ga, gb, atol=1e-5, rtol=1e-5)


def test_multihead_attention_routes_long_padded_keys(monkeypatch):
    """K >= MIN_KEYS with (B,) lengths, no dropout, no weights: the key-padded path runs
    and gives the masked path's output; causal, per-query lengths, weights and dropout do not."""
    calls = []
    real = key_padding.key_padded_attention
    monkeypatch.setattr(key_padding, "key_padded_attention", lambda *a: calls.append(1) or real(*a))
    torch.manual_seed(0)
    K = key_padding.MIN_KEYS
    mha = MultiHeadAttention(16, 4, skip_key_padding=True).eval()
    X = torch.randn(3, K, 16)
    lens = torch.tensor([K, 5, 0])
    out = mha(X, X, X, lens)
    assert len(calls) == 1
    MultiHeadAttention(16, 4).eval()(X, X, X, lens)  # opt-in: not without skip_key_padding
    assert len(calls) == 1
    want, _ = mha(X, X, X, lens, need_weights=True)  # explicit weights path
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    mha(X, X, X, lens, causal=True)
    mha(X, X, X, lens[:, None].expand(3, K).contiguous())
    mha(X[:, : K - 1], X[:, : K - 1], X[:, : K - 1], lens.clamp(max=K - 1))  # too short
    mha(X[:, :1], X, X, lens)  # one query per row (a decoding step): batched kernel
    mha.train()
    mha.dropout = 0.1
    mha(X, X, X, lens)
    assert len(calls) == 1


def test_errors_name_the_argument():
    q = torch.randn(2, 1, 3, 4)
    with pytest.raises(
        ValueError,
        match=r"lens must lie in \[0, 3\] \(the number of keys\), got values in \[-1, 2\]",
    ):
        key_padded_attention(q, q, q, torch.tensor([2, -1]))
    with pytest.raises(ValueError, match=r"lens must have shape \(B,\) = \(2,\), got \(3,\)"):
        key_padded_attention(q, q, q, torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"lens must have shape \(B,\) = \(2,\), got \(2, 3\)"):
        key_padded_attention(q, q, q, torch.ones(2, 3, dtype=torch.long))  # per-query lengths
    with pytest.raises(
        TypeError, match=r"lens must have an integer dtype \(lengths\), got torch\.float32"
    ):
        key_padded_attention(q, q, q, torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"q, k, v must be \(B, H, T, Dh\)"):
        key_padded_attention(q[0], q[0], q[0], torch.tensor([1]))
    with pytest.raises(ValueError, match=r"float32/float64 CPU tensors, got torch\.float16"):
        key_padded_attention(q.half(), q.half(), q.half(), torch.tensor([1, 2]))
