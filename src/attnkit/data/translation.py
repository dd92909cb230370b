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

Reading and the book's own functions (``preprocess_nmt``, ``tokenize_nmt`` with its
off-by-one, ``truncate_pad``, ``build_array_nmt``) live in :mod:`attnkit.data.fra`, splits
and batching in :mod:`attnkit.data.batching`; this module re-exports them with the data
object.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

from attnkit.data.batching import (
    Pair,
    TranslationBatch,
    bucket_batches,
    check_fraction,
    pad_ids,
    padding_efficiency,
    split_by_source,
)
from attnkit.data.fra import (
    BOOK_RESERVED_TOKENS,
    ReadReport,
    build_array_nmt,
    download_fra,
    preprocess_nmt,
    read_fra,
    read_pairs,
    tokenize_nmt,
    truncate_pad,
)
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
            s, s_len = pad_ids([src[i] for i in idx], pad_s)  # (B, S), (B,)
            t, t_len = pad_ids([tgt[i] for i in idx], pad_t)  # (B, T), (B,)
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
        return pad_ids(ids, self.src_vocab["<pad>"])

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
    check_fraction("val_fraction", val_fraction)
    check_fraction("test_fraction", test_fraction)
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
