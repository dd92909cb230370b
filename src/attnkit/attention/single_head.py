"""Attention scoring: additive (Bahdanau) and scaled dot-product attention.

Shape legend: B batch, Q queries, K keys, D width, Dv value width, H heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import check_qkv, positive_int, probability
from attnkit.attention.dropout import Dropout
from attnkit.attention.kernels import choose_kernel, explicit_attention, explicit_products
from attnkit.attention.masking import as_mask, masked_softmax
from attnkit.attention.recording import note_weights, recording
from attnkit.i18n import _

__all__ = ["AdditiveAttention", "DotProductAttention", "scaled_dot_product"]


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """softmax(q kᵀ / sqrt(D)) v over any leading dims, with an optional bool mask.

    Args:
        q: (..., Q, D); k: (..., K, D); v: (..., K, Dv).
        mask: bool, broadcastable to (..., Q, K), True = attend.
        dropout_p: dropout on the weights (pass 0.0 in eval mode).
        need_weights: return the exact weights; otherwise run the kernel
            ``attention.kernels`` chooses for the device, dtype and length (the fused
            ``F.scaled_dot_product_attention``, or explicit products on the CPU in half
            precision) and return ``None`` for them.

    Returns:
        output (..., Q, Dv) and weights (..., Q, K) or None. Rows with no key to
        attend give zero weights and a zero output on every path.
    """
    if not need_weights and choose_kernel(q, k.shape[-2]) == "matmul":
        return explicit_attention(q, k, v, mask, dropout_p), None
    if not need_weights:  # (an explicit path with attnkit's CPU dropout measured slower)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        if mask is not None and out.device.type != "cpu":
            # CPU kernels already return 0 for empty rows; make sure other backends agree.
            out = out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        return out, None
    return explicit_products(q, k, v, mask, dropout_p)


class DotProductAttention(nn.Module):
    """Scaled dot-product attention with dropout on the weights.

    ``forward`` runs through PyTorch's fused ``scaled_dot_product_attention``
    unless weights are wanted: ``need_weights=True`` (then it returns ``(output,
    weights)``), ``record_weights`` or a ``record_attention()`` block. Then it computes
    them exactly and keeps them in ``attention_weights`` too.
    """

    def __init__(self, dropout: float = 0.0, record_weights: bool = False) -> None:
        super().__init__()
        self.dropout = probability("dropout", dropout)
        self.record_weights = record_weights
        self.attention_weights: Tensor | None = None

    def wants_weights(self) -> bool:
        return self.record_weights or recording()

    def forward(
        self,
        queries: Tensor,  # (B, Q, D)
        keys: Tensor,  # (B, K, D)
        values: Tensor,  # (B, K, Dv)
        valid_lens: Tensor | None = None,  # (B,) or (B, Q) ints, or bool mask (B, Q, K)
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:  # (B, Q, Dv), and weights (B, Q, K)
        check_qkv(queries, keys, values, same_width=True)
        scores_shape = (queries.shape[0], queries.shape[1], keys.shape[1])
        mask = as_mask(scores_shape, valid_lens, queries.device)  # (B, 1 or Q, K)
        want = need_weights or self.wants_weights()
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product(queries, keys, values, mask, p, want)
        self.attention_weights = weights
        note_weights(self, weights)
        return (out, weights) if need_weights else out


class AdditiveAttention(nn.Module):
    """Additive (Bahdanau) attention: score(q, k) = w_vᵀ tanh(W_q q + W_k k).

    The weights are computed explicitly anyway, so they are always kept in
    ``attention_weights`` (B, Q, K); ``need_weights=True`` returns ``(output, weights)``.
    """

    def __init__(self, key_size: int, query_size: int, num_hiddens: int, dropout: float = 0.0):
        super().__init__()
        key_size = positive_int("key_size", key_size)
        query_size = positive_int("query_size", query_size)
        num_hiddens = positive_int("num_hiddens", num_hiddens)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = Dropout(probability("dropout", dropout))
        self.attention_weights: Tensor | None = None

    def forward(
        self,
        queries: Tensor,  # (B, Q, query_size)
        keys: Tensor,  # (B, K, key_size)
        values: Tensor,  # (B, K, Dv)
        valid_lens: Tensor | None = None,  # (B,) or (B, Q) ints, or bool mask (B, Q, K)
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:  # (B, Q, Dv), and weights (B, Q, K)
        check_qkv(queries, keys, values, same_width=False)
        if queries.shape[-1] != self.W_q.in_features or keys.shape[-1] != self.W_k.in_features:
            message = _(
                "expected queries (..., {query_size}) and keys (..., {key_size}), got "
                "{queries} and {keys}"
            )
            raise ValueError(
                message.format(
                    query_size=self.W_q.in_features,
                    key_size=self.W_k.in_features,
                    queries=tuple(queries.shape),
                    keys=tuple(keys.shape),
                )
            )
        q, k = self.W_q(queries), self.W_k(keys)  # (B, Q, H), (B, K, H)
        features = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))  # (B, Q, K, H)
        scores = self.w_v(features).squeeze(-1)  # (B, Q, K)
        weights = masked_softmax(scores, valid_lens)  # (B, Q, K)
        self.attention_weights = weights
        note_weights(self, weights)
        out = torch.bmm(self.dropout(weights), values)
        return (out, weights) if need_weights else out
