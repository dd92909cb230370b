"""The contrastive file's rows: how they are read, checked and scored; rates and intervals.

See :mod:`attnkit.inference.contrast` for the format (UTF-8 TSV, a header holding
``source``, ``correct``, ``contrastive``; optional ``antecedent``, ``distractor``,
``pronoun``, ``antecedent_target``, ``distractor_target``, ``group``; other columns kept)
and for what is measured. Every error is one ``ValueError`` naming the file, the line and
the column: :func:`read_contrast_tsv` checks what needs no model, :func:`check_rows` the
rest against the model (its limits and vocabulary). :func:`score_pairs` is the one scorer.
Words are compared lower-cased, outer punctuation and an elided French prefix (``l'``,
``qu'`` ...) off: ``l'animal`` is the word ``animal``, ``qu'il`` the word ``il``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnkit._validate import boolean, positive_int
from attnkit.i18n import _

__all__ = [
    "REQUIRED",
    "ContrastRow",
    "Rate",
    "bad_cell",
    "bare",
    "check_rows",
    "find_words",
    "pronoun_index",
    "read_contrast_tsv",
    "rows_from_dicts",
    "score_pairs",
    "target_ids",
    "wilson",
    "words",
]

REQUIRED = ("source", "correct", "contrastive")
_WORD = re.compile(r"[\w'’-]+")
_ELIDED = re.compile(r"^(?:[ldjmnstc]|qu|jusqu|lorsqu|puisqu)['’]")


@dataclass(frozen=True)
class ContrastRow:
    """One row of a contrastive file; ``line`` is its line in the file (1: the header)."""

    source: str
    correct: str
    contrastive: str
    line: int = 0
    antecedent: str = ""
    distractor: str = ""
    pronoun: str = "it"
    antecedent_target: str = ""
    distractor_target: str = ""
    group: str = ""
    fields: dict[str, str] = field(default_factory=dict)  # every column, as read

    def cells(self) -> dict[str, str]:
        """The row as a file's cells: ``fields`` and the named columns that are set."""
        named = {"source": self.source, "correct": self.correct,
                 "contrastive": self.contrastive, "antecedent": self.antecedent,
                 "distractor": self.distractor, "antecedent_target": self.antecedent_target,
                 "distractor_target": self.distractor_target, "group": self.group}  # fmt: skip
        if self.pronoun != "it":
            named["pronoun"] = self.pronoun
        return {**self.fields, **{k: v for k, v in named.items() if v or k in REQUIRED}}


def read_contrast_tsv(path: str | os.PathLike) -> list[ContrastRow]:
    """The rows of the contrastive file at ``path`` (see the module docstring), checked
    for what needs no model: columns, empty cells, identical targets, candidates and the
    pronoun in the source, the target candidates in ``correct``."""
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    texts = []
    for number, data in enumerate(lines, 1):
        try:
            texts.append(data.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as e:
            message = _("{file} line {line}: not UTF-8 (byte {byte} of the line)")
            raise ValueError(message.format(file=path, line=number, byte=e.start + 1)) from None
    if texts and texts[0].startswith("\ufeff"):
        texts[0] = texts[0][1:]
    if not texts or not texts[0].strip():
        message = _("{file} line 1: no header (it must name the columns {columns})")
        raise ValueError(message.format(file=path, columns=", ".join(REQUIRED)))
    header = [c.strip() for c in texts[0].split("\t")]
    dicts = []
    for number, text in enumerate(texts[1:], 2):
        if not text.strip():
            continue
        cells = text.split("\t")
        if len(cells) != len(header):
            message = _("{file} line {line}: {found} fields where the header has {expected}")
            raise ValueError(
                message.format(file=path, line=number, found=len(cells), expected=len(header))
            )
        dicts.append((number, dict(zip(header, (c.strip() for c in cells)))))
    return rows_from_dicts(dicts, header, str(path))


def rows_from_dicts(
    dicts: list[tuple[int, dict[str, str]]], columns: list[str], where: str = "<rows>"
) -> list[ContrastRow]:
    """Rows from ``(line, {column: cell})`` pairs, checked as :func:`read_contrast_tsv`
    says (``where`` names the file in messages)."""
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        message = _("{file} line 1 column {column}: missing (the header has {columns})")
        raise ValueError(
            message.format(
                file=where, column=repr(missing[0]), columns=", ".join(map(repr, columns))
            )
        )
    if ("antecedent" in columns) != ("distractor" in columns):
        present, absent = (("antecedent", "distractor") if "antecedent" in columns
                           else ("distractor", "antecedent"))  # fmt: skip
        message = _("{file} line 1 column {column}: missing (a {present} column needs it)")
        raise ValueError(message.format(file=where, column=repr(absent), present=repr(present)))
    rows = []
    for line, cells in dicts:
        rows.append(_row(cells, line, where))
    if not rows:
        raise ValueError(_("{file}: no rows after the header").format(file=where))
    return rows


def bad_cell(where: str, line: int, column: str, message: str) -> ValueError:
    return ValueError(
        _("{file} line {line} column {column}: {message}").format(
            file=where, line=line, column=repr(column), message=message
        )
    )


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (apostrophes and hyphens kept inside a word)."""
    return _WORD.findall(text.lower())


def bare(word: str) -> str:
    """``word`` lower-cased, outer punctuation and an elided prefix (``l'``, ``qu'``) off."""
    word = word.lower().strip('.,;:!?"«»()[]{}…\u2581 ')
    return _ELIDED.sub("", word)


def find_words(tokens: list[str], phrase: str) -> int | None:
    """Index in ``tokens`` (already :func:`bare`) where the words of ``phrase`` start."""
    target = [bare(w) for w in words(phrase)]
    if not target:
        return None
    for i in range(len(tokens) - len(target) + 1):
        if tokens[i : i + len(target)] == target:
            return i
    return None


def pronoun_index(tokens: list[str], pronoun: str, after: int) -> int | None:
    """The pronoun's first occurrence at or after ``after``, else its last one."""
    hits = [i for i, t in enumerate(tokens) if t == bare(pronoun)]
    if not hits:
        return None
    later = [i for i in hits if i >= after]
    return later[0] if later else hits[-1]


def _row(cells: dict[str, str], line: int, where: str) -> ContrastRow:
    for column in REQUIRED:
        if not cells.get(column):
            raise bad_cell(where, line, column, _("empty"))
    if cells["correct"] == cells["contrastive"]:
        raise bad_cell(where, line, "contrastive", _("identical to correct"))
    ante, dist = cells.get("antecedent", ""), cells.get("distractor", "")
    pronoun = cells.get("pronoun") or "it"
    if "antecedent" in cells and (ante or dist):
        for column, value in (("antecedent", ante), ("distractor", dist)):
            if not value:
                raise bad_cell(where, line, column, _("empty while the other candidate is given"))
        if bare(ante) == bare(dist):
            raise bad_cell(where, line, "distractor", _("the same word as the antecedent"))
        tokens = [bare(w) for w in words(cells["source"])]
        for column, value in (("antecedent", ante), ("distractor", dist)):
            if find_words(tokens, value) is None:
                message = _("{word!r} is not a word of the source {source!r}").format(
                    word=value, source=cells["source"])  # fmt: skip
                raise bad_cell(where, line, column, message)
        if pronoun_index(tokens, pronoun, 0) is None:
            message = _("the pronoun {word!r} is not a word of the source {source!r}").format(
                word=pronoun, source=cells["source"])  # fmt: skip
            raise bad_cell(where, line, "pronoun" if cells.get("pronoun") else "source", message)
    targets = {c: cells.get(c, "") for c in ("antecedent_target", "distractor_target")}
    if any(targets.values()):
        tokens = [bare(w) for w in words(cells["correct"])]
        for column, value in targets.items():
            if not value or find_words(tokens, value) is None:
                message = _("{word!r} is not a word of correct {target!r}").format(
                    word=value, target=cells["correct"])  # fmt: skip
                raise bad_cell(where, line, column, message)
    return ContrastRow(
        cells["source"], cells["correct"], cells["contrastive"], line, ante, dist, pronoun,
        targets["antecedent_target"], targets["distractor_target"], cells.get("group", ""),
        dict(cells),
    )  # fmt: skip


@dataclass(frozen=True)
class Rate:
    """``k`` of ``n``: the share and its 95% Wilson interval."""

    k: int
    n: int

    @property
    def value(self) -> float:
        return self.k / self.n if self.n else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    def to_json(self) -> dict:
        lo, hi = self.interval
        return {"k": self.k, "n": self.n, "value": self.value, "low": lo, "high": hi}


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (95% by default)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


# ----------------------------------------------------------------------------- scoring


def target_ids(data, text: str) -> tuple[list[int], list[str]]:
    """A target sentence -> (its ids, ``<eos>`` excluded; its tokens), tokenized as the
    model's training data was: the book's preprocessing and words, or the subword model."""
    from attnkit.data.fra import preprocess_nmt

    tokenizer = getattr(data, "tokenizer", None)
    tokens = preprocess_nmt(text).split() if tokenizer is None else tokenizer.encode_target(text)
    return list(data.tgt_vocab[tokens]), tokens


def check_rows(translator, rows: list[ContrastRow], where: str = "<rows>", *,
               allow_unknown: bool = False) -> list[tuple[list[int], list[int]]]:  # fmt: skip
    """The (correct, contrastive) target ids of every row, after checking each sentence
    against the model: limits, unknown words, targets identical as tokens."""
    from attnkit.inference.translator import InputError, model_max_len

    boolean("allow_unknown", allow_unknown)
    data = translator.data
    limit = data.max_len - 1
    model_max = model_max_len(translator.model_config)
    if model_max is not None:
        limit = min(limit, model_max - 1)
    word_level = getattr(data, "tokenizer", None) is None
    out = []
    for row in rows:
        try:
            translator.check([row.source], allow_unknown=allow_unknown)
        except InputError as e:
            raise bad_cell(where, row.line, "source", str(e)) from None
        ids = []
        for column in ("correct", "contrastive"):
            text = getattr(row, column)
            found, tokens = target_ids(data, text)
            if not found:
                raise bad_cell(where, row.line, column, _("empty"))
            if len(found) > limit:
                message = _("{count} target tokens + <eos>, more than max_len={limit} of this "
                            "model").format(count=len(found), limit=limit + 1)  # fmt: skip
                raise bad_cell(where, row.line, column, message)
            unknown = [t for t in tokens if word_level and t not in data.tgt_vocab]
            if unknown and not allow_unknown:
                message = _(
                    "unknown words (not in the model's {size}-word French vocabulary): {words}"
                ).format(size=len(data.tgt_vocab), words=", ".join(unknown))
                raise bad_cell(where, row.line, column, message)
            ids.append(found)
        if ids[0] == ids[1]:
            raise bad_cell(where, row.line, "contrastive", _("the same tokens as correct"))
        out.append((ids[0], ids[1]))
    return out


@torch.no_grad()
def score_pairs(model, data, sources: list[str], targets: list[list[int]],
                batch_size: int = 64) -> list[float]:  # fmt: skip
    """The summed log-probability (float64) of each target (ids, ``<eos>`` excluded and
    added here) given its source, teacher-forced in batches of ``batch_size`` rows."""
    from attnkit.inference.eval_mode import evaluating

    positive_int("batch_size", batch_size)
    if len(sources) != len(targets):
        raise ValueError(_("{sources} sources but {targets} targets").format(
            sources=len(sources), targets=len(targets)))  # fmt: skip
    ids = data.special_ids
    bos, eos, pad = ids["bos"], ids["eos"], ids["pad"]
    device = next(model.parameters()).device
    scores: list[float] = []
    with evaluating(model):
        for start in range(0, len(sources), batch_size):
            src, src_len = data.encode_source(sources[start : start + batch_size])
            src, src_len = src.to(device), src_len.to(device)
            outs = [[*t, eos] for t in targets[start : start + batch_size]]
            T = max(len(o) for o in outs)
            out = torch.full((len(outs), T), pad, dtype=torch.long)
            dec_in = torch.full((len(outs), T), pad, dtype=torch.long)
            for i, o in enumerate(outs):
                out[i, : len(o)] = torch.tensor(o)
                dec_in[i, : len(o)] = torch.tensor([bos, *o[:-1]])
            out, dec_in = out.to(device), dec_in.to(device)
            enc = model.encoder(src, src_len)
            logits, _state = model.decoder(dec_in, model.decoder.init_state(enc, src_len))
            logp = torch.log_softmax(logits.float(), -1).gather(-1, out[..., None])[..., 0]
            lengths = torch.tensor([len(o) for o in outs], device=device)
            mask = torch.arange(T, device=device)[None] < lengths[:, None]
            scores.extend((logp.double() * mask).sum(1).tolist())
    return scores
