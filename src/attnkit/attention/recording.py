"""Turn on recording of attention weights across a whole model (for pictures)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

__all__ = ["record_attention"]


@contextmanager
def record_attention(model: nn.Module, on: bool = True) -> Iterator[nn.Module]:
    """Within the block, every attention module of ``model`` keeps its weights.

    Modules with a ``record_weights`` flag (``DotProductAttention``,
    ``MultiHeadAttention``) compute exact weights instead of the fused kernel; the
    flags are restored on exit.
    """
    mods = [m for m in model.modules() if hasattr(m, "record_weights")]
    saved = [m.record_weights for m in mods]
    for m in mods:
        m.record_weights = on
    try:
        yield model
    finally:
        for m, s in zip(mods, saved):
            m.record_weights = s
