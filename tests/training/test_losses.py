"""Masked cross-entropy: the book's printed check, a float64 reference, gradcheck."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.training.losses import MaskedSoftmaxCELoss, masked_cross_entropy


def test_book_check():
    loss = MaskedSoftmaxCELoss()
    out = loss(torch.ones(3, 4, 10), torch.ones((3, 4), dtype=torch.long), torch.tensor([4, 2, 0]))
    torch.testing.assert_close(out, torch.tensor([math.log(10), math.log(10) / 2, 0.0]))
    assert [round(x, 4) for x in out.tolist()] == [2.3026, 1.1513, 0.0]


def _reference(logits, label, valid_len, eps):
    """Loops in float64: smoothed CE per real token."""
    B, T, _V = logits.shape
    per_token = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        for t in range(int(valid_len[b])):
            logp = torch.log_softmax(logits[b, t].double(), -1)
            nll = -logp[label[b, t]]
            per_token[b, t] = (1 - eps) * nll + eps * (-logp.mean())
    return per_token


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_reductions_match_float64_reference(eps):
    torch.manual_seed(0)
    logits = torch.randn(4, 6, 9, dtype=torch.float64)
    label = torch.randint(0, 9, (4, 6))
    valid_len = torch.tensor([6, 3, 1, 0])
    ref = _reference(logits, label, valid_len, eps)
    got = masked_cross_entropy(logits, label, valid_len, "none", eps)
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(
        masked_cross_entropy(logits, label, valid_len, "per_sequence", eps), ref.sum(1) / 6
    )
    torch.testing.assert_close(
        masked_cross_entropy(logits, label, valid_len, "sum", eps), ref.sum()
    )
    torch.testing.assert_close(
        masked_cross_entropy(logits, label, valid_len, "mean", eps), ref.sum() / 10
    )
    # the class passes label_smoothing through
    cls = MaskedSoftmaxCELoss(label_smoothing=eps)(logits, label, valid_len)
    torch.testing.assert_close(cls, ref.sum(1) / 6)


def test_padding_labels_do_not_matter_and_empty_batch_is_zero():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    label = torch.randint(0, 7, (2, 5))
    valid_len = torch.tensor([3, 2])
    other = label.clone()
    other[0, 3:] = 0
    other[1, 2:] = 6
    assert masked_cross_entropy(logits, label, valid_len) == masked_cross_entropy(
        logits, other, valid_len
    )
    assert masked_cross_entropy(logits, label, torch.tensor([0, 0])).item() == 0.0


def test_gradcheck():
    torch.manual_seed(0)
    logits = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    label = torch.randint(0, 5, (3, 4))
    valid_len = torch.tensor([4, 2, 1])
    for reduction in ("mean", "per_sequence"):
        assert torch.autograd.gradcheck(
            lambda x, r=reduction: masked_cross_entropy(x, label, valid_len, r, 0.1), (logits,)
        )
    # padded positions get no gradient
    masked_cross_entropy(logits, label, valid_len).backward()
    assert logits.grad[1, 2:].abs().max() == 0 and logits.grad[0].abs().max() > 0


def test_errors():
    x, y, n = torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long), torch.tensor([1, 2])
    with pytest.raises(ValueError, match=r"reduction must be one of 'mean', .*, got 'avg'"):
        masked_cross_entropy(x, y, n, "avg")
    with pytest.raises(ValueError, match=r"label must have shape \(B, T\) = \(2, 3\)"):
        masked_cross_entropy(x, y[:, :2], n)
    with pytest.raises(ValueError, match=r"valid_len must have shape \(B,\) = \(2,\)"):
        masked_cross_entropy(x, y, torch.tensor([1]))
    with pytest.raises(ValueError, match="logits must be a float tensor"):
        masked_cross_entropy(torch.zeros(2, 3), y, n)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), got 1\.0"):
        masked_cross_entropy(x, y, n, label_smoothing=1.0)
    with pytest.raises(TypeError, match=r"label_smoothing must be a float in \[0, 1\), got None"):
        masked_cross_entropy(x, y, n, label_smoothing=None)
