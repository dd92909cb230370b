"""Marian's tokenizer (Hugging Face ``MarianTokenizer``): two SentencePiece models, one
vocabulary.

    tok = MarianTokenizer.from_folder("opus-mt-en-fr")   # source.spm, target.spm, vocab.json
    tok.encode_source("Hello world")    # ['▁Hello', '▁world']   (no </s>: TranslationData adds it)
    tok.src_vocab[['▁Hello', '▁world']] + [tok.special_ids["eos"]]   # HF's input_ids
    tok.decode_target([1432, 25, 0])    # 'Bonjour' ... stops at </s>, specials skipped

What it does, as transformers' ``MarianTokenizer`` (5.x) does on a shared vocabulary:

- source text: a leading language code ``>>xx<<`` is kept as one piece; the rest is cut
  into pieces by ``source.spm`` (target text: ``target.spm``); every piece gets its id from
  ``vocab.json``, pieces it does not list become ``<unk>`` (SentencePiece's own ids are not
  Marian's); ``</s>`` is appended (by ``TranslationData.encode_source``).
- ids to text (``decode(ids, skip_special_tokens=True)``): specials (``</s>``, ``<pad>``,
  ``<unk>``) are dropped, the pieces joined by SentencePiece's ``decode_pieces`` of the
  *source* model (transformers 5 decodes with it when the vocabulary is shared), "▁" made a
  space, the ends stripped.

- decoding: ``</s>`` is forced at the last allowed step when the model's generation config
  says so (``forced_eos_token_id``, Marian's default: :attr:`MarianTokenizer.forced_eos`), as
  transformers' ``generate`` does.

Punctuation: transformers' ``MarianTokenizer`` has a ``normalize(text)`` method, sacremoses'
``MosesPunctNormalizer(source_lang)`` when sacremoses is installed (OPUS-MT's training data
went through Moses' punctuation normalizer), but its ``tokenizer(text)`` does not call it
(transformers 5; tested): :meth:`MarianTokenizer.normalize` is that method, and
:meth:`MarianTokenizer.encode_source` takes the text as transformers' call does.
``separate_vocabs`` tokenizers (two vocabularies) are refused with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.data.normalize import normalize_target
from attnkit.data.subword import read_tokenizer_file
from attnkit.data.text import Vocab
from attnkit.i18n import _

__all__ = ["MarianTokenizer", "PieceVocab"]

_FILES = ("source.spm", "target.spm", "vocab.json")


class PieceVocab(Vocab):
    """A ``Vocab`` over a fixed list of pieces whose unknown id is ``unk_id`` (Marian's
    ``<unk>`` is 1, not the book's 0)."""

    @classmethod
    def of(cls, pieces: Sequence[str], unk_id: int) -> PieceVocab:
        vocab = cls.from_dict({"idx_to_token": list(pieces)})
        if not 0 <= unk_id < len(vocab):
            message = _("unk_id {unk_id} is outside the vocabulary [0, {size})")
            raise ValueError(message.format(unk_id=unk_id, size=len(vocab)))
        vocab._unk = unk_id
        return vocab

    @property
    def unk(self) -> int:
        return getattr(self, "_unk", 0)


def _spm(proto: bytes, name: str):
    import sentencepiece

    try:
        return sentencepiece.SentencePieceProcessor(model_proto=proto)
    except Exception as e:  # RuntimeError/OSError on a damaged proto
        message = _("{name} is not a SentencePiece model ({error})")
        raise ValueError(message.format(name=name, error=e)) from None


def _pieces_in_id_order(vocab: dict[str, int], name: str) -> list[str]:
    """vocab.json's {piece: id} -> the pieces by id; ids must be 0..V-1, each once."""
    if not isinstance(vocab, dict) or not vocab:
        message = _("{name} must hold a non-empty JSON object {{piece: id}}")
        raise ValueError(message.format(name=name))
    pieces: list[str | None] = [None] * len(vocab)
    for piece, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < len(vocab) or pieces[i] is not None:
            message = _(
                "{name}: piece {piece!r} has id {i!r}; expected the ids 0..{last}, each once"
            )
            raise ValueError(message.format(name=name, piece=piece, i=i, last=len(vocab) - 1))
        pieces[i] = piece
    return pieces  # type: ignore[return-value]


class MarianTokenizer:
    """Marian's source and target SentencePiece models with the ids of one shared vocabulary.

    Args:
        source_proto, target_proto: the bytes of ``source.spm`` and ``target.spm``.
        vocab: vocab.json's {piece: id}, ids 0..V-1.
        special_ids: ids of ``bos`` (the decoder's start: Marian's
            ``decoder_start_token_id``, its pad), ``eos``, ``pad`` and ``unk``.
        suppress_ids: ids decoding never emits (pad, config.json's ``bad_words_ids``).
        forced_eos: whether decoding ends with ``</s>`` at its last allowed step when the
            sentence has not ended (the generation config's ``forced_eos_token_id``).
        source_lang: the source language (tokenizer_config.json's), for :meth:`normalize`.
    """

    kind = "marian"

    def __init__(
        self,
        source_proto: bytes,
        target_proto: bytes,
        vocab: dict[str, int],
        *,
        special_ids: dict[str, int],
        suppress_ids: Sequence[int] = (),
        names: tuple[str, str, str] = _FILES,
        forced_eos: bool = False,
        source_lang: str | None = None,
    ) -> None:
        self._protos = (source_proto, target_proto)
        self._vocab_json = dict(vocab)
        self._source = _spm(source_proto, names[0])
        self._target = _spm(target_proto, names[1])
        pieces = _pieces_in_id_order(self._vocab_json, names[2])
        missing = sorted({"bos", "eos", "pad", "unk"} - set(special_ids))
        if missing:
            message = _("special_ids lacks {missing}; got {special_ids!r}")
            raise ValueError(message.format(missing=missing, special_ids=special_ids))
        for key, i in special_ids.items():
            if not isinstance(i, int) or not 0 <= i < len(pieces):
                message = _("special_ids[{key!r}] = {i!r} is outside the vocabulary [0, {size})")
                raise ValueError(message.format(key=key, i=i, size=len(pieces)))
        self.special_ids = {k: int(v) for k, v in special_ids.items()}
        self.suppress_ids = tuple(sorted({int(i) for i in suppress_ids}))
        for i in self.suppress_ids:
            if not 0 <= i < len(pieces):
                message = _("suppress id {i} is outside the vocabulary [0, {size})")
                raise ValueError(message.format(i=i, size=len(pieces)))
        self.forced_eos = bool(forced_eos)
        self.source_lang = source_lang
        self.src_vocab = self.tgt_vocab = PieceVocab.of(pieces, self.special_ids["unk"])
        # the ids HF's decode(skip_special_tokens=True) drops: its special tokens
        self._skipped = {self.special_ids[k] for k in ("eos", "pad", "unk")}

    def __repr__(self) -> str:
        return f"MarianTokenizer({len(self.src_vocab)} shared pieces)"

    # ------------------------------------------------------------------ folders
    @classmethod
    def from_folder(
        cls, folder: str | os.PathLike, config: dict[str, Any] | None = None
    ) -> MarianTokenizer:
        """The tokenizer of a Hugging Face MarianMT folder: source.spm, target.spm,
        vocab.json (and tokenizer_config.json when there); special ids, ``bad_words_ids``
        and ``forced_eos_token_id`` from ``config`` (its config.json, read when None) and
        the folder's generation_config.json, which wins where both say (as in
        transformers' ``generate``)."""
        from attnkit.data.hf_folder import check_not_lfs_pointer, read_generation_config

        folder = Path(folder)
        missing = [n for n in _FILES if not (folder / n).is_file()]
        if missing:
            message = _(
                "{folder} is not a complete Marian tokenizer: it lacks {missing} (a "
                "MarianMT folder holds source.spm, target.spm and vocab.json; download "
                "them from the model's page on https://huggingface.co into {folder})"
            )
            raise FileNotFoundError(message.format(folder=folder, missing=", ".join(missing)))
        for name in (*_FILES, "tokenizer_config.json"):
            check_not_lfs_pointer(folder / name)
        settings = _read_json(folder / "tokenizer_config.json", default={})
        if settings.get("separate_vocabs"):
            message = _(
                "{folder}: its tokenizer has separate source and target vocabularies "
                "(separate_vocabs: true), which attnkit does not import: its models "
                "hold one vocabulary for both sides"
            )
            raise ValueError(message.format(folder=folder))
        if config is None:
            config = _read_json(folder / "config.json", default={})
        config = {**config, **read_generation_config(folder)}
        vocab = _read_json(folder / "vocab.json")
        unk_token = str(settings.get("unk_token", "<unk>"))
        if unk_token not in vocab:
            message = _("{vocab} has no {unk_token!r} piece")
            raise ValueError(message.format(vocab=folder / "vocab.json", unk_token=unk_token))
        specials = marian_special_ids(config, vocab, unk_token)
        return cls(
            (folder / "source.spm").read_bytes(),
            (folder / "target.spm").read_bytes(),
            vocab,
            special_ids=specials,
            suppress_ids=marian_suppress_ids(config, specials),
            names=tuple(str(folder / n) for n in _FILES),  # type: ignore[arg-type]
            forced_eos=marian_forced_eos(config, specials),
            source_lang=settings.get("source_lang"),
        )

    def save_folder(self, folder: str | os.PathLike) -> list[str]:
        """Write HF's files (source.spm, target.spm, vocab.json, tokenizer_config.json)
        into ``folder``, for ``MarianTokenizer.from_pretrained``; returns their names."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "source.spm").write_bytes(self._protos[0])
        (folder / "target.spm").write_bytes(self._protos[1])
        (folder / "vocab.json").write_text(
            json.dumps(self._vocab_json, ensure_ascii=False, indent=2), encoding="utf-8"
        )
        pieces = self.src_vocab.idx_to_token
        settings = {
            "tokenizer_class": "MarianTokenizer",
            "separate_vocabs": False,
            "eos_token": pieces[self.special_ids["eos"]],
            "unk_token": pieces[self.special_ids["unk"]],
            "pad_token": pieces[self.special_ids["pad"]],
            "model_max_length": 512,
        }
        (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
        return [*_FILES, "tokenizer_config.json"]

    # ------------------------------------------------------------------ text <-> pieces
    def normalize(self, text: str) -> str:
        """transformers' ``MarianTokenizer.normalize``: sacremoses' Moses punctuation
        normalizer for the source language (``« »`` and curly quotes to ``"``, ``…`` to
        ``...``, spaces around punctuation as Moses writes them) when sacremoses is
        installed (``pip install sacremoses``), else the text as it is; ``""`` stays ``""``.
        Not applied by :meth:`encode_source` (transformers' ``tokenizer(text)`` does not
        apply it either): call it first to feed the model OPUS-MT's training-time
        punctuation."""
        if not text:
            return ""
        normalizer = getattr(self, "_punct", None)
        if normalizer is None:
            try:
                from sacremoses import MosesPunctNormalizer

                normalizer = MosesPunctNormalizer(self.source_lang).normalize
            except (ImportError, FileNotFoundError):
                normalizer = str
            self._punct = normalizer
        return normalizer(text)

    @staticmethod
    def normalize_source(text: str) -> str:
        """Source text as Marian takes it: as it is (cased; no lower-casing as attnkit's
        own subword models do)."""
        return text

    normalize_target = staticmethod(normalize_target)  # references as attnkit scores them

    def encode_source(self, text: str) -> list[str]:
        """A source sentence -> pieces (a leading ``>>xx<<`` kept whole; no ``</s>``)."""
        return _encode(self._source, text)

    def encode_target(self, text: str) -> list[str]:
        """A target sentence -> pieces by ``target.spm`` (no ``</s>``)."""
        return _encode(self._target, text)

    def decode_target(self, ids: Sequence[int]) -> str:
        """Target ids -> text, stopping at ``</s>``, skipping the specials (HF's
        ``decode(ids, skip_special_tokens=True)``)."""
        eos, pieces = self.special_ids["eos"], []
        for i in ids:
            i = int(i)
            if i == eos:
                break
            if i not in self._skipped:
                pieces.append(self.tgt_vocab.idx_to_token[i])
        return self._source.decode_pieces(pieces).replace("\u2581", " ").strip()

    def target_pieces(self, ids: Sequence[int]) -> list[str]:
        return self.tgt_vocab.to_tokens([int(i) for i in ids])

    # ------------------------------------------------------------------ checkpoints
    def _files(self) -> dict[str, bytes]:
        vocab = json.dumps(self._vocab_json, ensure_ascii=False, sort_keys=True).encode()
        contents = (*self._protos, vocab)
        return {
            f"marian-{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{ext}": data
            for (stem, ext), data in zip(
                (("source", "spm"), ("target", "spm"), ("vocab", "json")), contents
            )
        }

    def save(self, directory: str | os.PathLike) -> dict[str, Any]:
        """Write the three files into a checkpoint folder (atomic, content-addressed
        names); return the record for its config.json."""
        from attnkit.checkpoint import atomic_write

        directory = Path(directory)
        for name, data in self._files().items():
            if not (directory / name).is_file():
                atomic_write(directory / name, lambda tmp, d=data: Path(tmp).write_bytes(d))
        return self.meta()

    def meta(self) -> dict[str, Any]:
        """The record kept in a checkpoint's config.json."""
        files = self._files()
        return {
            "kind": self.kind,
            "joint": True,
            "vocab_sizes": [len(self.src_vocab), len(self.tgt_vocab)],
            "special_ids": dict(self.special_ids),
            "suppress_ids": list(self.suppress_ids),
            "forced_eos": self.forced_eos,
            "source_lang": self.source_lang,
            "files": list(files),
            "sha256": [hashlib.sha256(d).hexdigest() for d in files.values()],
        }

    def folder_meta(self, folder: str | os.PathLike) -> dict[str, Any]:
        """The record of this tokenizer read from a Hugging Face folder: its own files
        (source.spm, target.spm, vocab.json) named, with their sha256, so that
        :meth:`load` reads them from that folder."""
        folder = Path(folder)
        return {
            **self.meta(),
            "files": list(_FILES),
            "sha256": [hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in _FILES],
        }

    @classmethod
    def load(cls, directory: str | os.PathLike, meta: dict[str, Any]) -> MarianTokenizer:
        """The tokenizer a checkpoint's record names (files sha256-checked)."""
        directory = Path(directory)
        if not isinstance(meta, dict) or meta.get("kind") != cls.kind:
            message = _("checkpoint {directory}: not a Marian tokenizer record")
            raise ValueError(message.format(directory=directory))
        names, digests = meta.get("files", []), meta.get("sha256", [])
        if len(names) != 3 or len(digests) != 3:
            message = _(
                "checkpoint {directory}: its Marian tokenizer record lists {names!r}; "
                "expected 3 files (source, target, vocab)"
            )
            raise ValueError(message.format(directory=directory, names=names))
        found = [read_tokenizer_file(directory, n, d) for n, d in zip(names, digests)]
        vocab = json.loads(found[2][0].decode("utf-8"))
        return cls(
            found[0][0],
            found[1][0],
            vocab,
            special_ids=dict(meta["special_ids"]),
            suppress_ids=meta.get("suppress_ids", ()),
            names=tuple(str(p) for _, p in found),  # type: ignore[arg-type]
            forced_eos=bool(meta.get("forced_eos", True)),  # Marian's default (older records)
            source_lang=meta.get("source_lang"),
        )


def _encode(sp, text: str) -> list[str]:
    code: list[str] = []
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        code, text = [text[: end + 2]], text[end + 2 :]
    return code + sp.encode(text, out_type=str)


def _read_json(path: Path, default: Any = None) -> Any:
    if not path.is_file() and default is not None:
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(_("{path} not found").format(path=path)) from None
    except ValueError as e:
        message = _("{path} is not valid JSON: {error}")
        raise ValueError(message.format(path=path, error=e)) from None


def marian_special_ids(
    config: dict[str, Any], vocab: dict[str, int], unk_token: str = "<unk>"
) -> dict[str, int]:
    """bos (decoder start), eos, pad, unk ids: config.json's ids where it gives them,
    vocab.json's ``</s>``/``<pad>`` otherwise."""
    pad = config.get("pad_token_id", vocab.get("<pad>"))
    eos = config.get("eos_token_id", vocab.get("</s>"))
    if isinstance(eos, list):  # generation configs may list several
        eos = eos[0]
    bos = config.get("decoder_start_token_id", pad)
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": vocab[unk_token]}
    unset = [k for k, v in specials.items() if not isinstance(v, int)]
    if unset:
        message = _("cannot tell the Marian model's {unset} token ids: {specials}")
        raise ValueError(message.format(unset=unset, specials=specials))
    return specials


def marian_suppress_ids(config: dict[str, Any], specials: dict[str, int]) -> list[int]:
    """The ids decoding must never emit: pad (HF's Marian models list it in
    ``bad_words_ids``) and every single-token entry of ``bad_words_ids``."""
    ids = {specials["pad"]}
    for words in config.get("bad_words_ids") or []:
        if isinstance(words, list) and len(words) == 1 and isinstance(words[0], int):
            ids.add(words[0])
    return sorted(ids)


def marian_forced_eos(config: dict[str, Any], specials: dict[str, int]) -> bool:
    """Whether decoding forces ``</s>`` at its last allowed step: the generation config's
    ``forced_eos_token_id`` is the eos id (MarianConfig's default is 0, Marian's eos; null
    turns it off)."""
    forced = config.get("forced_eos_token_id", 0)
    forced = forced if isinstance(forced, list) else [forced]
    return specials["eos"] in forced
