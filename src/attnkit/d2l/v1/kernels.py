"""Nadaraya-Watson regression of d2l 1.0 (section "Attention Pooling by Similarity").

1.0 has no learned version: a fixed kernel of the distance between training inputs (keys)
and validation inputs (queries), normalised over the keys. Shapes: ``x_train``, ``y_train``
(n,), ``x_val`` (m,); weights (n, m), one column per query.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.i18n import _

__all__ = ["boxcar", "constant", "epanechikov", "epanechnikov", "gaussian", "nadaraya_watson"]


def gaussian(x):
    return torch.exp(-(x**2) / 2)


def boxcar(x):
    return torch.abs(x) < 1.0


def constant(x):
    return 1.0 + 0 * x


def epanechnikov(x):
    return torch.max(1 - torch.abs(x), torch.zeros_like(x))


epanechikov = epanechnikov  # the book's spelling


def _vector(name: str, t) -> Tensor:
    if not isinstance(t, Tensor) or not t.is_floating_point():
        message = _("{name} must be a float tensor, got {dtype}")
        raise TypeError(message.format(name=name, dtype=getattr(t, "dtype", type(t))))
    if t.dim() > 1 and t.numel() != t.shape[0]:
        message = _("{name} must be 1-D (n,), got shape {shape}")
        raise ValueError(message.format(name=name, shape=tuple(t.shape)))
    return t.reshape(-1)


def nadaraya_watson(x_train, y_train, x_val, kernel):
    """``(y_hat (m,), attention_w (n, m))``: kernel weights normalised over the keys.

    A query with no key of nonzero weight (boxcar far from the data) gets zero weights and
    ``y_hat`` 0, where the book divides 0 by 0 (NaN). Computed in the inputs' dtype (the
    book casts the weights to float32).
    """
    x_train, y_train, x_val = (
        _vector("x_train", x_train), _vector("y_train", y_train), _vector("x_val", x_val)
    )  # fmt: skip
    if x_train.shape != y_train.shape:
        message = _("x_train and y_train must have the same length, got {n_x} and {n_y}")
        raise ValueError(message.format(n_x=x_train.numel(), n_y=y_train.numel()))
    if not callable(kernel):
        message = _("kernel must be a function of distances, got {kernel!r}")
        raise TypeError(message.format(kernel=kernel))
    dists = x_train.reshape((-1, 1)) - x_val.reshape((1, -1))  # (n, m)
    k = kernel(dists).to(dists.dtype)
    total = k.sum(0)
    attention_w = k / torch.where(total == 0, torch.ones_like(total), total)
    return y_train @ attention_w, attention_w
