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

Options beyond the book (off by default: then the layer, its state dict and its results are
those of plain multi-head attention):

- ``num_kv_heads`` = Hkv < H: grouped-query attention (Ainslie et al., 2023). Keys and
  values have Hkv heads (W_k, W_v: (Hkv·Dh, D_in)); query head h reads key/value head
  h // (H / Hkv). Hkv = 1 is multi-query attention. A ``KVCache`` then holds Hkv heads: its
  memory per token shrinks by H / Hkv.
- ``positions="rope"``: queries and keys rotated by their positions after the projection,
  per head, before the cache (``attention.rope``); ``positions="alibi"``: the paper's
  per-head linear distance bias added to the scores (``attention.alibi``). Both are for
  self-attention. The other schemes (sinusoidal, learned, none) act outside attention.

The kernel: PyTorch's ``scaled_dot_product_attention``, with ``is_causal`` when a causal
layer has no other mask and Q = K (no mask at all for one query over its cache), a
boolean mask otherwise, and ALiBi's bias as a float mask (the future and masked keys at
``finfo(dtype).min``; a row with no key to attend is zeroed, never NaN). Plain heads on
the CPU in half precision at short lengths use explicit products instead, which measured
faster there (``attention.kernels``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import boolean, optional, positive_int, positive_number, probability
from attnkit.attention import key_padding
from attnkit.attention.alibi import ALiBi
from attnkit.attention.dropout import dropout as _dropout
from attnkit.attention.kernels import choose_kernel, explicit_attention
from attnkit.attention.kv_cache import KVCache
from attnkit.attention.masking import attention_mask, masked_softmax
from attnkit.attention.positional import IN_ATTENTION, check_positions
from attnkit.attention.recording import note_weights, recording
from attnkit.attention.rope import RotaryEmbedding, apply_rope
from attnkit.attention.single_head import scaled_dot_product
from attnkit.i18n import _

__all__ = ["MultiHeadAttention"]

_SEPARATE = ("W_q", "W_k", "W_v")
# scaled_dot_product_attention(enable_gqa=...) (PyTorch 2.5): key/value heads shared by
# groups of query heads without copying them
_NATIVE_GQA = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 5)
_HALF = (torch.float16, torch.bfloat16)


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
        num_kv_heads: key/value heads Hkv (default H); must divide H. 1: multi-query
            attention; H: plain multi-head attention.
        positions: one of ``attention.positional.POSITIONS``; "rope" and "alibi" act here
            (self-attention only), the others ("none", the default) leave attention as is.
        rope_base: RoPE's base (θ_j = base^(-2j/Dh)).

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
        num_kv_heads: int | None = None,
        positions: str = "none",
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        num_heads = positive_int("num_heads", num_heads)
        num_kv_heads = optional(positive_int, "num_kv_heads", num_kv_heads) or num_heads
        if num_heads % num_kv_heads:
            message = _(
                "num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads}): "
                "each key/value head serves a group of query heads"
            )
            raise ValueError(message.format(num_kv_heads=num_kv_heads, num_heads=num_heads))
        num_hiddens = positive_int("num_hiddens", num_hiddens)
        sizes = {"query_size": query_size, "key_size": key_size, "value_size": value_size}
        for name, size in sizes.items():
            sizes[name] = num_hiddens if size is None else positive_int(name, size)
        if num_hiddens % num_heads:
            message = _("num_hiddens ({num_hiddens}) must be divisible by num_heads ({num_heads})")
            raise ValueError(message.format(num_hiddens=num_hiddens, num_heads=num_heads))
        same_width = len(set(sizes.values())) == 1
        fused_qkv = optional(boolean, "fused_qkv", fused_qkv)
        if fused_qkv is None:
            fused_qkv = same_width
        elif fused_qkv and not same_width:
            message = _("fused_qkv=True needs equal query, key and value sizes, got {sizes}")
            raise ValueError(message.format(sizes=sizes))
        self.num_heads, self.num_hiddens = num_heads, num_hiddens
        self.num_kv_heads = num_kv_heads
        self.head_dim = num_hiddens // num_heads  # Dh
        self.kv_hiddens = num_kv_heads * self.head_dim  # Hkv * Dh: the width of k and v
        D, Dkv = num_hiddens, self.kv_hiddens
        self._bounds = (0, D, D + Dkv, D + 2 * Dkv)  # rows of q, k, v in W_qkv
        self.positions = check_positions("positions", positions)
        rope_base = positive_number("rope_base", rope_base)
        if self.positions == "rope" and self.head_dim % 2:
            message = _(
                "positions='rope' needs an even head width, got num_hiddens / "
                "num_heads = {num_hiddens} / {num_heads} = {head_dim}"
            )
            raise ValueError(
                message.format(num_hiddens=num_hiddens, num_heads=num_heads, head_dim=self.head_dim)
            )
        # no parameters and no persistent buffers: the state dict stays plain attention's
        self.rope = RotaryEmbedding(self.head_dim, rope_base) if positions == "rope" else None
        self.alibi = ALiBi(num_heads) if positions == "alibi" else None
        self.query_size, self.key_size = sizes["query_size"], sizes["key_size"]
        self.value_size = sizes["value_size"]
        self.dropout = probability("dropout", dropout)
        self.record_weights = record_weights
        self.skip_key_padding = bool(skip_key_padding)
        self.fused_qkv = fused_qkv
        linear = self._projection_layer
        if fused_qkv:
            self.W_qkv = linear(self.query_size, D + 2 * Dkv, bias)  # rows q, k, v
        else:
            self.W_q = linear(self.query_size, num_hiddens, bias)
            self.W_k = linear(self.key_size, Dkv, bias)
            self.W_v = linear(self.value_size, Dkv, bias)
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
        start, stop = self._bounds[first], self._bounds[first + count]
        if hasattr(self.W_qkv, "row_block"):  # an int8 layer: the int8 product of its rows
            return self.W_qkv.row_block(start, stop)(X)
        bias = None if self.W_qkv.bias is None else self.W_qkv.bias[start:stop]
        return F.linear(X, self.W_qkv.weight[start:stop], bias)

    def _heads(self, X: Tensor, n: int, heads: int | None = None) -> tuple[Tensor, ...]:
        """(B, T, n*heads*Dh) -> n tensors (B, heads, T, Dh); heads: H by default."""
        B, T, _ = X.shape
        # unbind the (B, T, n, H, Dh) view along its own axis 2, then transpose each: the
        # backward then stacks n (B, T, H, Dh) grads with contiguous copies (~10% faster)
        parts = X.view(B, T, n, heads or self.num_heads, -1).unbind(2)
        return tuple(p.transpose(1, 2) for p in parts)

    def _project_self(self, X: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """X (B, T, D_in) -> q (B, H, T, Dh), k, v (B, Hkv, T, Dh): one matmul with W_qkv."""
        if self.fused_qkv:
            qkv = self.W_qkv(X)  # (B, T, D + 2 Dkv)
            if self.num_kv_heads == self.num_heads:
                return self._heads(qkv, 3)
            q, kv = qkv.split((self.num_hiddens, 2 * self.kv_hiddens), dim=-1)
            return self._heads(q, 1)[0], *self._heads(kv, 2, self.num_kv_heads)
        return self._project_query(X), *self._project_memory(X, X)

    def _project_query(self, queries: Tensor) -> Tensor:
        """(B, Q, query_size) -> q (B, H, Q, Dh)."""
        return self._heads(self._linear(0, 1, queries), 1)[0]

    def _project_memory(self, keys: Tensor, values: Tensor | None) -> tuple[Tensor, Tensor]:
        """keys (B, K, key_size), values (B, K, value_size) or None (= keys) -> k, v
        (B, Hkv, K, Dh); one memory for both: one matmul with the k, v rows of W_qkv."""
        heads = self.num_kv_heads
        if values is None and self.fused_qkv:
            return self._heads(self._linear(1, 2, keys), 2, heads)
        values = keys if values is None else values
        (k,) = self._heads(self._linear(1, 1, keys), 1, heads)
        (v,) = self._heads(self._linear(2, 1, values), 1, heads)
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
        position_ids: Tensor | None = None,  # (Q,) / (B, Q): RoPE's positions of the queries
    ) -> Tensor | tuple[Tensor, Tensor]:  # (B, Q, D), and weights (B, H, Q, K)
        """Attend; ``valid_lens`` and ``causal`` are combined into one mask.

        Args:
            queries: the queries; alone, self-attention (q, k and v all from them).
            keys: a memory to attend over (None: self-attention).
            values: the memory's values (None: the keys themselves).
            valid_lens: key lengths (B,) shared by all queries, (B, Q) per query, or a bool
                mask broadcastable to (B, Q, K) or (B, H, Q, K), True = attend.
            causal: query i attends keys j <= i + (K - Q): the queries are the last Q of
                the K positions (the cached ones included).
            cache: a ``KVCache``, updated in place: self-attention appends the new keys
                and values (Hkv heads, rotated first with RoPE); a static cache holds the
                memory's projections and is reused once filled.
            need_weights: also return the exact weights.
            position_ids: with ``positions="rope"``, the positions of the queries (and of
                the new keys): (Q,) or (B, Q) per row; default ``len(cache) + arange(Q)``.

        Shape:
            queries (B, Q, query_size); keys (B, K, key_size); values (B, K, value_size);
            output (B, Q, D); weights (B, H, Q, K), K counting the cached positions.

        Returns:
            The output, or ``(output, weights)`` with ``need_weights``. A fully masked
            query gets a zero output and zero weights.
        """
        self._check_input("queries", queries, self.query_size)
        if keys is None and values is not None:
            raise ValueError(_("values given without keys: pass keys too (or neither)"))
        if cache is not None and not isinstance(cache, KVCache):
            message = _("cache must be a KVCache or None, got {type}")
            raise TypeError(message.format(type=type(cache).__name__))
        if keys is not None and self.positions in IN_ATTENTION:
            message = _(
                "positions={positions!r} is for self-attention, mha(X): queries and a "
                "memory (keys) share no positions"
            )
            raise ValueError(message.format(positions=self.positions))
        if position_ids is not None and self.rope is None:
            message = _("position_ids are RoPE's; this layer has positions={positions!r}")
            raise ValueError(message.format(positions=self.positions))
        reuse = cache is not None and cache.static and cache.filled
        if keys is not None and not reuse:
            self._check_memory(queries, keys, values)
        if keys is None:  # self-attention
            q, k, v = self._project_self(queries)
            if self.rope is not None:
                held = 0 if cache is None else len(cache)
                q, k = self._rotate(q, k, held if position_ids is None else position_ids)
        elif reuse:  # the memory's keys and values are in the cache
            q, k, v = self._project_query(queries), cache.keys, cache.values
        else:
            q, (k, v) = self._project_query(queries), self._project_memory(keys, values)
        if cache is not None:
            k, v = cache.update(k, v)  # a filled static cache returns its own
            if k.shape[0] != q.shape[0]:
                message = _("the cache holds {cached} rows but the queries {batch}")
                raise ValueError(message.format(cached=k.shape[0], batch=q.shape[0]))
        dtype = q.dtype
        if k.dtype != dtype:  # a cache kept in its own precision (KVCache dtype): attend in it
            q = q.to(k.dtype)
        B, _heads, Q, _dh = q.shape
        want = need_weights or self.wants_weights()
        p = self.dropout if self.training else 0.0
        out, weights = self._attend(q, k, v, valid_lens, causal, want, p)  # (B, H, Q, Dh)
        if out.dtype != dtype:
            out, weights = out.to(dtype), None if weights is None else weights.to(dtype)
        self.attention_weights = weights  # (B, H, Q, K) or None
        note_weights(self, weights)  # into this thread's record_attention() block
        out = self.W_o(out.transpose(1, 2).reshape(B, Q, self.num_hiddens))  # (B, Q, D)
        return (out, weights) if need_weights else out

    def _rotate(self, q: Tensor, k: Tensor, positions: int | Tensor) -> tuple[Tensor, Tensor]:
        """RoPE: q (B, H, Q, Dh) and the new k (B, Hkv, Q, Dh) turned by their positions."""
        Q = q.shape[2]
        if isinstance(positions, Tensor):
            if positions.is_floating_point() or positions.dtype == torch.bool:
                message = _("position_ids must be integers, got {dtype}")
                raise TypeError(message.format(dtype=positions.dtype))
            if tuple(positions.shape) not in ((Q,), (q.shape[0], Q)):
                message = _(
                    "position_ids must be (Q,) = ({q},) or (B, Q) = ({batch}, {q}), got {got}"
                )
                raise ValueError(message.format(q=Q, batch=q.shape[0], got=tuple(positions.shape)))
        cos, sin = self.rope.cos_sin(positions, Q, q.dtype, q.device)  # (Q, Dh) / (B, 1, Q, Dh)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin)

    def _attend(self, q, k, v, valid_lens, causal: bool, want: bool, p: float):
        """q (B, H, Q, Dh), k, v (B, Hkv, K, Dh) -> (B, H, Q, Dh), weights (B, H, Q, K) or None."""
        B, _, Q, _ = q.shape
        K = k.shape[2]
        plain = self.num_kv_heads == self.num_heads and self.alibi is None
        # causal alone, Q = K: is_causal; one query over its cache: no mask at all
        fast_causal = causal and valid_lens is None and not want and Q in (K, 1)
        mask = None
        if not fast_causal:
            mask = attention_mask(
                valid_lens, B, Q, K, causal=causal, num_heads=self.num_heads, device=q.device
            )  # bool (B|1, 1|H, 1|Q, K) or None
        if plain and self._skips_padding(valid_lens, causal, want, p, q, k):
            return key_padding.key_padded_attention(q, k, v, valid_lens), None
        bias = None  # ALiBi: (1, H, Q, K), the future at finfo.min when causal
        if self.alibi is not None:
            bias = self.alibi(Q, K, causal=causal, dtype=q.dtype, device=q.device)
        if want:
            k, v = self._expand(k), self._expand(v)
            if bias is None:
                return scaled_dot_product(q, k, v, mask, p, True)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias  # (B, H, Q, K)
            weights = masked_softmax(scores, mask)
            dropped = _dropout(weights, p) if p > 0 else weights
            return dropped @ v, weights
        is_causal = fast_causal and Q > 1 and bias is None
        if plain:
            if is_causal and choose_kernel(q, K) == "matmul":
                return explicit_attention(q, k, v, None, p, is_causal=True), None
            if is_causal:
                return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True), None
            return scaled_dot_product(q, k, v, mask, p, False)
        attn_mask = mask
        if bias is not None:  # a float mask: the bias, masked keys at the minimum
            low = torch.finfo(bias.dtype).min
            attn_mask = bias if mask is None else torch.where(mask, bias, low)
        out = self._sdpa(q, k, v, attn_mask, p, is_causal)
        if mask is not None:  # rows with no key to attend: zero, on every backend
            out = out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        return out, None

    def _sdpa(self, q, k, v, attn_mask, p: float, is_causal: bool) -> Tensor:
        """PyTorch's fused kernel, key/value heads shared by groups of query heads:
        natively where the kernel does it (CPU; CUDA half precision without a mask),
        else by repeating them."""
        kwargs = {}
        if self.num_kv_heads != self.num_heads:
            native = q.device.type == "cpu" or (attn_mask is None and q.dtype in _HALF)
            if _NATIVE_GQA and native:
                kwargs["enable_gqa"] = True
            else:
                k, v = self._expand(k), self._expand(v)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=p, is_causal=is_causal, **kwargs
        )

    def _expand(self, x: Tensor) -> Tensor:
        """(B, Hkv, K, Dh) -> (B, H, K, Dh): key/value head g serves query heads
        g * H/Hkv .. (g+1) * H/Hkv - 1."""
        if self.num_kv_heads == self.num_heads:
            return x
        return x.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)

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
                message = _("keys and values must share (B, K), got {keys} and {values}")
                raise ValueError(
                    message.format(keys=tuple(keys.shape[:2]), values=tuple(values.shape[:2]))
                )
        if keys.shape[0] != queries.shape[0]:
            message = _("queries and keys must share the batch size, got {queries} and {keys}")
            raise ValueError(message.format(queries=queries.shape[0], keys=keys.shape[0]))

    @staticmethod
    def _check_input(name: str, X: Tensor, width: int) -> None:
        if not isinstance(X, Tensor) or not X.is_floating_point():
            message = _("{name} must be a floating-point tensor, got {got}")
            raise TypeError(message.format(name=name, got=getattr(X, "dtype", X)))
        if X.dim() != 3 or X.shape[-1] != width:
            message = _("{name} must be (B, T, {width}), got shape {shape}")
            raise ValueError(message.format(name=name, width=width, shape=tuple(X.shape)))

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
                sizes = (self.num_hiddens, self.kv_hiddens, self.kv_hiddens)
                parts = state_dict.pop(fused).split(sizes)
                for key, part in zip(separate, parts, strict=True):
                    state_dict[key] = part
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
