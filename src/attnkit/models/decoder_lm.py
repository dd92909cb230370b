"""The decoder-only Transformer language model (GPT): causal, pre-norm, tied embeddings.

Shape legend: B batch, T new positions, K positions attended (cached + new), D d_model,
H heads, Hkv key/value heads, Dh = D / H, F ffn_hidden, V vocabulary, L layers.

    x = Embed(ids)  [+ P(positions) for sinusoidal or learned]         (B, T, D)
    per block:  x = x + Drop(Attn(LN(x)))          causal; RoPE or ALiBi inside; GQA
                x = x + Drop(W_2 act(W_1 LN(x)))   position-wise, D -> F -> D
    logits = LN(x) Eᵀ                                                   (B, T, V), E tied

``act`` is the ``activation`` field (``attnkit.models.activations``): exact GELU by default
(nanoGPT's), ``gelu-tanh`` for GPT-2's own ("gelu_new"), ``relu`` or ``silu``. The LayerNorms
take ``norm_eps`` (1e-5, GPT-2's and torch's); ``bias`` puts biases in the linear layers and
the LayerNorms both (GPT-2 has them everywhere). A GPT-2 folder maps onto this model
(``attnkit.convert.gpt2``): learned positions, ``bias=True``, ``activation="gelu-tanh"``.

The attention is attnkit's ``MultiHeadAttention`` (fused W_qkv, PyTorch's fused kernel with
``is_causal``), so every position scheme of ``attention.positional.POSITIONS`` and grouped-
query attention are one config field each. Initialized as nanoGPT (GPT-2): N(0, 0.02^2)
weights, the two projections back into the residual stream at 0.02 / sqrt(2L), zero biases.

Incremental decoding: ``cache = model.new_cache()`` holds one ``KVCache`` per block
(Hkv heads each); ``model(ids, cache=cache)`` attends over the cached positions and the new
ones and appends the new keys and values, in place. Cached steps give the logits of one
full pass. A left-padded batch passes ``key_mask`` (B, K), True for real tokens: padding is
never attended and each row's positions count its own tokens only (``attnkit.inference.
generation`` generates this way).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import boolean, optional, positive_int, probability, real
from attnkit.attention.dropout import Dropout
from attnkit.attention.kv_cache import KVCache
from attnkit.attention.multihead import MultiHeadAttention
from attnkit.attention.positional import (
    POSITIONS,
    LearnedPositions,
    check_positions,
    input_positions,
)
from attnkit.attention.recording import record_attention
from attnkit.i18n import N_, _
from attnkit.models.activations import ACTIVATIONS, activation_module, check_activation
from attnkit.models.seq2seq import check_tokens

if TYPE_CHECKING:
    from attnkit.inference.prepacked import WeightLayout

__all__ = ["DecoderLM", "DecoderLMBlock", "DecoderLMCache", "DecoderLMConfig", "build_decoder_lm"]


def _field(default: Any, help: str, **cli: Any) -> Any:
    """A field documented for its generated ``attnkit lm train`` flag (``help``, ``flag``,
    ``choices``, ``parse``: ``attnkit.cli.config_flags``)."""
    return field(default=default, metadata={"help": help, **cli})


@dataclass(frozen=True)
class DecoderLMConfig:
    """What a ``DecoderLM`` is built from; validated on creation, recorded in checkpoints.

    ``vocab_size`` comes from the data (``build(vocab_size)`` sets it); every other field
    has a flag of ``attnkit lm train --arch transformer``.
    """

    vocab_size: int | None = None  # V; set from the data's vocabulary
    d_model: int = _field(128, N_("model width D"), flag="--d-model")
    num_heads: int = _field(4, N_("attention heads H"), flag="--heads")
    num_kv_heads: int | None = _field(
        None, N_("key/value heads (grouped-query attention: 1 = multi-query; default = heads)"),
        flag="--kv-heads",
    )  # fmt: skip
    num_layers: int = _field(4, N_("Transformer blocks"), flag="--layers")
    ffn_hidden: int = _field(512, N_("feed-forward width F"), flag="--ffn-hidden")
    dropout: float = _field(0.1, N_("dropout on embeddings, attention weights and residuals"))
    context_length: int = _field(128, N_("positions the model attends at once"), flag="--context")
    positions: str = _field("rope", N_("the position scheme"), choices=POSITIONS)
    bias: bool = _field(False, N_("biases in the linear layers and LayerNorms (GPT-2 has them)"))
    activation: str = _field("gelu", N_("the feed-forward activation (gelu-tanh: GPT-2's)"),
                             choices=ACTIVATIONS)  # fmt: skip
    norm_eps: float = _field(1e-5, N_("the LayerNorms' epsilon"), flag=None)

    def __post_init__(self) -> None:
        optional(positive_int, "DecoderLMConfig.vocab_size", self.vocab_size)
        for name in ("d_model", "num_heads", "num_layers", "ffn_hidden", "context_length"):
            positive_int(f"DecoderLMConfig.{name}", getattr(self, name))
        kv = optional(positive_int, "DecoderLMConfig.num_kv_heads", self.num_kv_heads)
        if self.d_model % self.num_heads:
            message = _(
                "DecoderLMConfig.d_model ({d_model}) must be divisible by num_heads ({num_heads})"
            )
            raise ValueError(message.format(d_model=self.d_model, num_heads=self.num_heads))
        if kv is not None and self.num_heads % kv:
            message = _("DecoderLMConfig.num_kv_heads ({kv}) must divide num_heads ({num_heads})")
            raise ValueError(message.format(kv=kv, num_heads=self.num_heads))
        probability("DecoderLMConfig.dropout", self.dropout)
        check_positions("DecoderLMConfig.positions", self.positions)
        boolean("DecoderLMConfig.bias", self.bias)
        check_activation("DecoderLMConfig.activation", self.activation)
        real("DecoderLMConfig.norm_eps", self.norm_eps, above=0.0)
        if self.positions == "rope" and (self.d_model // self.num_heads) % 2:
            message = _(
                "DecoderLMConfig.positions='rope' needs an even head width d_model / "
                "num_heads, got {d_model} / {num_heads}"
            )
            raise ValueError(message.format(d_model=self.d_model, num_heads=self.num_heads))

    @property
    def kv_heads(self) -> int:
        """Hkv: ``num_kv_heads``, or ``num_heads`` when it is None."""
        return self.num_kv_heads or self.num_heads

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> DecoderLMConfig:
        """The model fields of ``config`` (a checkpoint's: other keys are ignored, missing
        ones take their defaults, so checkpoints written before a field load as before)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready)."""
        return dataclasses.asdict(self)

    def build(self, vocab_size: int | None = None) -> DecoderLM:
        """The ``DecoderLM`` of this config over ``vocab_size`` tokens (default: the config's
        own), initialized by torch's RNG."""
        return build_decoder_lm(self, vocab_size)


class DecoderLMCache:
    """The key/value caches of every block (each (B, Hkv, K, Dh)), updated in place by
    ``DecoderLM.forward``; ``capacity`` preallocates that many positions per block."""

    def __init__(self, num_layers: int, capacity: int | None = None) -> None:
        positive_int("num_layers", num_layers)
        self.layers = [KVCache(capacity=capacity) for _ in range(num_layers)]

    def __len__(self) -> int:
        """Positions held (K)."""
        return len(self.layers[0])

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values held, all blocks: 2 L B Hkv K Dh x the element size."""
        return sum(layer.nbytes for layer in self.layers)

    def index_select(self, index: Tensor) -> DecoderLMCache:
        """A new cache with batch rows ``index`` (B',) of this one."""
        new = DecoderLMCache(len(self.layers))
        new.layers = [layer.index_select(index) for layer in self.layers]
        return new


class DecoderLMBlock(nn.Module):
    """Pre-norm block: x + Drop(Attn(LN(x))), then x + Drop(FFN(LN(x)))."""

    def __init__(self, config: DecoderLMConfig) -> None:
        super().__init__()
        c = config
        self.norm1 = nn.LayerNorm(c.d_model, c.norm_eps, bias=c.bias)  # over D
        self.attention = MultiHeadAttention(
            c.d_model, c.num_heads, c.dropout, c.bias, num_kv_heads=c.kv_heads,
            positions=c.positions,
        )  # fmt: skip  # W_qkv (D + 2 Hkv Dh, D), W_o (D, D)
        self.norm2 = nn.LayerNorm(c.d_model, c.norm_eps, bias=c.bias)  # over D
        self.ffn = nn.Sequential(
            nn.Linear(c.d_model, c.ffn_hidden, bias=c.bias),  # D -> F
            activation_module(c.activation),  # default exact (erf) GELU as nanoGPT; GPT-2: tanh
            nn.Linear(c.ffn_hidden, c.d_model, bias=c.bias),  # F -> D
        )
        self.dropout = Dropout(c.dropout)  # on each residual branch

    def forward(
        self,
        x: Tensor,
        cache: KVCache | None = None,
        key_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """One block over the new positions.

        Args:
            x: the residual stream of the new positions.
            cache: this block's ``KVCache`` (appended in place), or None.
            key_mask: bool, True = attend (padding False), broadcastable to (B, H, T, K).
            position_ids: RoPE's positions of the new tokens (None: after the cache).

        Shape:
            x (B, T, D); key_mask (B, 1, 1, K); position_ids (B, T). Returns (B, T, D).

        Returns:
            The residual stream after attention and the feed-forward layer.
        """
        rope = {} if position_ids is None else {"position_ids": position_ids}
        a = self.attention(
            self.norm1(x), valid_lens=key_mask, causal=True, cache=cache, **rope
        )  # (B, T, D): causal self-attention over the K cached + new positions
        x = x + self.dropout(a)  # (B, T, D)
        return x + self.dropout(self.ffn(self.norm2(x)))  # (B, T, D)


class DecoderLM(nn.Module):
    """The decoder-only Transformer language model of a ``DecoderLMConfig``.

    ``forward(ids (B, T))`` -> logits (B, T, V) (and per-block attention weights with
    ``return_attention``); with a cache, incremental decoding. Attribute names give the
    state dict keys: ``embedding.weight`` (tied: also the output layer),
    ``input_positions.weight`` (learned positions only), ``blocks.{i}.norm1``,
    ``.attention.W_qkv``, ``.attention.W_o``, ``.norm2``, ``.ffn.0``, ``.ffn.2``,
    ``final_norm``.
    """

    # the tied output layer's oneDNN layout (inference only, outside the state dict): set
    # by ``attnkit.inference.prepacked.prepack_linears``
    output_layout: WeightLayout | None = None

    def __init__(self, config: DecoderLMConfig) -> None:
        super().__init__()
        if not isinstance(config, DecoderLMConfig):
            message = _("config must be a DecoderLMConfig, got {type}")
            raise TypeError(message.format(type=type(config).__name__))
        if config.vocab_size is None:
            raise ValueError(_("DecoderLMConfig.vocab_size is not set: build(vocab_size) sets it"))
        c = self.config = config
        self.vocab_size, self.context_length = c.vocab_size, c.context_length
        self.positions, self.num_layers = c.positions, c.num_layers
        self.embedding = nn.Embedding(c.vocab_size, c.d_model)  # (V, D), tied to the output
        # sinusoidal: (any, D) table; learned: (context, D) parameter; rope/alibi/none: None
        self.input_positions = input_positions(c.positions, c.d_model, c.context_length)
        self.dropout = Dropout(c.dropout)  # on embeddings (+ positions)
        self.blocks = nn.ModuleList(DecoderLMBlock(c) for _ in range(c.num_layers))  # L blocks
        self.final_norm = nn.LayerNorm(c.d_model, c.norm_eps, bias=c.bias)  # over D
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nanoGPT's (GPT-2's) initialization, drawn from torch's RNG in module order."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding | LearnedPositions):
                nn.init.normal_(module.weight, 0.0, 0.02)  # every weight matrix, positions
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                module.reset_parameters()  # scale 1, bias 0
        out_std = 0.02 / math.sqrt(2 * self.num_layers)  # per residual branch: GPT-2's
        for block in self.blocks:
            nn.init.normal_(block.attention.W_o.weight, 0.0, out_std)  # (D, D)
            nn.init.normal_(block.ffn[2].weight, 0.0, out_std)  # (D, F)

    def new_cache(self, capacity: int | None = None) -> DecoderLMCache:
        """An empty cache for incremental decoding (``capacity``: positions to preallocate)."""
        return DecoderLMCache(self.num_layers, capacity)

    def forward(
        self,
        ids: Tensor,
        *,
        cache: DecoderLMCache | None = None,
        key_mask: Tensor | None = None,
        return_attention: bool = False,
        last_only: bool = False,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits at every new position (``last_only``: at the last one).

        Args:
            ids: token ids of the next T positions (after the cached ones).
            cache: from ``new_cache()``: the keys and values of the earlier positions,
                extended in place by these T; None: the T positions are the whole sequence.
            key_mask: bool, True for real tokens, False for padding, over all K = cached +
                T positions (a left-padded batch). Padding is never attended, and each
                row's positions count its real tokens only.
            return_attention: also return each block's exact attention weights.
            last_only: the logits of the last position only (B, 1, V): a prompt's prefill
                needs no others, and the output layer is most of a position's work.

        Shape:
            ids (B, T) int; key_mask (B, K); logits (B, T, V), or (B, 1, V) with
            ``last_only``; attention: L tensors (B, H, T, K).

        Returns:
            logits, or ``(logits, attention)`` with ``return_attention``. Learned
            positions stop at ``context_length`` (a clear error); the other schemes run at
            any length (extrapolation), ``generate`` keeps to the context.
        """
        check_tokens(ids, "ids")
        if cache is not None and not isinstance(cache, DecoderLMCache):
            message = _("cache must be a DecoderLMCache or None, got {type}")
            raise TypeError(message.format(type=type(cache).__name__))
        B, T = ids.shape  # batch, new positions
        held = 0 if cache is None else len(cache)  # positions before these T: K = held + T
        self._check_ids(ids)
        mask, position_ids = None, None  # bool (B, 1, 1, K); (B, T)
        if key_mask is not None:
            mask, position_ids = self._padding(key_mask, B, held, T)
        x = self.embedding(ids)  # (B, T, D)
        if self.input_positions is not None:
            x = self.input_positions(x, held if position_ids is None else position_ids)  # (B, T, D)
        x = self.dropout(x)  # (B, T, D)
        rope = position_ids if self.positions == "rope" else None  # (B, T) or None
        layers = (
            [None] * self.num_layers if cache is None else cache.layers
        )  # L x (B, Hkv, held, Dh)
        recorder = record_attention() if return_attention else contextlib.nullcontext()
        with recorder as record:  # an outer record_attention() block records as well
            for block, layer_cache in zip(self.blocks, layers, strict=True):
                x = block(x, layer_cache, mask, rope)  # (B, T, D); a module call: hooks fire
        if boolean("last_only", last_only):
            x = x[:, -1:]  # (B, 1, D)
        logits = self._logits(self.final_norm(x))  # (B, T, V), tied
        if not return_attention:
            return logits
        return logits, [record.get(block.attention) for block in self.blocks]  # L x (B, H, T, K)

    def _logits(self, h: Tensor) -> Tensor:
        """h (B, T, D) -> logits h Eᵀ (B, T, V), E the embedding (tied); prepacked in
        inference once ``prepack_linears`` gave the model an ``output_layout``."""
        if self.output_layout is None:
            return F.linear(h, self.embedding.weight)
        return self.output_layout.linear(h, self.embedding.weight, training=self.training)

    def _check_ids(self, ids: Tensor) -> None:
        """At least one position; ids in [0, V) checked on the CPU and in eval mode (a
        training step on an accelerator skips the host sync: the embedding's own device
        check stops bad ids there)."""
        if ids.shape[1] == 0:
            raise ValueError(_("ids must hold at least one position, got shape (B, 0)"))
        if self.training and ids.device.type != "cpu":
            return
        lo, hi = torch.stack(torch.aminmax(ids)).tolist()  # one host sync
        if lo < 0 or hi >= self.vocab_size:
            message = _(
                "ids holds token ids in [{lo}, {hi}], outside the vocabulary [0, {vocab_size})"
            )
            raise ValueError(message.format(lo=lo, hi=hi, vocab_size=self.vocab_size))

    @staticmethod
    def _padding(key_mask: Tensor, B: int, held: int, T: int) -> tuple[Tensor, Tensor]:
        """key_mask (B, K = held + T) -> the attention mask (B, 1, 1, K) and the new
        positions' ids (B, T): each row counts its own real tokens from 0."""
        if not isinstance(key_mask, Tensor) or key_mask.dtype != torch.bool:
            got = getattr(key_mask, "dtype", type(key_mask).__name__)
            raise TypeError(_("key_mask must be a bool tensor, got {got}").format(got=got))
        if tuple(key_mask.shape) != (B, held + T):
            message = _(
                "key_mask must be (B, K) = ({b}, {held}) (cached + new positions), got {shape}"
            )
            raise ValueError(message.format(b=B, held=held + T, shape=tuple(key_mask.shape)))
        counts = key_mask.long().cumsum(-1) - 1  # (B, K): index among the row's real tokens
        return key_mask[:, None, None, :], counts[:, held:].clamp(min=0)  # (B,1,1,K), (B,T)

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"positions={c.positions!r}, heads={c.num_heads}, kv_heads={c.kv_heads}, "
            f"context_length={c.context_length}, activation={c.activation!r}"
        )


def build_decoder_lm(config: DecoderLMConfig, vocab_size: int | None = None) -> DecoderLM:
    """``DecoderLM(config)`` over ``vocab_size`` tokens (None: ``config.vocab_size``)."""
    if not isinstance(config, DecoderLMConfig):
        message = _("config must be a DecoderLMConfig, got {type}")
        raise TypeError(message.format(type=type(config).__name__))
    if vocab_size is not None:
        config = dataclasses.replace(config, vocab_size=positive_int("vocab_size", vocab_size))
    return DecoderLM(config)
