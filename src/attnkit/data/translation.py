"""English-French translation data: reading, preprocessing, splits, bucketed batches.

Shape legend: B batch, S source length, T target length.

THE INTERFACE (shared by the models, the trainer and the CLI):

- ``TranslationBatch``: one padded batch; source and target end in ``<eos>``,
  the target has no ``<bos>`` (the trainer prepends it for teacher forcing).
- ``TranslationData`` (from :func:`load_translation_data`): vocabularies, the
  train/val/test pairs, ``batches(...)``, ``encode_source(...)``, ``to_dict()``.

Pipeline: text (the generated corpus of :mod:`attnkit.data.synthetic_fr`, a
``fra.txt``-format file, or the hub download) -> the book's ``preprocess_nmt`` ->
pairs (malformed lines skipped and reported) -> pairs longer than ``max_len`` dropped
-> splits that never share a sentence (source or target) -> vocabularies from the
training split (``<unk>=0, <pad>=1, <bos>=2, <eos>=3``) -> length-bucketed batches under
a budget of padded source + target tokens, shuffled per ``(seed, epoch)``, sharded over
ranks.

The book's own functions (``preprocess_nmt``, ``tokenize_nmt`` with its off-by-one,
``truncate_pad``, ``build_array_nmt``) are here too, unchanged in behaviour.
"""

from __future__ import annotations

import logging
import os
import random
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnkit.data import hub
from attnkit.data.text import Vocab

__all__ = [
    "BOOK_RESERVED_TOKENS",
    "ReadReport",
    "TranslationBatch",
    "TranslationData",
    "bucket_batches",
    "build_array_nmt",
    "download_fra",
    "load_translation_data",
    "padding_efficiency",
    "preprocess_nmt",
    "read_fra",
    "read_pairs",
    "split_by_source",
    "tokenize_nmt",
    "truncate_pad",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TranslationBatch:
    src: Tensor  # (B, S) long: source ids + <eos>, right-padded with <pad>
    src_len: Tensor  # (B,) long: valid source lengths (<eos> included)
    tgt: Tensor  # (B, T) long: target ids + <eos>, right-padded with <pad>; no <bos>
    tgt_len: Tensor  # (B,) long: valid target lengths (<eos> included)

    def to(self, device: torch.device | str) -> TranslationBatch:
        return TranslationBatch(*(t.to(device, non_blocking=True) for t in self.astuple()))

    def astuple(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return (self.src, self.src_len, self.tgt, self.tgt_len)

    @property
    def num_tgt_tokens(self) -> int:
        return int(self.tgt_len.sum())


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
    if num_steps <= 0:
        raise ValueError(f"num_steps must be > 0, got {num_steps}")
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
    """Read a ``fra.txt``-format file (``English<TAB>French`` lines) as UTF-8 text."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"translation data file {str(path)!r} does not exist")
    return path.read_text(encoding="utf-8")


def download_fra(*, search: Iterable[str | os.PathLike] = ()) -> Path:
    """Path of ``fra.txt`` from the hub (``DATA_HUB['fra-eng']``), downloading it if needed.

    ``search``: folders checked first for an extracted ``fra-eng/`` (accepted as is: its
    files cannot be checked against the zip's sha1) or a verified ``fra-eng.zip``; see
    :func:`attnkit.data.hub.download_extract`.
    """
    try:
        folder = hub.download_extract("fra-eng", search=search)
    except hub.DatasetUnavailableError as e:
        raise hub.DatasetUnavailableError(
            f"the fra-eng dataset is not available: {e} "
            "Use a local copy of fra.txt instead (--data FILE, or ATTNKIT_FRA=FILE)."
        ) from e
    return folder / "fra.txt"


@dataclass(frozen=True)
class ReadReport:
    """What :func:`read_pairs` kept and skipped."""

    pairs: int
    malformed: int  # lines without exactly one tab, or with an empty side
    malformed_lines: tuple[int, ...]  # 1-based line numbers of the first 10 malformed lines


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
        ValueError: no usable pair at all (the message names ``source``).
    """
    if num_examples is None:
        lines = preprocess_nmt(text).split("\n")
    else:  # preprocess lazily, line by line ("\n" + line: the same look-behind as the whole text)
        lines = (preprocess_nmt("\n" + line)[1:] for line in text.split("\n"))
    pairs: list[tuple[list[str], list[str]]] = []
    bad: list[int] = []
    for lineno, line in enumerate(lines, start=1):
        if num_examples is not None and len(pairs) >= num_examples:
            break
        line = line.rstrip("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            bad.append(lineno)
            continue
        pairs.append((parts[0].split(), parts[1].split()))
    report = ReadReport(len(pairs), len(bad), tuple(bad[:10]))
    if bad:
        warnings.warn(
            f"{source}: skipped {len(bad)} malformed line(s) (expected 'English<TAB>French'); "
            f"first at line(s) {', '.join(map(str, report.malformed_lines))}",
            stacklevel=2,
        )
    if not pairs:
        raise ValueError(
            f"{source} has no usable 'English<TAB>French' pairs ({len(bad)} malformed line(s))"
        )
    return pairs, report


# =========================================================================== splits


def split_by_source(
    pairs: Sequence[tuple[list[str], list[str]]],
    val_fraction: float,
    test_fraction: float,
    seed: int = 0,
) -> tuple[list[int], list[int], list[int]]:
    """Indices of train/val/test pairs such that no sentence, source or target, is in two splits.

    Pairs that share a source sentence *or* a target sentence are grouped (transitively,
    with a union-find over both sides: ``go .``/``go !`` -> ``va !`` is one group), and
    whole groups go to one split. The groups, in order of first occurrence, are shuffled
    under ``seed``; then each group in turn goes to test if that brings the test split
    closer to ``round(test_fraction * len(pairs))`` pairs, else to validation if that
    brings it closer to ``round(val_fraction * len(pairs))`` pairs, else to train. So
    the test split misses its target by at most half the largest group (validation too,
    unless train is left empty), and when every group is a single pair (the generated
    corpus) the sizes are exactly the rounded targets, as before. Within a split, indices keep corpus order. (The name is historical: the
    splits never share a target sentence either.)
    """
    _check_fraction("val_fraction", val_fraction)
    _check_fraction("test_fraction", test_fraction)
    if val_fraction + test_fraction >= 1:
        raise ValueError(
            f"val_fraction + test_fraction must be < 1, got {val_fraction} + {test_fraction}"
        )
    groups = _sentence_groups(pairs)
    random.Random(f"attnkit-split:{seed}").shuffle(groups)
    n_test = round(test_fraction * len(pairs))
    n_val = round(val_fraction * len(pairs))
    which = [0] * len(pairs)
    sizes = [0, 0, 0]  # train, val, test pairs so far
    for group in groups:
        # a group joins a split when that moves the split's size strictly closer to its
        # target: |size + len - target| < |size - target|  <=>  2 * size + len < 2 * target
        if 2 * sizes[2] + len(group) < 2 * n_test:
            part = 2
        elif 2 * sizes[1] + len(group) < 2 * n_val:
            part = 1
        else:
            part = 0
        sizes[part] += len(group)
        for i in group:
            which[i] = part
    out: tuple[list[int], list[int], list[int]] = ([], [], [])
    for i, part in enumerate(which):
        out[part].append(i)
    return out


def _sentence_groups(pairs: Sequence[tuple[list[str], list[str]]]) -> list[list[int]]:
    """Pair indices grouped by shared source or target sentences (connected components).

    Groups come in order of their first pair, each group's indices in corpus order.
    """
    parent = list(range(len(pairs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]  # path halving
            i = parent[i]
        return i

    first_src: dict[tuple[str, ...], int] = {}
    first_tgt: dict[tuple[str, ...], int] = {}
    for i, (src, tgt) in enumerate(pairs):
        for first, sentence in ((first_src, tuple(src)), (first_tgt, tuple(tgt))):
            j = first.setdefault(sentence, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)  # the root is the group's first pair
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _check_fraction(name: str, value: float) -> None:
    if not isinstance(value, int | float) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")


# =========================================================================== batching

Pair = tuple[list[str], list[str]]


def bucket_batches(
    lengths: Sequence[tuple[int, int]],
    batch_tokens: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> list[list[int]]:
    """Group example indices into length-bucketed batches under a token budget.

    ``lengths[i] = (S_i, T_i)`` are the source and target lengths of example ``i``
    (``<eos>`` included). A batch of ``B`` examples costs ``B * (max S + max T)`` padded
    tokens (source plus target), and every batch costs at most ``batch_tokens``.

    Examples are sorted by ``(S, T)`` (ties broken at random when ``shuffle``) and packed
    greedily, so similar lengths share a batch; with ``shuffle`` the batch order is then
    shuffled. Everything is deterministic under ``(seed, epoch)``; without ``shuffle``
    the result does not depend on them.

    Sharding (multi-process training): ``batch_tokens`` is the **global** budget. The
    global batches are the same whatever ``world_size`` is, and rank ``r`` gets rows
    ``r, r + world_size, ...`` of each of them (rows are sorted by length, so the shares
    are balanced). Every rank therefore does the same number of steps, one step of N
    ranks is one global batch, and the number of optimizer steps per epoch (and so the
    learning-rate schedule) does not change with N. A global batch with fewer rows than
    ``world_size`` is dropped for that epoch (only possible for very long examples).

    Raises:
        ValueError: bad arguments or a single example over ``batch_tokens``.
    """
    _check_sharding(rank, world_size)
    if not isinstance(batch_tokens, int) or batch_tokens <= 0:
        raise ValueError(f"batch_tokens must be a positive int, got {batch_tokens!r}")
    if not lengths:
        return []
    biggest = max(s + t for s, t in lengths)
    if biggest > batch_tokens:
        raise ValueError(
            f"batch_tokens={batch_tokens} is smaller than the longest example "
            f"({biggest} source+target tokens); use batch_tokens >= {biggest}"
        )
    rng = random.Random(f"attnkit-batches:{seed}:{epoch}")
    ties = [rng.random() for _ in lengths] if shuffle else list(range(len(lengths)))
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i][0], lengths[i][1], ties[i]))
    batches: list[list[int]] = []
    cur: list[int] = []
    max_s = max_t = 0
    for i in order:
        s, t = lengths[i]
        ns, nt = max(max_s, s), max(max_t, t)
        if cur and (len(cur) + 1) * (ns + nt) > batch_tokens:
            batches.append(cur)
            cur, ns, nt = [], s, t
        cur.append(i)
        max_s, max_t = ns, nt
    if cur:
        batches.append(cur)
    if shuffle:
        rng.shuffle(batches)
    if world_size > 1:
        batches = [b[rank::world_size] for b in batches if len(b) >= world_size]
    return batches


def _check_sharding(rank: int, world_size: int) -> None:
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, world_size={world_size}), got {rank!r}")


def padding_efficiency(batches: Sequence[TranslationBatch]) -> float:
    """Real tokens / padded tokens over source and target (1.0 = no padding)."""
    real = sum(int(b.src_len.sum()) + int(b.tgt_len.sum()) for b in batches)
    padded = sum(b.src.numel() + b.tgt.numel() for b in batches)
    return real / padded if padded else 1.0


def _pad_ids(seqs: Sequence[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    lens = [len(s) for s in seqs]
    width = max(lens)
    out = torch.tensor([s + [pad] * (width - n) for s, n in zip(seqs, lens)], dtype=torch.long)
    return out, torch.tensor(lens, dtype=torch.long)  # (B, S), (B,)


# =========================================================================== the data object


class TranslationData:
    """Vocabularies, splits and batches of an English -> French corpus.

    ``train``/``val``/``test`` hold ``(source tokens, target tokens)`` pairs in the
    book's preprocessed form, without ``<eos>``. ``max_len`` bounds each side's
    length *including* ``<eos>``. Build it with :func:`load_translation_data`.
    """

    def __init__(
        self,
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        train: list[Pair],
        val: list[Pair],
        test: list[Pair],
        max_len: int,
        *,
        num_dropped: int = 0,
        num_malformed: int = 0,
        source: str = "",
    ) -> None:
        self.src_vocab = src_vocab
        self.tgt_vocab = tgt_vocab
        self.train = train
        self.val = val
        self.test = test
        self.max_len = max_len
        self.num_dropped = num_dropped  # pairs longer than max_len, dropped at load
        self.num_malformed = num_malformed  # malformed lines skipped at load
        self.source = source  # "generated", a file path, or "download"
        self._cache: dict[str, tuple[list[list[int]], list[list[int]]]] = {}

    def __repr__(self) -> str:
        return (
            f"TranslationData(source={self.source!r}, train={len(self.train)}, "
            f"val={len(self.val)}, test={len(self.test)}, |src_vocab|={len(self.src_vocab)}, "
            f"|tgt_vocab|={len(self.tgt_vocab)}, max_len={self.max_len}, "
            f"dropped={self.num_dropped})"
        )

    def split(self, name: str) -> list[Pair]:
        if name not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {name!r}")
        return getattr(self, name)

    def _encoded(self, name: str) -> tuple[list[list[int]], list[list[int]]]:
        if name not in self._cache:
            eos_s, eos_t = self.src_vocab["<eos>"], self.tgt_vocab["<eos>"]
            pairs = self.split(name)
            src = [self.src_vocab[s] + [eos_s] for s, _ in pairs]
            tgt = [self.tgt_vocab[t] + [eos_t] for _, t in pairs]
            self._cache[name] = (src, tgt)
        return self._cache[name]

    def batches(
        self,
        split: str,
        batch_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> list[TranslationBatch]:
        """Length-bucketed batches of one split; see :func:`bucket_batches`.

        ``batch_tokens`` bounds each (global) batch's padded source + target tokens
        (``B * (S + T)``, ``<eos>`` included). Every pair of the split is in exactly one
        batch per epoch; with ``world_size > 1`` each rank gets its rows of every global
        batch (see :func:`bucket_batches`).
        """
        src, tgt = self._encoded(split)
        lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
        groups = bucket_batches(
            lengths,
            batch_tokens,
            shuffle=shuffle,
            seed=seed,
            epoch=epoch,
            rank=rank,
            world_size=world_size,
        )
        pad_s, pad_t = self.src_vocab["<pad>"], self.tgt_vocab["<pad>"]
        out = []
        for idx in groups:
            s, s_len = _pad_ids([src[i] for i in idx], pad_s)  # (B, S), (B,)
            t, t_len = _pad_ids([tgt[i] for i in idx], pad_t)  # (B, T), (B,)
            out.append(TranslationBatch(s, s_len, t, t_len))
        return out

    def encode_source(self, sentences: list[str]) -> tuple[Tensor, Tensor]:
        """Raw English sentences -> ``(src (B, S) long, src_len (B,) long)``.

        Each sentence goes through :func:`preprocess_nmt` and a whitespace split, gets
        ``<eos>``, and is right-padded with ``<pad>``; unknown words become ``<unk>``.

        Raises:
            ValueError: an empty list, an empty sentence, or a sentence longer than
                ``max_len`` tokens with ``<eos>``.
        """
        if isinstance(sentences, str) or not sentences:
            raise ValueError(f"sentences must be a non-empty list of str, got {sentences!r}")
        eos = self.src_vocab["<eos>"]
        ids = []
        for sentence in sentences:
            tokens = preprocess_nmt(sentence).split()
            if not tokens:
                raise ValueError(f"cannot translate an empty sentence: {sentence!r}")
            if len(tokens) + 1 > self.max_len:
                raise ValueError(
                    f"sentence {sentence!r} has {len(tokens)} tokens + <eos>, more than "
                    f"max_len={self.max_len}"
                )
            ids.append(self.src_vocab[tokens] + [eos])
        return _pad_ids(ids, self.src_vocab["<pad>"])

    def decode_target(self, ids: Sequence[int] | Tensor) -> str:
        """Target ids -> sentence, stopping at ``<eos>`` and skipping ``<pad>``/``<bos>``."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        words = []
        for i in ids:
            token = self.tgt_vocab.to_tokens(int(i))
            if token == "<eos>":
                break
            if token not in ("<pad>", "<bos>"):
                words.append(token)
        return " ".join(words)

    def to_dict(self) -> dict:
        """Vocabularies and ``max_len`` as plain JSON-able data (for checkpoints)."""
        return {
            "src_vocab": self.src_vocab.to_dict(),
            "tgt_vocab": self.tgt_vocab.to_dict(),
            "max_len": self.max_len,
        }

    @classmethod
    def from_dict(cls, d: dict) -> TranslationData:
        """Inverse of :meth:`to_dict`; the splits are empty."""
        return cls(
            Vocab.from_dict(d["src_vocab"]),
            Vocab.from_dict(d["tgt_vocab"]),
            [],
            [],
            [],
            int(d["max_len"]),
            source="checkpoint",
        )


def load_translation_data(
    data: str | os.PathLike | None = None,
    *,
    num_examples: int | None = None,
    min_freq: int = 2,
    max_len: int = 12,
    val_fraction: float = 0.05,
    test_fraction: float = 0.05,
    seed: int = 0,
    num_pairs: int = 20000,
) -> TranslationData:
    """Load an English -> French corpus, split it and build the vocabularies.

    ``data``: ``None`` -> the generated corpus (:mod:`attnkit.data.synthetic_fr`,
    ``num_pairs`` pairs under ``seed``); ``"download"`` -> the book's ``fra-eng`` from
    the hub; anything else -> a ``fra.txt``-format file, read as UTF-8 with the book's
    preprocessing (malformed lines are skipped with a warning, see :func:`read_pairs`).
    ``num_examples`` keeps the first pairs only. Pairs with more than ``max_len`` tokens
    with ``<eos>`` on either side are dropped (``num_dropped``). Splits never share a
    source or a target sentence (:func:`split_by_source`). The vocabularies
    (``min_freq``, reserved ``<pad>, <bos>, <eos>``) are built from the training split only.

    Raises:
        ValueError: bad arguments, no usable pair, an empty training split, or an empty
            validation (test) split although ``val_fraction`` (``test_fraction``) is > 0
            (too little data: use more, or pass ``val_fraction=0`` / ``test_fraction=0``).
    """
    if num_examples is not None and (not isinstance(num_examples, int) or num_examples <= 0):
        raise ValueError(f"num_examples must be None or a positive int, got {num_examples!r}")
    if not isinstance(min_freq, int) or min_freq < 0:
        raise ValueError(f"min_freq must be an int >= 0, got {min_freq!r}")
    if not isinstance(max_len, int) or max_len < 2:
        raise ValueError(f"max_len must be an int >= 2 (a token and <eos>), got {max_len!r}")
    if not isinstance(num_pairs, int) or num_pairs <= 0:
        raise ValueError(f"num_pairs must be a positive int, got {num_pairs!r}")
    _check_fraction("val_fraction", val_fraction)
    _check_fraction("test_fraction", test_fraction)
    if val_fraction + test_fraction >= 1:
        raise ValueError(
            f"val_fraction + test_fraction must be < 1, got {val_fraction} + {test_fraction}"
        )

    malformed = 0
    if data is None:
        from attnkit.data.synthetic_fr import generate_pairs

        n = num_pairs if num_examples is None else min(num_pairs, num_examples)
        pairs = [(en.split(), fr.split()) for en, fr in generate_pairs(n, seed)]
        source = "generated"
    else:
        path = download_fra() if str(data) == "download" else Path(data)
        pairs, report = read_pairs(read_fra(path), num_examples, source=str(path))
        malformed = report.malformed
        source = "download" if str(data) == "download" else str(path)

    kept = [(s, t) for s, t in pairs if len(s) < max_len and len(t) < max_len]
    dropped = len(pairs) - len(kept)
    if not kept:
        raise ValueError(
            f"no pair of {source} fits max_len={max_len} (tokens + <eos>); "
            f"all {len(pairs)} pairs are longer"
        )
    if dropped:
        log.info("dropped %d of %d pairs longer than max_len=%d", dropped, len(pairs), max_len)
    tr, va, te = split_by_source(kept, val_fraction, test_fraction, seed)
    train = [kept[i] for i in tr]
    if not train:
        raise ValueError(f"the training split of {source} is empty ({len(kept)} pairs)")
    _check_not_empty(source, len(kept), dropped, len(tr), (va, val_fraction), (te, test_fraction))
    reserved = list(BOOK_RESERVED_TOKENS)
    src_vocab = Vocab([s for s, _ in train], min_freq=min_freq, reserved_tokens=reserved)
    tgt_vocab = Vocab([t for _, t in train], min_freq=min_freq, reserved_tokens=reserved)
    return TranslationData(
        src_vocab,
        tgt_vocab,
        train,
        [kept[i] for i in va],
        [kept[i] for i in te],
        max_len,
        num_dropped=dropped,
        num_malformed=malformed,
        source=source,
    )


def _check_not_empty(
    source: str,
    usable: int,
    dropped: int,
    train: int,
    val: tuple[list[int], float],
    test: tuple[list[int], float],
) -> None:
    """Raise if a split asked for (fraction > 0) came out empty (its metrics would be NaN)."""
    empty = [
        (name, flag, fraction)
        for name, flag, (part, fraction) in (
            ("validation", "val", val),
            ("test", "test", test),
        )
        if fraction > 0 and not part
    ]
    if not empty:
        return
    names = " and ".join(name for name, _, _ in empty)
    fractions = ", ".join(f"{flag}_fraction={fraction}" for _, flag, fraction in empty)
    zero = " / ".join(f"{flag}_fraction=0 (--{flag}-fraction 0)" for _, flag, _ in empty)
    longer = f", after dropping {dropped} longer than max_len" if dropped else ""
    raise ValueError(
        f"the {names} split{'s' if len(empty) > 1 else ''} of {source} would be empty: "
        f"{usable} usable pair{'s' if usable != 1 else ''}{longer} "
        f"split {train} / {len(val[0])} / {len(test[0])} (train / val / test) with {fractions}; "
        f"use more data, or {zero} to train without {'them' if len(empty) > 1 else 'it'}"
    )
