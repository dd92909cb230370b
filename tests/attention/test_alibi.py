"""ALiBi: the slopes and the bias against the paper's formula, attention with the bias by
hand, the cache, fully masked rows, gradcheck."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.attention import ALiBi, KVCache, MultiHeadAttention, alibi_bias, alibi_slopes


def _paper_get_slopes(n):
    """The ALiBi paper's code (github.com/ofirpress/attention_with_linear_biases), verbatim."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + _paper_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def test_slopes_are_the_papers_geometric_sequence():
    assert alibi_slopes(8) == [1 / 2**h for h in range(1, 9)]  # 1/2, 1/4, ..., 1/256
    assert alibi_slopes(4) == [2**-2, 2**-4, 2**-6, 2**-8]  # r = 2^(-8/4)
    assert alibi_slopes(1) == [2**-8]
    # 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads (2^-0.5 ...)
    expected = [2.0**-h for h in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    assert alibi_slopes(12) == pytest.approx(expected, rel=1e-15)
    assert alibi_slopes(6) == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3], rel=1e-15)
    for n in range(1, 40):
        assert alibi_slopes(n) == pytest.approx(_paper_get_slopes(n), rel=1e-15), n


@pytest.mark.parametrize("heads,Q,K", [(8, 5, 5), (3, 2, 6), (12, 1, 4)])
def test_the_bias_is_minus_slope_times_distance(heads, Q, K):
    bias = alibi_bias(heads, Q, K, dtype=torch.float64)
    slopes = _paper_get_slopes(heads)
    assert bias.shape == (heads, Q, K)
    for h in range(heads):
        for a in range(Q):
            i = K - Q + a  # the queries are the last Q positions
            for j in range(K):
                assert float(bias[h, a, j]) == pytest.approx(-slopes[h] * abs(i - j), rel=1e-15)
    causal = ALiBi(heads)(Q, K, causal=True, dtype=torch.float32, device="cpu")
    assert causal.shape == (1, heads, Q, K)
    future = torch.arange(K)[None, :] > torch.arange(K - Q, K)[:, None]
    assert (causal[0][:, future] == torch.finfo(torch.float32).min).all()
    torch.testing.assert_close(causal[0][:, ~future], bias.float()[:, ~future])


def _by_hand(mha, X, lens=None):
    """softmax(q kᵀ/√Dh - m_h (i - j)) v, causal, float64; the paper's attention."""
    B, T, _ = X.shape
    q, k, v = mha._project_self(X)
    H, Dh = mha.num_heads, mha.head_dim
    k, v = mha._expand(k), mha._expand(v)
    m = torch.tensor(_paper_get_slopes(H), dtype=X.dtype)[:, None, None]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    scores = q @ k.transpose(-2, -1) / math.sqrt(Dh) - m * (i - j)  # (B, H, T, T)
    keep = (j <= i).expand(B, 1, T, T)
    if lens is not None:
        keep = keep & (torch.arange(T) < lens[:, None, None, None])
    w = scores.masked_fill(~keep, -math.inf).softmax(-1).nan_to_num(0.0)
    out = (w @ v).transpose(1, 2).reshape(B, T, H * Dh)
    return mha.W_o(out), w


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_attention_with_alibi_equals_the_paper_and_the_cache_the_full_pass(kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, positions="alibi", num_kv_heads=kv_heads).double().eval()
    X = torch.randn(3, 6, 16, dtype=torch.float64)
    ref, ref_w = _by_hand(mha, X)
    out, w = mha(X, causal=True, need_weights=True)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(mha(X, causal=True), ref)  # fused: SDPA with a float bias
    cache = KVCache()
    steps = [mha(X[:, :3], causal=True, cache=cache)]
    steps += [mha(X[:, t : t + 1], causal=True, cache=cache) for t in range(3, 6)]
    torch.testing.assert_close(torch.cat(steps, 1), ref)
    assert cache.keys.shape == (3, kv_heads, 6, 4)


def test_padding_and_fully_masked_rows_give_zeros_never_nan():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2, positions="alibi").double().eval()
    X = torch.randn(3, 5, 8, dtype=torch.float64)
    lens = torch.tensor([5, 2, 0])
    ref, ref_w = _by_hand(mha, X, lens)
    out, w = mha(X, valid_lens=lens, causal=True, need_weights=True)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref)
    fused = mha(X, valid_lens=lens, causal=True)
    assert not fused.isnan().any() and not out.isnan().any()
    torch.testing.assert_close(fused, out)
    assert (w[2] == 0).all()  # no key at all: zero weights
    torch.testing.assert_close(fused[2], mha.W_o(torch.zeros(5, 8, dtype=torch.float64)))
    half = MultiHeadAttention(8, 2, positions="alibi").half().eval()
    assert not half(X.half(), valid_lens=lens, causal=True).isnan().any()  # no -inf overflow


def test_gradcheck_attention_with_alibi():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 4, positions="alibi", num_kv_heads=2).double()
    X = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([4, 3])
    assert torch.autograd.gradcheck(lambda X: mha(X, causal=True), (X,))
    assert torch.autograd.gradcheck(lambda X: mha(X, valid_lens=lens, causal=True), (X,))
    assert torch.autograd.gradcheck(lambda X: mha(X, causal=True, need_weights=True)[0], (X,))


def test_the_causal_bias_is_reused_and_errors_name_the_problem():
    alibi = ALiBi(4)
    first = alibi(3, 3, causal=True, dtype=torch.float32, device="cpu")
    again = alibi(3, 3, causal=True, dtype=torch.float32, device="cpu")
    assert again.data_ptr() == first.data_ptr()  # a view of the one table: nothing rebuilt
    # a decoding step (1 query over K keys) is the last row of the full bias, for every K;
    # another layer with as many heads shares the table
    for K in (1, 5, 64, 65, 130):
        step = ALiBi(4)(1, K, causal=True, dtype=torch.float32, device="cpu")
        full = alibi_bias(4, K, K)[None].masked_fill(
            ~torch.ones(K, K, dtype=torch.bool).tril(), torch.finfo(torch.float32).min
        )
        assert torch.equal(step, full[:, :, -1:]) and torch.equal(
            alibi(K, K, causal=True, dtype=torch.float32, device="cpu"), full
        )
    assert torch.equal(
        alibi(2, 5, causal=False, dtype=torch.float64, device="cpu")[0],
        alibi_bias(4, 2, 5, dtype=torch.float64),
    )
    with pytest.raises(ValueError, match="ALiBi needs 1 <= num_queries <= num_keys"):
        alibi(3, 2, causal=True, dtype=torch.float32, device="cpu")
    assert alibi.state_dict() == {} and list(alibi.parameters()) == []
    assert MultiHeadAttention(8, 2, positions="alibi").state_dict().keys() == {
        "W_qkv.weight",
        "W_o.weight",
    }
    with pytest.raises(ValueError, match="positions='alibi' is for self-attention"):
        X = torch.randn(1, 2, 8)
        MultiHeadAttention(8, 2, positions="alibi")(X, X)
    with pytest.raises(ValueError, match="num_heads must be a positive int, got 0"):
        alibi_slopes(0)
    with pytest.raises(ValueError, match="needs num_keys >= num_queries"):
        alibi_bias(2, 3, 2)
