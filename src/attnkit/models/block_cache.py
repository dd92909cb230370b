"""A Transformer decoder block's caches: the self-attention's keys and values of the
positions decoded so far, and the encoder-decoder attention's of the encoder output
(``attnkit.attention.kv_cache.KVCache`` each). ``TransformerDecoder``'s state holds one per
block; beam search reorders them (``index_select``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from attnkit.attention.kv_cache import KVCache

__all__ = ["BlockCache"]


@dataclass
class BlockCache:
    """A decoder block's caches: its self-attention's keys/values of the positions decoded
    so far, and its encoder-decoder attention's keys/values of the encoder output."""

    self_attention: KVCache = field(default_factory=KVCache)
    cross_attention: KVCache = field(default_factory=lambda: KVCache(static=True))

    def __len__(self) -> int:
        """Positions decoded so far."""
        return len(self.self_attention)

    def copy(self) -> BlockCache:
        """A new cache holding the same tensors (updating it leaves this one as it is)."""
        return BlockCache(self.self_attention.copy(), self.cross_attention.copy())

    def index_select(self, index: Tensor, *, same_sources: bool = False) -> BlockCache:
        """A new cache with batch rows ``index`` (B',); ``same_sources``: the encoder
        keys/values are kept as they are (see ``Decoder.reorder_state``)."""
        cross = self.cross_attention
        return BlockCache(
            self.self_attention.index_select(index),
            cross.copy() if same_sources else cross.index_select(index),
        )
