"""The Transformer encoder-decoder (Vaswani et al., 2017) as in the book, on attnkit's attention.

Shape legend: B batch, S source length, T target length, D model width (d_model),
H heads, F feed-forward width (d_ff), V vocabulary size, L layers.

    enc:  X = PE(Embed(src) * s);  per block: X = AddNorm(X, SelfAttn(X)); X = AddNorm(X, FFN(X))
    dec:  Y = PE(Embed(tgt) * s);  per block: Y = AddNorm(Y, CausalSelfAttn(Y))
                                              Y = AddNorm(Y, CrossAttn(Y, enc));  Y = AddNorm(Y, FFN(Y))
          logits = Dense(Y) = Y W_outᵀ + b_out       FFN(X) = W2 act(W1 X + b1) + b2

Post-norm as the book (``LayerNorm(X + Dropout(Y))``) or pre-norm
(``X + Dropout(Y(LayerNorm(X)))`` plus a final LayerNorm) by config. The other fields of
``TransformerConfig`` (activation, positions_layout, scale_embedding, tie_embeddings) default
to the book's model, so checkpoints written before them load as they were; with them it is
also Marian's (silu, sine/cosine halves, one tied (V, D) matrix, W_out's bias its
``final_logits_bias``).

The decoder is causal in every mode (the book's is not in a full eval-mode pass).
Its state is the book's layout ``[enc_outputs, enc_valid_lens, caches]`` where
``caches[i]`` is block i's ``BlockCache``: the *projected* self-attention keys/values
of the positions decoded so far and the projected encoder keys/values, so each
incremental step projects one new position only. A decoder forward never changes the
state it is given: it returns a new one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit._validate import boolean, one_of, positive_int, probability
from attnkit.attention.dropout import Dropout
from attnkit.attention.kv_cache import KVCache
from attnkit.attention.masking import attention_mask
from attnkit.attention.multihead import MultiHeadAttention
from attnkit.attention.positional import SINUSOIDAL_LAYOUTS, PositionalEncoding
from attnkit.i18n import _
from attnkit.models import transformer_step, valid_rows
from attnkit.models.activations import activation_module, check_activation
from attnkit.models.block_cache import BlockCache
from attnkit.models.seq2seq import (
    AttentionDecoder,
    Encoder,
    EncoderDecoder,
    check_same_rows,
    check_tokens,
)

__all__ = [
    "AddNorm",
    "BlockCache",
    "DecoderBlock",
    "EncoderBlock",
    "PositionWiseFFN",
    "TransformerConfig",
    "TransformerDecoder",
    "TransformerEncoder",
    "build_transformer",
    "padding_mask",
    "tie_embeddings",
]


DECODE_ROOM = 32  # positions a decoder's self-attention caches preallocate (KVCache)
# sentences from which the memory caches take memory_cache_dtype (OPUS-MT's shapes in bf16,
# 2026-12-07: greedy at batch 1 19% slower, the products' fixed cost; beam 4 at 64 2% faster)
MEMORY_CACHE_DTYPE_MIN_ROWS = 64


@dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters of the encoder-decoder; validated on creation. The defaults are the
    book's (the recipes that use other values: ``attnkit.training.recipes``)."""

    d_model: int = 32
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 64
    dropout: float = 0.1
    max_len: int = 1000
    pre_norm: bool = False
    bias: bool = False
    activation: str = "relu"  # the FFN's: relu, gelu, gelu-tanh, silu
    positions_layout: str = "interleaved"  # the sinusoidal table's: interleaved, halves
    scale_embedding: bool = True  # embeddings * sqrt(d_model) (False: * 1)
    tie_embeddings: bool = False  # source = target embedding = output weight

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field_name in ("d_model", "num_heads", "num_layers", "d_ff", "max_len"):
            value = positive_int(f"{name}.{field_name}", getattr(self, field_name))
            object.__setattr__(self, field_name, value)  # numpy ints become ints (JSON)
        if self.d_model % self.num_heads:
            message = _("{name}.d_model ({d_model}) must be divisible by num_heads ({heads})")
            raise ValueError(message.format(name=name, d_model=self.d_model, heads=self.num_heads))
        probability(f"{name}.dropout", self.dropout)
        for field_name in ("pre_norm", "bias", "scale_embedding", "tie_embeddings"):
            boolean(f"{name}.{field_name}", getattr(self, field_name))
        check_activation(f"{name}.activation", self.activation)
        one_of(f"{name}.positions_layout", self.positions_layout, SINUSOIDAL_LAYOUTS)


class PositionWiseFFN(nn.Module):
    """Linear -> activation (ReLU by default) -> Linear, applied at every position.

    The activation module keeps the book's attribute name ``relu`` whatever it computes
    (``activation`` names it: one of ``attnkit.models.activations.ACTIVATIONS``).

    ``ffn_num_input=None`` makes it lazy (``nn.LazyLinear``, PyTorch's lazy modules): the
    input width is learned at the first call, and both layers create their parameters
    then, in call order.
    """

    def __init__(
        self,
        ffn_num_input: int | None,
        ffn_num_hiddens: int,
        ffn_num_outputs: int,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        lazy = ffn_num_input is None
        self.activation = check_activation("activation", activation)
        self.dense1 = (
            nn.LazyLinear(ffn_num_hiddens) if lazy else nn.Linear(ffn_num_input, ffn_num_hiddens)
        )
        self.relu = activation_module(activation)
        self.dense2 = (
            nn.LazyLinear(ffn_num_outputs) if lazy else nn.Linear(ffn_num_hiddens, ffn_num_outputs)
        )

    def forward(self, X: Tensor) -> Tensor:  # (B, T, D) -> (B, T, D_out)
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """Residual connection + LayerNorm: post-norm ``LN(X + Dropout(Y))`` or pre-norm.

    With ``pre_norm`` the block normalizes the sublayer's input (``pre(X)``) and the
    residual is ``X + Dropout(Y)``.
    """

    def __init__(self, normalized_shape, dropout: float, pre_norm: bool = False) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.ln = nn.LayerNorm(normalized_shape)
        self.pre_norm = pre_norm

    def pre(self, X: Tensor) -> Tensor:
        """The sublayer's input: LN(X) in pre-norm, X itself in post-norm."""
        return self.ln(X) if self.pre_norm else X

    def forward(self, X: Tensor, Y: Tensor) -> Tensor:  # (B, T, D), (B, T, D)
        if self.pre_norm:
            return X + self.dropout(Y)
        return self.ln(self.dropout(Y) + X)


class _Sublayers:
    """How a block builds its sublayers; a subclass may build other kinds (lazy ones, say)
    with the same interface, in the same order."""

    def _make_attention(self, config: TransformerConfig) -> nn.Module:
        c = config
        return MultiHeadAttention(c.d_model, c.num_heads, c.dropout, c.bias)

    def _make_ffn(self, config: TransformerConfig) -> nn.Module:
        return PositionWiseFFN(config.d_model, config.d_ff, config.d_model, config.activation)


class EncoderBlock(_Sublayers, nn.Module):
    """Self-attention and a position-wise FFN, each wrapped in AddNorm."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.attention = self._make_attention(c)
        self.addnorm1 = AddNorm(c.d_model, c.dropout, c.pre_norm)
        self.ffn = self._make_ffn(c)
        self.addnorm2 = AddNorm(c.d_model, c.dropout, c.pre_norm)

    def forward(
        self, X: Tensor, valid_lens: Tensor | None = None, *, rows: Tensor | None = None
    ) -> Tensor:
        """X (B, S, D) -> (B, S, D); valid_lens: key lengths (B,) or a bool mask
        broadcastable to (B, H, S, S), True = attend (the encoder passes (B, 1, 1, S));
        rows (N,): the FFN of those flat positions only, the others kept (valid_rows)."""
        Y = self.addnorm1(X, self.attention(self.addnorm1.pre(X), valid_lens=valid_lens))
        if rows is not None:
            return valid_rows.on_valid_rows(Y, rows, self._ffn_sublayer)
        return self._ffn_sublayer(Y)

    def _ffn_sublayer(self, Y: Tensor) -> Tensor:  # (..., D) -> (..., D): AddNorm(Y, FFN(Y))
        return self.addnorm2(Y, self.ffn(self.addnorm2.pre(Y)))


def _check_ids(X: Tensor, vocab_size: int, name: str) -> None:
    check_tokens(X, name)
    if not X.numel():
        return
    lo, hi = torch.stack(torch.aminmax(X)).tolist()  # one host sync
    if lo < 0 or hi >= vocab_size:
        message = _("{name} holds token ids in [{lo}, {hi}], outside the vocabulary [0, {size})")
        raise ValueError(message.format(name=name, lo=lo, hi=hi, size=vocab_size))


def padding_mask(valid_lens: Tensor | None, B: int, S: int, device) -> Tensor | None:
    """Source lengths (B,) -> bool (B, 1, 1, S), built once for every block; None stays None."""
    return attention_mask(
        valid_lens, B, 1, S, num_heads=1, per_query=False, device=device, name="valid_lens"
    )


class _TokenStack:
    """Shared by encoder and decoder: token embedding * s + positions, then blocks
    (s = sqrt(D), or 1 without ``scale_embedding``)."""

    def _build_stack(
        self, vocab_size: int, config: TransformerConfig, make_block: Callable[[int], nn.Module]
    ) -> None:
        vocab_size = positive_int("vocab_size", vocab_size)
        self.config = config
        self.vocab_size = vocab_size
        self.num_hiddens = config.d_model
        self.num_layers = config.num_layers
        # getattr: configs pickled before the field (the d2l adapters build their own)
        scaled = getattr(config, "scale_embedding", True)
        self.embed_scale = math.sqrt(config.d_model) if scaled else 1.0
        self.embedding = nn.Embedding(vocab_size, config.d_model)
        layout = getattr(config, "positions_layout", "interleaved")
        self.pos_encoding = PositionalEncoding(
            config.d_model, config.dropout, config.max_len, layout
        )
        self.blks = nn.Sequential()
        for i in range(config.num_layers):
            self.blks.add_module(f"block{i}", make_block(i))
        self.final_norm = nn.LayerNorm(config.d_model) if config.pre_norm else nn.Identity()

    def _embed(self, X: Tensor, offset: int = 0) -> Tensor:
        """Token ids (B, T) at positions offset.. -> (B, T, D). Under CPU autocast the
        result is in the autocast dtype, so the residual stream is carried in it: CPU
        autocast runs LayerNorm in its input's dtype, and a float32 stream would be cast
        for every linear layer and promoted back at every residual add (~270 copies a
        training step at the base recipe; an interleaved A/B of the engine's bf16 step
        measured 92.5 -> 89.0 ms, 2026-11-28, docs/benchmarks.md). Off the CPU, or
        without autocast, float32."""
        Y = self.pos_encoding(self.embedding(X) * self.embed_scale, offset)
        if Y.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            Y = Y.to(torch.get_autocast_dtype("cpu"))
        return Y


class TransformerEncoder(_TokenStack, Encoder):
    """Embedding * s + positional encoding, then ``num_layers`` encoder blocks."""

    def __init__(
        self, vocab_size: int, config: TransformerConfig, make_block: Callable | None = None
    ) -> None:
        super().__init__()
        self._build_stack(vocab_size, config, make_block or (lambda i: EncoderBlock(config)))

    def forward(self, X: Tensor, valid_lens: Tensor | None = None, *args) -> Tensor:
        """X (B, S) token ids, valid_lens (B,) -> (B, S, D)."""
        _check_ids(X, self.vocab_size, "src")
        mask = padding_mask(valid_lens, X.shape[0], X.shape[1], X.device)
        inference = not self.training and not torch.is_grad_enabled()
        rows = valid_rows.valid_rows(valid_lens, *X.shape) if inference else None
        X = self._embed(X)
        for blk in self.blks:
            if rows is not None and type(blk) is EncoderBlock and not transformer_step.hooked(blk):
                X = blk(X, mask, rows=rows)  # the FFN of the valid positions only
            else:
                X = blk(X, mask)  # called as a module: forward hooks on blocks fire
        return self.final_norm(X)

    @property
    def attention_weights(self) -> list[Tensor | None]:
        """Per block: self-attention (B, H, S, S) of the last forward, when recorded."""
        return [blk.attention.attention_weights for blk in self.blks]


class DecoderBlock(_Sublayers, nn.Module):
    """Causal self-attention, encoder-decoder attention and an FFN, each with AddNorm."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.attention1 = self._make_attention(c)
        self.addnorm1 = AddNorm(c.d_model, c.dropout, c.pre_norm)
        self.attention2 = self._make_attention(c)
        self.addnorm2 = AddNorm(c.d_model, c.dropout, c.pre_norm)
        self.ffn = self._make_ffn(c)
        self.addnorm3 = AddNorm(c.d_model, c.dropout, c.pre_norm)

    def forward(
        self,
        X: Tensor,  # (B, T, D): the new positions
        enc_outputs: Tensor,  # (B, S, D)
        cross_mask: Tensor | None = None,  # bool (B, 1, 1, S) or source lengths (B,)
        cache: BlockCache | None = None,  # updated in place: the new positions are added
    ) -> Tensor:  # (B, T, D)
        self_cache = None if cache is None else cache.self_attention
        cross_cache = None if cache is None else cache.cross_attention
        Y = self.addnorm1(X, self.attention1(self.addnorm1.pre(X), causal=True, cache=self_cache))
        Y_in = self.addnorm2.pre(Y)
        Z = self.addnorm2(
            Y, self.attention2(Y_in, enc_outputs, valid_lens=cross_mask, cache=cross_cache)
        )
        return self.addnorm3(Z, self.ffn(self.addnorm3.pre(Z)))


class TransformerDecoder(_TokenStack, AttentionDecoder):
    """Embedding + positional encoding, decoder blocks, then a dense layer to V logits.

    State: ``[enc_outputs (B, S, D), enc_valid_lens (B,) | None, caches (list per block)]``.
    """

    # the encoder memory's key/value caches' precision (KVCache dtype; None: the
    # activations'), set by quantize_int8 (int8_cache_dtype)
    memory_cache_dtype: torch.dtype | None = None

    def __init__(
        self, vocab_size: int, config: TransformerConfig, make_block: Callable | None = None
    ) -> None:
        super().__init__()
        self._build_stack(vocab_size, config, make_block or (lambda i: DecoderBlock(config)))
        self.dense = self._make_dense(config.d_model, vocab_size)

    def _make_dense(self, d_model: int, vocab_size: int) -> nn.Module:
        """The output layer, D -> V logits (a subclass may build a lazy one)."""
        return nn.Linear(d_model, vocab_size)

    def init_state(self, enc_outputs: Tensor, enc_valid_lens: Tensor | None = None, *args) -> list:
        """enc_outputs (B, S, D), enc_valid_lens (B,) -> the state before position 0. The
        self-attention caches preallocate ``DECODE_ROOM`` positions (doubled as needed):
        decoding one position at a time then writes each in place."""
        large = enc_outputs.shape[0] >= MEMORY_CACHE_DTYPE_MIN_ROWS
        dtype = self.memory_cache_dtype if large else None
        caches = [
            BlockCache(KVCache(capacity=DECODE_ROOM), KVCache(static=True, dtype=dtype))
            for _ in range(self.num_layers)
        ]
        return [enc_outputs, enc_valid_lens, caches]

    def forward(self, X: Tensor, state: list) -> tuple[Tensor, list]:
        """X (B, T) token ids (the next T positions) -> logits (B, T, V), new state."""
        _check_ids(X, self.vocab_size, "tgt")
        enc_outputs, enc_valid_lens, caches = state
        if enc_outputs.shape[0] != X.shape[0]:
            message = _("tgt has batch size {batch} but the state holds {rows} rows")
            raise ValueError(message.format(batch=X.shape[0], rows=enc_outputs.shape[0]))
        caches = [BlockCache() if c is None else c.copy() for c in caches]  # state kept as is
        cross_mask = padding_mask(enc_valid_lens, *enc_outputs.shape[:2], X.device)
        if transformer_step.applies(self, X, caches, _STANDARD):  # one position, inference
            logits = transformer_step.decoder_step(self, X, cross_mask, caches)
            return logits, [enc_outputs, enc_valid_lens, caches]
        Y = self._embed(X, offset=len(caches[0]))
        for blk, cache in zip(self.blks, caches, strict=True):
            Y = blk(Y, enc_outputs, cross_mask, cache)  # as a module: forward hooks fire
        return self.dense(self.final_norm(Y)), [enc_outputs, enc_valid_lens, caches]

    def reorder_state(self, state: list, index: Tensor, *, same_sources: bool = False) -> list:
        """Keep/reorder batch rows ``index`` (B',) of every tensor in the state; with
        ``same_sources`` the encoder side (outputs, lengths, projected keys/values) is kept
        as it is (see ``Decoder.reorder_state``)."""
        enc_outputs, enc_valid_lens, caches = state
        caches = [
            BlockCache() if c is None else c.index_select(index, same_sources=same_sources)
            for c in caches
        ]
        if same_sources:
            check_same_rows(index, enc_outputs.shape[0])
            return [enc_outputs, enc_valid_lens, caches]
        return [
            enc_outputs.index_select(0, index),
            None if enc_valid_lens is None else enc_valid_lens.index_select(0, index),
            caches,
        ]

    @property
    def attention_weights(self) -> list[list[Tensor | None]]:
        """[[self-attention per block], [enc-dec attention per block]], each (B, H, T, K)."""
        return [
            [blk.attention1.attention_weights for blk in self.blks],
            [blk.attention2.attention_weights for blk in self.blks],
        ]

    def alignment(self) -> Tensor | None:
        """Enc-dec attention of the last block, averaged over heads: (B, T, S)."""
        w = self.blks[-1].attention2.attention_weights
        return None if w is None else w.mean(1)


# what transformer_step computes: these blocks, AddNorms, FFNs and this embedding
_STANDARD = (DecoderBlock, AddNorm, PositionWiseFFN, _TokenStack._embed)


def build_transformer(
    config: TransformerConfig, src_vocab_size: int, tgt_vocab_size: int
) -> EncoderDecoder:
    """The encoder-decoder with Xavier-uniform init of the linear layers (the book's).

    With ``config.tie_embeddings`` the two embeddings and the output layer share one
    (V, D) ``Parameter`` (initialized as the output layer, Xavier-uniform); it needs
    ``src_vocab_size == tgt_vocab_size`` (one vocabulary)."""
    if config.tie_embeddings and src_vocab_size != tgt_vocab_size:
        message = _(
            "TransformerConfig.tie_embeddings needs one vocabulary for both sides, got "
            "src_vocab_size={src} and tgt_vocab_size={tgt}"
        )
        raise ValueError(message.format(src=src_vocab_size, tgt=tgt_vocab_size))
    model = EncoderDecoder(
        TransformerEncoder(src_vocab_size, config), TransformerDecoder(tgt_vocab_size, config)
    )
    if config.tie_embeddings:
        tie_embeddings(model)
    for m in model.modules():
        if type(m) is nn.Linear:
            nn.init.xavier_uniform_(m.weight)
    return model


def tie_embeddings(model: EncoderDecoder) -> None:
    """Make the source and target embeddings and the output layer's weight one
    ``Parameter`` (the output layer's (V, D) weight); its bias stays its own."""
    shared = model.decoder.dense.weight  # (V, D)
    if model.encoder.embedding.weight.shape != shared.shape:
        raise ValueError(
            f"cannot tie embeddings of shapes {tuple(model.encoder.embedding.weight.shape)} "
            f"and {tuple(shared.shape)}"
        )
    model.encoder.embedding.weight = shared
    model.decoder.embedding.weight = shared


def _register() -> None:
    from attnkit.models.registry import register_arch

    # the book's config; the named recipes (book, small, base ...) are attnkit.training.recipes
    register_arch("transformer", build_transformer, TransformerConfig())


_register()
