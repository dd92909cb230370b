"""Batched beam search over any attnkit encoder-decoder, and the inputs every search takes.

Shape legend: N sentences, k beam size, V target vocabulary, S source length.

Uses only the generic model interface (``encoder``, ``decoder.init_state``,
``decoder(X, state)`` one step at a time, ``decoder.reorder_state``), so it works
for the GRU models and the Transformer (whose state carries a key/value cache).

Hypotheses are ranked by log-probability divided by the GNMT length penalty
``((5 + |y|) / 6) ** alpha``; ``alpha = 0`` ranks by raw log-probability, and a
beam of size 1 is exactly greedy decoding.

One decoder call per step serves every sentence and every beam, and only what can still
change costs a decoder row. A hypothesis has a row while it is *live*: unfinished, with a
finite log-probability (the first step has one row per sentence: beam 0, the others do
not exist yet). A finished hypothesis keeps its place among its sentence's k best at its
log-probability (its only continuation is a free ``<eos>``) without a row, and a sentence
leaves the bookkeeping, its k hypotheses written out, once none of its hypotheses is
live: nothing about it can change any more. Each step, every live hypothesis proposes
its own k best continuations (only those can be among its sentence's k best), one
``topk`` per sentence picks the k survivors, and ``decoder.reorder_state`` gathers their
rows (the key/value caches of the Transformer, the GRU state of the Bahdanau decoder).
The results are those of one sentence searched alone, ranked by the same float sums, so
the same as keeping every row of a batch until its last sentence ends (tested against a
per-sentence reference), at the cost of the rows that still matter
(``benchmarks/models/decode_speed.py`` counts them).

:func:`check_decode_inputs` lives here, below ``attnkit.inference.decoding`` (greedy
decoding and the one ``translate``), which imports this module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnkit._validate import boolean, integer, positive_int, real, source_batch
from attnkit.cpu_memory import keep_large_blocks
from attnkit.i18n import _
from attnkit.inference.eval_mode import evaluating
from attnkit.inference.row_top import row_topk
from attnkit.inference.shortlist import OutputColumns, Shortlist
from attnkit.models.seq2seq import EncoderDecoder

__all__ = ["BeamHypothesis", "BeamSearch", "check_decode_inputs", "check_suppress"]


def check_decode_inputs(model: nn.Module, src: Tensor, src_len: Tensor, max_len: int) -> None:
    """Raise unless ``model`` is an encoder-decoder and ``src``/``src_len``/``max_len`` fit.

    Args:
        model: anything with ``.encoder`` and ``.decoder`` (an ``EncoderDecoder``).
        src: source token ids, padded.
        src_len: the valid length of each row of ``src``.
        max_len: the most target steps, ``<eos>`` included (>= 1).

    Shape:
        src: (B, S) long; src_len: (B,).

    Raises:
        TypeError: a model without ``encoder``/``decoder``, tensors that are not tensors,
            a ``src`` that is not long, a ``max_len`` that is not an int.
        ValueError: a ``src`` that is not 2-D, a ``src_len`` not of shape (B,), a
            ``max_len`` below 1.
    """
    for name in ("encoder", "decoder"):
        if not hasattr(model, name):
            message = _("model must be an EncoderDecoder with .{name}, got {type}")
            raise TypeError(message.format(name=name, type=type(model).__name__))
    source_batch(src, src_len)
    positive_int("max_len", max_len)


def check_suppress(suppress: object, eos: int) -> tuple[int, ...]:
    """``suppress`` (a sequence of target ids decoding never emits) as a sorted tuple of
    ints >= 0; ``eos`` cannot be one of them (nothing could end)."""
    if isinstance(suppress, str | bytes) or not hasattr(suppress, "__iter__"):
        message = _("suppress must be a sequence of token ids, got {type}")
        raise TypeError(message.format(type=type(suppress).__name__))
    ids = tuple(sorted({integer("suppress", i, minimum=0) for i in suppress}))
    if eos in ids:
        message = _("suppress must not hold the <eos> id {eos}: no sentence could end")
        raise ValueError(message.format(eos=eos))
    return ids


@dataclass(frozen=True)
class BeamHypothesis:
    tokens: list[int]  # target ids, without <bos> and <eos>
    log_prob: float  # sum of token log-probabilities (<eos> included when finished)
    score: float  # log_prob / length penalty: what hypotheses are ranked by
    finished: bool  # ended with <eos> (False: stopped at max_len)


class BeamSearch:
    """``BeamSearch(beam_size, max_len, bos, eos)(model, src, src_len)``.

    Args:
        beam_size: hypotheses kept per sentence (k >= 1).
        max_len: most target tokens generated per sentence (<eos> included, >= 1).
        bos, eos: the target vocabulary's ids of ``<bos>`` and ``<eos>`` (ints >= 0).
        length_penalty: GNMT alpha (0 = none; a finite number >= 0).
        suppress: target ids never proposed (their log-probabilities set to -inf after the
            log-softmax, as Hugging Face's ``bad_words_ids``; Marian's pad).
        force_eos: at the last step, only ``<eos>`` continues a hypothesis, at no cost (its
            log-probability counted as 0, as transformers' ``forced_eos_token_id``).
        shortlist: a :class:`~attnkit.inference.shortlist.Shortlist`: each batch searches
            its shortlisted words only (the softmax renormalized over them).

    Shape:
        call: src (N, S) long, src_len (N,) -> N lists of k hypotheses.

    Raises:
        TypeError / ValueError: an argument of the wrong type / value (``attnkit._validate``).
    """

    def __init__(
        self,
        beam_size: int,
        max_len: int,
        bos: int,
        eos: int,
        length_penalty: float = 0.0,
        *,
        suppress: tuple[int, ...] | list[int] = (),
        force_eos: bool = False,
        shortlist: Shortlist | None = None,
    ) -> None:
        self.beam_size = positive_int("beam_size", beam_size)
        self.max_len = positive_int("max_len", max_len)
        self.bos = integer("bos", bos, minimum=0)
        self.eos = integer("eos", eos, minimum=0)
        self.length_penalty = real("length_penalty", length_penalty, at_least=0.0)
        self.suppress = check_suppress(suppress, self.eos)
        self.force_eos = boolean("force_eos", force_eos)
        if shortlist is not None and not isinstance(shortlist, Shortlist):
            message = _("shortlist must be a Shortlist or None, got {type}")
            raise TypeError(message.format(type=type(shortlist).__name__))
        self.shortlist = shortlist

    def _penalty(self, length: Tensor) -> Tensor:
        return ((5.0 + length) / 6.0) ** self.length_penalty

    @torch.no_grad()
    def __call__(
        self,
        model: EncoderDecoder,
        src: Tensor,  # (N, S) token ids
        src_len: Tensor,  # (N,)
    ) -> list[list[BeamHypothesis]]:
        """Per sentence, its ``beam_size`` hypotheses, best first (model in eval mode).

        Args:
            model: an ``EncoderDecoder``; evaluated in eval mode, its mode restored after.
            src: source ids, padded; src_len: each row's valid length.

        Shape:
            src: (N, S) long; src_len: (N,).

        Returns:
            N lists of ``beam_size`` :class:`BeamHypothesis`, in the order of ``src``'s rows.
        """
        check_decode_inputs(model, src, src_len, self.max_len)
        columns = OutputColumns.of(self.shortlist, model, src, src_len, self.eos)
        if src.device.type == "cpu":
            keep_large_blocks()  # the logits' blocks re-used, not mapped afresh (cpu_memory)
        # eval: no dropout, the same input always gives the same beams
        with evaluating(model), columns.restricting(model.decoder):
            return self._search(model, src, src_len, columns)

    def _search(
        self, model: EncoderDecoder, src: Tensor, src_len: Tensor, columns: OutputColumns
    ) -> list[list[BeamHypothesis]]:
        N, k, T, eos = src.shape[0], self.beam_size, self.max_len, self.eos
        device = src.device
        decoder = model.decoder
        keeps_sources = _takes_same_sources(decoder)
        state = decoder.init_state(model.encoder(src, src_len), src_len)  # N rows: beam 0 each
        # Bookkeeping of the n live sentences, (n, k) each; a hypothesis is "live" (has a
        # decoder row) when it is unfinished and its log-probability is finite.
        sent = torch.arange(N, device=device)  # original index of each live sentence (n,)
        log_prob = torch.full((N, k), float("-inf"), device=device)
        log_prob[:, 0] = 0.0  # only beam 0 exists at the start: the k beams differ
        finished = torch.zeros(N, k, dtype=torch.bool, device=device)
        lengths = torch.zeros(N, k, device=device)  # tokens generated, <eos> included
        tokens = torch.empty(N, k, 0, dtype=torch.long, device=device)  # (n, k, t)
        live = finished.clone()
        live[:, 0] = True  # which hypotheses have a decoder row, rows in (n, k) order
        X = torch.full((N, 1), self.bos, dtype=torch.long, device=device)  # (R, 1)
        # the results, written when a sentence completes (or at the step limit)
        out_tokens = torch.full((N, k, T), eos, dtype=torch.long, device=device)
        out_lp = torch.empty(N, k, device=device)
        out_len = torch.empty(N, k, device=device)
        out_fin = torch.empty(N, k, dtype=torch.bool, device=device)
        row_sentence = sent[live.nonzero()[:, 0]]  # (R,): each decoder row's sentence
        suppress = columns.positions(self.suppress)  # logits' columns of the ids
        banned = torch.tensor(suppress, dtype=torch.long, device=device)
        forced = torch.tensor(columns.positions((eos,)), dtype=torch.long, device=device)
        for t in range(T):
            logits, state = decoder(X, state)  # (R, 1, V): live hypotheses only
            n, c = log_prob.shape[0], min(k, logits.shape[-1])
            # Candidates, c per hypothesis (only a hypothesis's own c best can be among its
            # sentence's k best): a live one's best continuations, a finished one's free
            # <eos> continuation alone, none (-inf) for a dead one.
            value, word = self._best_continuations(logits[:, -1], log_prob[live], c, t,
                                                   banned, forced)  # fmt: skip
            word = columns.ids(word)  # columns -> target ids
            cand = torch.full((n, k, c), float("-inf"), device=device)
            cand_word = torch.full((n, k, c), eos, dtype=torch.long, device=device)
            cand[live], cand_word[live] = value, word
            cand[..., 0] = torch.where(finished, log_prob, cand[..., 0])
            log_prob, flat = cand.view(n, k * c).topk(k, dim=-1)  # (n, k)
            origin, token = flat // c, cand_word.view(n, k * c).gather(1, flat)
            from_row = _row_numbers(live).gather(1, origin)  # decoder row of the origin
            finished = finished.gather(1, origin)
            lengths = lengths.gather(1, origin) + (~finished).float()
            index = origin[..., None].expand(-1, -1, tokens.shape[2])
            tokens = torch.cat([tokens.gather(1, index), token[..., None]], dim=2)
            finished = finished | (token == eos)
            live = ~finished & (log_prob > float("-inf"))  # (n, k)
            done = ~live.any(dim=1)  # (n,): nothing can change any more
            if t == T - 1:
                done = torch.ones_like(done)
            if bool(done.any()):
                idx = sent[done]
                out_tokens[idx, :, : t + 1] = tokens[done]
                for out, value in ((out_lp, log_prob), (out_len, lengths), (out_fin, finished)):
                    out[idx] = value[done]
                keep = ~done
                if not bool(keep.any()):
                    break
                sent, log_prob, finished = sent[keep], log_prob[keep], finished[keep]
                lengths, tokens, live, token = lengths[keep], tokens[keep], live[keep], token[keep]
                from_row = from_row[keep]
            # (R',): finished rows leave. When every row still decodes the sentence it did,
            # the encoder side of the state stays as it is (no copy of it per step).
            index, previous = from_row[live], row_sentence
            row_sentence = sent[live.nonzero()[:, 0]]  # (R',): the next step's rows
            if keeps_sources and torch.equal(previous, row_sentence):
                state = decoder.reorder_state(state, index, same_sources=True)
            else:
                state = decoder.reorder_state(state, index)
            X = token[live][:, None]  # (R', 1)
        return self._hypotheses(out_tokens, out_lp, out_len, out_fin)

    def _best_continuations(
        self, logits: Tensor, log_prob: Tensor, c: int, t: int, banned: Tensor, forced: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Each live hypothesis's c best continuations: (R, c) log-probabilities of the
        hypothesis so far plus the word's, and the words' columns. logits (R, V), log_prob
        (R,).

        A hypothesis's own log-probability shifts its whole row, so its best words are the
        row's best log-softmax values: a top-k runs on the (R, V) log-softmax and the
        shift is added to the c values it keeps, not to every word (one (R, V) tensor
        fewer per step: 61 MB at beam 4 x 64 sentences x 59,514 words). The log-softmax
        overwrites the logits, which nothing reads after (2026-12-07, 256 x 59,514 on the
        2-core EPYC: 4.8 ms in place, 7.1 ms into a new tensor)."""
        step = logits.float().contiguous()  # (R, V): this step's own logits
        torch._log_softmax(step, -1, False, out=step)  # in place (the logits are not read again)
        if banned.numel():  # after the softmax, as Hugging Face's bad_words_ids
            step.index_fill_(-1, banned, float("-inf"))
        if self.force_eos and t == self.max_len - 1:  # only <eos>, free
            step = torch.full_like(step, float("-inf")).index_fill_(-1, forced, 0.0)
        value, word = row_topk(step, c)  # (R, c), as step.topk(c) (row_top)
        return log_prob[:, None] + value, word

    def _hypotheses(
        self,
        tokens: Tensor,  # (N, k, T) long, <eos>-padded
        log_prob: Tensor,  # (N, k)
        lengths: Tensor,  # (N, k): tokens generated, <eos> included
        finished: Tensor,  # (N, k) bool
    ) -> list[list[BeamHypothesis]]:
        """Per sentence, its k hypotheses best first (one host copy, then plain lists)."""
        score = log_prob / self._penalty(lengths)  # (N, k)
        order = score.argsort(dim=1, descending=True)
        tokens = tokens.gather(1, order[..., None].expand_as(tokens)).tolist()
        columns = [x.gather(1, order).tolist() for x in (log_prob, score, finished)]
        out: list[list[BeamHypothesis]] = []
        for seqs, lps, scores, ends in zip(tokens, *columns, strict=True):
            hyps = []
            for seq, lp, sc, end in zip(seqs, lps, scores, ends, strict=True):
                if self.eos in seq:
                    seq = seq[: seq.index(self.eos)]
                hyps.append(BeamHypothesis(seq, lp, sc, bool(end)))
            out.append(hyps)
        return out


def _takes_same_sources(decoder) -> bool:
    """Whether ``decoder.reorder_state`` takes ``same_sources`` (attnkit's decoders do;
    a decoder written before it, or elsewhere, gets the plain two-argument call)."""
    try:
        return "same_sources" in inspect.signature(decoder.reorder_state).parameters
    except (TypeError, ValueError):
        return False


def _row_numbers(live: Tensor) -> Tensor:
    """live (n, k) bool -> (n, k): each live hypothesis's decoder row, rows numbered in
    (n, k) order (the value at a hypothesis that is not live is not used)."""
    return live.view(-1).cumsum(0).view(live.shape) - 1
