"""Attention weights as values: record them for one block of code, per thread.

    with record_attention(model) as record:       # this thread's (and context's) record
        model.encoder(src, src_len)
    weights = record.get(model.encoder.blks[0].attention)   # (B, H, S, S)

Inside the block, every attention module (``DotProductAttention``,
``MultiHeadAttention``, ``AdditiveAttention``, the Bahdanau decoder) computes exact
weights instead of a fused kernel and notes them in the record, keyed by the module. The
record lives in a ``contextvars.ContextVar``, not on the modules: two threads (two
requests of the web explorer) can record on the same model at the same time without a
lock, each getting its own weights. The modules' ``attention_weights`` attributes (the
book's API) are still set as well, but they are shared: under concurrency read the record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from torch import Tensor, nn

__all__ = ["AttentionRecord", "note_weights", "record_attention", "recording"]


class AttentionRecord:
    """The weights noted during one ``record_attention`` block: module -> last weights."""

    def __init__(self) -> None:
        self._weights: dict[int, tuple[nn.Module, Tensor]] = {}

    def note(self, module: nn.Module, weights: Tensor) -> None:
        self._weights[id(module)] = (module, weights)  # the module is kept: its id stays its own

    def get(self, module: nn.Module) -> Tensor | None:
        """The weights ``module`` computed last in the block, or None."""
        found = self._weights.get(id(module))
        return None if found is None or found[0] is not module else found[1]

    def __len__(self) -> int:
        return len(self._weights)


_RECORD: ContextVar[AttentionRecord | None] = ContextVar("attnkit_attention_record", default=None)


def recording() -> bool:
    """Whether a ``record_attention`` block is active in this thread/context."""
    return _RECORD.get() is not None


def note_weights(module: nn.Module, weights: Tensor | None) -> None:
    """Called by attention modules: keep ``weights`` in the active record, if any."""
    record = _RECORD.get()
    if record is not None and weights is not None:
        record.note(module, weights)


@contextmanager
def record_attention(model: nn.Module | None = None, on: bool = True) -> Iterator[AttentionRecord]:
    """Record exact attention weights in this thread/context within the block.

    ``model`` is accepted for the earlier signature (recording covers every module the
    block runs); ``on=False`` turns recording off inside the block (a nested block that
    needs the fused kernels). Yields the ``AttentionRecord``.
    """
    record = AttentionRecord()
    token = _RECORD.set(record if on else None)
    try:
        yield record
    finally:
        _RECORD.reset(token)
