"""``TranslationData``: the vocabularies (or subword models), splits and batches of an
English -> French corpus; built by :func:`attnkit.data.translation.load_translation_data`.

Shape legend: B batch, S source length, T target length.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from torch import Tensor

from attnkit._validate import one_of
from attnkit.data.batching import Pair, TranslationBatch, bucket_batches, pad_ids
from attnkit.data.fra import preprocess_nmt
from attnkit.data.marian_tokenizer import MarianTokenizer
from attnkit.data.subword import SubwordTokenizer
from attnkit.data.text import Vocab
from attnkit.i18n import N_, _

__all__ = ["TranslationData", "load_tokenizer"]


def load_tokenizer(
    directory: str | os.PathLike, record: dict
) -> SubwordTokenizer | MarianTokenizer:
    """The tokenizer a checkpoint's data record names (``record["kind"]``: attnkit's
    ``sentencepiece`` models or an imported ``marian`` one), its files read from
    ``directory`` and sha256-checked."""
    if isinstance(record, dict) and record.get("kind") == MarianTokenizer.kind:
        return MarianTokenizer.load(directory, record)
    return SubwordTokenizer.load(directory, record)


class TranslationData:
    """Vocabularies, splits and batches of an English -> French corpus.

    ``train``/``val``/``test`` hold ``(source tokens, target tokens)`` pairs in the
    book's preprocessed form, without ``<eos>``. ``max_len`` bounds each side's
    length *including* ``<eos>``. Build it with :func:`load_translation_data`.

    Special tokens are used by id (:attr:`special_ids`): the vocabularies' ``<bos>``,
    ``<eos>``, ``<pad>``, ``<unk>`` for attnkit's words and subwords, the tokenizer's own
    ids for an imported Marian model (its ``</s>`` is 0, its decoder starts at ``<pad>``).
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
        tokenizer: SubwordTokenizer | MarianTokenizer | None = None,
        texts: dict[str, list[tuple[str, str]]] | None = None,
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
        # subwords: the SentencePiece models, and each split's normalized (source, target)
        # text (what translations are made from and scored against); None: word level
        self.tokenizer = tokenizer
        self.texts = texts or {}
        self._cache: dict[str, tuple[list[list[int]], list[list[int]]]] = {}

    def __repr__(self) -> str:
        return (
            f"TranslationData(source={self.source!r}, train={len(self.train)}, "
            f"val={len(self.val)}, test={len(self.test)}, |src_vocab|={len(self.src_vocab)}, "
            f"|tgt_vocab|={len(self.tgt_vocab)}, max_len={self.max_len}, "
            f"dropped={self.num_dropped}{', ' + repr(self.tokenizer) if self.tokenizer else ''})"
        )

    @property
    def special_ids(self) -> dict[str, int]:
        """The target side's ``bos`` (the decoder's first input), ``eos``, ``pad``, ``unk``
        ids and the source side's ``src_eos``, ``src_pad``."""
        own = getattr(self.tokenizer, "special_ids", None)
        if own is not None:  # one vocabulary for both sides
            return {**own, "src_eos": own["eos"], "src_pad": own["pad"]}
        tgt, src = self.tgt_vocab, self.src_vocab
        return {
            "bos": tgt["<bos>"],
            "eos": tgt["<eos>"],
            "pad": tgt["<pad>"],
            "unk": tgt.unk,
            "src_eos": src["<eos>"],
            "src_pad": src["<pad>"],
        }

    @property
    def suppress_ids(self) -> tuple[int, ...]:
        """Target ids decoding never emits: a Marian tokenizer's (pad, ``bad_words_ids``);
        none for attnkit's own vocabularies (their models never learned to emit them)."""
        return tuple(getattr(self.tokenizer, "suppress_ids", ()))

    def split(self, name: str) -> list[Pair]:
        return getattr(self, one_of("split", name, ("train", "val", "test")))

    def encoded(self, name: str) -> tuple[list[list[int]], list[list[int]]]:
        """The split ``name``'s source and target ids, each ending in ``<eos>`` (made once)."""
        if name not in self._cache:
            ids = self.special_ids
            eos_s, eos_t = ids["src_eos"], ids["eos"]
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
        src, tgt = self.encoded(split)
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
        pad_s, pad_t = self.special_ids["src_pad"], self.special_ids["pad"]
        out = []
        for idx in groups:
            s, s_len = pad_ids([src[i] for i in idx], pad_s)  # (B, S), (B,)
            t, t_len = pad_ids([tgt[i] for i in idx], pad_t)  # (B, T), (B,)
            out.append(TranslationBatch(s, s_len, t, t_len))
        return out

    def encode_source(self, sentences: list[str]) -> tuple[Tensor, Tensor]:
        """Raw English sentences -> ``(src (B, S) long, src_len (B,) long)``.

        Word level: each sentence goes through :func:`preprocess_nmt` and a whitespace
        split (unknown words become ``<unk>``); subwords: :func:`normalize_source` and the
        SentencePiece model (nothing is unknown). Each gets ``<eos>`` and is right-padded
        with ``<pad>``.

        Raises:
            TypeError: one str instead of a list.
            ValueError: an empty list, an empty sentence, or a sentence longer than
                ``max_len`` tokens with ``<eos>``.
        """
        if isinstance(sentences, str):
            message = _("sentences must be a list of str, got one str: {sentences!r}")
            raise TypeError(message.format(sentences=sentences))
        if not sentences:
            message = _("sentences must be a non-empty list of str, got {sentences!r}")
            raise ValueError(message.format(sentences=sentences))
        eos = self.special_ids["src_eos"]
        ids = []
        for sentence in sentences:
            tokens = self.source_tokens(sentence)
            if not tokens:
                message = _("cannot translate an empty sentence: {sentence!r}")
                raise ValueError(message.format(sentence=sentence))
            if len(tokens) + 1 > self.max_len:
                message = _(
                    "sentence {sentence!r} has {count} {unit} + <eos>, more than max_len={max_len}"
                )
                count, unit = len(tokens), _(self.unit)
                raise ValueError(
                    message.format(sentence=sentence, count=count, unit=unit, max_len=self.max_len)
                )
            ids.append(self.src_vocab[tokens] + [eos])
        return pad_ids(ids, self.special_ids["src_pad"])

    @property
    def unit(self) -> str:
        """What a token is: "words" (the book's tokens) or "pieces" (subwords)."""
        return N_("words") if self.tokenizer is None else N_("pieces")

    @property
    def bleu_tokenize(self) -> str:
        """sacreBLEU's tokenizer for this data: "none" (word level: the book's tokens are
        scored as they are) or "13a" (subwords: detokenized text, the standard one)."""
        return "none" if self.tokenizer is None else "13a"

    def source_tokens(self, sentence: str) -> list[str]:
        """One raw English sentence -> its tokens (words or pieces), no ``<eos>``."""
        if self.tokenizer is not None:
            return self.tokenizer.encode_source(sentence)
        return preprocess_nmt(sentence).split()

    def sources(self, split: str) -> list[str]:
        """The source sentences of ``split`` as text (what ``encode_source`` takes)."""
        if self.tokenizer is not None:
            return [s for s, _ in self.texts[split]]
        return [" ".join(s) for s, _ in self.split(split)]

    def references(self, split: str) -> list[str]:
        """The reference translations of ``split`` as text (what BLEU compares with)."""
        if self.tokenizer is not None:
            return [t for _, t in self.texts[split]]
        return [" ".join(t) for _, t in self.split(split)]

    def detokenize(self, ids: Sequence[int] | Tensor) -> str:
        """Decoded target ids (``<eos>`` excluded) -> the translation's text: the words
        joined by spaces, or the pieces decoded by SentencePiece."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        if self.tokenizer is not None:
            return self.tokenizer.decode_target(ids)
        return " ".join(self.tgt_vocab.to_tokens(list(ids)))

    def decode_target(self, ids: Sequence[int] | Tensor) -> str:
        """Target ids -> sentence, stopping at ``<eos>`` and skipping ``<pad>``/``<bos>``."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        if self.tokenizer is not None:
            return self.tokenizer.decode_target(ids)
        words = []
        for i in ids:
            token = self.tgt_vocab.to_tokens(int(i))
            if token == "<eos>":
                break
            if token not in ("<pad>", "<bos>"):
                words.append(token)
        return " ".join(words)

    def to_dict(self) -> dict:
        """Vocabularies and ``max_len`` as plain JSON-able data (for checkpoints); with
        subwords also the tokenizer's record (its files: :meth:`SubwordTokenizer.save`)."""
        d = {
            "src_vocab": self.src_vocab.to_dict(),
            "tgt_vocab": self.tgt_vocab.to_dict(),
            "max_len": self.max_len,
        }
        if self.tokenizer is not None:
            d["tokenizer"] = self.tokenizer.meta()
        return d

    @classmethod
    def from_dict(cls, d: dict, directory: str | os.PathLike | None = None) -> TranslationData:
        """Inverse of :meth:`to_dict`; the splits are empty. A subword record loads its
        tokenizer files from the checkpoint ``directory``."""
        tokenizer = None
        vocabs = Vocab.from_dict(d["src_vocab"]), Vocab.from_dict(d["tgt_vocab"])
        if d.get("tokenizer") is not None:
            if directory is None:
                raise ValueError(_("a subword checkpoint's data needs its directory to load"))
            tokenizer = load_tokenizer(directory, d["tokenizer"])
            if isinstance(tokenizer, MarianTokenizer):
                vocabs = tokenizer.src_vocab, tokenizer.tgt_vocab  # its own <unk> id
        return cls(
            *vocabs,
            [],
            [],
            [],
            int(d["max_len"]),
            source="checkpoint",
            tokenizer=tokenizer,
        )
