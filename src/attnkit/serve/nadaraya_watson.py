"""Nadaraya-Watson kernel regression for the explorer's second tab.

f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i with w = 1 / width: the book's data
(``make_nw_data``) and the non-parametric estimator with a fixed kernel width.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from attnkit._validate import real
from attnkit.attention.kernel_regression import NadarayaWatson, make_nw_data

__all__ = ["MAX_WIDTH", "MIN_WIDTH", "nadaraya_watson"]

MIN_WIDTH, MAX_WIDTH = 0.01, 100.0


@lru_cache(maxsize=8)
def _data(n_train: int, seed: int):
    return make_nw_data(n_train=n_train, seed=seed)


def nadaraya_watson(width: float, n_train: int = 50, seed: int = 0) -> dict[str, Any]:
    """Fit the book's data with kernel ``width``; return points, curves and the weights.

    ``attention`` is (test points, training points): row q holds the softmax weights
    that test point q puts on each training point (rows sum to 1).
    """
    real("width", width, at_least=MIN_WIDTH, at_most=MAX_WIDTH)
    data = _data(n_train, seed)
    net = NadarayaWatson(learnable=False, width=1.0 / width)
    with torch.inference_mode():
        y_hat = net(data.x_test, data.x_train, data.y_train)
        weights = net.attention_weights
    return {
        "width": width,
        "w": 1.0 / width,
        "x_train": data.x_train.tolist(),
        "y_train": data.y_train.tolist(),
        "x_test": data.x_test.tolist(),
        "y_truth": data.y_truth.tolist(),
        "y_hat": y_hat.tolist(),
        "attention": weights.tolist(),
    }
