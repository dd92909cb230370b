"""Nadaraya-Watson kernel regression: attention pooling with a Gaussian kernel.

f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i

With ``w`` fixed at 1 this is the non-parametric estimator; with ``w`` learnable
it is the book's parametric attention pooling.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit._validate import integer
from attnkit.i18n import _

__all__ = [
    "NWData",
    "NWKernelRegression",
    "NadarayaWatson",
    "fit_nadaraya_watson",
    "make_nw_data",
    "nw_target",
]


class NadarayaWatson(nn.Module):
    """Gaussian-kernel attention pooling.

    Args:
        learnable: learn the inverse kernel width ``w``; otherwise ``w`` = ``width``.
        width: the initial (or fixed) value of ``w``; ``None`` draws U(0, 1) as the book.
    """

    def __init__(self, learnable: bool = True, width: float | None = None) -> None:
        super().__init__()
        init = torch.rand(1) if width is None else torch.tensor([float(width)])
        if learnable:
            self.w = nn.Parameter(init)
        else:
            self.register_buffer("w", init)
        self.attention_weights: Tensor | None = None

    def forward(
        self,
        queries: Tensor,  # (Q,)
        keys: Tensor,  # (Q, K) per-query keys, or (K,) shared
        values: Tensor,  # same shape as keys
    ) -> Tensor:  # (Q,)
        if queries.dim() != 1:
            message = _("queries must be 1-D (Q,), got shape {shape}")
            raise ValueError(message.format(shape=tuple(queries.shape)))
        if keys.shape != values.shape:
            message = _("keys and values must have the same shape, got {keys} and {values}")
            raise ValueError(message.format(keys=tuple(keys.shape), values=tuple(values.shape)))
        if keys.dim() == 1:
            keys = keys.expand(queries.shape[0], -1)  # (Q, K)
            values = values.expand(queries.shape[0], -1)
        elif keys.dim() != 2 or keys.shape[0] != queries.shape[0]:
            message = _("keys must be (K,) or (Q, K) with Q = {q}, got {keys}")
            raise ValueError(message.format(q=queries.shape[0], keys=tuple(keys.shape)))
        scores = -(((queries.unsqueeze(1) - keys) * self.w) ** 2) / 2  # (Q, K)
        self.attention_weights = torch.softmax(scores, dim=1)
        return (self.attention_weights * values).sum(dim=1)


class NWKernelRegression(NadarayaWatson):
    """The book's parametric model: ``w`` learnable, initialized U(0, 1)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(learnable=True, **kwargs)


def nw_target(x: Tensor) -> Tensor:
    """The book's true function 2 sin x + x^0.8."""
    return 2 * torch.sin(x) + x**0.8


@dataclass
class NWData:
    x_train: Tensor  # (n,) sorted
    y_train: Tensor  # (n,) noisy targets
    x_test: Tensor  # (m,)
    y_truth: Tensor  # (m,)


def make_nw_data(n_train: int = 50, seed: int = 0, noise: float = 0.5) -> NWData:
    """The book's data: x ~ sort(U(0, 5)), y = 2 sin x + x^0.8 + N(0, noise), test grid 0:5:0.1."""
    integer("n_train", n_train, minimum=2)  # leave-one-out needs another point
    g = torch.Generator().manual_seed(seed)
    x_train, _ = torch.sort(torch.rand(n_train, generator=g) * 5)
    y_train = nw_target(x_train) + torch.normal(0.0, noise, (n_train,), generator=g)
    x_test = torch.arange(0, 5, 0.1)
    return NWData(x_train, y_train, x_test, nw_target(x_test))


def leave_one_out(x: Tensor) -> Tensor:
    """(n,) -> (n, n-1): row i holds every element but x[i]."""
    n = x.shape[0]
    keep = ~torch.eye(n, dtype=torch.bool)
    return x.unsqueeze(0).expand(n, n)[keep].reshape(n, n - 1)


def fit_nadaraya_watson(
    data: NWData, epochs: int = 5, lr: float = 0.5, seed: int = 0
) -> tuple[NadarayaWatson, list[float]]:
    """Train the parametric model as the book: full batch, SGD, leave-one-out keys.

    Returns the model and the summed squared loss of each epoch.
    """
    torch.manual_seed(seed)
    net = NWKernelRegression()
    keys, values = leave_one_out(data.x_train), leave_one_out(data.y_train)  # (n, n-1)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    losses = []
    for _epoch in range(epochs):
        opt.zero_grad()
        loss = ((net(data.x_train, keys, values) - data.y_train) ** 2).sum()  # as MSELoss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return net, losses
