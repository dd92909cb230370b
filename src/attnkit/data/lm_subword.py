"""SentencePiece subwords for language models: any UTF-8 text, as it is.

``attnkit lm train --tokenizer sentencepiece`` trains a plain SentencePiece model on the
raw lines of its text, through the machinery of :mod:`attnkit.data.subword` (its trainer
settings: ``byte_fallback``, no ``<unk>`` in practice, SentencePiece's own normalization
off, the special ids ``<unk>=0, <pad>=1, <bos>=2, <eos>=3``) but without the translator's
English/French normalization: the text is neither lowercased nor stripped of punctuation.

    tok = LMSubwordTokenizer.train(lines, vocab_size=1000)
    ids = tok.encode("The Time Traveller")     # [...]
    tok.decode(ids)                            # 'The Time Traveller'
    meta = tok.save(checkpoint_dir)            # sentencepiece-<sha>.model + its sha256
    tok = LMSubwordTokenizer.load(checkpoint_dir, meta)

``decode(encode(x)) == x`` up to runs of whitespace (SentencePiece keeps one space). A
corpus is its lines encoded one after the other (each line starts a new word).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit._validate import integer, one_of
from attnkit.data.subword import (
    _SPECIALS,
    MODEL_TYPES,
    _processor,
    _train_proto,
    read_tokenizer_file,
)
from attnkit.data.text import Vocab
from attnkit.i18n import N_, _

__all__ = ["LMSubwordTokenizer"]


class LMSubwordTokenizer:
    """One SentencePiece model: ``encode(text) -> ids``, ``decode(ids) -> text``;
    ``vocab`` lists its pieces in id order."""

    def __init__(self, proto: bytes, *, model_type: str = "unigram", name: str = "tokenizer"):
        self.proto, self.model_type = proto, model_type
        self._sp = _processor(proto, name)
        found = {p: self._sp.piece_to_id(p) for p in _SPECIALS}
        if found != _SPECIALS:
            message = _("tokenizer file {name} has special ids {found}, not {specials}")
            raise ValueError(message.format(name=name, found=found, specials=_SPECIALS))
        self.vocab = Vocab.from_dict(
            {"idx_to_token": [self._sp.id_to_piece(i) for i in range(len(self._sp))]}
        )

    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"LMSubwordTokenizer({self.model_type}, {len(self)} pieces)"

    @classmethod
    def train(
        cls, lines: Sequence[str], *, vocab_size: int = 1000, model_type: str = "unigram"
    ) -> LMSubwordTokenizer:
        """Train on the non-empty ``lines`` as they are. ``vocab_size`` counts every
        piece, the 4 specials and 256 bytes included (at least 261)."""
        _check_lines(lines)
        one_of("model_type", model_type, MODEL_TYPES)
        integer("vocab_size", vocab_size)
        minimum = len(_SPECIALS) + 256 + 1
        if vocab_size < minimum:
            message = _(
                "--vocab-size {vocab_size} is too small: the 4 special pieces and 256 "
                "byte pieces take {taken}; use at least {minimum} (say 1000)"
            )
            raise ValueError(
                message.format(vocab_size=vocab_size, taken=minimum - 1, minimum=minimum)
            )
        text = [line for line in lines if line.strip()]
        if not text:
            raise ValueError(_("cannot train a tokenizer on a text without a non-empty line"))
        return cls(_train_proto(text, vocab_size, model_type, N_("text")), model_type=model_type)

    def encode(self, text: str) -> list[int]:
        """Text -> piece ids (no ``<bos>``/``<eos>``)."""
        return self._sp.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Piece ids -> text (special pieces are dropped)."""
        return self._sp.decode([int(i) for i in ids if int(i) not in _SPECIALS.values()])

    def encode_lines(self, lines: Sequence[str]) -> list[int]:
        """The ids of the non-empty ``lines``, one after the other (a corpus)."""
        _check_lines(lines)
        return [i for ids in self._sp.encode([x for x in lines if x.strip()]) for i in ids]

    # ------------------------------------------------------------------ files
    @property
    def file_name(self) -> str:
        return f"sentencepiece-{hashlib.sha256(self.proto).hexdigest()[:12]}.model"

    def meta(self) -> dict[str, Any]:
        """The record a checkpoint's config.json keeps: type, size, file, sha256."""
        return {
            "kind": "sentencepiece",
            "model_type": self.model_type,
            "vocab_size": len(self),
            "file": self.file_name,
            "sha256": hashlib.sha256(self.proto).hexdigest(),
        }

    def save(self, directory: str | os.PathLike) -> dict[str, Any]:
        """Write the model file into ``directory`` (atomically, a content-addressed name);
        return its record (``meta()``)."""
        from attnkit.checkpoint import atomic_write

        path = Path(directory) / self.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file():
            atomic_write(path, lambda tmp: Path(tmp).write_bytes(self.proto))
        return self.meta()

    @classmethod
    def load(cls, directory: str | os.PathLike, meta: dict[str, Any]) -> LMSubwordTokenizer:
        """The tokenizer recorded by :meth:`save`: a missing or damaged file is an error
        that names it."""
        directory = Path(directory)
        if not isinstance(meta, dict) or meta.get("kind") != "sentencepiece":
            message = _("checkpoint {directory}: not a sentencepiece tokenizer record")
            raise ValueError(message.format(directory=directory))
        proto, path = read_tokenizer_file(directory, meta.get("file"), meta.get("sha256"))
        return cls(proto, model_type=meta.get("model_type", "unigram"), name=str(path))


def _check_lines(lines: object) -> None:
    if isinstance(lines, str) or not isinstance(lines, Sequence):
        message = _("lines must be a sequence of str (one per line), got {type}")
        raise TypeError(message.format(type=type(lines).__name__))
