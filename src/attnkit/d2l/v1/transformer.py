"""The Transformer of d2l 1.0 (chapter 11): the core's blocks with the book's lazy layers.

Shapes: token ids (B, T); hidden states (B, T, num_hiddens); ``valid_lens`` (B,) source
lengths. Every class here is the core's (:mod:`attnkit.models.transformer`) with 1.0's
constructor signatures, lazy sublayers and ``state_dict`` keys: the blocks build their
attention as ``d2l.MultiHeadAttention`` (the core's ``LazyMultiHeadAttention``) and their
FFN as the core's lazy ``PositionWiseFFN``, so no parameter exists before the first
forward, which creates them in call order, as the book's. ``TransformerDecoderBlock`` and
``TransformerDecoder`` are the notebook's classes, with the core's two fixes (the weights
and keys are the same):

* the decoder is causal in every mode (the book's only in training mode, so its
  teacher-forced validation pass sees future tokens);
* decoding step by step, each token gets its own position's encoding (the book's
  adds position 0's to every token).

The decoder's state is the book's ``[enc_outputs, enc_valid_lens, caches]``, updated in
place as the book's; ``caches[i]`` is block i's core ``BlockCache`` (projected keys and
values of the positions decoded so far, and of the encoder's outputs), where the book
keeps block i's raw inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit._validate import non_negative_int, positive_int, probability
from attnkit.attention.positional import PositionalEncoding as _PositionalEncoding
from attnkit.d2l.v1.attention import MultiHeadAttention, check_heads
from attnkit.i18n import _
from attnkit.models import transformer as _tf

__all__ = [
    "AddNorm", "PositionWiseFFN", "PositionalEncoding", "TransformerDecoder",
    "TransformerDecoderBlock", "TransformerEncoder", "TransformerEncoderBlock",
]  # fmt: skip


class PositionalEncoding(_PositionalEncoding):
    """``PositionalEncoding(num_hiddens, dropout, max_len=1000)``: X (B, T, D) + P[:T]."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, probability("dropout", dropout), max_len)


class PositionWiseFFN(_tf.PositionWiseFFN):
    """``dense2(relu(dense1(X)))`` with lazy ``dense1`` (ffn_num_hiddens), ``dense2``."""

    def __init__(self, ffn_num_hiddens, ffn_num_outputs):
        super().__init__(
            None, positive_int("ffn_num_hiddens", ffn_num_hiddens),
            positive_int("ffn_num_outputs", ffn_num_outputs),
        )  # fmt: skip


class AddNorm(_tf.AddNorm):
    """``AddNorm(norm_shape, dropout)``: ``ln(dropout(Y) + X)``."""

    def __init__(self, norm_shape, dropout):
        super().__init__(norm_shape, probability("dropout", dropout))

    def forward(self, X, Y):
        if X.shape != Y.shape:
            message = _("AddNorm: X and Y must have the same shape, got {x} and {y}")
            raise ValueError(message.format(x=tuple(X.shape), y=tuple(Y.shape)))
        return super().forward(X, Y)


def _config(num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias=False):
    """The core's config, after the book's arguments are checked under the book's names."""
    check_heads(num_hiddens, num_heads)
    return _tf.TransformerConfig(
        d_model=int(num_hiddens), num_heads=int(num_heads),
        num_layers=positive_int("num_blks", num_blks),
        d_ff=positive_int("ffn_num_hiddens", ffn_num_hiddens),
        dropout=probability("dropout", dropout), bias=bool(use_bias),
    )  # fmt: skip


class _BookSublayers:
    """The core block's sublayers as 1.0's: lazy ``d2l.MultiHeadAttention`` and FFN."""

    def _make_attention(self, config):
        return MultiHeadAttention(config.d_model, config.num_heads, config.dropout, config.bias)

    def _make_ffn(self, config):
        return PositionWiseFFN(config.d_ff, config.d_model)


class TransformerEncoderBlock(_BookSublayers, _tf.EncoderBlock):
    """Self-attention and FFN, each with ``AddNorm``; ``forward(X (B, T, D), valid_lens)``."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False):
        super().__init__(_config(num_hiddens, ffn_num_hiddens, num_heads, 1, dropout, use_bias))


def _check_tokens(X):
    """Token ids: TypeError for anything but an integer tensor, ValueError unless 2-D."""
    if not isinstance(X, Tensor):
        message = _("X must be integer token ids (batch_size, num_steps), got {type}")
        raise TypeError(message.format(type=type(X).__name__))
    if X.is_floating_point() or X.is_complex() or X.dtype == torch.bool:
        message = _("X must be integer token ids (batch_size, num_steps), got {dtype}")
        raise TypeError(message.format(dtype=X.dtype))
    if X.dim() != 2:
        message = _("X must be integer token ids (batch_size, num_steps), got shape {shape}")
        raise ValueError(message.format(shape=tuple(X.shape)))


class TransformerEncoder(_tf.TransformerEncoder):
    """Embedding * sqrt(D) + positions, then ``num_blks`` encoder blocks (``blks.block{i}``).

    ``forward(X (B, T) ids, valid_lens (B,))`` -> (B, T, num_hiddens); in eval mode
    ``attention_weights[i]`` is block i's (B*H, T, T).
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 use_bias=False):  # fmt: skip
        positive_int("vocab_size", vocab_size)
        config = _config(num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, use_bias)
        super().__init__(
            vocab_size, config,
            lambda i: TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout,
                                              use_bias),
        )  # fmt: skip

    def forward(self, X, valid_lens=None, *args):
        _check_tokens(X)
        return super().forward(X, valid_lens, *args)

    _pad_safe_forward = forward  # padding keys are masked: EncoderDecoder may trim them

    @property
    def attention_weights(self):
        return [blk.attention.attention.attention_weights for blk in self.blks]


class TransformerDecoderBlock(_BookSublayers, _tf.DecoderBlock):
    """Block ``i`` of the decoder: causal self-attention over the positions cached in
    ``state[2][i]``, cross-attention, FFN; ``forward(X (B, T, D), state) -> (Y, state)``."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
        i = non_negative_int("i", i)
        super().__init__(_config(num_hiddens, ffn_num_hiddens, num_heads, 1, dropout))
        self.i = i

    def forward(self, X, state, *block_args):
        """The book's ``blk(X, state)``, updating ``state[2][i]`` in place; inside the core's
        decoder, which calls ``blk(X, enc_outputs, cross_mask, cache)``, the core's forward."""
        if block_args:
            return super().forward(X, state, *block_args)
        if state[2][self.i] is None:
            state[2][self.i] = _tf.BlockCache()
        return super().forward(X, state[0], state[1], state[2][self.i]), state


class TransformerDecoder(_tf.TransformerDecoder):
    """The notebook's decoder; ``attention_weights`` = [self-attention per block,
    cross-attention per block] (eval mode), each (B*H, T, K)."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout):
        positive_int("vocab_size", vocab_size)
        config = _config(num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout)
        super().__init__(
            vocab_size, config,
            lambda i: TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, i),
        )  # fmt: skip
        self.num_blks = config.num_layers

    def _make_dense(self, d_model, vocab_size):
        return nn.LazyLinear(vocab_size)

    def forward(self, X, state):
        """X (B, T) ids -> (B, T, vocab), state; positions continue after the cache. As the
        book's, the caches of ``state`` are updated in place and ``state`` is returned."""
        _check_tokens(X)
        if len(state) != 3 or len(state[2]) != self.num_blks:
            message = _("state must be init_state(...)'s [enc_outputs, enc_valid_lens, cache]")
            raise ValueError(message)
        Y, new_state = super().forward(X, state)
        state[2][:] = new_state[2]
        return Y, state

    _pad_safe_forward = forward  # the source's padding is masked in cross-attention

    @property
    def attention_weights(self):
        return [
            [blk.attention1.attention.attention_weights for blk in self.blks],
            [blk.attention2.attention.attention_weights for blk in self.blks],
        ]
