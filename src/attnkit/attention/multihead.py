"""Multi-head attention: H scaled dot-product heads computed in parallel, one ``forward``.

Shape legend: B batch, Q queries, K keys, D model width (num_hiddens), H heads,
Dh = D / H head width.

    mha(X)                        self-attention: [q; k; v] = X W_qkvᵀ, one matmul
    mha(Y, memory)                attention over a memory: q = Y W_qᵀ, [k; v] = memory W_kvᵀ
    mha(queries, keys, values)    the book's call: three projections
    out = W_o concat_h softmax(q_h k_hᵀ / sqrt(Dh) + mask) v_h

Every call takes ``valid_lens`` (key lengths or a bool mask, built into a mask by
``masking.attention_mask``), ``causal``, ``cache`` (a ``KVCache``, updated in place) and
``need_weights`` (then it returns ``(output, weights)``, weights (B, H, Q, K)).

With equal input widths the three input projections are one (3D, D_in) weight ``W_qkv``
(rows: W_q, W_k, W_v), kept as a parameter: nothing is concatenated per forward.
``fused_qkv=False`` keeps three ``W_q``, ``W_k``, ``W_v`` (the book's layout); either
layout loads state dicts saved in the other. The heads are split with one view +
transpose, (B, T, D) -> (B, H, T, Dh), the book's ``transpose_qkv`` without the copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import boolean, optional, positive_int, probability
from attnkit.attention import key_padding
from attnkit.attention.kv_cache import KVCache
from attnkit.attention.masking import attention_mask
from attnkit.attention.recording import note_weights, recording
from attnkit.attention.single_head import scaled_dot_product

__all__ = ["MultiHeadAttention"]

_SEPARATE = ("W_q", "W_k", "W_v")


class MultiHeadAttention(nn.Module):
    """Multi-head attention with input projections W_q, W_k, W_v and output projection W_o.

    Args:
        num_hiddens: model width D; must be divisible by ``num_heads``.
        num_heads: number of heads H.
        dropout: dropout on the attention weights (training mode).
        bias: whether the projections have biases.
        query_size, key_size, value_size: input widths (default D).
        record_weights: compute the exact weights at every forward and keep them in
            ``attention_weights`` (otherwise only when asked, or inside
            ``record_attention()``).
        fused_qkv: one (3D, D_in) ``W_qkv`` weight (default when the three input widths
            are equal) or three separate ``W_q``, ``W_k``, ``W_v`` (False).
        skip_key_padding: with key lengths (B,) on CPU, long keys (K >= 128) and many
            queries, run each row on its valid keys only (``attention.key_padding``).
            Opt-in: it pays off for long, ragged keys only (see the README).

    Without requested weights the heads run through PyTorch's fused
    ``scaled_dot_product_attention``; with them the exact weights are computed.
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
        fused_qkv: bool | None = None,
        skip_key_padding: bool = False,
    ) -> None:
        super().__init__()
        num_heads = positive_int("num_heads", num_heads)
        num_hiddens = positive_int("num_hiddens", num_hiddens)
        sizes = {"query_size": query_size, "key_size": key_size, "value_size": value_size}
        for name, size in sizes.items():
            sizes[name] = num_hiddens if size is None else positive_int(name, size)
        if num_hiddens % num_heads:
            raise ValueError(
                f"num_hiddens ({num_hiddens}) must be divisible by num_heads ({num_heads})"
            )
        same_width = len(set(sizes.values())) == 1
        fused_qkv = optional(boolean, "fused_qkv", fused_qkv)
        if fused_qkv is None:
            fused_qkv = same_width
        elif fused_qkv and not same_width:
            raise ValueError(f"fused_qkv=True needs equal query, key and value sizes, got {sizes}")
        self.num_heads, self.num_hiddens = num_heads, num_hiddens
        self.query_size, self.key_size = sizes["query_size"], sizes["key_size"]
        self.value_size = sizes["value_size"]
        self.dropout = probability("dropout", dropout)
        self.record_weights = record_weights
        self.skip_key_padding = bool(skip_key_padding)
        self.fused_qkv = fused_qkv
        linear = self._projection_layer
        if fused_qkv:
            self.W_qkv = linear(self.query_size, 3 * num_hiddens, bias)  # rows q, k, v
        else:
            self.W_q = linear(self.query_size, num_hiddens, bias)
            self.W_k = linear(self.key_size, num_hiddens, bias)
            self.W_v = linear(self.value_size, num_hiddens, bias)
        self.W_o = linear(num_hiddens, num_hiddens, bias)
        self.attention_weights: Tensor | None = None  # (B, H, Q, K) of the last forward

    def wants_weights(self) -> bool:
        """Whether a forward computes the exact weights without being asked to return them."""
        return self.record_weights or recording()

    def _projection_layer(self, in_features: int, out_features: int, bias: bool) -> nn.Module:
        """One of W_q, W_k, W_v (or W_qkv) and W_o: an ``nn.Linear``. A subclass may build
        another kind (``LazyMultiHeadAttention``: ``nn.LazyLinear``)."""
        return nn.Linear(in_features, out_features, bias=bias)

    # -- projections ----------------------------------------------------------------
    def _linear(self, first: int, count: int, X: Tensor) -> Tensor:
        """X projected by ``count`` of (W_q, W_k, W_v) from index ``first``: a row slice of
        W_qkv (fused, one matmul) or one separate layer (count 1)."""
        if not self.fused_qkv:
            return (self.W_q, self.W_k, self.W_v)[first](X)
        rows = slice(first * self.num_hiddens, (first + count) * self.num_hiddens)
        bias = None if self.W_qkv.bias is None else self.W_qkv.bias[rows]
        return F.linear(X, self.W_qkv.weight[rows], bias)

    def _heads(self, X: Tensor, n: int) -> tuple[Tensor, ...]:
        """(B, T, n*D) -> n tensors (B, H, T, Dh)."""
        B, T, _ = X.shape
        # unbind the (B, T, n, H, Dh) view along its own axis 2, then transpose each: the
        # backward then stacks n (B, T, H, Dh) grads with contiguous copies (~10% faster)
        parts = X.view(B, T, n, self.num_heads, -1).unbind(2)
        return tuple(p.transpose(1, 2) for p in parts)

    def _project_self(self, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """X (B, T, D_in) -> q, k, v (B, H, T, Dh): one matmul with W_qkv."""
        if self.fused_qkv:
            return self._heads(self.W_qkv(X), 3)
        return self._project_query(X), *self._project_memory(X, X)

    def _project_query(self, queries: Tensor) -> Tensor:
        """(B, Q, query_size) -> q (B, H, Q, Dh)."""
        return self._heads(self._linear(0, 1, queries), 1)[0]

    def _project_memory(self, keys: Tensor, values: Tensor | None) -> tuple[Tensor, Tensor]:
        """keys (B, K, key_size), values (B, K, value_size) or None (= keys) -> k, v
        (B, H, K, Dh); one memory for both: one matmul with the k, v rows of W_qkv."""
        if values is None and self.fused_qkv:
            return self._heads(self._linear(1, 2, keys), 2)
        values = keys if values is None else values
        (k,) = self._heads(self._linear(1, 1, keys), 1)
        (v,) = self._heads(self._linear(2, 1, values), 1)
        return k, v

    # -- the one forward --------------------------------------------------------------
    def forward(
        self,
        queries: Tensor,  # (B, Q, query_size)
        keys: Tensor | None = None,  # (B, K, key_size); None: self-attention on queries
        values: Tensor | None = None,  # (B, K, value_size); None: the keys themselves
        valid_lens: Tensor | None = None,  # (B,) / (B, Q) key lengths, or bool mask
        *,
        causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:  # (B, Q, D), and weights (B, H, Q, K)
        """Attend; ``valid_lens`` and ``causal`` are combined into one mask.

        ``valid_lens``: key lengths (B,) shared by all queries, (B, Q) per query, or a bool
        mask broadcastable to (B, Q, K) or (B, H, Q, K), True = attend. With a ``cache``,
        K counts the cached positions too, and ``causal`` treats the queries as the last Q
        of the K positions. A fully masked query gets a zero output and zero weights.
        """
        self._check_input("queries", queries, self.query_size)
        if keys is None and values is not None:
            raise ValueError("values given without keys: pass keys too (or neither)")
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")
        reuse = cache is not None and cache.static and cache.filled
        if keys is not None and not reuse:
            self._check_memory(queries, keys, values)
        if keys is None:  # self-attention
            q, k, v = self._project_self(queries)
        elif reuse:  # the memory's keys and values are in the cache
            q, k, v = self._project_query(queries), cache.keys, cache.values
        else:
            q, (k, v) = self._project_query(queries), self._project_memory(keys, values)
        if cache is not None:
            k, v = cache.update(k, v)  # a filled static cache returns its own
            if k.shape[0] != q.shape[0]:
                raise ValueError(f"the cache holds {k.shape[0]} rows but the queries {q.shape[0]}")
        B, _, Q, _ = q.shape
        mask = attention_mask(
            valid_lens, B, Q, k.shape[2], causal=causal, num_heads=self.num_heads,
            device=q.device,
        )  # fmt: skip
        want = need_weights or self.wants_weights()
        p = self.dropout if self.training else 0.0
        if self._skips_padding(valid_lens, causal, want, p, q, k):
            out, weights = key_padding.key_padded_attention(q, k, v, valid_lens), None
        else:
            out, weights = scaled_dot_product(q, k, v, mask, p, want)  # (B, H, Q, Dh)
        self.attention_weights = weights  # (B, H, Q, K) or None
        note_weights(self, weights)  # into this thread's record_attention() block
        out = self.W_o(out.transpose(1, 2).reshape(B, Q, self.num_hiddens))  # (B, Q, D)
        return (out, weights) if need_weights else out

    def _skips_padding(self, valid_lens, causal, want, p, q, k) -> bool:
        """Whether the opt-in key-padded CPU path runs (plain key lengths, long keys)."""
        return (
            self.skip_key_padding
            and isinstance(valid_lens, Tensor)
            and valid_lens.dtype != torch.bool
            and valid_lens.dim() == 1
            and not causal
            and not want
            and p == 0.0
            and k.shape[2] >= key_padding.MIN_KEYS
            and q.shape[2] >= key_padding.MIN_QUERIES
            and key_padding.available(q)
        )

    def _check_memory(self, queries: Tensor, keys: Tensor, values: Tensor | None) -> None:
        self._check_input("keys", keys, self.key_size)
        if values is not None:
            self._check_input("values", values, self.value_size)
            if keys.shape[:2] != values.shape[:2]:
                raise ValueError(
                    "keys and values must share (B, K), got "
                    f"{tuple(keys.shape[:2])} and {tuple(values.shape[:2])}"
                )
        if keys.shape[0] != queries.shape[0]:
            raise ValueError(
                "queries and keys must share the batch size, got "
                f"{queries.shape[0]} and {keys.shape[0]}"
            )

    @staticmethod
    def _check_input(name: str, X: Tensor, width: int) -> None:
        if not isinstance(X, Tensor) or not X.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {getattr(X, 'dtype', X)}")
        if X.dim() != 3 or X.shape[-1] != width:
            raise ValueError(f"{name} must be (B, T, {width}), got shape {tuple(X.shape)}")

    # -- state dicts of either layout ---------------------------------------------------
    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Load W_q/W_k/W_v into W_qkv (fused) or the reverse: checkpoints of either layout
        (older attnkit checkpoints and the book's are separate) load into both."""
        for kind in ("weight", "bias"):
            fused = f"{prefix}W_qkv.{kind}"
            separate = [f"{prefix}{name}.{kind}" for name in _SEPARATE]
            if self.fused_qkv and all(key in state_dict for key in separate):
                state_dict[fused] = torch.cat([state_dict.pop(key) for key in separate])
            elif not self.fused_qkv and fused in state_dict:
                for key, part in zip(separate, state_dict.pop(fused).chunk(3), strict=True):
                    state_dict[key] = part
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
