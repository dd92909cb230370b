"""Multi-head attention against a book-style float64 reference; masks; causality; errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit import d2l
from attnkit.attention import MultiHeadAttention
from attnkit.attention.kv_cache import KVCache


class BookMHA(nn.Module):
    """The book's formulation: transpose_qkv, repeat_interleave lens, masked_softmax(-1e6), bmm."""

    def __init__(self, key_size, query_size, value_size, num_hiddens, num_heads, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def _t(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1).permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def forward(self, queries, keys, values, valid_lens):
        q, k, v = self._t(self.W_q(queries)), self._t(self.W_k(keys)), self._t(self.W_v(values))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        if valid_lens is not None:
            lens = valid_lens.repeat_interleave(self.num_heads, dim=0)
            lens = (
                lens.reshape(-1) if lens.dim() == 2 else torch.repeat_interleave(lens, q.shape[1])
            )
            flat = scores.reshape(-1, scores.shape[-1])
            keep = torch.arange(flat.shape[-1])[None, :] < lens[:, None]
            scores = flat.masked_fill(~keep, -1e6).reshape(scores.shape)
        w = torch.softmax(scores, -1)
        out = torch.bmm(w, v)
        out = out.reshape(-1, self.num_heads, out.shape[1], out.shape[2]).permute(0, 2, 1, 3)
        return self.W_o(out.reshape(out.shape[0], out.shape[1], -1))


@settings(max_examples=20, deadline=None)
@given(
    B=st.integers(1, 3),
    Q=st.integers(1, 5),
    K=st.integers(1, 6),
    heads=st.sampled_from([1, 2, 4]),
    per_query=st.booleans(),
    data=st.data(),
)
def test_matches_book_formulation_in_float64(B, Q, K, heads, per_query, data):
    n = B * Q if per_query else B
    lens = torch.tensor(data.draw(st.lists(st.integers(1, K), min_size=n, max_size=n)))
    lens = lens.reshape((B, Q) if per_query else (B,))
    book = BookMHA(6, 5, 7, 8, heads).double()
    ours = d2l.MultiHeadAttention(6, 5, 7, 8, heads, 0.0).double().eval()
    ours.load_state_dict(book.state_dict())
    q, k, v = torch.randn(B, Q, 5).double(), torch.randn(B, K, 6).double(), torch.randn(B, K, 7)
    v = v.double()
    ref = book(q, k, v, lens)
    torch.testing.assert_close(ours(q, k, v, lens), ref)  # eval: exact weights path
    torch.testing.assert_close(ours(q, k, v, lens, need_weights=False), ref)  # fused path


def test_state_dict_keys_and_book_example_shape():
    mha = d2l.MultiHeadAttention(100, 100, 100, 100, 5, 0.5)
    assert sorted(mha.state_dict()) == ["W_k.weight", "W_o.weight", "W_q.weight", "W_v.weight"]
    mha.eval()
    X, Y = torch.ones(2, 4, 100), torch.ones(2, 6, 100)
    out = mha(X, Y, Y, torch.tensor([3, 2]))
    assert out.shape == (2, 4, 100)
    # book layout of the kept weights: (B*H, Q, K); our view: (B, H, Q, K)
    assert mha.attention.attention_weights.shape == (10, 4, 6)
    assert mha.attention_weights.shape == (2, 5, 4, 6)
    torch.testing.assert_close(mha.attention_weights.sum(-1), torch.ones(2, 5, 4))
    assert (mha.attention_weights[1, :, :, 2:] == 0).all()


def test_fast_and_exact_paths_agree_with_padding_and_dropout_off():
    mha = MultiHeadAttention(32, 4, dropout=0.3).eval()
    X = torch.randn(3, 7, 32)
    lens = torch.tensor([7, 3, 0])
    fast = mha(X, X, X, lens)
    assert mha.attention_weights is None
    exact, weights = mha(X, X, X, lens, need_weights=True)
    torch.testing.assert_close(fast, exact, atol=1e-5, rtol=1e-5)
    assert weights.shape == (3, 4, 7, 7) and mha.attention_weights is weights


def test_causal_output_ignores_future_positions():
    mha = MultiHeadAttention(16, 2).eval()
    X = torch.randn(2, 6, 16)
    Y = X.clone()
    Y[:, 4:] = torch.randn(2, 2, 16) * 10  # change the future of position 3
    a = mha(X, X, X, causal=True)
    b = mha(Y, Y, Y, causal=True)
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])
    _, weights = mha(X, causal=True, need_weights=True)
    assert (weights.triu(1) == 0).all()


def test_causal_combined_with_padding():
    mha = MultiHeadAttention(8, 2).eval()
    X = torch.randn(2, 5, 8)
    _, w = mha(X, X, X, torch.tensor([5, 2]), causal=True, need_weights=True)
    assert (w[1, :, :, 2:] == 0).all() and (w.triu(1) == 0).all()


def test_the_three_call_forms_agree():
    """mha(X) (one fused matmul), mha(Y, memory) and the book's mha(q, k, v) are the same
    attention; so is the unfused layout loaded from the same weights."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    X, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    lens = torch.tensor([3, 1])
    torch.testing.assert_close(mha(X, valid_lens=lens), mha(X, X, X, lens))
    torch.testing.assert_close(mha(X, memory, valid_lens=lens), mha(X, memory, memory, lens))
    separate = MultiHeadAttention(8, 2, fused_qkv=False).eval()
    separate.load_state_dict(mha.state_dict())
    assert sorted(separate.state_dict()) == ["W_k.weight", "W_o.weight", "W_q.weight", "W_v.weight"]
    torch.testing.assert_close(separate(X, memory, valid_lens=lens), mha(X, memory, memory, lens))
    torch.testing.assert_close(separate.W_k.weight, mha.W_qkv.weight[8:16])


def test_the_fused_weight_is_a_parameter_used_as_is():
    """W_qkv is kept: no concatenation per forward, and its gradient is the three
    projections' gradients stacked."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, bias=True)
    assert sorted(mha.state_dict()) == ["W_o.bias", "W_o.weight", "W_qkv.bias", "W_qkv.weight"]
    assert mha.W_qkv.weight.shape == (24, 8)
    separate = MultiHeadAttention(8, 2, bias=True, fused_qkv=False)
    separate.load_state_dict(mha.state_dict())
    X = torch.randn(2, 4, 8)
    mha(X).square().sum().backward()
    separate(X).square().sum().backward()
    stacked = torch.cat(
        [separate.W_q.weight.grad, separate.W_k.weight.grad, separate.W_v.weight.grad]
    )
    torch.testing.assert_close(mha.W_qkv.weight.grad, stacked)
    # an older checkpoint (three separate weights) loads into the fused layout
    mha.load_state_dict(separate.state_dict())
    torch.testing.assert_close(
        mha.W_qkv.bias, torch.cat([separate.W_q.bias, separate.W_k.bias, separate.W_v.bias])
    )
    with pytest.raises(ValueError, match="fused_qkv=True needs equal query, key and value sizes"):
        MultiHeadAttention(8, 2, key_size=4, fused_qkv=True)
    with pytest.raises(TypeError, match=r"fused_qkv must be a bool, got 1 \(int\)"):
        MultiHeadAttention(8, 2, fused_qkv=1)
    assert not MultiHeadAttention(8, 2, key_size=4).fused_qkv  # unequal sizes: separate


def test_a_cache_step_equals_the_full_pass_and_weights_are_returned():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    X, memory = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    lens = torch.tensor([6, 2])
    with torch.no_grad():
        full, full_w = mha(X, causal=True, need_weights=True)
        cache = KVCache()
        steps = [mha(X[:, t : t + 1], causal=True, cache=cache) for t in range(4)]
        torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-6)
        cross = KVCache(static=True)
        first = mha(X[:, :1], memory, valid_lens=lens, cache=cross)
        keys = cross.keys
        again, w = mha(X[:, :1], memory * 0, valid_lens=lens, cache=cross, need_weights=True)
    assert cross.keys is keys  # a filled static cache is reused: the memory is not read
    torch.testing.assert_close(first, again)
    assert w.shape == (2, 2, 1, 6) and (w[1, ..., 2:] == 0).all()
    assert full_w.shape == (2, 2, 4, 4)
    with pytest.raises(TypeError, match="cache must be a KVCache or None, got tuple"):
        mha(X, cache=(1, 2))
    with pytest.raises(ValueError, match="values given without keys"):
        mha(X, None, X)


def test_bool_mask_argument():
    mha = MultiHeadAttention(8, 2).eval()
    X = torch.randn(2, 4, 8)
    mask = torch.arange(4) < torch.tensor([2, 4])[:, None, None]  # (B, 1, K)
    torch.testing.assert_close(mha(X, X, X, mask), mha(X, X, X, torch.tensor([2, 4])))


def test_errors_name_the_problem():
    with pytest.raises(
        ValueError, match=r"num_hiddens \(10\) must be divisible by num_heads \(3\)"
    ):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="num_heads must be a positive int, got 0"):
        MultiHeadAttention(8, 0)
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"queries must be \(B, T, 8\), got shape \(2, 3, 7\)"):
        mha(torch.randn(2, 3, 7), torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\]"):
        X = torch.randn(2, 3, 8)
        mha(X, X, X, torch.tensor([1, 4]))
    with pytest.raises(TypeError, match="integer dtype"):
        mha(X, X, X, torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="does not broadcast"):
        mha(X, X, X, torch.ones(2, 4, 4, dtype=torch.bool))


def test_forward_rejects_non_tensor_lengths_keys_and_values():
    mha = MultiHeadAttention(8, 2)
    X = torch.randn(2, 3, 8)
    with pytest.raises(
        TypeError, match=r"valid_lens must be None, a tensor of lengths .* got list"
    ):
        mha(X, X, X, [1, 2])
    with pytest.raises(TypeError, match=r"keys must be a floating-point tensor, got torch\.int64"):
        mha(X, torch.ones(2, 3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="values must be a floating-point tensor"):
        mha(X, X, "v")


def test_sizes_accept_numpy_ints_and_reject_floats():
    np = pytest.importorskip("numpy")
    assert MultiHeadAttention(np.int64(8), np.int64(2)).num_heads == 2
    with pytest.raises(TypeError, match=r"num_heads must be a positive int, got 2\.0 \(float\)"):
        MultiHeadAttention(8, 2.0)
    with pytest.raises(ValueError, match="key_size must be a positive int, got 0"):
        MultiHeadAttention(8, 2, key_size=0)
