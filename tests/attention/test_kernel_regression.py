"""Nadaraya-Watson kernel regression: formula, gradients, the book's training."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import NadarayaWatson, NWKernelRegression
from attnkit.attention.kernel_regression import (
    fit_nadaraya_watson,
    leave_one_out,
    make_nw_data,
    nw_target,
)


def test_nonparametric_equals_weighted_average():
    x, y = torch.tensor([0.0, 1.0, 3.0]), torch.tensor([1.0, 2.0, 5.0])
    q = torch.tensor([0.5, 2.0])
    nw = NadarayaWatson(learnable=False, width=1.0)
    out = nw(q, x, y)
    for i, qi in enumerate(q):
        k = torch.exp(-((qi - x) ** 2) / 2)
        assert abs(float(out[i]) - float((k * y).sum() / k.sum())) < 1e-6
    torch.testing.assert_close(nw.attention_weights.sum(1), torch.ones(2))
    assert list(nw.parameters()) == []


def test_gradcheck_in_width():
    net = NWKernelRegression(width=0.7).double()
    q = torch.rand(4, dtype=torch.float64) * 5
    keys = torch.rand(4, 6, dtype=torch.float64) * 5
    vals = torch.randn(4, 6, dtype=torch.float64)

    def f(w):
        return torch.func.functional_call(net, {"w": w}, (q, keys, vals))

    assert torch.autograd.gradcheck(
        f, (torch.tensor([0.7], dtype=torch.float64, requires_grad=True),)
    )


def test_leave_one_out():
    out = leave_one_out(torch.tensor([1.0, 2.0, 3.0]))
    assert out.tolist() == [[2.0, 3.0], [1.0, 3.0], [1.0, 2.0]]


def test_book_training_improves_fit():
    data = make_nw_data(seed=0)
    assert data.x_train.shape == (50,) and data.x_test.shape == (50,)
    assert torch.all(data.x_train[1:] >= data.x_train[:-1])
    torch.testing.assert_close(data.y_truth, nw_target(data.x_test))
    net, losses = fit_nadaraya_watson(data, epochs=5)
    assert len(losses) == 5 and losses[-1] < losses[0]
    with torch.no_grad():
        fitted = net(data.x_test, data.x_train, data.y_train)
        fixed = NadarayaWatson(learnable=False, width=1.0)(data.x_test, data.x_train, data.y_train)
    mse = lambda y: float(((y - data.y_truth) ** 2).mean())  # noqa: E731
    assert mse(fitted) < mse(fixed)


def test_errors():
    nw = NWKernelRegression()
    with pytest.raises(ValueError, match="same shape"):
        nw(torch.rand(3), torch.rand(3, 4), torch.rand(3, 5))
    with pytest.raises(ValueError, match=r"queries must be 1-D"):
        nw(torch.rand(3, 1), torch.rand(3, 4), torch.rand(3, 4))
    with pytest.raises(ValueError, match="n_train must be an int >= 2, got 1"):
        make_nw_data(n_train=1)
    with pytest.raises(TypeError, match=r"n_train must be an int >= 2, got 5\.0 \(float\)"):
        make_nw_data(n_train=5.0)
