"""Subword tokenization with SentencePiece: trained on the training split, stored in the
checkpoint, and the only thing between normalized text and token ids.

    tok = SubwordTokenizer.train(sources, targets, vocab_size=8000, model_type="unigram")
    tok.encode_source("I'm hungry.")        # ['▁i', "'", 'm', '▁hungry', '.']
    tok.decode_target([41, 7, 953, 3])      # 'J'ai faim.'  (stops at <eos>)
    meta = tok.save(checkpoint_dir)         # tokenizer-<sha>.model files + their sha256
    tok = SubwordTokenizer.load(checkpoint_dir, meta)

Ids follow the word pipeline's layout (``<unk>=0, <pad>=1, <bos>=2, <eos>=3``), so the
models, batches and decoders work unchanged: ``src_vocab``/``tgt_vocab`` are ``Vocab``
objects listing the pieces in id order. ``joint=True`` trains one model on both sides
(one vocabulary, shared pieces such as names and numbers); ``joint=False`` one per side.
SentencePiece's own normalization is off (``identity``): the text is normalized by
:mod:`attnkit.data.normalize` before it gets here, so ``decode(encode(x)) == x``.
``byte_fallback`` spells characters unseen in training as UTF-8 bytes: no ``<unk>``.
Training is deterministic: the same sentences give the same model (tested).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attnkit._validate import boolean, integer, one_of
from attnkit.data.normalize import normalize_source, normalize_target
from attnkit.data.text import Vocab
from attnkit.i18n import N_, _

__all__ = ["MODEL_TYPES", "SubwordTokenizer", "read_tokenizer_file"]

MODEL_TYPES = ("unigram", "bpe")
_SPECIALS = {"<unk>": 0, "<pad>": 1, "<bos>": 2, "<eos>": 3}
_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")


def _spm():
    import sentencepiece

    return sentencepiece


def _processor(proto: bytes, name: str):
    try:
        return _spm().SentencePieceProcessor(model_proto=proto)
    except Exception as e:  # sentencepiece raises RuntimeError/OSError on a damaged proto
        message = _("tokenizer file {name} is damaged (not a SentencePiece model: {error})")
        raise ValueError(message.format(name=name, error=e)) from None


def _train_proto(lines: Sequence[str], vocab_size: int, model_type: str, what: str) -> bytes:
    buffer = io.BytesIO()
    try:
        _spm().SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=buffer,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=1.0,
            byte_fallback=True,
            normalization_rule_name="identity",
            unk_id=0, pad_id=1, bos_id=2, eos_id=3,
            unk_piece="<unk>", pad_piece="<pad>", bos_piece="<bos>", eos_piece="<eos>",
            input_sentence_size=0,  # every sentence (the corpus is small)
            max_sentence_length=1 << 16,
            num_threads=max(1, min(os.cpu_count() or 1, 8)),
            minloglevel=2,  # warnings and errors only
        )  # fmt: skip
    except RuntimeError as e:
        found = _TOO_HIGH.search(str(e))
        if found:
            message = _(
                "--vocab-size {vocab_size} is too large for the {what} ({sentences:,} "
                "sentences): SentencePiece can make at most {limit} pieces of it; use "
                "--vocab-size {limit} or less"
            )
            raise ValueError(
                message.format(
                    vocab_size=vocab_size, what=_(what), sentences=len(lines), limit=found.group(2)
                )
            ) from None
        found = _TOO_LOW.search(str(e))
        if found:
            message = _(
                "--vocab-size {vocab_size} is too small for the {what}: its characters "
                "and the special and byte pieces need {limit}; use more"
            )
            raise ValueError(
                message.format(vocab_size=vocab_size, what=_(what), limit=found.group(2))
            ) from None
        message = _("training the {what} SentencePiece model failed: {error}")
        raise ValueError(message.format(what=_(what), error=e)) from None
    return buffer.getvalue()


def read_tokenizer_file(directory: Path, name: object, digest: object) -> tuple[bytes, Path]:
    """The bytes of tokenizer file ``name`` of checkpoint folder ``directory`` and its path,
    checked against the sha256 ``digest`` its config.json records; a missing or damaged
    file is an error that names it (FileNotFoundError / ValueError)."""
    path = directory / Path(str(name)).name
    if not path.is_file():
        message = _(
            "checkpoint {directory} is incomplete: its tokenizer file {name} is "
            "missing (it is written beside config.json; copy the whole folder)"
        )
        raise FileNotFoundError(message.format(directory=directory, name=path.name))
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != digest:
        message = _("tokenizer file {path} is damaged (its sha256 does not match config.json)")
        raise ValueError(message.format(path=path))
    return data, path


class SubwordTokenizer:
    """SentencePiece models for the source and the target side (one model when joint)."""

    def __init__(
        self,
        src_proto: bytes,
        tgt_proto: bytes | None = None,
        *,
        model_type: str = "unigram",
        names: tuple[str, str] = ("source model", "target model"),
    ) -> None:
        self.joint = tgt_proto is None
        self.model_type = model_type
        self._protos = (src_proto, src_proto if tgt_proto is None else tgt_proto)
        self._src = _processor(src_proto, names[0])
        self._tgt = self._src if tgt_proto is None else _processor(tgt_proto, names[1])
        for sp, name in ((self._src, names[0]), (self._tgt, names[1])):
            found = {p: sp.piece_to_id(p) for p in _SPECIALS}
            if found != _SPECIALS:
                message = _("tokenizer file {name} has special ids {found}, not {specials}")
                raise ValueError(message.format(name=name, found=found, specials=_SPECIALS))
        self.src_vocab = self._vocab(self._src)
        self.tgt_vocab = self.src_vocab if self.joint else self._vocab(self._tgt)

    @staticmethod
    def _vocab(sp) -> Vocab:
        return Vocab.from_dict({"idx_to_token": [sp.id_to_piece(i) for i in range(len(sp))]})

    def __repr__(self) -> str:
        sizes = (
            f"{len(self.src_vocab)} joint"
            if self.joint
            else f"{len(self.src_vocab)} + {len(self.tgt_vocab)}"
        )
        return f"SubwordTokenizer({self.model_type}, {sizes} pieces)"

    # ------------------------------------------------------------------ training
    @classmethod
    def train(
        cls,
        sources: Iterable[str],
        targets: Iterable[str],
        *,
        vocab_size: int = 8000,
        model_type: str = "unigram",
        joint: bool = True,
    ) -> SubwordTokenizer:
        """Train on normalized sentences (``normalize_source``/``normalize_target`` applied
        here). ``vocab_size`` counts every piece, the 4 specials and 256 bytes included."""
        one_of("model_type", model_type, MODEL_TYPES)
        integer("vocab_size", vocab_size)
        boolean("joint", joint)
        minimum = len(_SPECIALS) + 256 + 1
        if vocab_size < minimum:
            message = _(
                "--vocab-size {vocab_size} is too small: the 4 special pieces and 256 "
                "byte pieces take {taken}; use at least {minimum} (say 8000)"
            )
            raise ValueError(
                message.format(vocab_size=vocab_size, taken=minimum - 1, minimum=minimum)
            )
        src = [normalize_source(s) for s in sources]
        tgt = [normalize_target(t) for t in targets]
        if not src or not tgt:
            raise ValueError(_("cannot train a tokenizer on an empty training split"))
        if joint:
            proto = _train_proto(src + tgt, vocab_size, model_type, N_("training split"))
            return cls(proto, model_type=model_type)
        return cls(
            _train_proto(src, vocab_size, model_type, N_("English side of the training split")),
            _train_proto(tgt, vocab_size, model_type, N_("French side of the training split")),
            model_type=model_type,
        )

    # ------------------------------------------------------------------ text <-> pieces
    def encode_source(self, text: str) -> list[str]:
        """An English sentence -> pieces (normalized first; no ``<eos>``)."""
        return self._src.encode(normalize_source(text), out_type=str)

    def encode_target(self, text: str) -> list[str]:
        """A French sentence -> pieces (normalized first; no ``<eos>``)."""
        return self._tgt.encode(normalize_target(text), out_type=str)

    def decode_target(self, ids: Sequence[int]) -> str:
        """Target ids -> text, stopping at ``<eos>`` and skipping ``<pad>``/``<bos>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == _SPECIALS["<eos>"]:
                break
            if i not in (_SPECIALS["<pad>"], _SPECIALS["<bos>"]):
                out.append(i)
        return self._tgt.decode(out)

    def target_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._tgt.id_to_piece(int(i)) for i in ids]

    # ------------------------------------------------------------------ files
    def _files(self) -> dict[str, bytes]:
        sides = ("joint",) if self.joint else ("src", "tgt")
        protos = (self._protos[0],) if self.joint else self._protos
        return {
            f"tokenizer-{side}-{hashlib.sha256(p).hexdigest()[:12]}.model": p
            for side, p in zip(sides, protos)
        }

    def save(self, directory: str | os.PathLike) -> dict[str, Any]:
        """Write the model file(s) into ``directory`` (atomically, content-addressed names,
        so an older checkpoint's files stay valid); return the record for config.json."""
        from attnkit.checkpoint import atomic_write

        directory = Path(directory)
        files = self._files()
        for name, proto in files.items():
            if not (directory / name).is_file():
                atomic_write(directory / name, lambda tmp, p=proto: Path(tmp).write_bytes(p))
        return self.meta()

    def meta(self) -> dict[str, Any]:
        """The record kept in a checkpoint's config.json: kind, type, sizes, files, sha256."""
        files = self._files()
        return {
            "kind": "sentencepiece",
            "model_type": self.model_type,
            "joint": self.joint,
            "vocab_sizes": [len(self.src_vocab), len(self.tgt_vocab)],
            "files": list(files),
            "sha256": [hashlib.sha256(p).hexdigest() for p in files.values()],
        }

    @classmethod
    def load(cls, directory: str | os.PathLike, meta: dict[str, Any]) -> SubwordTokenizer:
        """The tokenizer recorded by :meth:`save`; a missing or damaged file is an error
        that names it."""
        directory = Path(directory)
        if not isinstance(meta, dict) or meta.get("kind") != "sentencepiece":
            message = _("checkpoint {directory}: not a sentencepiece tokenizer record")
            raise ValueError(message.format(directory=directory))
        protos = []
        for name, digest in zip(meta.get("files", []), meta.get("sha256", [])):
            data, path = read_tokenizer_file(directory, name, digest)
            protos.append((data, str(path)))
        if len(protos) != (1 if meta.get("joint") else 2):
            message = _(
                "checkpoint {directory}: its tokenizer record lists files {files!r}; "
                "expected {expected}"
            )
            raise ValueError(
                message.format(
                    directory=directory,
                    files=meta.get("files"),
                    expected=_("1 (joint)") if meta.get("joint") else _("2 (source, target)"),
                )
            )
        if meta.get("joint"):
            return cls(protos[0][0], model_type=meta.get("model_type", "unigram"),
                       names=(protos[0][1], protos[0][1]))  # fmt: skip
        return cls(protos[0][0], protos[1][0], model_type=meta.get("model_type", "unigram"),
                   names=(protos[0][1], protos[1][1]))  # fmt: skip
