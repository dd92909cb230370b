"""A vocabulary shortlist: the output layer restricted to the target words likely for a
batch's source words (Marian's lexical shortlist, CTranslate2's vocabulary map).

Shape legend: B batch, S source length, V_src / V_tgt the vocabularies, K the words kept
per source word, F the always-kept frequent words, W the words of one batch's shortlist.

Learned from a parallel corpus by co-occurrence: for each pair, every distinct source id
meets every distinct target id once. A source word s keeps the K target words t with the
highest Dice coefficient 2 c(s, t) / (c(s) + c(t)) among those seen with it at least
``min_count`` times; the F most frequent target words are kept for every batch (function
words, punctuation, ``<eos>``). Dice, not p(t | s): p(t | s) ranks the frequent words
first, which the F words already hold, where Dice ranks a word's translations first.

Decoding with a shortlist (``greedy_decode``/``BeamSearch``/``translate`` take
``shortlist=``): the batch's words W (sorted ids: the union of its source words' lists, the
frequent words and ``<eos>``) are chosen once per batch, the decoder's output layer keeps
their W rows for that batch (an ``Int8Linear`` its int8 rows, :meth:`Int8Linear.rows`), and
the search runs over W columns: the softmax is renormalized over W, as Marian's and
CTranslate2's are, so a translation can change even where every word it chose is in W
(beam scores), besides the words W lacks. ``benchmarks/models/shortlist.py`` measures the
speed and how many outputs change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import non_negative_int, output_rows, positive_int, source_batch
from attnkit.i18n import _
from attnkit.inference.int8 import Int8Linear

__all__ = ["OutputColumns", "Shortlist", "restricted_output"]

_FORMAT = "attnkit-shortlist-1"


class Shortlist:
    """Per source id, the target ids to keep (``table`` (V_src, K) long, -1 where a source
    word has fewer), plus ``frequent`` (F,) target ids kept for every batch, over a target
    vocabulary of ``tgt_vocab_size`` ids. Build one with :meth:`learn`, or :meth:`load`."""

    def __init__(self, table: Tensor, frequent: Tensor, tgt_vocab_size: int) -> None:
        self.tgt_vocab_size = positive_int("tgt_vocab_size", tgt_vocab_size)
        for name, t, dims in (("table", table, 2), ("frequent", frequent, 1)):
            if not isinstance(t, Tensor) or t.dim() != dims or t.dtype != torch.long:
                message = _("{name} must be a {dims}-D long tensor, got {what}")
                what = (t.dtype, tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__
                raise TypeError(message.format(name=name, dims=dims, what=what))
            if t.numel() and not (-1 <= int(t.min()) and int(t.max()) < tgt_vocab_size):
                message = _("{name} must hold target ids in [0, {size}) (or -1), got [{lo}, {hi}]")
                raise ValueError(
                    message.format(name=name, size=tgt_vocab_size, lo=int(t.min()), hi=int(t.max()))
                )
        self.table, self.frequent = table, frequent

    @classmethod
    def learn(
        cls,
        sources: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]],
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        per_source: int = 50,
        frequent: int = 100,
        min_count: int = 2,
    ) -> Shortlist:
        """Learn from parallel sentences as ids (``sources[i]`` translates to
        ``targets[i]``): each source id's ``per_source`` best target ids by Dice among
        those met ``min_count`` times or more, and the ``frequent`` most frequent target ids
        (counted once per sentence)."""
        src_vocab_size = positive_int("src_vocab_size", src_vocab_size)
        tgt_vocab_size = positive_int("tgt_vocab_size", tgt_vocab_size)
        per_source = positive_int("per_source", per_source)
        frequent = non_negative_int("frequent", frequent)
        min_count = positive_int("min_count", min_count)
        _check_pairs(sources, targets)
        keys, src_count, tgt_count = _cooccurrences(
            sources, targets, src_vocab_size, tgt_vocab_size
        )
        pair, count = torch.unique(keys, return_counts=True)  # (P,) s * V_tgt + t, c(s, t)
        s, t = pair // tgt_vocab_size, pair % tgt_vocab_size
        dice = 2 * count / (src_count[s] + tgt_count[t])  # (P,) float64
        dice = torch.where(count >= min_count, dice, -1.0)
        order = torch.argsort(dice, descending=True, stable=True)
        order = order[torch.argsort(s[order], stable=True)]  # by source id, best first within
        s, t, dice = s[order], t[order], dice[order]
        first = torch.searchsorted(s, s)  # each entry's group start
        rank = torch.arange(len(s)) - first
        kept = (rank < per_source) & (dice > 0)
        table = torch.full((src_vocab_size, per_source), -1, dtype=torch.long)
        table[s[kept], rank[kept]] = t[kept]
        top = torch.argsort(tgt_count, descending=True, stable=True)[:frequent]
        top = top[tgt_count[top] > 0]
        return cls(table, top.sort().values, tgt_vocab_size)

    def words(self, src: Tensor, src_len: Tensor, keep: Sequence[int] = ()) -> Tensor:
        """The sorted target ids W (W,) long for a batch: its source words' lists, the
        frequent words and ``keep`` (``<eos>``). src (B, S) long, src_len (B,)."""
        source_batch(src, src_len)
        valid = torch.arange(src.shape[1], device=src.device) < src_len[:, None]  # (B, S)
        ids = src[valid].cpu()
        if int(ids.numel()) and (int(ids.min()) < 0 or int(ids.max()) >= self.table.shape[0]):
            message = _("src holds ids in [{lo}, {hi}], outside the shortlist's [0, {size})")
            raise ValueError(
                message.format(lo=int(ids.min()), hi=int(ids.max()), size=self.table.shape[0])
            )
        chosen = torch.zeros(self.tgt_vocab_size + 1, dtype=torch.bool)  # the last: -1's
        chosen[self.table[ids.unique()].reshape(-1)] = True
        chosen[-1] = False
        chosen[self.frequent] = True
        chosen[torch.tensor(list(keep), dtype=torch.long)] = True
        return chosen[:-1].nonzero().squeeze(1).to(src.device)  # (W,)

    def coverage(
        self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
        keep: Sequence[int] = (), batch: int = 64,
    ) -> tuple[float, float, float]:  # fmt: skip
        """What it keeps on parallel sentences as ids: the mean words per sentence, per
        ``batch`` consecutive sentences, and the share of the targets' ids that are among
        their own sentence's words."""
        batch = positive_int("batch", batch)
        _check_pairs(sources, targets)

        def words(rows):
            lengths = torch.tensor([len(r) for r in rows])
            ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
            for i, r in enumerate(rows):
                ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            return self.words(ids, lengths, keep)

        sizes, covered, total = 0, 0, 0
        for src, tgt in zip(sources, targets, strict=True):
            kept = set(words([src]).tolist())
            sizes += len(kept)
            covered += sum(t in kept for t in tgt)
            total += len(tgt)
        per_batch = [len(words(sources[i : i + batch])) for i in range(0, len(sources), batch)]
        return sizes / len(sources), sum(per_batch) / len(per_batch), covered / max(total, 1)

    def save(self, path: str | Path) -> None:
        torch.save(
            {"format": _FORMAT, "table": self.table, "frequent": self.frequent,
             "tgt_vocab_size": self.tgt_vocab_size},
            Path(path),
        )  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> Shortlist:
        """A shortlist :meth:`save` wrote; a clear ValueError for any other file."""
        path = Path(path)
        if not path.is_file():
            message = _("no shortlist file at {path}")
            raise ValueError(message.format(path=path))
        try:
            saved = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # a file torch cannot read: say which
            message = _("{path} is not a shortlist file ({error})")
            raise ValueError(message.format(path=path, error=error)) from None
        if not isinstance(saved, dict) or saved.get("format") != _FORMAT:
            message = _("{path} is not a shortlist file ({error})")
            raise ValueError(message.format(path=path, error=_FORMAT))
        return cls(saved["table"], saved["frequent"], saved["tgt_vocab_size"])

    def __repr__(self) -> str:
        return (
            f"Shortlist(sources={self.table.shape[0]}, per_source={self.table.shape[1]}, "
            f"frequent={self.frequent.numel()}, tgt_vocab_size={self.tgt_vocab_size})"
        )


def _check_pairs(sources, targets) -> None:
    """Parallel sentences as ids: two equal, non-empty lists of id lists."""
    for name, value in (("sources", sources), ("targets", targets)):
        if not isinstance(value, Sequence) or isinstance(value, str | bytes):
            message = _("{name} must be a list of id lists, got {type}")
            raise TypeError(message.format(name=name, type=type(value).__name__))
    if len(sources) != len(targets) or not sources:
        message = _("sources and targets must be equal, non-empty lists, got {n} and {m}")
        raise ValueError(message.format(n=len(sources), m=len(targets)))


def _cooccurrences(sources, targets, src_vocab_size: int, tgt_vocab_size: int):
    """Every (source id, target id) meeting in a pair, once per pair, as keys
    s * V_tgt + t (P_all,) int64; and c(s), c(t): the sentences holding each id."""
    keys, src_count = [], torch.zeros(src_vocab_size, dtype=torch.float64)
    tgt_count = torch.zeros(tgt_vocab_size, dtype=torch.float64)
    for i, (src, tgt) in enumerate(zip(sources, targets, strict=True)):
        s, t = torch.tensor(sorted(set(src))), torch.tensor(sorted(set(tgt)))
        if not (len(s) and len(t)):
            continue
        if s[0] < 0 or s[-1] >= src_vocab_size or t[0] < 0 or t[-1] >= tgt_vocab_size:
            message = _("pair {i} holds ids outside the vocabularies ({src}, {tgt})")
            raise ValueError(message.format(i=i, src=src_vocab_size, tgt=tgt_vocab_size))
        src_count[s] += 1
        tgt_count[t] += 1
        keys.append((s[:, None] * tgt_vocab_size + t[None, :]).reshape(-1))
    return torch.cat(keys), src_count, tgt_count


class _RowsLinear(nn.Module):
    """A float output layer's rows ``ids``: weight (W, D), bias (W,) or None."""

    def __init__(self, dense: nn.Module, ids: Tensor) -> None:
        super().__init__()
        self.weight = dense.weight.detach()[ids]
        self.bias = None if dense.bias is None else dense.bias.detach()[ids]

    def forward(self, x: Tensor) -> Tensor:  # (..., D) -> (..., W)
        return F.linear(x, self.weight, self.bias)


@contextlib.contextmanager
def restricted_output(decoder: nn.Module, ids: Tensor) -> Iterator[None]:
    """Within the block, ``decoder.dense`` (its output layer) computes the logits of the
    target ids ``ids`` (W,) only, in that order: (..., W) where it gave (..., V_tgt)."""
    dense = getattr(decoder, "dense", None)
    if not isinstance(dense, nn.Linear | Int8Linear):
        message = _("a shortlist needs a decoder whose output layer .dense is linear, got {type}")
        raise TypeError(message.format(type=type(dense).__name__))
    output_rows(ids, dense.out_features)
    rows = dense.rows(ids) if isinstance(dense, Int8Linear) else _RowsLinear(dense, ids)
    decoder.dense = rows.train(dense.training)  # eval: the decoder's lean step still applies
    try:
        yield
    finally:
        decoder.dense = dense


class OutputColumns:
    """Which target id each column of the decoder's logits is during one decoding call:
    every id (``words`` None, no shortlist) or the batch's shortlisted words (W,)."""

    def __init__(self, words: Tensor | None = None) -> None:
        self.words = words

    @classmethod
    def of(cls, shortlist: Shortlist | None, model: nn.Module, src: Tensor, src_len: Tensor,
           eos: int) -> OutputColumns:  # fmt: skip
        """The columns for decoding ``src`` (B, S) with ``shortlist`` (or None)."""
        if shortlist is None:
            return cls()
        if not isinstance(shortlist, Shortlist):
            message = _("shortlist must be a Shortlist or None, got {type}")
            raise TypeError(message.format(type=type(shortlist).__name__))
        out = getattr(getattr(model.decoder, "dense", None), "out_features", None)
        if out != shortlist.tgt_vocab_size:
            message = _(
                "the shortlist is for {size} target ids, the model's output layer has {out}"
            )
            raise ValueError(message.format(size=shortlist.tgt_vocab_size, out=out))
        return cls(shortlist.words(src, src_len, keep=(eos,)))

    def restricting(self, decoder: nn.Module) -> contextlib.AbstractContextManager:
        """The decoder's output layer restricted to the columns' words (or left as it is)."""
        if self.words is None:
            return contextlib.nullcontext()
        return restricted_output(decoder, self.words)

    def positions(self, ids: Sequence[int]) -> tuple[int, ...]:
        """The columns of those of ``ids`` that have one (suppressed ids, ``<eos>``)."""
        if self.words is None:
            return tuple(ids)
        wanted = torch.tensor(list(ids), dtype=torch.long, device=self.words.device)
        at = torch.searchsorted(self.words, wanted).clamp_(max=len(self.words) - 1)
        return tuple(at[self.words[at] == wanted].tolist())

    def ids(self, columns: Tensor) -> Tensor:
        """Column numbers (any shape) -> the target ids they stand for."""
        return columns if self.words is None else self.words[columns]
