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
from pathlib import Path

from attnkit._validate import (
    boolean,
    integer,
    non_negative_int,
    one_of,
    optional,
    positive_int,
)
from attnkit.data.batching import (
    Pair,
    TranslationBatch,
    bucket_batches,
    check_fractions,
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
    read_text_pairs,
    tokenize_nmt,
    truncate_pad,
)
from attnkit.data.marian_tokenizer import MarianTokenizer
from attnkit.data.normalize import normalize_source, normalize_target
from attnkit.data.subword import SubwordTokenizer
from attnkit.data.text import Vocab
from attnkit.data.translation_data import TranslationData
from attnkit.i18n import N_, _, ngettext

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


TOKENIZERS = ("word", "sentencepiece")
SUBWORD_MAX_LEN = 128  # pieces + <eos> per side: no Tatoeba pair comes near it


def load_translation_data(
    data: str | os.PathLike | None = None,
    *,
    num_examples: int | None = None,
    min_freq: int = 2,
    max_len: int | None = None,
    val_fraction: float = 0.05,
    test_fraction: float = 0.05,
    seed: int = 0,
    num_pairs: int = 20000,
    tokenizer: str = "word",
    vocab_size: int = 8000,
    subword_type: str = "unigram",
    joint_vocab: bool = True,
    subword: SubwordTokenizer | MarianTokenizer | None = None,
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

    ``tokenizer="sentencepiece"``: subwords instead of words (see :func:`_subword_data`):
    ``vocab_size`` pieces, ``subword_type`` "unigram" or "bpe", one model for both sides
    (``joint_vocab``) or one each, trained on the training split, or ``subword`` (a
    tokenizer already trained: a checkpoint's) reused as it is. ``max_len`` defaults to 12
    words or ``SUBWORD_MAX_LEN`` pieces.

    Raises:
        ValueError: bad arguments, no usable pair, an empty training split, or an empty
            validation (test) split although ``val_fraction`` (``test_fraction``) is > 0
            (too little data: use more, or pass ``val_fraction=0`` / ``test_fraction=0``).
    """
    one_of("tokenizer", tokenizer, TOKENIZERS)
    if max_len is None:
        max_len = 12 if tokenizer == "word" else SUBWORD_MAX_LEN
    _check_sizes(num_examples, min_freq, max_len, num_pairs)
    check_fractions(val_fraction, test_fraction)
    boolean("joint_vocab", joint_vocab)

    if tokenizer == "sentencepiece":
        return _subword_data(
            data, num_examples, max_len, val_fraction, test_fraction, seed, num_pairs,
            vocab_size, subword_type, joint_vocab, subword,
        )  # fmt: skip
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
        message = _(
            "no pair of {source} fits max_len={max_len} (tokens + <eos>); all "
            "{pairs} pairs are longer"
        )
        raise ValueError(message.format(source=source, max_len=max_len, pairs=len(pairs)))
    if dropped:
        log.info("dropped %d of %d pairs longer than max_len=%d", dropped, len(pairs), max_len)
    tr, va, te = split_by_source(kept, val_fraction, test_fraction, seed)
    train = [kept[i] for i in tr]
    if not train:
        message = _("the training split of {source} is empty ({pairs} pairs)")
        raise ValueError(message.format(source=source, pairs=len(kept)))
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


def _check_sizes(num_examples, min_freq: int, max_len: int, num_pairs: int) -> None:
    optional(positive_int, "num_examples", num_examples)
    non_negative_int("min_freq", min_freq)
    integer("max_len", max_len, minimum=2)  # a token and <eos>
    positive_int("num_pairs", num_pairs)


def _subword_data(
    data, num_examples, max_len, val_fraction, test_fraction, seed, num_pairs,
    vocab_size, subword_type, joint_vocab, subword,
) -> TranslationData:  # fmt: skip
    """The subword branch of :func:`load_translation_data`.

    Text as written -> :func:`normalize_source` / :func:`normalize_target` -> splits that
    never share a normalized sentence -> SentencePiece trained on the training split ->
    pieces; pairs longer than ``max_len`` pieces (with ``<eos>``) on either side are
    dropped from every split (``num_dropped``). Each split keeps its normalized text
    (``texts``): test BLEU is computed on it, detokenized, never on pieces.
    """
    malformed = 0
    if data is None:
        from attnkit.data.synthetic_fr import generate_pairs

        n = num_pairs if num_examples is None else min(num_pairs, num_examples)
        raw = generate_pairs(n, seed)
        source = "generated"
    else:
        path = download_fra() if str(data) == "download" else Path(data)
        source = "download" if str(data) == "download" else str(path)
        raw, report = read_text_pairs(read_fra(path), num_examples, source=str(path))
        malformed = report.malformed
    # a given tokenizer's own normalization (Marian's keeps the source as it is)
    norm_src = getattr(subword, "normalize_source", normalize_source)
    norm_tgt = getattr(subword, "normalize_target", normalize_target)
    texts = [(norm_src(en), norm_tgt(fr)) for en, fr in raw]
    parts = split_by_source([([en], [fr]) for en, fr in texts], val_fraction, test_fraction, seed)
    train_texts = [texts[i] for i in parts[0]]
    if not train_texts:
        message = _("the training split of {source} is empty ({pairs} pairs)")
        raise ValueError(message.format(source=source, pairs=len(texts)))
    _check_not_empty(source, len(texts), 0, len(parts[0]), *zip(parts[1:], (val_fraction, test_fraction)))  # fmt: skip
    if subword is None:
        subword = SubwordTokenizer.train(
            [en for en, _ in train_texts], [fr for _, fr in train_texts],
            vocab_size=vocab_size, model_type=subword_type, joint=joint_vocab,
        )  # fmt: skip
    splits: dict[str, list[Pair]] = {}
    kept_texts: dict[str, list[tuple[str, str]]] = {}
    dropped = 0
    for name, idx in zip(("train", "val", "test"), parts):
        splits[name], kept_texts[name] = [], []
        for i in idx:
            en, fr = texts[i]
            pair = (subword.encode_source(en), subword.encode_target(fr))
            if len(pair[0]) < max_len and len(pair[1]) < max_len:
                splits[name].append(pair)
                kept_texts[name].append((en, fr))
            else:
                dropped += 1
    if not splits["train"]:
        message = _(
            "the training split of {source} is empty: all its {pairs} pairs are "
            "longer than max_len={max_len} pieces (with <eos>); raise --max-len"
        )
        raise ValueError(message.format(source=source, pairs=len(train_texts), max_len=max_len))
    if dropped:
        log.info("dropped %d of %d pairs longer than max_len=%d pieces", dropped, len(texts), max_len)  # fmt: skip
    return TranslationData(
        subword.src_vocab, subword.tgt_vocab, splits["train"], splits["val"], splits["test"],
        max_len, num_dropped=dropped, num_malformed=malformed, source=source,
        tokenizer=subword, texts=kept_texts,
    )  # fmt: skip


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
            (N_("validation"), "val", val),
            (N_("test"), "test", test),
        )
        if fraction > 0 and not part
    ]
    if not empty:
        return
    names = _("validation and test") if len(empty) > 1 else _(empty[0][0])
    fractions = ", ".join(f"{flag}_fraction={fraction}" for _name, flag, fraction in empty)
    zero = " / ".join(f"{flag}_fraction=0 (--{flag}-fraction 0)" for _n, flag, _f in empty)
    longer = _(", after dropping {dropped} longer than max_len").format(dropped=dropped)
    pairs = ngettext("{usable} usable pair{longer}", "{usable} usable pairs{longer}", usable)
    message = ngettext(
        "the {names} split of {source} would be empty: {pairs} split {train} / {val} / "
        "{test} (train / val / test) with {fractions}; use more data, or {zero} to train "
        "without it",
        "the {names} splits of {source} would be empty: {pairs} split {train} / {val} / "
        "{test} (train / val / test) with {fractions}; use more data, or {zero} to train "
        "without them",
        len(empty),
    )
    pairs = pairs.format(usable=usable, longer=longer if dropped else "")
    fields = dict(names=names, source=source, pairs=pairs, train=train, fractions=fractions)
    raise ValueError(message.format(**fields, val=len(val[0]), test=len(test[0]), zero=zero))
