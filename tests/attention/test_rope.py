"""RoPE: the rotation against its formula, the score depends on the offset only (property),
the sinusoidal table inside it, multi-head attention with RoPE and a cache, gradcheck."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import (
    KVCache,
    MultiHeadAttention,
    RotaryEmbedding,
    apply_rope,
    rope_cos_sin,
    rope_frequencies,
    sinusoidal_table,
)


def _rotate_by_formula(x: torch.Tensor, p: int, base: float = 10000.0) -> torch.Tensor:
    """x (Dh,) at position p, pair by pair: (x_j, x_{j+Dh/2}) turned by p * base^(-2j/Dh)."""
    Dh = x.shape[0]
    out = x.clone()
    for j in range(Dh // 2):
        angle = p * base ** (-2 * j / Dh)
        a, b = float(x[j]), float(x[j + Dh // 2])
        out[j] = a * math.cos(angle) - b * math.sin(angle)
        out[j + Dh // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def _rope(x: torch.Tensor, p: int, base: float = 10000.0) -> torch.Tensor:
    """x (Dh,) float64 rotated by apply_rope at position p."""
    cos, sin = rope_cos_sin(torch.tensor([p]), x.shape[0], base, dtype=torch.float64)
    return apply_rope(x[None], cos, sin)[0]


@pytest.mark.parametrize("Dh", [2, 6, 16])
@pytest.mark.parametrize("p", [0, 1, 5, 123])
def test_the_rotation_is_the_papers_formula(Dh, p):
    x = torch.randn(Dh, dtype=torch.float64)
    torch.testing.assert_close(_rope(x, p), _rotate_by_formula(x, p), rtol=0, atol=1e-12)
    torch.testing.assert_close(_rope(x, p).norm(), x.norm())  # a rotation keeps the length


def test_frequencies_and_the_sinusoidal_table():
    """cos(p θ_j), sin(p θ_j) are the sinusoidal table's entries P[p, 2j+1], P[p, 2j] at
    width Dh: RoPE multiplies by the very vectors the book adds."""
    Dh, T = 8, 40
    theta = rope_frequencies(Dh, dtype=torch.float64)
    expected = [10000 ** (-2 * j / Dh) for j in range(4)]
    torch.testing.assert_close(theta, torch.tensor(expected, dtype=torch.float64))
    cos, sin = rope_cos_sin(torch.arange(T), Dh, dtype=torch.float64)
    P = sinusoidal_table(T, Dh).double()
    torch.testing.assert_close(cos[:, :4], P[:, 1::2], rtol=0, atol=1e-6)
    torch.testing.assert_close(sin[:, :4], P[:, 0::2], rtol=0, atol=1e-6)
    torch.testing.assert_close(cos[:, 4:], cos[:, :4])  # each angle written for both halves


@settings(max_examples=60, deadline=None)
@given(
    half=st.integers(1, 8),
    p=st.integers(0, 2000),
    s=st.integers(0, 2000),
    shift=st.integers(-2000, 2000),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_score_depends_on_the_offset_only(half, p, s, shift, seed):
    """rope(q, p) · rope(k, s) = rope(q, p + d) · rope(k, s + d) = q · rope(k, s - p)."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 2 * half, dtype=torch.float64, generator=g)
    shift = max(shift, -min(p, s))  # positions stay >= 0
    score = _rope(q, p) @ _rope(k, s)
    scale = float(q.norm() * k.norm())
    assert abs(float(_rope(q, p + shift) @ _rope(k, s + shift) - score)) <= 1e-9 * scale
    assert abs(float(q @ _rope(k, s - p) - score)) <= 1e-9 * scale  # R(p)ᵀR(s) = R(s - p)


def test_the_module_offsets_ids_and_the_grown_table_agree():
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 5, 8)
    at_7 = rope(x, 7)  # int offset: positions 7..11, from the float32 table
    assert rope._cos.shape[0] >= 12 and "_cos" not in rope.state_dict()
    assert torch.equal(rope(x, torch.arange(7, 12)), at_7)  # ids (T,): the same numbers
    ids = torch.stack([torch.arange(7, 12), torch.arange(0, 5)])  # (B, T) per row
    per_row = rope(x, ids)
    assert torch.equal(per_row[0], at_7[0]) and torch.equal(per_row[1], rope(x, 0)[1])
    far = rope(x, 5000)  # the table grows
    assert rope._cos.shape[0] >= 5005
    torch.testing.assert_close(far, rope(x, torch.arange(5000, 5005)), rtol=0, atol=0)
    x64 = x.double()
    torch.testing.assert_close(rope(x64, 3)[0, 0, 0], _rope(x64[0, 0, 0], 3), rtol=0, atol=1e-12)


def _causal_steps(mha, X, first=2):
    cache = KVCache()
    outs = [mha(X[:, :first], causal=True, cache=cache)]
    outs += [mha(X[:, t : t + 1], causal=True, cache=cache) for t in range(first, X.shape[1])]
    return torch.cat(outs, 1), cache


def test_attention_with_rope_rotates_inside_and_the_cache_keeps_offsets():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, positions="rope").double().eval()
    plain = MultiHeadAttention(16, 4).double().eval()
    plain.load_state_dict(mha.state_dict())  # the same weights, the same keys
    X = torch.randn(2, 7, 16, dtype=torch.float64)
    full, w = mha(X, causal=True, need_weights=True)
    # by hand: project, rotate each head's q and k by its position, attend, W_o
    q, k, v = plain._project_self(X)
    cos, sin = rope_cos_sin(torch.arange(7), 4, dtype=torch.float64)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~torch.ones(7, 7).tril().bool(), -1e300)
    ref_w = scores.softmax(-1)
    torch.testing.assert_close(w, ref_w)
    ref = plain.W_o((ref_w @ v).transpose(1, 2).reshape(2, 7, 16))
    torch.testing.assert_close(full, ref)
    torch.testing.assert_close(mha(X, causal=True), ref)  # the fused path
    steps, cache = _causal_steps(mha, X)
    torch.testing.assert_close(steps, ref)  # cached keys were rotated at their own positions
    assert len(cache) == 7
    # a shift of every position changes nothing (relative positions)
    shifted = mha(X, causal=True, position_ids=torch.arange(7) + 1000)
    torch.testing.assert_close(shifted, ref, rtol=1e-9, atol=1e-9)
    assert not torch.allclose(plain(X, causal=True), ref)  # and RoPE did act


def test_gradcheck_rope_and_attention_with_rope():
    torch.manual_seed(0)
    x = torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_cos_sin(torch.tensor([0, 3, 9]), 4, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: apply_rope(x, cos, sin), (x,))
    mha = MultiHeadAttention(8, 2, positions="rope", num_kv_heads=1).double()
    X = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda X: mha(X, causal=True), (X,))
    assert torch.autograd.gradcheck(lambda X: mha(X, causal=True, need_weights=True)[0], (X,))


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="head_dim must be even for RoPE"):
        RotaryEmbedding(5)
    with pytest.raises(ValueError, match=r"positions='rope' needs an even head width.* = 3"):
        MultiHeadAttention(6, 2, positions="rope")
    with pytest.raises(ValueError, match=r"positions must be one of 'sinusoidal'.*got 'rotary'"):
        MultiHeadAttention(8, 2, positions="rotary")
    with pytest.raises(ValueError, match="rope_base must be a positive finite number, got 0"):
        MultiHeadAttention(8, 2, positions="rope", rope_base=0)
    mha = MultiHeadAttention(8, 2, positions="rope")
    X = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="positions='rope' is for self-attention"):
        mha(X, X, X)
    with pytest.raises(ValueError, match=r"position_ids must be \(Q,\) = \(3,\) or \(B, Q\)"):
        mha(X, position_ids=torch.arange(4))
    with pytest.raises(TypeError, match=r"position_ids must be integers, got torch\.float32"):
        mha(X, position_ids=torch.zeros(3))
    with pytest.raises(
        ValueError, match="position_ids are RoPE's; this layer has positions='none'"
    ):
        MultiHeadAttention(8, 2)(X, position_ids=torch.arange(3))
    with pytest.raises(TypeError, match="positions must be an integer tensor"):
        rope_cos_sin(torch.zeros(3), 4)
    with pytest.raises(ValueError, match=r"x must be \(B, H, T, 4\)"):
        RotaryEmbedding(4)(torch.randn(3, 4))


def test_a_negative_offset_and_bad_inputs_are_named():
    from attnkit.attention.rope import RotaryEmbedding, apply_rope

    rope = RotaryEmbedding(8)
    x = torch.randn(1, 2, 3, 8)
    rope(x, 4)  # the table grows past the rows a negative offset would wrap onto
    with pytest.raises(ValueError, match="positions must be a non-negative int, got -3"):
        rope(x, -3)
    with pytest.raises(TypeError, match="positions must be a non-negative int"):
        rope(x, 1.5)
    cos, sin = rope.cos_sin(0, 3, torch.float32, "cpu")
    with pytest.raises(
        ValueError, match=r"x must have an even last dimension Dh, got shape \(3, 7\)"
    ):
        apply_rope(torch.randn(3, 7), cos[:, :7], sin[:, :7])
    with pytest.raises(TypeError, match="cos must be a floating-point tensor, got list"):
        apply_rope(torch.randn(3, 8), [1.0], sin)
