"""Encoder-decoder interfaces and the book's GRU seq2seq models (plain and Bahdanau attention).

Shape legend: B batch, S source length, T target length, E embedding width,
H hidden width, L GRU layers, V vocabulary size.

THE GENERIC INTERFACE (every seq2seq model in attnkit implements it; the trainer,
decoding and the CLI use nothing else)::

    enc_outputs = model.encoder(src, src_len)              # src (B, S) long, src_len (B,) long
    state = model.decoder.init_state(enc_outputs, src_len)
    logits, state = model.decoder(tgt_in, state)           # tgt_in (B, T) -> logits (B, T, V)
    state = model.decoder.reorder_state(state, index)      # keep/reorder batch rows, index (B',)
    model.decoder.alignment()                              # (B, T, S) enc-dec attention or None

``decoder(tgt_in, state)`` also works one step at a time (T = 1): calling it T times
with one token gives the same logits as one call with T tokens (incremental decoding).
``enc_outputs`` and ``state`` are opaque to callers.

The modules keep the book's constructor signatures and ``state_dict`` keys
(``embedding``, ``rnn``, ``dense``, ``attention.W_q/W_k/w_v``), so the book's code
and checkpoints work. Deliberate differences from the book:

- Given ``src_len``, the encoder packs the sequence, so padding never reaches the
  GRU state: the final state is the one after ``<eos>``, whatever the padding.
- ``Seq2SeqDecoder`` carries the encoder's final top-layer state as the context in its
  state (as d2l 1.0 does). The book's version re-reads ``state[-1]``, which at
  prediction time is the decoder's own state, so training and inference differed.
- Parameters get the book's Xavier-uniform init in the constructors (the book does
  it in ``train_seq2seq``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnkit._validate import positive_int, probability
from attnkit.attention.masking import attention_mask
from attnkit.attention.recording import note_weights
from attnkit.attention.single_head import AdditiveAttention
from attnkit.i18n import _

__all__ = [
    "AttentionDecoder",
    "BahdanauState",
    "Decoder",
    "Encoder",
    "EncoderDecoder",
    "Seq2SeqAttentionDecoder",
    "Seq2SeqDecoder",
    "Seq2SeqEncoder",
    "Seq2SeqState",
    "check_same_rows",
    "check_tokens",
    "xavier_init_weights",
]


# ----------------------------------------------------------------------------- interfaces


class Encoder(nn.Module):
    """Base encoder: ``forward(src (B, S), src_len (B,) | None) -> enc_outputs``."""

    def forward(self, X: Tensor, *args):
        raise NotImplementedError


class Decoder(nn.Module):
    """Base decoder: ``init_state``, ``forward(X, state) -> (logits, state)``, ``reorder_state``."""

    def init_state(self, enc_outputs, *args):
        raise NotImplementedError

    def forward(self, X: Tensor, state):
        raise NotImplementedError

    def reorder_state(self, state, index: Tensor, *, same_sources: bool = False):
        """Select batch rows ``index`` (B',) of ``state`` (beam search, dropping finished rows).

        ``same_sources=True``: the caller vouches that new row r decodes the same source
        sentence as old row r (beam search reordering hypotheses within each sentence, no
        row added or dropped): what depends on the source alone (encoder outputs, their
        lengths and projections) is kept as it is instead of being copied.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement reorder_state")

    def alignment(self) -> Tensor | None:
        """Encoder-decoder attention of the last forward, (B, T, S), or None if not recorded."""
        return None


def check_same_rows(index: Tensor, rows: int) -> None:
    """``reorder_state(..., same_sources=True)`` keeps one new row per old row."""
    if index.shape[0] != rows:
        raise ValueError(
            f"same_sources needs one new row per old row, got {index.shape[0]} rows for {rows}"
        )


class AttentionDecoder(Decoder):
    """A decoder with attention: ``attention_weights`` holds the last forward's weights."""

    @property
    def attention_weights(self):
        raise NotImplementedError


class EncoderDecoder(nn.Module):
    """``forward(enc_X, dec_X, *args)``: encode, ``init_state``, decode (the book's class)."""

    def __init__(self, encoder: Encoder, decoder: Decoder, **kwargs) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X: Tensor, dec_X: Tensor, *args):
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state)


# ----------------------------------------------------------------------------- helpers


def xavier_init_weights(m: nn.Module) -> None:
    """The book's init: Xavier-uniform on every Linear weight and every GRU weight matrix."""
    if type(m) is nn.Linear:
        nn.init.xavier_uniform_(m.weight)
    if type(m) is nn.GRU:
        for name in m._flat_weights_names:
            if "weight" in name:
                nn.init.xavier_uniform_(m._parameters[name])


def check_tokens(X: Tensor, name: str = "X") -> None:
    """Raise a clear error unless ``X`` is a 2-D integer tensor of token ids."""
    if not isinstance(X, Tensor) or X.dtype not in (torch.int64, torch.int32):
        message = _("{name} must be a (B, T) int64 tensor of token ids, got {got}")
        raise TypeError(message.format(name=name, got=getattr(X, "dtype", X)))
    if X.dim() != 2:
        message = _("{name} must have shape (B, T), got {shape}")
        raise ValueError(message.format(name=name, shape=tuple(X.shape)))


def _check_sizes(
    vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int, dropout: float
) -> None:
    """The book's GRU model arguments: positive sizes, dropout in [0, 1)."""
    positive_int("vocab_size", vocab_size)
    positive_int("embed_size", embed_size)
    positive_int("num_hiddens", num_hiddens)
    positive_int("num_layers", num_layers)
    probability("dropout", dropout)


def _gru_dropout(dropout: float, num_layers: int) -> float:
    """nn.GRU drops out between layers only; with one layer pass 0 (no warning)."""
    return dropout if num_layers > 1 else 0.0


# ----------------------------------------------------------------------------- encoder


class Seq2SeqEncoder(Encoder):
    """Embedding + multi-layer GRU, time-major output as the book.

    ``forward(X (B, S), src_len (B,) | None) -> (outputs (S, B, H), state (L, B, H))``.
    With ``src_len`` the GRU runs on the packed sequence: outputs past a row's length
    are 0 and ``state`` is taken at its last real token.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int,
        dropout: float = 0,
        **kwargs,
    ) -> None:
        super().__init__()
        _check_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(
            embed_size, num_hiddens, num_layers, dropout=_gru_dropout(dropout, num_layers)
        )
        self.apply(xavier_init_weights)

    def forward(self, X: Tensor, src_len: Tensor | None = None, *args) -> tuple[Tensor, Tensor]:
        check_tokens(X, "src")
        if src_len is None:
            return self.rnn(self.embedding(X.t()))  # (S, B, H), (L, B, H); the book's path
        B, S = X.shape
        if tuple(src_len.shape) != (B,):
            message = _("src_len must have shape (B,) = ({b},), got {shape}")
            raise ValueError(message.format(b=B, shape=tuple(src_len.shape)))
        lengths = src_len.detach().to("cpu", torch.int64).clamp(1, S)
        longest = int(lengths.max())
        emb = self.embedding(X[:, :longest].t())  # (S', B, E): columns of padding only dropped
        if bool((lengths == longest).all()):
            out, state = self.rnn(emb)
        else:
            packed = pack_padded_sequence(emb, lengths, enforce_sorted=False)
            out, state = self.rnn(packed)
            out, _lengths = pad_packed_sequence(out, total_length=longest)  # zeros past each length
        if longest < S:
            out = F.pad(out, (0, 0, 0, 0, 0, S - longest))  # (S, B, H)
        return out, state


# ----------------------------------------------------------------------------- plain decoder


class Seq2SeqState(NamedTuple):
    """State of ``Seq2SeqDecoder``: GRU hidden state and the fixed encoder context."""

    hidden: Tensor  # (L, B, H)
    context: Tensor  # (B, H): the encoder's final top-layer state

    @property
    def shape(self) -> torch.Size:
        """The hidden state's shape, so the book's ``state.shape`` check prints the same."""
        return self.hidden.shape


class Seq2SeqDecoder(Decoder):
    """GRU decoder whose every input step is ``cat(embedding, context)`` (the book's order)."""

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int,
        dropout: float = 0,
        **kwargs,
    ) -> None:
        super().__init__()
        _check_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(
            embed_size + num_hiddens,
            num_hiddens,
            num_layers,
            dropout=_gru_dropout(dropout, num_layers),
        )
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.apply(xavier_init_weights)

    def init_state(self, enc_outputs, *args) -> Seq2SeqState:
        _, enc_state = enc_outputs  # (L, B, H)
        return Seq2SeqState(enc_state, enc_state[-1])

    def forward(self, X: Tensor, state: Seq2SeqState) -> tuple[Tensor, Seq2SeqState]:
        check_tokens(X, "X")
        if not isinstance(state, Seq2SeqState):  # a bare (L, B, H) tensor, as the book passes
            state = Seq2SeqState(state, state[-1])
        emb = self.embedding(X.t())  # (T, B, E)
        context = state.context.unsqueeze(0).expand(emb.shape[0], -1, -1)  # (T, B, H)
        out, hidden = self.rnn(torch.cat((emb, context), dim=2), state.hidden)  # (T, B, H)
        logits = self.dense(out).transpose(0, 1)  # (B, T, V)
        return logits, Seq2SeqState(hidden, state.context)

    def reorder_state(
        self, state: Seq2SeqState, index: Tensor, *, same_sources: bool = False
    ) -> Seq2SeqState:
        if same_sources:
            check_same_rows(index, state.context.shape[0])
        context = state.context if same_sources else state.context.index_select(0, index)
        return Seq2SeqState(state.hidden.index_select(1, index), context)


# ----------------------------------------------------------------------------- Bahdanau decoder


class BahdanauState(NamedTuple):
    """State of ``Seq2SeqAttentionDecoder``, the book's 3-tuple."""

    enc_outputs: Tensor  # (B, S, H) batch-major encoder outputs (keys and values)
    hidden: Tensor  # (L, B, H)
    src_len: Tensor | None  # (B,) valid source lengths


class Seq2SeqAttentionDecoder(AttentionDecoder):
    """GRU decoder with additive (Bahdanau) attention over the encoder outputs.

    Each step: query = top-layer hidden state, context = attention over the encoder
    outputs, GRU input = ``cat(context, embedding)`` (context first, as the book).
    ``attention_weights`` is the book's list of per-step (B, 1, S) weights of the last
    forward; ``alignment()`` stacks them into (B, T, S).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        num_hiddens: int,
        num_layers: int,
        dropout: float = 0,
        **kwargs,
    ) -> None:
        super().__init__()
        _check_sizes(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(
            embed_size + num_hiddens,
            num_hiddens,
            num_layers,
            dropout=_gru_dropout(dropout, num_layers),
        )
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self._attention_weights: list[Tensor] = []
        self.apply(xavier_init_weights)

    def init_state(self, enc_outputs, enc_valid_lens: Tensor | None = None, *args) -> BahdanauState:
        outputs, hidden_state = enc_outputs  # (S, B, H), (L, B, H)
        return BahdanauState(outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X: Tensor, state: BahdanauState) -> tuple[Tensor, BahdanauState]:
        check_tokens(X, "X")
        enc_outputs, hidden, src_len = state
        S = enc_outputs.shape[1]
        # Work shared by all T steps, done once: the key projection and the key mask.
        # (The same score as AdditiveAttention.forward, with W_k(keys) hoisted out of the loop.)
        att = self.attention
        keys = att.W_k(enc_outputs).unsqueeze(1)  # (B, 1, S, H)
        B, device = enc_outputs.shape[0], enc_outputs.device
        mask = attention_mask(src_len, B, 1, S, per_query=False, device=device)  # (B, 1, S)
        # masked_softmax inlined for the per-step loop (its checks cost more than the math):
        # fill masked keys with the lowest value, softmax, then zero them exactly.
        fill = None if mask is None else ~mask
        lowest = torch.finfo(enc_outputs.dtype).min
        emb = self.embedding(X.t())  # (T, B, E)
        outputs, weights = [], []
        for x in emb:  # x: (B, E)
            query = att.W_q(hidden[-1]).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, H)
            scores = att.w_v(torch.tanh(query + keys)).squeeze(-1)  # (B, 1, S)
            if fill is None:
                w = torch.softmax(scores, dim=-1)  # (B, 1, S)
            else:
                w = torch.softmax(scores.masked_fill(fill, lowest), dim=-1) * mask
            context = torch.bmm(att.dropout(w), enc_outputs)  # (B, 1, H)
            step_in = torch.cat((context.squeeze(1), x), dim=-1).unsqueeze(0)  # (1, B, H + E)
            out, hidden = self.rnn(step_in, hidden)  # (1, B, H), (L, B, H)
            outputs.append(out)
            weights.append(w.detach())
        att.attention_weights = weights[-1] if weights else None
        self._attention_weights = weights
        if weights:
            note_weights(self, torch.cat(weights, dim=1))  # (B, T, S) alignment
        logits = self.dense(torch.cat(outputs, dim=0)).transpose(0, 1)  # (B, T, V)
        return logits, BahdanauState(enc_outputs, hidden, src_len)

    def reorder_state(
        self, state: BahdanauState, index: Tensor, *, same_sources: bool = False
    ) -> BahdanauState:
        enc_outputs, hidden, src_len = state
        if same_sources:
            check_same_rows(index, enc_outputs.shape[0])
            return BahdanauState(enc_outputs, hidden.index_select(1, index), src_len)
        return BahdanauState(
            enc_outputs.index_select(0, index),
            hidden.index_select(1, index),
            None if src_len is None else src_len.index_select(0, index),
        )

    @property
    def attention_weights(self) -> list[Tensor]:
        return self._attention_weights

    def alignment(self) -> Tensor | None:
        if not self._attention_weights:
            return None
        return torch.cat(self._attention_weights, dim=1)  # (B, T, S)
