"""The key/value cache of one attention layer: projected keys and values, (B, H, T, Dh) each.

Shape legend: B batch, H heads, T positions held, Dh head width.

Incremental decoding feeds a decoder one new position at a time. Its self-attention then
needs the keys and values of every position before, and its attention over the encoder
output needs that output's keys and values, the same at every step. ``KVCache`` holds
them, already projected and split into heads, so each step projects only what is new:

- ``KVCache()`` (self-attention): each ``update(k, v)`` appends the new positions and
  returns all of them;
- ``KVCache(static=True)`` (attention over a fixed memory): the first ``update`` stores
  the memory's projections; later ones return them unchanged, and
  ``MultiHeadAttention`` does not project the memory again.

A ``MultiHeadAttention`` forward given a cache updates it in place. ``copy`` (the same
tensors, a new holder) and ``index_select`` (rows kept or reordered, as beam search does)
give new caches and leave the old one as it was.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit._validate import boolean

__all__ = ["KVCache"]


class KVCache:
    """Projected keys and values of the positions attended so far, each (B, H, T, Dh)."""

    __slots__ = ("keys", "static", "values")

    def __init__(
        self, keys: Tensor | None = None, values: Tensor | None = None, *, static: bool = False
    ) -> None:
        if (keys is None) != (values is None):
            raise ValueError("KVCache needs both keys and values, or neither")
        if keys is not None:
            _check_heads("keys", keys)
            _check_heads("values", values)
            if keys.shape[:3] != values.shape[:3]:
                raise ValueError(
                    "keys and values must share (B, H, T), got "
                    f"{tuple(keys.shape)} and {tuple(values.shape)}"
                )
        self.keys, self.values, self.static = keys, values, boolean("static", static)

    def __len__(self) -> int:
        """Positions held (T)."""
        return 0 if self.keys is None else self.keys.shape[2]

    @property
    def filled(self) -> bool:
        """Whether anything is held (a static cache: whether the memory is projected)."""
        return self.keys is not None

    def update(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' keys and values, (B, H, T_new, Dh) each, and return all
        the positions held; a filled static cache returns its own and ignores these."""
        if self.static and self.filled:
            return self.keys, self.values
        _check_heads("keys", keys)
        _check_heads("values", values)
        if self.keys is not None:
            held = tuple(self.keys.shape[:2]) + tuple(self.keys.shape[3:])
            new = tuple(keys.shape[:2]) + tuple(keys.shape[3:])
            if held != new:
                raise ValueError(
                    f"the cache holds (B, H, *, Dh) = {tuple(self.keys.shape)}, and the new "
                    f"keys {tuple(keys.shape)} do not match it"
                )
            keys = torch.cat([self.keys, keys], dim=2)  # (B, H, T_held + T_new, Dh)
            values = torch.cat([self.values, values], dim=2)
        self.keys, self.values = keys, values
        return keys, values

    def copy(self) -> KVCache:
        """A new cache holding the same tensors (an update of one leaves the other as is)."""
        return KVCache(self.keys, self.values, static=self.static)

    def index_select(self, index: Tensor) -> KVCache:
        """A new cache with batch rows ``index`` (B',) of this one."""
        if self.keys is None:
            return KVCache(static=self.static)
        return KVCache(
            self.keys.index_select(0, index), self.values.index_select(0, index), static=self.static
        )

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return f"KVCache(static={self.static}, keys={shape})"


def _check_heads(name: str, X) -> None:
    if not isinstance(X, Tensor) or X.dim() != 4:
        raise ValueError(
            f"{name} must be a (B, H, T, Dh) tensor, got {getattr(X, 'shape', type(X).__name__)}"
        )
