"""Grouped-query attention: kv-heads = heads is plain attention bit for bit; groups share
key/value heads; the cache holds Hkv heads (preallocated or not); gradcheck; errors."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import KVCache, MultiHeadAttention


def _calls(mha, X, lens):
    """Every path: fused, exact weights, causal (is_causal), padded, cached steps."""
    cache = KVCache()
    steps = torch.cat(
        [mha(X[:, t : t + 1], causal=True, cache=cache) for t in range(X.shape[1])], 1
    )
    return [
        mha(X),
        *mha(X, valid_lens=lens, need_weights=True),
        mha(X, causal=True),
        mha(X, valid_lens=lens, causal=True),
        steps,
        cache.keys,
    ]


@pytest.mark.parametrize("fused", [True, False])
def test_kv_heads_equal_to_heads_is_plain_attention_bit_for_bit(fused):
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 4, bias=True, fused_qkv=fused).eval()
    grouped = MultiHeadAttention(16, 4, bias=True, fused_qkv=fused, num_kv_heads=4).eval()
    named = MultiHeadAttention(16, 4, bias=True, fused_qkv=fused, positions="none").eval()
    shapes = {k: v.shape for k, v in plain.state_dict().items()}
    assert {k: v.shape for k, v in grouped.state_dict().items()} == shapes
    grouped.load_state_dict(plain.state_dict())
    named.load_state_dict(plain.state_dict())
    X, lens = torch.randn(3, 5, 16), torch.tensor([5, 2, 0])
    for a, b, c in zip(_calls(plain, X, lens), _calls(grouped, X, lens), _calls(named, X, lens)):
        assert torch.equal(a, b) and torch.equal(a, c)


def _as_plain(gqa: MultiHeadAttention) -> MultiHeadAttention:
    """Plain attention whose key/value head h is gqa's head h // (H / Hkv): its W_k, W_v
    rows are gqa's, each head's block repeated for its group."""
    H, Dh, G = gqa.num_heads, gqa.head_dim, gqa.num_heads // gqa.num_kv_heads
    plain = MultiHeadAttention(gqa.num_hiddens, H, fused_qkv=False).double().eval()
    W = gqa.W_qkv.weight
    D, Dkv = gqa.num_hiddens, gqa.kv_hiddens
    q_rows, k_rows, v_rows = W[:D], W[D : D + Dkv], W[D + Dkv :]

    def repeat(rows):  # (Hkv*Dh, D) -> (H*Dh, D): head g's rows for query heads g*G .. g*G+G-1
        return rows.view(-1, Dh, D).repeat_interleave(G, dim=0).reshape(H * Dh, D)

    with torch.no_grad():
        plain.W_q.weight.copy_(q_rows)
        plain.W_k.weight.copy_(repeat(k_rows))
        plain.W_v.weight.copy_(repeat(v_rows))
        plain.W_o.weight.copy_(gqa.W_o.weight)
    return plain


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("positions", ["none", "rope", "alibi"])
def test_groups_of_query_heads_share_a_key_value_head(kv_heads, positions):
    torch.manual_seed(0)
    gqa = MultiHeadAttention(16, 4, num_kv_heads=kv_heads, positions=positions).double().eval()
    plain = _as_plain(gqa)
    plain.positions, plain.rope, plain.alibi = gqa.positions, gqa.rope, gqa.alibi
    X, lens = torch.randn(2, 6, 16, dtype=torch.float64), torch.tensor([6, 3])
    for kwargs in ({"causal": True}, {"causal": True, "valid_lens": lens}):
        expected, w = plain(X, need_weights=True, **kwargs)
        got, got_w = gqa(X, need_weights=True, **kwargs)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(got_w, w)
        torch.testing.assert_close(gqa(X, **kwargs), expected)  # the fused kernel
    if positions == "none":
        torch.testing.assert_close(gqa(X), plain(X))  # not causal too


@pytest.mark.parametrize("kv_heads", [1, 2, 8])
def test_the_cache_holds_kv_heads_and_memory_per_token_shrinks(kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 8, num_kv_heads=kv_heads).eval()
    X = torch.randn(2, 5, 32)
    full = mha(X, causal=True)
    for capacity in (None, 2, 16):
        cache = KVCache(capacity=capacity)
        steps = [mha(X[:, t : t + 1], causal=True, cache=cache) for t in range(5)]
        torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-6)
        assert cache.keys.shape == (2, kv_heads, 5, 4)
        assert cache.nbytes == 2 * 2 * kv_heads * 5 * 4 * 4  # k and v, B, Hkv, T, Dh, float32
    assert mha.W_qkv.weight.shape == (32 + 2 * kv_heads * 4, 32)


def test_both_layouts_load_each_other_with_groups():
    torch.manual_seed(0)
    fused = MultiHeadAttention(16, 4, bias=True, num_kv_heads=2)
    separate = MultiHeadAttention(16, 4, bias=True, num_kv_heads=2, fused_qkv=False)
    separate.load_state_dict(fused.state_dict())
    assert separate.W_k.weight.shape == (8, 16) and separate.W_q.weight.shape == (16, 16)
    torch.testing.assert_close(separate.W_v.bias, fused.W_qkv.bias[24:])
    X, memory = torch.randn(2, 3, 16), torch.randn(2, 4, 16)
    torch.testing.assert_close(separate(X, memory), fused(X, memory))
    torch.testing.assert_close(separate(X, causal=True), fused(X, causal=True))
    fused.load_state_dict(separate.state_dict())


def test_gradcheck_grouped_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 4, num_kv_heads=2).double()
    X = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([4, 1])
    assert torch.autograd.gradcheck(lambda X: mha(X, causal=True), (X,))
    assert torch.autograd.gradcheck(lambda X, M: mha(X, M, valid_lens=lens), (X, memory))
    assert torch.autograd.gradcheck(lambda X: mha(X, need_weights=True)[0], (X,))


def test_a_preallocated_cache_appends_in_place_and_copies_stay_apart():
    g = torch.Generator().manual_seed(0)
    parts = [
        (torch.randn(2, 1, n, 3, generator=g), torch.randn(2, 1, n, 3, generator=g))
        for n in (2, 1, 4)
    ]
    plain, room = KVCache(), KVCache(capacity=3)
    for k, v in parts[:2]:
        a, b = plain.update(k, v), room.update(k, v)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    buffer = room._room.keys
    assert buffer.shape[2] == 3 and room.keys.data_ptr() == buffer.data_ptr()
    twin = room.copy()
    room.update(*parts[2])  # past the capacity: grows (by doubling, at least to 7)
    assert len(room) == 7 and room._room.keys.shape[2] >= 7 and len(twin) == 3
    twin.update(*parts[2])
    assert torch.equal(twin.keys, room.keys) and torch.equal(twin.values, room.values)
    assert "capacity=3" in repr(room)
    with pytest.raises(ValueError, match="capacity is for appending caches"):
        KVCache(static=True, capacity=4)
    with pytest.raises(ValueError, match="capacity must be a positive int, got 0"):
        KVCache(capacity=0)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"num_kv_heads \(3\) must divide num_heads \(4\)"):
        MultiHeadAttention(16, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads must be a positive int, got 0"):
        MultiHeadAttention(16, 4, num_kv_heads=0)
    with pytest.raises(TypeError, match=r"num_kv_heads must be a positive int, got 2\.0"):
        MultiHeadAttention(16, 4, num_kv_heads=2.0)
