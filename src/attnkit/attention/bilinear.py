"""Bilinear ("general") attention scoring: a(q, k) = qᵀ W k (Luong et al., 2015).

The d2l 10.3 exercise: a score for queries and keys of different widths that uses
matrix products only. Shape legend: B batch, Q queries, K keys, Dq / Dk their widths,
Dv value width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit._validate import positive_int, probability
from attnkit.attention.masking import masked_softmax
from attnkit.attention.recording import note_weights

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
        for name, t in (("queries", queries), ("keys", keys), ("values", values)):
            if not isinstance(t, Tensor) or not t.is_floating_point():
                raise TypeError(
                    f"{name} must be a floating-point tensor, got {getattr(t, 'dtype', type(t))}"
                )
            if t.dim() != 3:
                raise ValueError(f"{name} must be 3-D (B, T, D), got shape {tuple(t.shape)}")
        if queries.shape[-1] != self.query_size:
            raise ValueError(
                f"queries must be (B, Q, {self.query_size}), got {tuple(queries.shape)}"
            )
        if keys.shape[-1] != self.key_size:
            raise ValueError(f"keys must be (B, K, {self.key_size}), got {tuple(keys.shape)}")
        if not queries.shape[0] == keys.shape[0] == values.shape[0]:
            raise ValueError(
                "queries, keys and values must share the batch size, got "
                f"{queries.shape[0]}, {keys.shape[0]} and {values.shape[0]}"
            )
        if keys.shape[1] != values.shape[1]:
            raise ValueError(
                f"keys and values must have the same length K, got {keys.shape[1]} "
                f"and {values.shape[1]}"
            )
        weights = masked_softmax(self.scores(queries, keys), valid_lens)
        self.attention_weights = weights
        note_weights(self, weights)  # into this thread's record_attention() block
        out = torch.bmm(self.dropout(weights), values)
        return (out, weights) if need_weights else out
