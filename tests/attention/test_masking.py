"""sequence_mask, masked_softmax, causal_mask: values against float64 references."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.attention import as_mask, attention_mask, causal_mask, masked_softmax, sequence_mask


def reference_masked_softmax(X: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Plain float64 loop: softmax over kept keys, zeros elsewhere, zero rows if none kept."""
    X, out = X.double(), torch.zeros(X.shape, dtype=torch.float64)
    for idx in torch.cartesian_prod(*[torch.arange(n) for n in X.shape[:-1]]).reshape(
        -1, X.dim() - 1
    ):
        row, k = X[tuple(idx)], keep.expand(X.shape)[tuple(idx)]
        if k.any():
            e = torch.exp(row[k] - row[k].max())
            out[tuple(idx)][k] = e / e.sum()
    return out


def test_sequence_mask_book_value_and_not_in_place():
    X = torch.tensor([[1, 2, 3], [4, 5, 6]])
    out = sequence_mask(X, torch.tensor([1, 2]))
    assert out.tolist() == [[1, 0, 0], [4, 5, 0]]
    assert X.tolist() == [[1, 2, 3], [4, 5, 6]]  # input untouched


def test_sequence_mask_fill_value_and_trailing_dims():
    X = torch.ones(2, 3, 4)
    out = sequence_mask(X, torch.tensor([0, 3]), value=-1)
    assert (out[0] == -1).all() and (out[1] == 1).all()


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 4),
    Q=st.integers(1, 5),
    K=st.integers(1, 7),
    per_query=st.booleans(),
    data=st.data(),
)
def test_masked_softmax_matches_reference(B, Q, K, per_query, data):
    X = torch.randn(B, Q, K) * 3
    shape = (B, Q) if per_query else (B,)
    n = B * Q if per_query else B
    lens = torch.tensor(data.draw(st.lists(st.integers(0, K), min_size=n, max_size=n)))
    lens = lens.reshape(shape)
    W = masked_softmax(X, lens)
    keep = torch.arange(K) < (lens.unsqueeze(-1) if per_query else lens[:, None, None])
    keep = keep.expand(B, Q, K)
    ref = reference_masked_softmax(X, keep)
    torch.testing.assert_close(W.double(), ref, atol=1e-6, rtol=1e-6)
    # rows with any valid key sum to one; masked weights are exactly zero
    sums = W.sum(-1)
    has_key = keep.any(-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert (W[~keep] == 0).all()
    assert not torch.isnan(W).any()


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), K=st.integers(2, 6), data=st.data())
def test_padded_scores_do_not_matter(B, K, data):
    lens = torch.tensor(data.draw(st.lists(st.integers(1, K), min_size=B, max_size=B)))
    X = torch.randn(B, 2, K)
    noise = torch.randn(B, 2, K) * 100
    pad = ~(torch.arange(K) < lens[:, None, None])
    Y = torch.where(pad, noise, X)
    torch.testing.assert_close(masked_softmax(X, lens), masked_softmax(Y, lens))


def test_fully_masked_rows_are_zero_not_nan():
    X = torch.randn(2, 3, 4)
    W = masked_softmax(X, torch.tensor([[0, 2, 4], [0, 0, 0]]))
    assert (W[0, 0] == 0).all() and (W[1] == 0).all()
    torch.testing.assert_close(W[0, 1].sum(), torch.tensor(1.0))


def test_bool_mask_equals_lengths():
    X = torch.randn(2, 3, 5)
    lens = torch.tensor([2, 4])
    mask = torch.arange(5) < lens[:, None, None]  # (B, 1, K)
    torch.testing.assert_close(masked_softmax(X, mask), masked_softmax(X, lens))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_masking_no_overflow(dtype):
    X = torch.randn(3, 2, 6) * 4
    lens = torch.tensor([0, 3, 6])
    W = masked_softmax(X.to(dtype), lens)
    assert W.dtype == dtype and torch.isfinite(W).all()
    ref = masked_softmax(X.double(), lens)
    torch.testing.assert_close(W.double(), ref, atol=2e-2, rtol=2e-2)
    assert (W[0] == 0).all()


def test_masked_softmax_gradcheck():
    X = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([[1, 2, 4], [0, 3, 2]])
    assert torch.autograd.gradcheck(lambda x: masked_softmax(x, lens), (X,))


def test_no_mask_is_plain_softmax():
    X = torch.randn(2, 3, 4)
    torch.testing.assert_close(masked_softmax(X, None), torch.softmax(X, -1))


@pytest.mark.parametrize(
    ("lens", "exc", "match"),
    [
        (torch.tensor([1, 2, 3]), ValueError, r"shape \(B,\) = \(2,\) or \(B, Q\) = \(2, 3\)"),
        (torch.tensor([[1, 2], [1, 2]]), ValueError, r"got \(2, 2\)"),
        (torch.tensor([1.0, 2.0]), TypeError, "integer dtype"),
        (torch.tensor([-1, 2]), ValueError, r"\[0, 4\].*\[-1, 2\]"),
        (torch.tensor([1, 5]), ValueError, r"must lie in \[0, 4\]"),
        ([1, 2], TypeError, "torch.Tensor"),
        (torch.ones(2, 4, 4, dtype=torch.bool), ValueError, "does not broadcast"),
    ],
)
def test_valid_lens_errors(lens, exc, match):
    with pytest.raises(exc, match=match):
        masked_softmax(torch.randn(2, 3, 4), lens)


def test_non_float_scores_rejected():
    with pytest.raises(TypeError, match="floating-point"):
        masked_softmax(torch.ones(2, 3, 4, dtype=torch.long), None)


def test_causal_mask_square_and_offset():
    assert causal_mask(3).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    # one new query after 3 cached keys sees all 4
    assert causal_mask(1, 4).tolist() == [[1, 1, 1, 1]]
    assert causal_mask(2, 4).tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    with pytest.raises(ValueError, match="num_queries <= num_keys"):
        causal_mask(4, 2)


def test_as_mask_shapes():
    assert as_mask((2, 3, 4), torch.tensor([1, 2])).shape == (2, 1, 4)
    assert as_mask((2, 3, 4), torch.tensor([[1, 2, 3], [0, 0, 4]])).shape == (2, 3, 4)
    assert as_mask((2, 3, 4), None) is None


def test_attention_mask_is_the_one_builder():
    lens = torch.tensor([3, 1])
    # key lengths: (B, 1, K); with heads (B, 1, 1, K); per query: (B, Q, K)
    m = attention_mask(lens, 2, 2, 4)
    assert m.tolist() == [[[1, 1, 1, 0]], [[1, 0, 0, 0]]]
    assert attention_mask(lens, 2, 2, 4, num_heads=3).shape == (2, 1, 1, 4)
    per_query = attention_mask(torch.tensor([[1, 2], [0, 4]]), 2, 2, 4)
    assert per_query.tolist() == [[[1, 0, 0, 0], [1, 1, 0, 0]], [[0, 0, 0, 0], [1, 1, 1, 1]]]
    # causal alone, and with lengths: the last Q of K positions (a cached step)
    assert attention_mask(None, 2, 2, 4, causal=True).tolist() == causal_mask(2, 4).tolist()
    both = attention_mask(lens, 2, 2, 4, causal=True, num_heads=1)
    assert both.shape == (2, 1, 2, 4)
    assert both[0, 0].tolist() == [[1, 1, 1, 0], [1, 1, 1, 0]]
    assert both[1, 0].tolist() == [[1, 0, 0, 0], [1, 0, 0, 0]]
    # a bool mask passes through, checked; with heads a (B, Q, K) mask gets the heads axis
    keep = torch.rand(2, 2, 4) > 0.5
    assert torch.equal(attention_mask(keep, 2, 2, 4), keep)
    assert torch.equal(attention_mask(keep, 2, 2, 4, num_heads=2), keep.unsqueeze(1))
    assert attention_mask(None, 2, 2, 4) is None


def test_attention_mask_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"src_len must have shape \(B,\) = \(2,\), got \(2, 3\)"):
        attention_mask(torch.ones(2, 3, dtype=torch.long), 2, 3, 4, per_query=False, name="src_len")
    with pytest.raises(ValueError, match=r"boolean mask m of shape \(3, 4\) does not broadcast"):
        attention_mask(torch.ones(3, 4, dtype=torch.bool), 2, 2, 4, name="m")
    with pytest.raises(TypeError, match="valid_lens must be None, a tensor of lengths"):
        attention_mask([1, 2], 2, 2, 4)
    with pytest.raises(ValueError, match=r"must lie in \[0, 4\]"):
        attention_mask(torch.tensor([5, 1]), 2, 2, 4)


_shapes = st.lists(st.integers(1, 3), max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(mask_shape=_shapes, target=_shapes)
def test_boolean_masks_are_checked_by_torch_broadcasting_rule(mask_shape, target):
    """attention_mask / as_mask check a bool mask with their own cheap rule (it runs at
    every decoding step): it accepts exactly what torch.broadcast_shapes accepts."""
    from attnkit.attention.masking import _broadcastable

    try:
        torch.broadcast_shapes(mask_shape, target)
        torch_accepts = True
    except RuntimeError:
        torch_accepts = False
    assert _broadcastable(mask_shape, target) == torch_accepts
    if len(target) == 3:
        mask = torch.ones(mask_shape, dtype=torch.bool)
        if torch_accepts:
            assert as_mask(target, mask) is mask
        else:
            with pytest.raises(ValueError, match="does not broadcast to scores of shape"):
                as_mask(target, mask)
