"""Attention of d2l 1.0 (chapter 11): scoring functions, multi-head attention, the
attention decoder interface and the notebook's Bahdanau decoder.

Shape legend: B batch, Q queries, K keys, D width, H heads. ``valid_lens``: (B,) or (B, Q)
integer key lengths, or a boolean mask broadcastable to (B, Q, K) (True = attend). A query
with no valid key gets zero weights (the book: uniform weights over its padding).

The math is attnkit's (:func:`attnkit.attention.masked_softmax`,
:func:`attnkit.attention.single_head.scaled_dot_product`); ``MultiHeadAttention`` is the
core's :class:`attnkit.attention.LazyMultiHeadAttention` (1.0's lazy layers, so
``state_dict`` keys are d2l 1.0.3's and load after a first forward). In training mode
dot-product attention runs the fused kernel and keeps no ``attention_weights``; in eval
mode it keeps them, shaped as the book's.
"""

from __future__ import annotations

import torch
from torch import nn

from attnkit._validate import check_qkv, positive_int, probability
from attnkit.attention.lazy import LazyMultiHeadAttention
from attnkit.attention.masking import masked_softmax as _masked_softmax
from attnkit.d2l.attention import DotProductAttention as _DotProductAttention
from attnkit.d2l.attention import show_heatmaps
from attnkit.d2l.attention import transpose_output as _transpose_output
from attnkit.d2l.attention import transpose_qkv as _transpose_qkv
from attnkit.d2l.v1.base import Module
from attnkit.d2l.v1.seq2seq import init_seq2seq
from attnkit.i18n import _
from attnkit.models.seq2seq import AttentionDecoder

__all__ = [
    "AdditiveAttention", "AttentionDecoder", "DotProductAttention", "MultiHeadAttention",
    "Seq2SeqAttentionDecoder", "masked_softmax", "show_heatmaps",
]  # fmt: skip


def masked_softmax(X, valid_lens):
    """Softmax over the last axis of X (B, Q, K) ignoring keys past ``valid_lens``."""
    return _masked_softmax(X, valid_lens)


def check_heads(num_hiddens, num_heads) -> None:
    """Widths and heads of multi-head attention, in the book's names."""
    positive_int("num_hiddens", num_hiddens)
    positive_int("num_heads", num_heads)
    if num_hiddens % num_heads:
        message = _(
            "num_hiddens must be divisible by num_heads, got num_hiddens={num_hiddens} "
            "and num_heads={num_heads}"
        )
        raise ValueError(message.format(num_hiddens=num_hiddens, num_heads=num_heads))


class DotProductAttention(_DotProductAttention):
    """``DotProductAttention(dropout)``: softmax(Q Kᵀ / sqrt(D)) V with dropout on the weights.

    ``forward(queries (B, Q, D), keys (B, K, D), values (B, K, Dv), valid_lens=None)``.
    """

    def __init__(self, dropout):
        super().__init__(probability("dropout", dropout))


class AdditiveAttention(nn.Module):
    """``AdditiveAttention(num_hiddens, dropout)``: lazy ``W_k``, ``W_q``, ``w_v``.

    ``forward(queries (B, Q, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens)``;
    keeps ``attention_weights`` (B, Q, K).
    """

    def __init__(self, num_hiddens, dropout, **kwargs):
        super().__init__()
        positive_int("num_hiddens", num_hiddens)
        self.W_k = nn.LazyLinear(num_hiddens, bias=False)
        self.W_q = nn.LazyLinear(num_hiddens, bias=False)
        self.w_v = nn.LazyLinear(1, bias=False)
        self.dropout = nn.Dropout(probability("dropout", dropout))

    def forward(self, queries, keys, values, valid_lens):
        check_qkv(queries, keys, values, same_width=False)
        queries, keys = self.W_q(queries), self.W_k(keys)  # (B, Q, h), (B, K, h)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))  # (B, Q, K, h)
        scores = self.w_v(features).squeeze(-1)  # (B, Q, K)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class MultiHeadAttention(LazyMultiHeadAttention, Module):
    """``MultiHeadAttention(num_hiddens, num_heads, dropout, bias=False)``: the core's
    ``LazyMultiHeadAttention`` (lazy ``W_q``, ``W_k``, ``W_v``, ``W_o``, created at the
    first call in that order; keys as 1.0.3's) as a ``d2l.Module``.

    ``forward(queries (B, Q, Dq), keys (B, K, Dk), values (B, K, Dv), valid_lens)`` ->
    (B, Q, num_hiddens); the core's keywords (``causal``, ``cache``...) pass through. In
    eval mode ``attention.attention_weights`` is (B*H, Q, K), as the book's; in training
    the fused kernel runs and keeps none.
    """

    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        check_heads(num_hiddens, num_heads)
        super().__init__(num_hiddens, num_heads, probability("dropout", dropout), bias)
        self.attention = DotProductAttention(dropout)  # holds the weights in the book's layout
        for name in [n for n in self._modules if n != "attention"]:  # attention first, as
            self._modules[name] = self._modules.pop(name)  # the book's module lists it

    def wants_weights(self) -> bool:
        return super().wants_weights() or not self.training  # the book keeps them in eval

    def forward(self, queries, keys=None, values=None, valid_lens=None, **kwargs):
        if keys is not None and values is not None:
            check_qkv(queries, keys, values, same_width=False)
        out = super().forward(queries, keys, values, valid_lens, **kwargs)
        w = self.attention_weights  # (B, H, Q, K) or None
        self.attention.attention_weights = None if w is None else w.reshape(-1, *w.shape[-2:])
        return out

    def transpose_qkv(self, X):
        """(B, T, D) -> (B*H, T, D/H)."""
        return _transpose_qkv(X, self.num_heads)

    def transpose_output(self, X):
        """(B*H, T, D/H) -> (B, T, D), the inverse of ``transpose_qkv``."""
        return _transpose_output(X, self.num_heads)


class Seq2SeqAttentionDecoder(AttentionDecoder):
    """The notebook's Bahdanau decoder: additive attention over the encoder's outputs,
    queried by the last layer's hidden state at every step."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        positive_int("vocab_size", vocab_size)
        positive_int("embed_size", embed_size)
        positive_int("num_layers", num_layers)
        self.attention = AdditiveAttention(num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.LazyLinear(vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_outputs, enc_valid_lens):
        """(outputs (T, B, H), hidden (L, B, H)) -> (outputs (B, T, H), hidden, lens)."""
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        """X (B, T) ids -> (B, T, vocab), the new state."""
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)  # (T, B, E)
        outputs, self._attention_weights = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)  # (B, 1, H)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]

    @property
    def attention_weights(self):
        return self._attention_weights
