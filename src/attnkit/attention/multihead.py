"""Multi-head attention: H scaled dot-product heads computed in parallel.

Shape legend: B batch, Q queries, K keys, D model width (num_hiddens), H heads,
Dh = D / H head width.

The heads are split with one view + transpose, (B, T, D) -> (B, H, T, Dh), the
book's ``transpose_qkv`` without the copy into (B*H, T, Dh). Projection of keys and
values is separate from attending (``project_kv`` / ``attend``) so decoders can
cache projected keys and values and pay for one new position per step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import positive_int
from attnkit.attention import key_padding
from attnkit.attention.masking import causal_mask, check_valid_lens, lengths_to_mask
from attnkit.attention.recording import note_weights, recording
from attnkit.attention.scoring import DotProductAttention, scaled_dot_product

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Multi-head attention with projections ``W_q``, ``W_k``, ``W_v``, ``W_o``.

    Args:
        num_hiddens: model width D; must be divisible by ``num_heads``.
        num_heads: number of heads H.
        dropout: dropout on the attention weights.
        bias: whether the four projections have biases.
        query_size, key_size, value_size: input widths (default D).

    Without requested weights the heads run through the fused
    ``F.scaled_dot_product_attention``; with ``need_weights=True`` (or
    ``record_weights=True``) the exact weights are kept in ``attention_weights``
    as (B, H, Q, K), and as (B*H, Q, K) in ``attention.attention_weights`` (the
    book's layout).
    """

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = False,
        *,
        query_size: int | None = None,
        key_size: int | None = None,
        value_size: int | None = None,
        record_weights: bool = False,
    ) -> None:
        super().__init__()
        num_heads = positive_int("num_heads", num_heads)
        num_hiddens = positive_int("num_hiddens", num_hiddens)
        for name, size in (("query_size", query_size), ("key_size", key_size),
                           ("value_size", value_size)):  # fmt: skip
            if size is not None:
                positive_int(name, size)
        if num_hiddens % num_heads:
            raise ValueError(
                f"num_hiddens ({num_hiddens}) must be divisible by num_heads ({num_heads})"
            )
        self.num_heads = num_heads
        self.num_hiddens = num_hiddens
        self.record_weights = record_weights
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size or num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size or num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size or num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    # -- helpers ---------------------------------------------------------------
    def wants_weights(self) -> bool:
        return self.record_weights or recording()

    @property
    def attention_weights(self) -> Tensor | None:
        """Weights of the last forward, (B, H, Q, K), or None if not recorded."""
        w = self.attention.attention_weights
        if w is None:
            return None
        return w.reshape(-1, self.num_heads, *w.shape[-2:])

    def _split(self, X: Tensor) -> Tensor:
        B, T, _ = X.shape
        return X.view(B, T, self.num_heads, -1).transpose(1, 2)  # (B, H, T, Dh)

    @staticmethod
    def _check_input(name: str, X: Tensor, width: int) -> None:
        if not isinstance(X, Tensor) or not X.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {getattr(X, 'dtype', X)}")
        if X.dim() != 3 or X.shape[-1] != width:
            raise ValueError(f"{name} must be (B, T, {width}), got shape {tuple(X.shape)}")

    # -- the two halves ----------------------------------------------------------
    def project_kv(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """keys (B, K, key_size), values (B, K, value_size) -> two (B, H, K, Dh)."""
        self._check_input("keys", keys, self.W_k.in_features)
        self._check_input("values", values, self.W_v.in_features)
        if keys.shape[:2] != values.shape[:2]:
            raise ValueError(
                "keys and values must share (B, K), got "
                f"{tuple(keys.shape[:2])} and {tuple(values.shape[:2])}"
            )
        if keys is values and self.W_k.in_features == self.W_v.in_features:
            B, K, _ = keys.shape
            kv = self._fused_linear((self.W_k, self.W_v), keys)  # (B, K, 2D)
            k, v = kv.view(B, K, 2, self.num_heads, -1).unbind(2)  # as in project_qkv
            return k.transpose(1, 2), v.transpose(1, 2)  # (B, H, K, Dh) each
        return self._split(self.W_k(keys)), self._split(self.W_v(values))

    def build_mask(
        self,
        batch: int,
        num_queries: int,
        num_keys: int,
        valid_lens: Tensor | None,
        causal: bool,
        device: torch.device,
    ) -> Tensor | None:
        """Padding lengths / bool mask and causality -> bool mask broadcastable to (B, H, Q, K)."""
        mask = None
        if valid_lens is not None and not isinstance(valid_lens, Tensor):
            raise TypeError(
                "valid_lens must be None, a tensor of lengths (B,) or (B, Q), or a boolean "
                f"mask tensor, got {type(valid_lens).__name__}"
            )
        if valid_lens is not None:
            if valid_lens.dtype == torch.bool:
                mask = valid_lens.to(device)
                if mask.dim() == 3:  # (B, Q, K) -> (B, 1, Q, K)
                    mask = mask.unsqueeze(1)
                try:
                    torch.broadcast_shapes(
                        mask.shape, (batch, self.num_heads, num_queries, num_keys)
                    )
                except RuntimeError:
                    raise ValueError(
                        f"mask of shape {tuple(valid_lens.shape)} does not broadcast to "
                        f"(B, Q, K) = ({batch}, {num_queries}, {num_keys})"
                    ) from None
            else:
                check_valid_lens(valid_lens, batch, num_queries, num_keys)
                lens = valid_lens.to(device)
                if lens.dim() == 1:
                    mask = lengths_to_mask(lens, num_keys)[:, None, None, :]  # (B, 1, 1, K)
                else:
                    mask = lengths_to_mask(lens, num_keys)[:, None]  # (B, 1, Q, K)
        if causal:
            tri = causal_mask(num_queries, num_keys, device=device)  # (Q, K)
            mask = tri if mask is None else mask & tri
        return mask

    def attend(
        self,
        queries: Tensor,  # (B, Q, query_size)
        k: Tensor,  # (B, H, K, Dh), from project_kv
        v: Tensor,  # (B, H, K, Dh)
        mask: Tensor | None = None,  # bool, broadcastable to (B, H, Q, K)
        need_weights: bool | None = None,
        *,
        key_lens: Tensor | None = None,  # (B,), when mask is exactly these key lengths
    ) -> Tensor:  # (B, Q, D)
        self._check_input("queries", queries, self.W_q.in_features)
        if queries.shape[0] != k.shape[0]:
            raise ValueError(
                f"queries and keys must share the batch size, got {queries.shape[0]} and {k.shape[0]}"
            )
        q = self._split(self.W_q(queries))  # (B, H, Q, Dh)
        return self.attend_heads(q, k, v, mask, need_weights, key_lens=key_lens)

    def attend_heads(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        need_weights: bool | None = None,
        *,
        key_lens: Tensor | None = None,
    ) -> Tensor:
        """Per-head attention of projected q (B, H, Q, Dh), k, v (B, H, K, Dh) -> (B, Q, D).

        ``key_lens`` (B,) may be given when ``mask`` is exactly these key lengths; long
        keys on CPU then skip the padding (see ``attention.key_padding``).
        """
        B, _, Q, _ = q.shape
        want = self.wants_weights() if need_weights is None else need_weights
        p = self.attention.dropout if self.training else 0.0
        if (
            key_lens is not None
            and not want
            and p == 0.0
            and k.shape[2] >= key_padding.MIN_KEYS
            and Q >= key_padding.MIN_QUERIES
            and key_padding.available(q)
        ):
            out, weights = key_padding.key_padded_attention(q, k, v, key_lens), None
        else:
            out, weights = scaled_dot_product(q, k, v, mask, p, want)  # (B, H, Q, Dh)
        self.attention.attention_weights = (
            None if weights is None else weights.reshape(-1, Q, k.shape[2])  # (B*H, Q, K)
        )
        note_weights(self, weights)  # (B, H, Q, K), in this thread's record_attention block
        out = out.transpose(1, 2).reshape(B, Q, self.num_hiddens)  # (B, Q, D)
        return self.W_o(out)

    def forward(
        self,
        queries: Tensor,  # (B, Q, query_size)
        keys: Tensor,  # (B, K, key_size)
        values: Tensor,  # (B, K, value_size)
        valid_lens: Tensor | None = None,  # (B,) / (B, Q) ints, or bool mask (B, Q, K)
        *,
        causal: bool = False,
        need_weights: bool | None = None,
    ) -> Tensor:  # (B, Q, D)
        self._check_input("queries", queries, self.W_q.in_features)
        self._check_input("keys", keys, self.W_k.in_features)
        self._check_input("values", values, self.W_v.in_features)
        mask = self.build_mask(
            queries.shape[0], queries.shape[1], keys.shape[1], valid_lens, causal, queries.device
        )
        key_lens = None  # plain key lengths: long keys can skip the padding on CPU
        if (
            isinstance(valid_lens, Tensor)
            and valid_lens.dtype != torch.bool
            and valid_lens.dim() == 1
            and not causal
        ):
            key_lens = valid_lens  # integer (B,): build_mask has checked it
        if queries is keys and keys is values:
            return self.self_attend(queries, mask, need_weights, key_lens=key_lens)
        k, v = self.project_kv(keys, values)
        return self.attend(queries, k, v, mask, need_weights, key_lens=key_lens)

    def self_attend(
        self,
        X: Tensor,  # (B, T, D): queries, keys and values at once
        mask: Tensor | None = None,  # bool, broadcastable to (B, H, T, T)
        need_weights: bool | None = None,
        *,
        key_lens: Tensor | None = None,  # (B,), when mask is exactly these key lengths
    ) -> Tensor:  # (B, T, D)
        """Self-attention with one fused projection of queries, keys and values."""
        return self.attend_heads(*self.project_qkv(X), mask, need_weights, key_lens=key_lens)

    def project_qkv(self, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """X (B, T, D) -> q, k, v, each (B, H, T, Dh), with one matmul X @ [W_q; W_k; W_v]ᵀ."""
        self._check_input("X", X, self.W_q.in_features)
        if not (self.W_q.in_features == self.W_k.in_features == self.W_v.in_features):
            return (self._split(self.W_q(X)), *self.project_kv(X, X))
        B, T, _ = X.shape
        qkv = self._fused_linear((self.W_q, self.W_k, self.W_v), X)
        # unbind the (B, T, 3, H, Dh) view along its own axis 2, then transpose each to
        # (B, H, T, Dh): the backward then stacks three (B, T, H, Dh) grads into (B, T, 3D)
        # with contiguous copies instead of a strided gather (~10% of forward + backward)
        q, k, v = qkv.view(B, T, 3, self.num_heads, -1).unbind(2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    @staticmethod
    def _fused_linear(layers: tuple[nn.Linear, ...], X: Tensor) -> Tensor:
        weight = torch.cat([m.weight for m in layers])  # (n*D, D_in)
        bias = None if layers[0].bias is None else torch.cat([m.bias for m in layers])
        return F.linear(X, weight, bias)
