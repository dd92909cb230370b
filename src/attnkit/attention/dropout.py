"""Dropout that draws fewer random numbers on CPU.

PyTorch's CPU ``F.dropout`` fills a Bernoulli tensor through MKL, which starts a fresh
random stream on every call: about 70-100 µs for the 10-30k activations of the book's
Transformer, whatever their size, 18 times a step. Here one 64-bit draw of PyTorch's own
generator gives three 16-bit uniforms, and a unit is kept when its uniform is at or above
``round(p * 65536)``: the drop probability is ``p`` to within 2^-17 (0.1 -> 0.1000061),
the survivors are scaled by the inverse of that exact keep probability (so the output's
expectation is the input, exactly), and ``torch.manual_seed`` makes it reproducible. On
other devices this is ``F.dropout``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import probability

__all__ = ["Dropout", "dropout", "keep_mask"]

_LEVELS = 1 << 16


def _dropped_levels(p: float) -> int:
    """How many of the 2^16 levels drop a unit: ``round(p * 2^16)`` (at most 2^16)."""
    return min(round(p * _LEVELS), _LEVELS)


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> Tensor:
    """Bool (shape): True with probability ``1 - round(p * 2^16) / 2^16``, on the CPU."""
    p = probability("p", p)
    n = 1
    for size in shape:
        n *= int(size)
    dropped = _dropped_levels(p)
    if dropped == _LEVELS:  # p within 2^-17 of 1: the int16 threshold would wrap around
        return torch.zeros(shape, dtype=torch.bool)
    draws = (n + 2) // 3
    # int64 draws cover [0, 2^63): the low three 16-bit words are uniform, the top one is not
    words = torch.empty(draws, dtype=torch.int64).random_().view(torch.int16).view(draws, 4)
    uniform = words[:, :3].reshape(-1)[:n]  # (n,) uniform over [-2^15, 2^15)
    return uniform.view(shape) >= dropped - _LEVELS // 2


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability ``p`` (on the 2^-16 grid) and scale the
    rest by the inverse of the exact keep probability, so the expectation is ``x``."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not x.is_floating_point():
        return F.dropout(x, p, True)
    kept = _LEVELS - _dropped_levels(p)
    keep = keep_mask(x.shape, p).to(x.dtype)  # (x.shape), no grad
    return x * (keep.mul_(_LEVELS / kept) if kept else keep)


class Dropout(nn.Module):
    """``nn.Dropout`` over ``dropout`` above (same ``p`` attribute, no parameters)."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = probability("dropout", p)

    def forward(self, X: Tensor) -> Tensor:
        return dropout(X, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
