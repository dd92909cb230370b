"""Bilinear ("general") attention scoring: a(q, k) = qᵀ W k (Luong et al., 2015).

The d2l 10.3 exercise: a score for queries and keys of different widths that uses
matrix products only. Shape legend: B batch, Q queries, K keys, Dq / Dk their widths,
Dv value width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit._validate import check_qkv, positive_int, probability
from attnkit.attention.masking import masked_softmax
from attnkit.attention.recording import note_weights
from attnkit.i18n import _

__all__ = ["BilinearAttention"]


class BilinearAttention(nn.Module):
    """score(q, k) = qᵀ W k with a learned ``W`` (query_size, key_size), then masked softmax.

    Args:
        query_size: width Dq of the queries.
        key_size: width Dk of the keys (may differ from Dq).
        dropout: dropout on the attention weights.

    ``forward(queries (B, Q, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens)`` ->
    (B, Q, Dv). ``valid_lens`` is None, key lengths (B,) or (B, Q), or a boolean mask
    broadcastable to (B, Q, K), True = attend (:mod:`attnkit.attention.masking`); a row
    with no key to attend gets zero weights and a zero output. The weights of the last
    call are kept in ``attention_weights`` (B, Q, K).
    """

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.query_size = positive_int("query_size", query_size)
        self.key_size = positive_int("key_size", key_size)
        bound = 1.0 / math.sqrt(self.key_size)
        self.W = nn.Parameter(torch.empty(self.query_size, self.key_size).uniform_(-bound, bound))
        self.dropout = nn.Dropout(probability("dropout", dropout))
        self.attention_weights: Tensor | None = None

    def extra_repr(self) -> str:
        return f"query_size={self.query_size}, key_size={self.key_size}"

    def scores(self, queries: Tensor, keys: Tensor) -> Tensor:
        """(B, Q, Dq), (B, K, Dk) -> (B, Q, K) = queries @ W @ keysᵀ (two batched matmuls)."""
        return torch.matmul(queries, self.W) @ keys.transpose(1, 2)

    def forward(
        self,
        queries: Tensor,  # (B, Q, Dq)
        keys: Tensor,  # (B, K, Dk)
        values: Tensor,  # (B, K, Dv)
        valid_lens: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:  # (B, Q, Dv), and weights (B, Q, K)
        check_qkv(queries, keys, values, same_width=False)
        if queries.shape[-1] != self.query_size:
            message = _("queries must be (B, Q, {query_size}), got {shape}")
            raise ValueError(message.format(query_size=self.query_size, shape=tuple(queries.shape)))
        if keys.shape[-1] != self.key_size:
            message = _("keys must be (B, K, {key_size}), got {shape}")
            raise ValueError(message.format(key_size=self.key_size, shape=tuple(keys.shape)))
        weights = masked_softmax(self.scores(queries, keys), valid_lens)
        self.attention_weights = weights
        note_weights(self, weights)  # into this thread's record_attention() block
        out = torch.bmm(self.dropout(weights), values)
        return (out, weights) if need_weights else out
