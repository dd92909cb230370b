"""English-French text in the ``fra.txt`` format: reading, the book's preprocessing.

The book's own functions (``preprocess_nmt``, ``tokenize_nmt`` with its off-by-one,
``truncate_pad``, ``build_array_nmt``) unchanged in behaviour, the hub download of
``fra.txt``, and :func:`read_pairs`, attnkit's reader that reports malformed lines.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnkit._validate import positive_int
from attnkit.data import hub
from attnkit.data.text import Vocab
from attnkit.i18n import _

__all__ = [
    "BOOK_RESERVED_TOKENS",
    "ReadReport",
    "build_array_nmt",
    "download_fra",
    "preprocess_nmt",
    "read_fra",
    "read_pairs",
    "read_text_pairs",
    "tokenize_nmt",
    "truncate_pad",
]

# =========================================================================== book preprocessing

_SPACE_BEFORE_PUNCT = re.compile(r"(?<=[^ ])([,.!?])")
BOOK_RESERVED_TOKENS = ("<pad>", "<bos>", "<eos>")  # -> <unk>=0, <pad>=1, <bos>=2, <eos>=3


def preprocess_nmt(text: str) -> str:
    """The book's ``preprocess_nmt``: NBSPs to spaces, lowercase, space before ``, . ! ?``.

    A space is inserted before one of the four marks when the previous character is
    not a space (never at position 0). Nothing else changes (``j'ai`` stays one token).
    """

    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    # Same as the book's character loop, ~20x faster: the look-behind sees the original text.
    return _SPACE_BEFORE_PUNCT.sub(r" \1", text)


def tokenize_nmt(
    text: str, num_examples: int | None = None
) -> tuple[list[list[str]], list[list[str]]]:
    """The book's ``tokenize_nmt``, quirks included.

    Splits on ``\\n``, then ``\\t``; keeps only lines with exactly two fields and splits
    each side on a single ``' '``. It ``break``s when ``i > num_examples``, so it reads
    lines ``0..num_examples``: ``num_examples + 1`` lines (the book's off-by-one).
    Malformed lines are dropped silently, as in the book; :func:`read_pairs` reports them.
    """
    source, target = [], []
    for i, line in enumerate(text.split("\n")):
        if num_examples and i > num_examples:
            break
        parts = line.split("\t")
        if len(parts) == 2:
            source.append(parts[0].split(" "))
            target.append(parts[1].split(" "))
    return source, target


def truncate_pad(line: list, num_steps: int, padding_token) -> list:
    """Truncate ``line`` to ``num_steps`` items or right-pad it with ``padding_token``."""
    positive_int("num_steps", num_steps)
    if len(line) > num_steps:
        return list(line[:num_steps])
    return list(line) + [padding_token] * (num_steps - len(line))


def build_array_nmt(lines: list[list[str]], vocab: Vocab, num_steps: int) -> tuple[Tensor, Tensor]:
    """The book's ``build_array_nmt``: ids + ``<eos>``, then truncate/pad to ``num_steps``.

    ``<eos>`` is appended *before* truncation, so a truncated line loses it (as in the
    book). Returns ``(array (N, num_steps) long, valid_len (N,))``; ``valid_len`` counts
    non-``<pad>`` entries with the book's expression ``(array != pad).type(int32).sum(1)``
    (torch promotes that sum to int64).
    """
    ids = [vocab[list(line)] + [vocab["<eos>"]] for line in lines]
    pad = vocab["<pad>"]
    array = torch.tensor([truncate_pad(x, num_steps, pad) for x in ids], dtype=torch.long)
    array = array.reshape(len(ids), num_steps)  # (N, num_steps), also when N == 0
    valid_len = (array != pad).type(torch.int32).sum(1)  # (N,)
    return array, valid_len


# =========================================================================== reading files


def read_fra(path: str | os.PathLike) -> str:
    """Read a ``fra.txt``-format file (``English<TAB>French`` lines) as UTF-8 text.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not UTF-8 (the message names the line and byte).
    """
    path = Path(path)
    if not path.is_file():
        message = _("translation data file {path!r} does not exist")
        raise FileNotFoundError(message.format(path=str(path)))
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        message = _(
            "{path} is not UTF-8 text: line {line}, byte {column} is {raw!r} "
            "({reason}); save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        )
        raise ValueError(
            message.format(
                path=path, line=line, column=column, raw=raw[e.start : e.start + 1], reason=e.reason
            )
        ) from None


def download_fra(*, search: Iterable[str | os.PathLike] = ()) -> Path:
    """Path of ``fra.txt`` from the hub (``DATA_HUB['fra-eng']``), downloading it if needed.

    ``search``: folders checked first for an extracted ``fra-eng/`` (accepted as is: its
    files cannot be checked against the zip's sha1) or a verified ``fra-eng.zip``; see
    :func:`attnkit.data.hub.download_extract`.
    """
    try:
        folder = hub.download_extract("fra-eng", search=search)
    except hub.DatasetUnavailableError as e:
        message = _(
            "the fra-eng dataset is not available: {error} Use a local copy of "
            "fra.txt instead (--data FILE, or ATTNKIT_FRA=FILE)."
        )
        raise hub.DatasetUnavailableError(message.format(error=e)) from e
    return folder / "fra.txt"


@dataclass(frozen=True)
class ReadReport:
    """What :func:`read_pairs` kept and skipped."""

    pairs: int
    malformed: int  # lines without exactly one tab, or with an empty side
    malformed_lines: tuple[int, ...]  # 1-based line numbers of the first 10 malformed lines


def read_text_pairs(
    text: str, num_examples: int | None = None, *, source: str = "<text>"
) -> tuple[list[tuple[str, str]], ReadReport]:
    """``English<TAB>French`` lines -> ``(english, french)`` strings as written (no
    preprocessing), reporting bad lines; the rules of :func:`read_pairs`."""
    return _parse_lines(text.split("\n"), num_examples, source, split=False)


def read_pairs(
    text: str, num_examples: int | None = None, *, source: str = "<text>"
) -> tuple[list[tuple[list[str], list[str]]], ReadReport]:
    """Parse ``English<TAB>French`` lines with book preprocessing, reporting bad lines.

    Unlike the book's :func:`tokenize_nmt`, malformed lines (no tab, more than one tab,
    or an empty side after stripping) are skipped, counted, and reported in a
    ``UserWarning`` with their line numbers; blank lines are ignored silently.
    ``num_examples`` keeps the first ``num_examples`` usable pairs (no off-by-one).
    Tokens are split on whitespace, so stray double spaces make no empty tokens.

    Raises:
        ValueError: no usable pair at all (the message names ``source``, the first bad
            line's number and its start).
    """
    if num_examples is None:
        lines = preprocess_nmt(text).split("\n")
    else:  # preprocess lazily, line by line ("\n" + line: the same look-behind as the whole text)
        lines = (preprocess_nmt("\n" + line)[1:] for line in text.split("\n"))
    return _parse_lines(lines, num_examples, source, split=True)


def _parse_lines(lines: Iterable[str], num_examples: int | None, source: str, *, split: bool):
    pairs: list = []
    bad: list[int] = []
    first_bad = ""
    for lineno, line in enumerate(lines, start=1):
        if num_examples is not None and len(pairs) >= num_examples:
            break
        line = line.rstrip("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            if not bad:
                first_bad = line
            bad.append(lineno)
            continue
        pairs.append((parts[0].split(), parts[1].split()) if split else (parts[0], parts[1]))
    report = ReadReport(len(pairs), len(bad), tuple(bad[:10]))
    shown = repr(first_bad[:60] + ("…" if len(first_bad) > 60 else ""))
    if not pairs:
        if bad:
            where = _("; line {line} reads {shown}").format(line=bad[0], shown=shown)
        else:
            where = _(" (the file is empty)")
        message = _(
            "{source} has no usable 'English<TAB>French' pairs ({count} malformed "
            "line(s){where}); each line must be an English sentence, one tab, and its "
            "French translation"
        )
        raise ValueError(message.format(source=source, count=len(bad), where=where))
    if bad:
        message = _(
            "{source}: skipped {count} malformed line(s) (expected 'English<TAB>French'); "
            "first at line(s) {lines}: line {line} reads {shown}"
        )
        lines = ", ".join(map(str, report.malformed_lines))
        warnings.warn(
            message.format(source=source, count=len(bad), lines=lines, line=bad[0], shown=shown),
            stacklevel=3,
        )
    return pairs, report
