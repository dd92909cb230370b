"""GPT-2's byte-level BPE, built with the ``tokenizers`` package from a GPT-2 folder.

    tok = GPT2BPETokenizer.from_folder("gpt2")   # vocab.json + merges.txt, or tokenizer.json
    ids = tok.encode("Hello world")               # [15496, 995]: as HF's GPT2Tokenizer
    tok.decode(ids)                               # 'Hello world'
    meta = tok.save(checkpoint_dir)               # gpt2-bpe-<sha>.json + its sha256
    tok = GPT2BPETokenizer.load(checkpoint_dir, meta)
    tok.save_pretrained(folder)                   # vocab.json, merges.txt, tokenizer.json

The pipeline is GPT-2's: the text split by its regular expression (contractions, letters,
numbers, other characters, runs of spaces), each piece's UTF-8 bytes written as printable
characters (a space is ``Ġ``), BPE merges in rank order, no prefix space, no ``<bos>``;
decoding joins the pieces and reads the bytes back as UTF-8 (invalid bytes: U+FFFD).
``<|endoftext|>`` is a special token when the vocabulary has it: written in a text, it is
that one id (as HF's tokenizer does). ``vocab`` lists the byte-level pieces in id order (the
explorer's labels: ``label(id)`` is a piece's own text).

``tokenizers`` is imported inside the methods: ``import attnkit`` does not load it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnkit.data.text import Vocab
from attnkit.i18n import _

__all__ = ["ENDOFTEXT", "GPT2BPETokenizer", "has_gpt2_tokenizer"]

ENDOFTEXT = "<|endoftext|>"  # GPT-2's one special token (its bos, eos and unk)
_KIND = "gpt2-bpe"


def has_gpt2_tokenizer(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds GPT-2 tokenizer files (tokenizer.json, or vocab.json and
    merges.txt)."""
    folder = Path(folder)
    return (folder / "tokenizer.json").is_file() or all(
        (folder / name).is_file() for name in ("vocab.json", "merges.txt")
    )


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise ImportError(
            _("GPT-2's tokenizer needs the tokenizers package (pip install 'attnkit[hf]')")
        ) from None
    return tokenizers


class GPT2BPETokenizer:
    """GPT-2's byte-level BPE: ``encode(text) -> ids``, ``decode(ids) -> text``.

    Args:
        spec: the tokenizer as ``tokenizers`` serializes it (tokenizer.json's text).
        name: how errors name its source.
    """

    def __init__(self, spec: str, *, name: str = "tokenizer") -> None:
        if not isinstance(spec, str):
            message = _("spec must be a tokenizer.json text (str), got {type}")
            raise TypeError(message.format(type=type(spec).__name__))
        try:
            self._tok = _tokenizers().Tokenizer.from_str(spec)
        except Exception as e:  # the Rust side raises its own exception types
            message = _("{name} is not a readable tokenizer.json ({error})")
            raise ValueError(message.format(name=name, error=e)) from None
        self.spec, self.name = spec, name
        size = self._tok.get_vocab_size(with_added_tokens=True)
        pieces = [self._tok.id_to_token(i) for i in range(size)]
        if any(p is None for p in pieces):
            message = _("{name} has gaps in its token ids (0 .. {last})")
            raise ValueError(message.format(name=name, last=size - 1))
        self.vocab = Vocab.from_dict({"idx_to_token": pieces})
        self.eos_id = self._tok.token_to_id(ENDOFTEXT)  # None when the vocabulary lacks it

    # ------------------------------------------------------------------ building
    @classmethod
    def from_files(
        cls, vocab_file: str | os.PathLike, merges_file: str | os.PathLike
    ) -> GPT2BPETokenizer:
        """GPT-2's tokenizer of a vocab.json (piece -> id) and a merges.txt (one merge a
        line, by rank; a ``#version`` first line is skipped)."""
        tk = _tokenizers()
        for path in (vocab_file, merges_file):
            if not Path(path).is_file():
                message = _("{path!r} not found (GPT-2's tokenizer needs it)")
                raise FileNotFoundError(message.format(path=str(path)))
        try:
            vocab, merges = tk.models.BPE.read_file(str(vocab_file), str(merges_file))
        except Exception as e:
            message = _("{vocab_file} / {merges_file} are not GPT-2 BPE files ({error})")
            raise ValueError(
                message.format(vocab_file=vocab_file, merges_file=merges_file, error=e)
            ) from None
        model = tk.models.BPE(vocab, merges, continuing_subword_prefix="", end_of_word_suffix="",
                              fuse_unk=False)  # fmt: skip
        tok = tk.Tokenizer(model)
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
        if ENDOFTEXT in vocab:
            tok.add_special_tokens([ENDOFTEXT])
        return cls(tok.to_str(), name=f"{Path(vocab_file).parent}")

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> GPT2BPETokenizer:
        """The tokenizer of a GPT-2 folder: tokenizer.json when present (as HF's fast
        tokenizer reads it), else vocab.json + merges.txt."""
        folder = Path(folder)
        if (folder / "tokenizer.json").is_file():
            path = folder / "tokenizer.json"
            return cls(path.read_text(encoding="utf-8"), name=str(path))
        if not has_gpt2_tokenizer(folder):
            message = _(
                "{folder} holds no GPT-2 tokenizer: expected tokenizer.json, or "
                "vocab.json and merges.txt"
            )
            raise FileNotFoundError(message.format(folder=folder))
        return cls.from_files(folder / "vocab.json", folder / "merges.txt")

    # ------------------------------------------------------------------ text <-> ids
    def __len__(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"GPT2BPETokenizer({len(self)} pieces)"

    def encode(self, text: str) -> list[int]:
        """Text -> ids (no special token added)."""
        if not isinstance(text, str):
            raise TypeError(_("text must be a str, got {type}").format(type=type(text).__name__))
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> text (special tokens kept, as HF's ``decode``); ValueError for an id
        outside the vocabulary."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(self)]
        if bad:
            message = _("ids {bad} are outside the tokenizer's [0, {size})")
            raise ValueError(message.format(bad=bad[:5], size=len(self)))
        return self._tok.decode(ids, skip_special_tokens=False)

    def label(self, token_id: int) -> str:
        """One token's own text (a piece may hold part of a character: U+FFFD then)."""
        return self.decode([token_id])

    # ------------------------------------------------------------------ files
    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.spec.encode("utf-8")).hexdigest()

    @property
    def file_name(self) -> str:
        return f"{_KIND}-{self.sha256[:12]}.json"

    def meta(self) -> dict[str, Any]:
        """The record a checkpoint's config.json keeps: kind, size, file, sha256."""
        return {"kind": _KIND, "vocab_size": len(self), "file": self.file_name,
                "sha256": self.sha256}  # fmt: skip

    def save(self, directory: str | os.PathLike) -> dict[str, Any]:
        """Write tokenizer.json's text into ``directory`` under a content-addressed name
        (atomically); return its record (``meta()``)."""
        from attnkit.checkpoint import atomic_write

        path = Path(directory) / self.file_name
        if not path.is_file():
            atomic_write(path, lambda tmp: Path(tmp).write_text(self.spec, encoding="utf-8"))
        return self.meta()

    @classmethod
    def load(cls, directory: str | os.PathLike, meta: Any) -> GPT2BPETokenizer:
        """The tokenizer :meth:`save` recorded; a missing or damaged file is an error
        naming it."""
        directory = Path(directory)
        if not isinstance(meta, dict) or meta.get("kind") != _KIND:
            message = _("checkpoint {directory}: not a {kind} tokenizer record: {meta!r}")
            raise ValueError(message.format(directory=directory, kind=_KIND, meta=meta))
        name = meta.get("file")
        if not isinstance(name, str) or Path(name).name != name or not name:
            message = _("checkpoint {directory}: bad tokenizer file name {name!r}")
            raise ValueError(message.format(directory=directory, name=name))
        path = directory / name
        if not path.is_file():
            message = _("checkpoint {directory} is incomplete: {name} is missing")
            raise FileNotFoundError(message.format(directory=directory, name=name))
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            message = _("tokenizer file {path} is corrupted (sha256 does not match)")
            raise ValueError(message.format(path=path))
        return cls(data.decode("utf-8"), name=str(path))

    def save_pretrained(self, folder: str | os.PathLike) -> list[str]:
        """Write HF's GPT-2 tokenizer files into ``folder``: vocab.json, merges.txt (from
        the BPE model) and tokenizer.json. Returns the names written."""
        from attnkit.checkpoint import atomic_write

        model = json.loads(self.spec)["model"]
        if model.get("type") != "BPE":
            message = _("{name} is not a BPE tokenizer (model {type!r})")
            raise ValueError(message.format(name=self.name, type=model.get("type")))
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        texts = {
            "vocab.json": json.dumps(model["vocab"], ensure_ascii=False),
            "merges.txt": "#version: 0.2\n" + "".join(m + "\n" for m in merges),
            "tokenizer.json": self.spec,
        }
        folder = Path(folder)
        for name, text in texts.items():
            atomic_write(
                folder / name, lambda tmp, t=text: Path(tmp).write_text(t, encoding="utf-8")
            )
        return list(texts)
