"""The Transformer of d2l 1.0 (chapter 11) with the book's lazy layers and ``state_dict`` keys.

Shapes: token ids (B, T); hidden states (B, T, num_hiddens); ``valid_lens`` (B,) source
lengths. ``TransformerDecoderBlock``/``TransformerDecoder`` are the notebook's classes,
with two fixes (the weights and keys are the same):

* the decoder is causal in every mode (the book's only in training mode, so its
  teacher-forced validation pass sees future tokens);
* decoding step by step, each token gets its own position's encoding (the book's
  adds position 0's to every token).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnkit.attention.masking import causal_mask
from attnkit.d2l.attention import AddNorm as _AddNorm
from attnkit.d2l.attention import PositionalEncoding as _PositionalEncoding
from attnkit.d2l.v1.attention import AttentionDecoder, MultiHeadAttention, check_dropout
from attnkit.d2l.v1.seq2seq import Encoder
from attnkit.d2l.v1.text import check_counts

__all__ = [
    "AddNorm", "PositionWiseFFN", "PositionalEncoding", "TransformerDecoder",
    "TransformerDecoderBlock", "TransformerEncoder", "TransformerEncoderBlock",
]  # fmt: skip


class PositionalEncoding(_PositionalEncoding):
    """``PositionalEncoding(num_hiddens, dropout, max_len=1000)``: X (B, T, D) + P[:T]."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, check_dropout(dropout), max_len)


class PositionWiseFFN(nn.Module):
    """``dense2(relu(dense1(X)))`` with lazy ``dense1`` (ffn_num_hiddens), ``dense2``."""

    def __init__(self, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        check_counts("ffn_num_hiddens", ffn_num_hiddens)
        check_counts("ffn_num_outputs", ffn_num_outputs)
        self.dense1 = nn.LazyLinear(ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.LazyLinear(ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(_AddNorm):
    """``AddNorm(norm_shape, dropout)``: ``ln(dropout(Y) + X)``."""

    def __init__(self, norm_shape, dropout):
        super().__init__(norm_shape, check_dropout(dropout))

    def forward(self, X, Y):
        if X.shape != Y.shape:
            raise ValueError(
                f"AddNorm: X and Y must have the same shape, got {tuple(X.shape)} "
                f"and {tuple(Y.shape)}"
            )
        return super().forward(X, Y)


class TransformerEncoderBlock(nn.Module):
    """Self-attention and FFN, each with ``AddNorm``; ``forward(X (B, T, D), valid_lens)``."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


def _check_tokens(X, vocab_size):
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or X.is_floating_point():
        got = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"X must be integer token ids (batch_size, num_steps), got {got}")


class TransformerEncoder(Encoder):
    """Embedding * sqrt(D) + positions, then ``num_blks`` encoder blocks (``blks.block{i}``).

    ``forward(X (B, T) ids, valid_lens (B,))`` -> (B, T, num_hiddens); in eval mode
    ``attention_weights[i]`` is block i's (B*H, T, T).
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
                 use_bias=False):  # fmt: skip
        super().__init__()
        check_counts("vocab_size", vocab_size)
        check_counts("num_blks", num_blks)
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module(
                "block" + str(i),
                TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias),
            )

    def forward(self, X, valid_lens):
        _check_tokens(X, self.embedding.num_embeddings)
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        self.attention_weights = [None] * len(self.blks)
        for i, blk in enumerate(self.blks):
            X = blk(X, valid_lens)
            self.attention_weights[i] = blk.attention.attention.attention_weights
        return X

    _pad_safe_forward = forward  # padding keys are masked: EncoderDecoder may trim them


class TransformerDecoderBlock(nn.Module):
    """Block ``i`` of the decoder: causal self-attention over the cached inputs
    (``state[2][i]``, raw inputs (B, T_seen, D) as the book), cross-attention, FFN."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
        super().__init__()
        self.i = check_counts("i", i, minimum=0)
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, state):
        """X (B, T, D); state [enc_outputs (B, S, D), enc_valid_lens (B,), cache list]."""
        enc_outputs, enc_valid_lens = state[0], state[1]
        cached = state[2][self.i]
        key_values = X if cached is None else torch.cat((cached, X), dim=1)
        state[2][self.i] = key_values
        T, K = X.shape[1], key_values.shape[1]
        mask = None if T == 1 else causal_mask(T, K, device=X.device)  # (T, K), every mode
        Y = self.addnorm1(X, self.attention1(X, key_values, key_values, mask))
        Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
        Z = self.addnorm2(Y, Y2)
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(AttentionDecoder):
    """The notebook's decoder; ``attention_weights`` = [self-attention per block,
    cross-attention per block] (eval mode)."""

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout):
        super().__init__()
        check_counts("vocab_size", vocab_size)
        self.num_hiddens = check_counts("num_hiddens", num_hiddens)
        self.num_blks = check_counts("num_blks", num_blks)
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module(
                "block" + str(i),
                TransformerDecoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, i),
            )
        self.dense = nn.LazyLinear(vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

    def forward(self, X, state):
        """X (B, T) ids -> (B, T, vocab), state; positions continue after the cache."""
        _check_tokens(X, self.embedding.num_embeddings)
        if len(state) != 3 or len(state[2]) != self.num_blks:
            raise ValueError("state must be init_state(...)'s [enc_outputs, enc_valid_lens, cache]")
        offset = 0 if state[2][0] is None else state[2][0].shape[1]
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens), offset)
        self._attention_weights = [[None] * len(self.blks) for _ in range(2)]
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)
            self._attention_weights[0][i] = blk.attention1.attention.attention_weights
            self._attention_weights[1][i] = blk.attention2.attention.attention_weights
        return self.dense(X), state

    _pad_safe_forward = forward  # the source's padding is masked in cross-attention

    @property
    def attention_weights(self):
        return self._attention_weights
