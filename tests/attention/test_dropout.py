"""attnkit's CPU dropout: the drop rate, the scaling, the gradient, seeds and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.attention.dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5, 0.9])
def test_units_are_dropped_at_rate_p(p):
    n = 3_000_000
    kept = float(keep_mask((n,), p).double().mean())
    exact = 1 - round(p * 65536) / 65536  # p on a 2^-16 grid
    assert abs(kept - exact) < 5 * math.sqrt(exact * (1 - exact) / n)  # 5 sigma
    assert abs(kept - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n) + 2**-17


def test_p_next_to_one_drops_everything_and_the_output_is_unbiased():
    for p in (0.999999, 1 - 2**-18):  # round(p * 2^16) = 2^16: the threshold must not wrap
        assert not keep_mask((10_000,), p).any()
        assert torch.equal(dropout(torch.ones(10_000), p), torch.zeros(10_000))
    x = torch.ones(2_000_000, dtype=torch.float64)
    for p in (0.1, 0.3, 1e-6):  # E[output] = input: scaled by the exact keep probability
        mean = float(dropout(x, p).mean())
        keep = 1 - round(p * 65536) / 65536
        assert abs(mean - 1) < 5 * math.sqrt((1 - keep) / keep / x.numel()) + 1e-12


def test_masks_are_uncorrelated_across_positions():
    m = keep_mask((400_000,), 0.5).double() - 0.5
    for lag in (1, 2, 3, 4):  # neighbours share a 64-bit draw when lag < 3
        corr = float((m[:-lag] * m[lag:]).mean() / 0.25)
        assert abs(corr) < 0.01, lag


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_survivors_are_scaled_and_the_gradient_is_the_same_mask(dtype):
    x = torch.randn(64, 7, 32, dtype=dtype).abs().add_(0.1).requires_grad_()  # no zeros
    y = dropout(x, 0.2)
    kept = y != 0
    scale = 65536 / (65536 - round(0.2 * 65536))  # the exact keep probability's inverse
    torch.testing.assert_close(y[kept], x.detach()[kept] * scale)
    (y * 3).sum().backward()
    torch.testing.assert_close(x.grad, kept.to(dtype) * 3 * scale)
    assert y.dtype == dtype and y.shape == x.shape


def test_seeded_eval_and_p0():
    x = torch.randn(5, 9)
    torch.manual_seed(1)
    a = dropout(x, 0.3)
    torch.manual_seed(1)
    assert torch.equal(dropout(x, 0.3), a)
    assert dropout(x, 0.0) is x and dropout(x, 0.5, training=False) is x
    layer = Dropout(0.3)
    assert repr(layer) == "Dropout(p=0.3)" and not list(layer.parameters())
    assert layer.eval()(x) is x


def test_bad_probabilities_are_named():
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        Dropout(1.0)
    with pytest.raises(TypeError, match="p must be a float in"):
        keep_mask((3,), "0.1")
