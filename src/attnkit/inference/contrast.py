"""Contrastive evaluation: does the translator prefer the correct translation to a minimally
different wrong one (ContraPro, Müller et al. 2018; Lopes et al. 2020 for en-fr)?

A contrastive file is UTF-8 TSV with a header holding ``source``, ``correct`` and
``contrastive`` (other columns are kept with each row). Optional columns:

- ``antecedent``, ``distractor``: the two candidate words (or word groups) in the source;
  they enable the meaning-blind baselines by position and the head analysis
  (:mod:`attnkit.inference.contrast_heads`); ``pronoun``: the source pronoun (default
  ``it``), the first of its occurrences after both candidates (else the last);
- ``antecedent_target``, ``distractor_target``: the candidates' words in ``correct``, e.g.
  their noun phrases with the article (``la rue``): the decoder self-attention's keys in
  the head analysis;
- ``group``: per-group accuracy.

**Score**: the model's *summed* log-probability (natural log) of the tokenized target and
its ``<eos>``, teacher-forced: ``log p(y | x) = Σ_t log softmax(logits_t)[y_t]`` over the
whole target vocabulary (a Marian model's suppressed ids included), summed in float64.
The length-normalised variant (the sum divided by the target's tokens with ``<eos>``) is
reported beside it. **Accuracy** = the share of rows whose correct target scores strictly
higher; ties (equal scores) are counted and reported apart, so swapping the two columns
gives ``1 - accuracy - ties / n``. Intervals are Wilson score intervals at 95%.

**Baselines** (what a model ignoring meaning gets, derived from the columns):

- *masculine*: right on a row when its ``correct`` holds a masculine pronoun (``il``,
  ``ils``, also elided: ``qu'il``) that ``contrastive`` lacks, wrong when it holds a
  feminine one (``elle``, ``elles``) that ``contrastive`` lacks; rows with neither are left
  out of it;
- *first noun*: right when the antecedent comes before the distractor in the source;
- *nearest noun*: right when the antecedent is closer to the pronoun (in words; equal
  distances left out).

Bad input is one ``ValueError`` naming the file, the line and the column: a missing column,
an empty cell, identical targets (as text or as tokens), a candidate or pronoun not in the
source, a sentence over the model's limits, words the model does not know (word-level
models; ``allow_unknown`` scores them as ``<unk>``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from attnkit._validate import boolean
from attnkit.i18n import _
from attnkit.inference.contrast_rows import (
    ContrastRow,
    Rate,
    bare,
    check_rows,
    find_words,
    pronoun_index,
    read_contrast_tsv,
    rows_from_dicts,
    score_pairs,
    target_ids,
    wilson,
    words,
)

__all__ = [
    "ContrastReport",
    "ContrastRow",
    "Rate",
    "baselines",
    "check_rows",
    "evaluate_contrast",
    "read_contrast_tsv",
    "rows_from_dicts",
    "score_pairs",
    "target_ids",
    "wilson",
]

MASCULINE = frozenset({"il", "ils"})
FEMININE = frozenset({"elle", "elles"})


# ----------------------------------------------------------------------------- report


def baselines(rows: list[ContrastRow]) -> dict[str, Rate]:
    """What a model ignoring meaning gets on ``rows`` (see the module docstring): ``masculine``,
    ``first`` and ``nearest``, each over the rows it applies to."""
    masc = [0, 0]
    first = [0, 0]
    near = [0, 0]
    for row in rows:
        gained = set(map(bare, words(row.correct))) - set(map(bare, words(row.contrastive)))
        if gained & MASCULINE and not gained & FEMININE:
            masc = [masc[0] + 1, masc[1] + 1]
        elif gained & FEMININE and not gained & MASCULINE:
            masc[1] += 1
        if not row.antecedent:
            continue
        tokens = [bare(w) for w in words(row.source)]
        a, d = find_words(tokens, row.antecedent), find_words(tokens, row.distractor)
        p = pronoun_index(tokens, row.pronoun, max(a, d) + 1)
        first = [first[0] + (a < d), first[1] + 1]
        if abs(a - p) != abs(d - p):
            near = [near[0] + (abs(a - p) < abs(d - p)), near[1] + 1]
    return {"masculine": Rate(*masc), "first": Rate(*first), "nearest": Rate(*near)}


@dataclass
class ContrastReport:
    """What :func:`evaluate_contrast` measured. ``scores``: per row (correct, contrastive)
    summed log-probabilities; ``lengths``: their tokens with ``<eos>``."""

    where: str
    rows: list[ContrastRow]
    scores: list[tuple[float, float]]
    lengths: list[tuple[int, int]]
    baselines: dict[str, Rate]
    heads: dict | None = None  # contrast_heads.head_analysis's
    ablation: dict | None = None  # contrast_heads.ablation's

    @property
    def n(self) -> int:
        return len(self.rows)

    def outcomes(self, normalised: bool = False) -> list[int]:
        """Per row: 1 correct scores higher, 0 a tie, -1 the contrastive scores higher."""
        out = []
        for (c, w), (lc, lw) in zip(self.scores, self.lengths):
            if normalised:
                c, w = c / lc, w / lw
            out.append((c > w) - (c < w))
        return out

    def accuracy(self, normalised: bool = False) -> Rate:
        return Rate(sum(o == 1 for o in self.outcomes(normalised)), self.n)

    def ties(self, normalised: bool = False) -> int:
        return sum(o == 0 for o in self.outcomes(normalised))

    @property
    def mean_margin(self) -> float:
        """Mean of correct - contrastive summed log-probability (nats)."""
        return sum(c - w for c, w in self.scores) / self.n

    def groups(self) -> dict[str, Rate]:
        """Accuracy per value of the ``group`` column (rows without one left out)."""
        found: dict[str, list[int]] = {}
        for row, o in zip(self.rows, self.outcomes()):
            if row.group:
                found.setdefault(row.group, []).append(o)
        return {g: Rate(sum(o == 1 for o in os_), len(os_)) for g, os_ in sorted(found.items())}

    def to_json(self) -> dict:
        """Plain data: what ``attnkit translate contrast --json`` prints."""
        acc, norm = self.accuracy(), self.accuracy(True)
        return {
            "file": self.where,
            "rows": self.n,
            "score": "summed log-probability (nats) of the target tokens and <eos>",
            "accuracy": acc.to_json(),
            "ties": self.ties(),
            "mean_margin": self.mean_margin,
            "length_normalised": {**norm.to_json(), "ties": self.ties(True)},
            "groups": {g: r.to_json() for g, r in self.groups().items()},
            "baselines": {k: r.to_json() for k, r in self.baselines.items()},
            "heads": self.heads,
            "ablation": self.ablation,
            "items": [
                {**row.fields, "line": row.line, "score_correct": c, "score_contrastive": w}
                for row, (c, w) in zip(self.rows, self.scores)
            ],
        }


def evaluate_contrast(
    translator,
    pairs: str | os.PathLike | list[ContrastRow],
    *,
    heads: bool = True,
    ablation: bool = True,
    batch_size: int = 64,
    allow_unknown: bool = False,
) -> ContrastReport:
    """Score every row of ``pairs`` (a contrastive file, or rows) with ``translator`` (an
    ``attnkit.inference.translator.Translator``); with ``heads`` and a Transformer (or a
    Bahdanau model) the head analysis of the rows with candidates, with ``ablation`` and a
    Transformer each head's ablation (:mod:`attnkit.inference.contrast_heads`)."""
    from attnkit.inference import contrast_heads

    boolean("heads", heads)
    boolean("ablation", ablation)
    if isinstance(pairs, list):  # checked as a file's rows
        where = "<rows>"
        cells = [(r.line or i + 2, r.cells()) for i, r in enumerate(pairs)]
        columns = list(dict.fromkeys(k for _, c in cells for k in c))
        rows = rows_from_dicts(cells, columns, where)
    else:
        rows, where = read_contrast_tsv(pairs), str(pairs)
    if not rows:
        raise ValueError(_("{file}: no rows after the header").format(file=where))
    ids = check_rows(translator, rows, where, allow_unknown=allow_unknown)
    flat = score_pairs(translator.model, translator.data,
                       [r.source for r in rows for _ in range(2)],
                       [t for pair in ids for t in pair], batch_size)  # fmt: skip
    report = ContrastReport(
        where, rows, list(zip(flat[::2], flat[1::2])),
        [(len(c) + 1, len(w) + 1) for c, w in ids], baselines(rows),
    )  # fmt: skip
    if heads and any(r.antecedent for r in rows):
        report.heads = contrast_heads.head_analysis(translator, rows, ids)
    if ablation and contrast_heads.transformer_heads(translator.model):
        report.ablation = contrast_heads.ablation(
            translator,
            rows,
            ids,
            report,
            best=(report.heads or {}).get("best"),
            batch_size=batch_size,
        )
    return report
