"""Language-model corpora and minibatch iterators (the book's chapter 8 data side).

Shape legend: B batch, T time steps (``num_steps``).

Corpora are lists of lines, normalized as the book does for The Time Machine
(``[^A-Za-z]+`` -> one space, stripped, lowercased), so a character vocabulary is
``<unk>``, space and the 26 letters. Three sources:

* ``builtin``: the offline default. The plain-text topics of the Python language
  reference that every CPython ships (``pydoc_data.topics``, ~460 KB of English
  prose with code examples); falls back to stdlib docstrings if it is missing.
* ``time_machine``: the book's dataset (``$ATTNKIT_TIMEMACHINE``, else the cached or
  downloaded hub file, sha1-verified; a clear error offline).
* a path: any local UTF-8 text file (``--data FILE``).

Iterators follow the book (random offset, then random sampling or sequential
partitioning, ``Y`` is ``X`` shifted by one) but draw randomness from a
``random.Random`` instance, never the global state, so a seed reproduces them.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch
from torch import Tensor

from attnkit._validate import boolean, index, integer, positive_int
from attnkit.data.text import Vocab, tokenize
from attnkit.i18n import _

__all__ = [
    "CORPORA",
    "LMDataLoader",
    "builtin_corpus_lines",
    "check_corpus_length",
    "load_corpus",
    "load_lm_data",
    "normalize_line",
    "read_corpus_lines",
    "read_text_lines",
    "read_time_machine",
    "seq_data_iter_random",
    "seq_data_iter_sequential",
    "stdlib_docstrings",
]

CORPORA = ("builtin", "time_machine")
_NON_LETTERS = re.compile("[^A-Za-z]+")


def normalize_line(line: str) -> str:
    """The book's preprocessing: runs of non-letters -> one space, stripped, lowercased."""
    return _NON_LETTERS.sub(" ", line).strip().lower()


def read_text_lines(path: str | os.PathLike, *, normalize: bool = True) -> list[str]:
    """Read a local UTF-8 text file, each line normalized (empty lines are kept, as the
    book); ``normalize=False``: the lines as they are, line ends removed."""
    path = Path(path)
    if not path.is_file():
        message = _("data file {path!r} does not exist or is not a file")
        raise FileNotFoundError(message.format(path=str(path)))
    with open(path, encoding="utf-8", errors="replace") as f:
        if not normalize:
            return f.read().splitlines()
        return [normalize_line(line) for line in f.readlines()]


def read_time_machine(
    path: str | os.PathLike | None = None,
    *,
    search: Iterable[str | os.PathLike] = (),
    normalize: bool = True,
) -> list[str]:
    """The Time Machine as normalized lines (3221 of them).

    Looks at ``path``, then ``$ATTNKIT_TIMEMACHINE``, then a ``timemachine.txt`` with the
    hub's sha1 in the ``search`` folders (``attnkit.d2l`` passes the book's ``../data``),
    then the hub cache / download (sha1-checked). Offline without a copy it raises
    ``DatasetUnavailableError`` saying where it looked and how to pass a local file.
    """
    if path is None:
        path = os.environ.get("ATTNKIT_TIMEMACHINE") or None
    if path is None:
        from attnkit.data.hub import DatasetUnavailableError, download

        try:
            path = download("time_machine", search=search)
        except DatasetUnavailableError as e:
            message = _("{error} (or set ATTNKIT_TIMEMACHINE=/path/to/timemachine.txt)")
            raise DatasetUnavailableError(message.format(error=e)) from e
    return read_text_lines(path, normalize=normalize)


def stdlib_docstrings() -> str:
    """Fallback prose: docstrings of a fixed list of stdlib modules and their members."""
    import importlib
    import inspect

    names = [
        "argparse", "asyncio", "collections", "contextlib", "csv", "dataclasses", "datetime",
        "decimal", "email", "fractions", "functools", "http.client", "inspect", "itertools",
        "json", "logging", "pathlib", "pickle", "random", "re", "shutil", "socket", "statistics",
        "string", "subprocess", "tarfile", "textwrap", "threading", "typing", "unittest",
        "urllib.parse", "uuid", "zipfile",
    ]  # fmt: skip
    parts: list[str] = []
    for name in names:
        try:
            mod = importlib.import_module(name)
        except ImportError:  # pragma: no cover - stripped-down interpreters
            continue
        parts.append(inspect.getdoc(mod) or "")
        for attr in sorted(getattr(mod, "__all__", [])):
            doc = inspect.getdoc(getattr(mod, attr, None))
            if doc:
                parts.append(doc)
    return "\n".join(parts)


def builtin_corpus_lines(*, normalize: bool = True) -> list[str]:
    """The offline default corpus: Python's language-reference topics, normalized.

    ``pydoc_data.topics`` ships with every CPython (it backs ``help('if')``); topics are
    taken in sorted order so the corpus is deterministic for a given Python version.
    """
    try:
        from pydoc_data.topics import topics

        text = "\n".join(topics[k] for k in sorted(topics))
    except ImportError:  # pragma: no cover - distributions that strip pydoc_data
        text = stdlib_docstrings()
    return [normalize_line(line) for line in text.splitlines()] if normalize else text.splitlines()


def read_corpus_lines(
    source: str | os.PathLike | None = None, *, normalize: bool = True
) -> list[str]:
    """Lines of ``'builtin'`` (default), ``'time_machine'`` or a local file path, each
    normalized as the book's character LMs read them (``normalize=False``: as they are,
    for a subword tokenizer)."""
    boolean("normalize", normalize)
    if source is None or source == "builtin":
        return builtin_corpus_lines(normalize=normalize)
    if source == "time_machine":
        return read_time_machine(normalize=normalize)
    return read_text_lines(source, normalize=normalize)


def load_corpus(
    lines: Sequence[str], token: str = "char", max_tokens: int = -1
) -> tuple[list[int], Vocab]:
    """Tokenize ``lines`` into one flat index list and its ``Vocab`` (the book's order).

    The vocabulary is built on the whole text; ``max_tokens > 0`` then truncates the
    corpus, exactly as ``load_corpus_time_machine``.
    """
    if isinstance(lines, str):
        raise TypeError(_("lines must be a sequence of strings (one per line), got one str"))
    integer("max_tokens", max_tokens)  # <= 0: all
    tokens = tokenize(list(lines), token)  # checks token
    vocab = Vocab(tokens)
    corpus = [vocab[tok] for line in tokens for tok in line]
    if not corpus:
        message = _(
            "the corpus is empty: got {lines} lines and 0 {token} tokens after "
            "normalization; expected text with at least one letter"
        )
        raise ValueError(message.format(lines=len(lines), token=token))
    if max_tokens > 0:
        corpus = corpus[:max_tokens]
    return corpus, vocab


def check_corpus_length(num_tokens: int, batch_size: int, num_steps: int) -> None:
    """Raise unless every epoch of either iterator yields at least one minibatch.

    The worst case is the sequential iterator with offset ``num_steps``: it needs
    ``(batch_size + 1) * num_steps + 1`` tokens.
    """
    positive_int("batch_size", batch_size)
    positive_int("num_steps", num_steps)
    need = (batch_size + 1) * num_steps + 1
    if num_tokens < need:
        message = _(
            "the corpus has {num_tokens} tokens, too short for "
            "batch_size={batch_size} and num_steps={num_steps}: expected at least "
            "(batch_size + 1) * num_steps + 1 = {need} tokens (use a longer "
            "corpus, a larger max_tokens, or smaller num_steps/batch_size)"
        )
        raise ValueError(
            message.format(
                num_tokens=num_tokens, batch_size=batch_size, num_steps=num_steps, need=need
            )
        )


def _as_corpus_tensor(corpus) -> Tensor:
    t = torch.as_tensor(corpus)
    if t.numel() == 0:  # before the dtype check: torch.tensor([]) is float32
        message = _(
            "corpus is empty (got {type} of shape {shape}); expected a flat "
            "sequence of token indices"
        )
        raise ValueError(message.format(type=type(corpus).__name__, shape=tuple(t.shape)))
    if t.dim() != 1 or t.is_floating_point() or t.dtype == torch.bool:
        message = _(
            "corpus must be a flat sequence of token indices, got dtype {dtype} and shape {shape}"
        )
        raise TypeError(message.format(dtype=t.dtype, shape=tuple(t.shape)))
    return t.long()


def _default_rng(rng: random.Random | None) -> random.Random:
    # Seeded from the global `random` module, so `random.seed(s)` still reproduces
    # book-style code; the sampling itself never touches global state.
    return rng if rng is not None else random.Random(random.getrandbits(64))


def seq_data_iter_random(
    corpus: Sequence[int] | Tensor,
    batch_size: int,
    num_steps: int,
    rng: random.Random | None = None,
) -> Iterator[tuple[Tensor, Tensor]]:
    """Random sampling: random offset in [0, num_steps-1], shuffled subsequences.

    Yields ``(X, Y)``, both (B, T) int64, with ``Y[b, t] = corpus[start_b + t + 1]``.
    Adjacent minibatches are not adjacent in the text.
    """
    data = _as_corpus_tensor(corpus)
    check_corpus_length(len(data), batch_size, num_steps)
    rng = _default_rng(rng)
    offset = rng.randint(0, num_steps - 1)
    num_subseqs = (len(data) - offset - 1) // num_steps
    starts = list(range(offset, offset + num_subseqs * num_steps, num_steps))
    rng.shuffle(starts)
    steps = torch.arange(num_steps)
    for i in range(0, (num_subseqs // batch_size) * batch_size, batch_size):
        idx = torch.tensor(starts[i : i + batch_size]).unsqueeze(1) + steps  # (B, T)
        yield data[idx], data[idx + 1]


def seq_data_iter_sequential(
    corpus: Sequence[int] | Tensor,
    batch_size: int,
    num_steps: int,
    rng: random.Random | None = None,
) -> Iterator[tuple[Tensor, Tensor]]:
    """Sequential partitioning: random offset in [0, num_steps], batch rows are contiguous.

    Row ``b`` of minibatch ``i + 1`` continues row ``b`` of minibatch ``i`` in the text,
    so a hidden state can be carried across minibatches. Yields (B, T) int64 pairs.
    """
    data = _as_corpus_tensor(corpus)
    check_corpus_length(len(data), batch_size, num_steps)
    rng = _default_rng(rng)
    offset = rng.randint(0, num_steps)
    num_tokens = ((len(data) - offset - 1) // batch_size) * batch_size
    Xs = data[offset : offset + num_tokens].reshape(batch_size, -1)  # (B, N/B)
    Ys = data[offset + 1 : offset + 1 + num_tokens].reshape(batch_size, -1)
    num_batches = Xs.shape[1] // num_steps
    for i in range(0, num_steps * num_batches, num_steps):
        yield Xs[:, i : i + num_steps], Ys[:, i : i + num_steps]


class LMDataLoader:
    """Re-iterable minibatches over a corpus; each epoch draws a fresh offset/shuffle.

    ``seed`` makes the sequence of epochs reproducible (None: seeded from the global
    ``random`` module once, so ``random.seed`` still works for book-style code); ``rng``
    draws from a generator of the caller's instead (the ``random`` module itself: the
    global state, every epoch, as the book's loader). ``rank``/``world_size`` shard the
    batch rows (rank r keeps rows r, r + world_size, ...), which keeps sequential
    partitioning contiguous per row; with world_size 1 (default) nothing changes.
    """

    def __init__(
        self,
        corpus: Sequence[int] | Tensor,
        batch_size: int,
        num_steps: int,
        use_random_iter: bool = False,
        seed: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        rng: random.Random | None = None,
    ) -> None:
        if rng is not None and seed is not None:
            raise ValueError(_("pass seed or rng, not both"))
        if rng is not None and not (hasattr(rng, "randint") and hasattr(rng, "shuffle")):
            message = _("rng must be a random.Random (or the random module), got {rng!r}")
            raise TypeError(message.format(rng=rng))
        self.corpus = _as_corpus_tensor(corpus)
        check_corpus_length(len(self.corpus), batch_size, num_steps)
        index("rank", rank, positive_int("world_size", world_size))
        if batch_size < world_size:
            message = _(
                "batch_size={batch_size} must be >= world_size={world_size} to shard batch rows"
            )
            raise ValueError(message.format(batch_size=batch_size, world_size=world_size))
        self.batch_size, self.num_steps = batch_size, num_steps
        self.use_random_iter = use_random_iter
        self.rank, self.world_size = rank, world_size
        if rng is None:
            rng = random.Random(seed) if seed is not None else _default_rng(None)
        self.rng = rng
        self.data_iter_fn = seq_data_iter_random if use_random_iter else seq_data_iter_sequential

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        # every rank draws the same offsets from the same seed, then keeps its rows
        for X, Y in self.data_iter_fn(self.corpus, self.batch_size, self.num_steps, self.rng):
            if self.world_size > 1:
                X, Y = X[self.rank :: self.world_size], Y[self.rank :: self.world_size]
            yield X, Y


def load_lm_data(
    batch_size: int,
    num_steps: int,
    source: str | os.PathLike | None = None,
    *,
    token: str = "char",
    max_tokens: int = 10000,
    use_random_iter: bool = False,
    seed: int | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[LMDataLoader, Vocab]:
    """Read ``source`` (see ``read_corpus_lines``), build the vocab and a loader."""
    corpus, vocab = load_corpus(read_corpus_lines(source), token, max_tokens)
    loader = LMDataLoader(
        corpus, batch_size, num_steps, use_random_iter, seed=seed, rank=rank, world_size=world_size
    )
    return loader, vocab
