"""The two attention kernels compute one function: explicit products against a float64
reference and the fused kernel (masks, causal with a cache, empty rows, gradients), the
choice by device, dtype and length, and the override."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnkit.attention import kernels
from attnkit.attention.kernels import (
    MATMUL_MAX_KEYS,
    choose_kernel,
    explicit_attention,
    explicit_products,
    set_attention_kernel,
)
from attnkit.attention.multihead import MultiHeadAttention


def _reference(q, k, v, mask):
    """softmax(q kᵀ / sqrt(d)) v in float64, masked keys excluded, empty rows zero."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row of -inf: NaN -> 0
    return w @ v


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) for _ in range(3)]


def test_explicit_products_equal_the_reference_and_the_fused_kernel(qkv):
    q, k, v = qkv
    g = torch.Generator().manual_seed(1)
    mask = torch.rand(2, 1, 5, 5, generator=g) > 0.3
    mask[0, 0, 2] = False  # a query with no key: a zero row
    for m in (None, mask):
        out = explicit_attention(q, k, v, m)
        torch.testing.assert_close(out, _reference(q, k, v, m), rtol=1e-12, atol=1e-12)
        fused = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        torch.testing.assert_close(out, fused, rtol=1e-10, atol=1e-10)
    assert explicit_attention(q, k, v, mask)[0, :, 2].abs().max() == 0  # not NaN
    out, weights = explicit_products(q, k, v, mask)  # the same, with its weights
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~mask, -math.inf)  # sqrt(4) = 2
    expected = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, _reference(q, k, v, mask), rtol=1e-12, atol=1e-12)
    # causal, and the last 2 queries over 5 keys (a cache): query i sees keys <= i + 3
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(
        explicit_attention(q, k, v, is_causal=True), _reference(q, k, v, causal)
    )
    torch.testing.assert_close(
        explicit_attention(q[..., 3:, :], k, v, is_causal=True),
        _reference(q[..., 3:, :], k, v, causal[3:]),
    )
    both = explicit_attention(q, k, v, mask, is_causal=True)
    torch.testing.assert_close(both, _reference(q, k, v, mask & causal))


def test_explicit_products_have_the_exact_gradient(qkv):
    q, k, v = (t[:1, :2].clone().requires_grad_() for t in qkv)
    mask = torch.ones(1, 1, 5, 5, dtype=torch.bool).tril()
    assert torch.autograd.gradcheck(lambda a, b, c: explicit_attention(a, b, c, mask), (q, k, v))


def test_the_choice_by_device_dtype_and_length_and_its_override():
    assert kernels.attention_kernel() == "auto"
    short, long = MATMUL_MAX_KEYS, MATMUL_MAX_KEYS + 1
    q32, q16 = torch.zeros(1, 1, 1, 8), torch.zeros(1, 1, 1, 8, dtype=torch.bfloat16)
    assert choose_kernel(q32, short) == "sdpa"  # float32: the fused kernel (pinned numerics)
    assert choose_kernel(q16, short) == "matmul" and choose_kernel(q16, long) == "sdpa"
    assert choose_kernel(q16.half(), 16) == "matmul"
    # one query per row over >= ONE_QUERY_MATMUL_MIN_ROWS batch x head rows: explicit
    rows = kernels.ONE_QUERY_MATMUL_MIN_ROWS
    assert choose_kernel(torch.zeros(rows // 8, 8, 1, 8), long) == "matmul"
    assert choose_kernel(torch.zeros(rows // 8 - 1, 8, 1, 8), short) == "sdpa"
    assert choose_kernel(torch.zeros(rows // 8, 8, 2, 8), short) == "sdpa"  # two queries
    try:
        assert set_attention_kernel("sdpa") == "auto"
        assert choose_kernel(q16, short) == "sdpa"
        assert set_attention_kernel("matmul") == "sdpa" and choose_kernel(q32, long) == "matmul"
    finally:
        set_attention_kernel("auto")
    with pytest.raises(ValueError, match="kernel must be one of 'auto', 'sdpa', 'matmul'"):
        set_attention_kernel("flash")


@pytest.mark.parametrize("causal", [True, False])
def test_multi_head_attention_gives_the_same_through_either_kernel(causal):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, dropout=0.0).eval()
    x = torch.randn(3, 7, 16)
    lens = torch.tensor([7, 4, 1])
    outs = {}
    for name in ("sdpa", "matmul"):
        previous = set_attention_kernel(name)
        try:
            valid = None if causal else lens
            outs[name] = mha(x, valid_lens=valid, causal=causal)
            if causal:  # the fast path: is_causal without a mask
                assert mha(x, causal=True).shape == (3, 7, 16)
        finally:
            set_attention_kernel(previous)
    torch.testing.assert_close(outs["matmul"], outs["sdpa"], rtol=1e-5, atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # auto: explicit products in bf16
        auto = mha(x, valid_lens=None if causal else lens, causal=causal)
    assert auto.dtype == torch.bfloat16
    torch.testing.assert_close(auto.float(), outs["sdpa"], rtol=0.05, atol=0.03)
