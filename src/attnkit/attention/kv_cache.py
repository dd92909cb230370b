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
give new caches and leave the old one as it was. A static cache reordered so that a row
is read more than once (beam search's k hypotheses of one sentence) keeps its rows and a
``row_map`` instead of copies (``attention.row_map``); ``update`` then returns one row per
query row, and the decoder's step attends through the map.

``KVCache(dtype=torch.bfloat16)`` stores the keys and values in that precision (converted
as they come) and returns them so: attention then runs in it (``MultiHeadAttention`` and
the decoder step cast the queries to it and the output back). A decoding step reads every
cached position of every row once per layer, so at a large batch or beam its attention
products are bound by memory; half the bytes made them 2-2.3x faster (2026-12-07, the
2-core AVX-512 EPYC with native bf16). ``quantize_int8`` asks for it for a translator's
caches of the encoder memory where the CPU computes in bf16
(``attnkit.inference.int8.int8_cache_dtype``); PyTorch's bf16 products copy a strided view
first, so an appending cache (its positions a view into its room) gains less.

H is the number of key/value heads: with grouped-query attention (``num_kv_heads``) a
cache holds fewer heads than there are queries, and ``nbytes`` shrinks with it.

``KVCache(capacity=N)`` allocates (B, H, N, Dh) once, at the first update, and writes
each new position in place (growing by doubling if N is passed): no copy of the positions
held at every step, as ``torch.cat`` makes. ``keys`` and ``values`` are then views of the
positions held. Copies share the buffer and its high-water mark (the last column any of
them wrote): the one whose positions end at the mark writes on in place, one that fell
behind (a sibling appended first, as two continuations of one state would) allocates its
own, so no holder ever sees another's positions. ``index_select`` keeps the room.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit._validate import boolean, optional, positive_int
from attnkit.attention.row_map import RowMap, select
from attnkit.i18n import _

__all__ = ["KVCache"]


class KVCache:
    """Projected keys and values of the positions attended so far, each (B, H, T, Dh)."""

    __slots__ = ("_room", "capacity", "dtype", "keys", "row_map", "static", "values")

    def __init__(
        self,
        keys: Tensor | None = None,
        values: Tensor | None = None,
        *,
        static: bool = False,
        capacity: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if dtype is not None and (
            not isinstance(dtype, torch.dtype) or not dtype.is_floating_point
        ):
            message = _("dtype must be a floating torch.dtype or None, got {dtype!r}")
            raise TypeError(message.format(dtype=dtype))
        self.dtype = dtype
        if (keys is None) != (values is None):
            raise ValueError(_("KVCache needs both keys and values, or neither"))
        if keys is not None:
            _check_heads("keys", keys)
            _check_heads("values", values)
            if keys.shape[:3] != values.shape[:3]:
                message = _("keys and values must share (B, H, T), got {keys} and {values}")
                raise ValueError(message.format(keys=tuple(keys.shape), values=tuple(values.shape)))
            if dtype is not None:
                keys, values = keys.to(dtype), values.to(dtype)
        self.keys, self.values, self.static = keys, values, boolean("static", static)
        self.capacity = optional(positive_int, "capacity", capacity)
        if self.capacity is not None and self.static:
            raise ValueError(_("capacity is for appending caches: a static cache holds one memory"))
        self._room: _Room | None = None  # the preallocated buffers (with capacity)
        # a static cache's query rows -> its rows, set by index_select (attention.row_map)
        self.row_map: RowMap | None = None

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
            return self.per_row()
        _check_heads("keys", keys)
        _check_heads("values", values)
        if self.keys is not None:
            held = tuple(self.keys.shape[:2]) + tuple(self.keys.shape[3:])
            new = tuple(keys.shape[:2]) + tuple(keys.shape[3:])
            if held != new:
                message = _(
                    "the cache holds (B, H, *, Dh) = {cached}, and the new keys {keys} do "
                    "not match it"
                )
                raise ValueError(
                    message.format(cached=tuple(self.keys.shape), keys=tuple(keys.shape))
                )
        if self.dtype is not None and keys.dtype != self.dtype:  # stored in its precision
            keys, values = keys.to(self.dtype), values.to(self.dtype)
        if self.capacity is not None and not _tracked(keys, values):
            return self._write(keys, values)  # in place, into the preallocated buffers
        if self.keys is not None:
            keys = torch.cat([self.keys, keys], dim=2)  # (B, H, T_held + T_new, Dh)
            values = torch.cat([self.values, values], dim=2)
        elif self.static and not _tracked(keys, values):  # read at every step: one layout
            keys, values = keys.contiguous(), values.contiguous()
        self.keys, self.values, self._room = keys, values, None
        return keys, values

    def per_row(self) -> tuple[Tensor, Tensor]:
        """The keys and values of each query row, (R, H, T, Dh) each: ``keys`` and
        ``values`` themselves, or with a ``row_map`` (which holds the memory's rows once)
        the rows it names, gathered."""
        if self.row_map is None or self.keys is None:
            return self.keys, self.values
        rows = self.row_map.rows
        return self.keys.index_select(0, rows), self.values.index_select(0, rows)

    def _write(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Write the new positions into the buffers, after the held ones: in place when
        this holder's positions end at the buffers' high-water mark and they have room,
        else into new buffers (grown by doubling) holding a copy of the held positions."""
        held, new = len(self), keys.shape[2]
        room = self._room  # the positions held are its columns 0 .. held - 1
        if room is None or room.end != held or held + new > room.keys.shape[2]:
            size = max(self.capacity, held + new, 2 * held)
            bufs = []
            for x, old in ((keys, self.keys), (values, self.values)):
                buf = x.new_empty(*x.shape[:2], size, x.shape[3])  # (B, H, N, Dh)
                if held:
                    buf[:, :, :held] = old
                bufs.append(buf)
            room = _Room(bufs[0], bufs[1], held)
            self._room = room
        end = held + new
        room.keys[:, :, held:end] = keys
        room.values[:, :, held:end] = values
        room.end = end
        self.keys, self.values = room.keys[:, :, :end], room.values[:, :, :end]  # views
        return self.keys, self.values

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values held (the positions held, not a buffer's spare room)."""
        if self.keys is None:
            return 0
        return sum(x.numel() * x.element_size() for x in (self.keys, self.values))

    def copy(self) -> KVCache:
        """A new cache holding the same tensors (an update of one leaves the other as is)."""
        twin = KVCache(
            self.keys, self.values, static=self.static, capacity=self.capacity, dtype=self.dtype
        )
        twin._room = self._room  # shared: see the module's doc
        twin.row_map = self.row_map
        return twin

    def index_select(self, index: Tensor) -> KVCache:
        """A new cache with batch rows ``index`` (B',) of this one (with room to append,
        as much again as it holds, when this one has a buffer)."""
        if self.keys is None:
            return KVCache(static=self.static, capacity=self.capacity, dtype=self.dtype)
        rows = None if self.row_map is None else self.row_map.rows
        mapped = select(rows, index, *self.keys.shape[:2]) if self.static else None
        if mapped is not None:  # rows read more than once (beams of one sentence): a map
            row_map, keep = mapped
            keys, values = self.keys, self.values
            if keep is not None:  # the map uses less than half of the rows: compacted
                keys, values = keys.index_select(0, keep), values.index_select(0, keep)
            cache = KVCache(keys, values, static=True, dtype=self.dtype)
            cache.row_map = row_map
            return cache
        if self._room is None or self.static:
            return KVCache(
                self.keys.index_select(0, index),
                self.values.index_select(0, index),
                static=self.static,
                capacity=self.capacity,
                dtype=self.dtype,
            )
        held = len(self)
        cols = min(self._room.keys.shape[2], max(2 * held, held + 1))
        bufs = []
        for room in (self._room.keys, self._room.values):  # (B, H, N, Dh) each
            buf = room.new_empty(index.shape[0], room.shape[1], cols, room.shape[3])
            # the held columns only (the spare room is written later): 1.5-5x faster than
            # selecting all N' columns at a 256-row beam step (2026-12-07)
            torch.index_select(room[:, :, :held], 0, index, out=buf[:, :, :held])
            bufs.append(buf)
        kbuf, vbuf = bufs  # (B', H, N', Dh)
        cache = KVCache(
            kbuf[:, :, :held], vbuf[:, :, :held], capacity=self.capacity, dtype=self.dtype
        )
        cache._room = _Room(kbuf, vbuf, held)
        return cache

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        room = "" if self.capacity is None else f", capacity={self.capacity}"
        dtype = "" if self.dtype is None else f", dtype={self.dtype}"
        return f"KVCache(static={self.static}, keys={shape}{room}{dtype})"


class _Room:
    """Preallocated keys and values buffers, (B, H, N, Dh) each, shared by a cache's copies;
    ``end``: the last buffer column any of them has written (their high-water mark)."""

    __slots__ = ("end", "keys", "values")

    def __init__(self, keys: Tensor, values: Tensor, end: int) -> None:
        self.keys, self.values, self.end = keys, values, end


def _check_heads(name: str, X) -> None:
    if not isinstance(X, Tensor) or X.dim() != 4:
        message = _("{name} must be a (B, H, T, Dh) tensor, got {got}")
        raise ValueError(message.format(name=name, got=getattr(X, "shape", type(X).__name__)))


def _tracked(keys: Tensor, values: Tensor) -> bool:
    """Whether autograd records these: earlier steps' graphs then hold views of the cache,
    and an in-place write into its buffer would fail their backward (so it concatenates)."""
    return torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad)
