"""Shared pieces of the seq2seq exercises (d2l 0.17 sections 9.7 and 9.8): the generated
English-French pairs padded to a fixed length as the book does, a small training loop
whose loss masking and teacher forcing can be switched off (9.7.2, 9.7.4), an LSTM
variant of the book's GRU seq2seq (9.7.5), and validation BLEU by greedy or beam search.

Runs are paired: for one seed, every variant starts from ``torch.manual_seed(seed)``
and sees the same minibatches in the same order (``torch.Generator`` seeded with it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit.models.seq2seq import (
    EncoderDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    Seq2SeqState,
    check_same_rows,
)

__all__ = [
    "Arrays",
    "LSTMDecoder",
    "LSTMEncoder",
    "book_arrays",
    "build_seq2seq",
    "corpus_data",
    "source_dependence",
    "train_seq2seq",
    "val_bleu",
    "val_sentence_losses",
]

NUM_STEPS = 10  # the book's num_steps: every target row padded to 10 tokens
SIZES = {"embed_size": 32, "num_hiddens": 64, "num_layers": 1}  # the tour's GRU sizes


def corpus_data(small: bool, seed: int):
    """Generated English-French pairs (``attnkit.data.synthetic_fr``): 600 at small size,
    1200 at full size, at most 9 words + <eos> a side; 20% held out for validation."""
    from attnkit.data.translation import load_translation_data

    return load_translation_data(
        None, num_pairs=600 if small else 1200, seed=seed, max_len=NUM_STEPS,
        val_fraction=0.2, test_fraction=0.0,
    )  # fmt: skip


@dataclass(frozen=True)
class Arrays:
    """The training split as the book's arrays: ids + <eos>, padded to ``NUM_STEPS``."""

    src: Tensor  # (N, NUM_STEPS) long
    src_len: Tensor  # (N,)
    tgt: Tensor  # (N, NUM_STEPS) long
    tgt_len: Tensor  # (N,)


def book_arrays(data) -> Arrays:
    from attnkit.data.fra import build_array_nmt

    src, src_len = build_array_nmt([s for s, _ in data.train], data.src_vocab, NUM_STEPS)
    tgt, tgt_len = build_array_nmt([t for _, t in data.train], data.tgt_vocab, NUM_STEPS)
    return Arrays(src, src_len.long(), tgt, tgt_len.long())


# ----------------------------------------------------------------------------- LSTM variant


class LSTMEncoder(Seq2SeqEncoder):
    """The book's encoder with ``nn.LSTM``: the state is the pair (h, c), each (L, B, H)."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.rnn = nn.LSTM(embed_size, num_hiddens, num_layers)


class LSTMDecoder(Seq2SeqDecoder):
    """The book's decoder with ``nn.LSTM``; the context is the encoder's top-layer h."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.rnn = nn.LSTM(embed_size + num_hiddens, num_hiddens, num_layers)

    def init_state(self, enc_outputs, *args) -> Seq2SeqState:
        _, (h, c) = enc_outputs  # (L, B, H) each
        return Seq2SeqState((h, c), h[-1])

    def reorder_state(self, state, index, *, same_sources=False) -> Seq2SeqState:
        h, c = state.hidden
        if same_sources:
            check_same_rows(index, state.context.shape[0])
        context = state.context if same_sources else state.context.index_select(0, index)
        return Seq2SeqState((h.index_select(1, index), c.index_select(1, index)), context)


def build_seq2seq(data, *, cell: str = "gru", seed: int = 0, **sizes) -> EncoderDecoder:
    """The book's seq2seq (``cell="gru"``: attnkit's own modules) or its LSTM twin, with
    ``SIZES`` overridden by ``sizes``; parameters drawn after ``torch.manual_seed(seed)``."""
    cfg = {**SIZES, **sizes}
    enc_cls, dec_cls = {"gru": (Seq2SeqEncoder, Seq2SeqDecoder),
                        "lstm": (LSTMEncoder, LSTMDecoder)}[cell]  # fmt: skip
    torch.manual_seed(seed)
    return EncoderDecoder(enc_cls(len(data.src_vocab), **cfg), dec_cls(len(data.tgt_vocab), **cfg))


# ----------------------------------------------------------------------------- training


def _free_running_logits(
    model, src, src_len, bos: int, steps: int, reset_state: bool = False
) -> Tensor:
    """No teacher forcing: the decoder reads its own previous argmax, and its state is
    carried from step to step (the state returned by one step feeds the next).
    ``reset_state``: the widely copied wrong loop, which starts every step again from the
    encoder's state, so the decoder sees only its previous token and the context.
    src (B, S) -> logits (B, steps, V)."""
    start = state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    x = torch.full((src.shape[0], 1), bos, dtype=torch.long)  # (B, 1)
    out = []
    for _ in range(steps):
        logits, state = model.decoder(x, start if reset_state else state)  # (B, 1, V)
        out.append(logits)
        x = logits.argmax(-1).detach()  # (B, 1): the model's own prediction
    return torch.cat(out, dim=1)


def train_seq2seq(
    model,
    data,
    arrays: Arrays,
    *,
    epochs: int,
    seed: int,
    lr: float = 0.01,
    batch_size: int = 32,
    mask: bool = True,
    teacher_forcing: bool = True,
    reset_state: bool = False,
) -> list[float]:
    """Adam, gradient clipping at 1, the book's loss: token cross-entropies (padding
    weighted 0 when ``mask``, 1 when not) averaged over every position of the batch.
    Returns the masked training loss per epoch (mean over real tokens, always masked, so
    variants compare on the same quantity)."""
    bos = data.tgt_vocab["<bos>"]
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n, losses = arrays.src.shape[0], []
    model.train()
    for _ in range(epochs):
        total = tokens = 0.0
        for idx in torch.randperm(n, generator=g).split(batch_size):
            src, src_len = arrays.src[idx], arrays.src_len[idx]
            tgt, tgt_len = arrays.tgt[idx], arrays.tgt_len[idx]  # (B, T), (B,)
            if teacher_forcing:
                dec_in = torch.cat([torch.full((len(idx), 1), bos), tgt[:, :-1]], dim=1)
                logits, _ = model(src, dec_in, src_len)  # (B, T, V)
            else:
                logits = _free_running_logits(model, src, src_len, bos, tgt.shape[1], reset_state)
            per_token = nn.functional.cross_entropy(
                logits.transpose(1, 2), tgt, reduction="none"
            )  # (B, T)
            real = (torch.arange(tgt.shape[1])[None, :] < tgt_len[:, None]).float()
            weight = real if mask else torch.ones_like(real)
            loss = (per_token * weight).mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += float((per_token.detach() * real).sum())
            tokens += float(real.sum())
        losses.append(total / tokens)
    return losses


def val_bleu(model, data, *, beam: int | None = None, length_penalty: float = 0.0) -> float:
    """Corpus BLEU (0-100, the book's word tokens) of the validation split, greedy
    (``beam=None``) or beam search."""
    from attnkit.inference.evaluation import split_texts, translate_and_score
    from attnkit.metrics import bleu_from_stats

    sources, refs = split_texts(data, "val")
    model.eval()
    _, stats = translate_and_score(
        model, data, sources, refs, max_len=NUM_STEPS + 2, beam=beam,
        length_penalty=length_penalty,
    )  # fmt: skip
    return bleu_from_stats(stats)


def val_sentence_losses(model, data, *, shift_sources: int = 0) -> Tensor:
    """Teacher-forced mean cross-entropy of each validation sentence's target tokens
    (<eos> included, padding left out), (N,). ``shift_sources``: sentence i is given the
    source of sentence i + shift (cyclically), a wrong source of the same kind."""
    from attnkit.data.fra import build_array_nmt

    src, src_len = build_array_nmt([s for s, _ in data.val], data.src_vocab, NUM_STEPS)
    tgt, tgt_len = build_array_nmt([t for _, t in data.val], data.tgt_vocab, NUM_STEPS)
    src, src_len = src.roll(-shift_sources, 0), src_len.roll(-shift_sources, 0)
    dec_in = torch.cat([torch.full((len(src), 1), data.tgt_vocab["<bos>"]), tgt[:, :-1]], dim=1)
    model.eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(src, dec_in, src_len.long())[0], -1)  # (N, T, V)
    nll = -logp.gather(-1, tgt[..., None]).squeeze(-1)  # (N, T)
    real = (torch.arange(NUM_STEPS)[None, :] < tgt_len[:, None]).float()
    return (nll * real).sum(1) / real.sum(1)


def source_dependence(model, data) -> dict:
    """How much the model's predictions rest on the source: per validation sentence, the
    loss with the next sentence's source minus the loss with its own (``seed_summary``
    over the sentences: positive when the true source helps)."""
    from attnkit.tour.stats import seed_summary

    own = val_sentence_losses(model, data)
    wrong = val_sentence_losses(model, data, shift_sources=1)
    return seed_summary((wrong - own).tolist())
