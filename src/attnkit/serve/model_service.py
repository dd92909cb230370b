"""The model behind the explorer: load a checkpoint once, translate concurrently.

Shape legend: L layers, H heads, S source tokens (``<eos>`` included), T target steps.

Everything here is plain Python (no HTTP), so it can be tested and reused on its own.
Requests run on the shared model at the same time, in the server's worker threads: the
model is only read, and each request's attention maps are recorded in its own context
(``attnkit.attention.recording``), never on the modules. ``serialize=True`` runs one
request at a time instead (a lock; ``benchmarks/serve_concurrency.py`` compares both).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import unicodedata
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnkit.data.translation import TranslationData
from attnkit.inference.attention_maps import attention_maps
from attnkit.inference.attention_maps import merge_pieces as pieces_to_words
from attnkit.inference.beam_search import BeamSearch

__all__ = [
    "CheckpointLoadError",
    "InputError",
    "ModelService",
    "Translation",
    "escape_unencodable",
    "visible",
]


def _escape_char(c: str) -> str:
    n = ord(c)
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def escape_unencodable(s: str) -> str:
    """``s`` with every lone surrogate (which UTF-8 cannot encode) as a ``\\udxxx`` escape."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(_escape_char(c) if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)
    return s


def visible(word: str) -> str:
    """``word`` as it can be read: invisible, control and format characters as escapes.

    ``"cat\\u200b"`` (a zero-width space after ``cat``) is shown as
    ``cat\\u200b``; printable characters (``é``, ``ß``, CJK ...) are kept as they are.
    """
    if word.isprintable():
        return word
    return "".join(c if c.isprintable() else _escape_char(c) for c in word)


def _char_name(c: str) -> str:
    name = unicodedata.name(c, "") or f"a {unicodedata.category(c)} character"
    return f"U+{ord(c):04X} {name}"


class CheckpointLoadError(RuntimeError):
    """The checkpoint could not be loaded (missing, corrupted, or not a translator)."""


class InputError(ValueError):
    """A request the model cannot translate; ``field`` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Translation:
    text: str
    beam_size: int
    seconds: float  # decoding + attention maps
    finished: bool  # ended with <eos> (False: stopped at the length limit)
    unknown_words: list[str]
    maps: dict[str, Any]  # AttentionMaps.to_json()


class ModelService:
    """A loaded translator with its vocabularies and request limits.

    Args:
        model: an attnkit ``EncoderDecoder``.
        data: the ``TranslationData`` the model was trained with (vocabularies, max_len).
        arch: the registry name of the architecture (shown in the page).
        max_chars: the longest accepted input text, in characters.
        max_beam: the largest accepted beam size.
        serialize: translate one request at a time (default: concurrently).
    """

    def __init__(
        self,
        model: nn.Module,
        data: TranslationData,
        arch: str,
        *,
        max_chars: int = 200,
        max_beam: int = 10,
        model_config: dict[str, Any] | None = None,
        serialize: bool = False,
    ) -> None:
        for name, value in (("max_chars", max_chars), ("max_beam", max_beam)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.model = model.eval()
        self.data = data
        self.arch = arch
        self.model_config = dict(model_config or {})
        self.max_chars = max_chars
        self.max_beam = max_beam
        self.device = next(model.parameters()).device
        self._lock = threading.Lock() if serialize else contextlib.nullcontext()

    @classmethod
    def from_checkpoint(
        cls, directory: str | os.PathLike, *, device: str = "cpu", **options: Any
    ) -> ModelService:
        """Load a checkpoint directory; raise ``CheckpointLoadError`` with the reason."""
        from attnkit.training.checkpoint import load_model

        try:
            model, cfg = load_model(directory, device=device)
            data = TranslationData.from_dict(cfg["data"], directory)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
            # another task's checkpoint (a language model) is named as such by load_model
            reason = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise CheckpointLoadError(f"cannot load checkpoint {directory}: {reason}") from e
        return cls(model, data, str(cfg["arch"]), model_config=cfg.get("model_config"), **options)

    @property
    def max_tokens(self) -> int:
        """The most source words (or subword pieces) per sentence (``<eos>`` is added)."""
        return self.data.max_len - 1

    @property
    def tokenizer(self) -> str:
        """ "word" (the book's words) or "sentencepiece" (subword pieces)."""
        return "word" if self.data.tokenizer is None else "sentencepiece"

    def info(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "tokenizer": self.tokenizer,
            "model_config": self.model_config,
            "src_vocab_size": len(self.data.src_vocab),
            "tgt_vocab_size": len(self.data.tgt_vocab),
            "max_chars": self.max_chars,
            "max_tokens": self.max_tokens,
            "max_beam": self.max_beam,
            "device": str(self.device),
        }

    def check(self, text: str, beam_size: int, allow_unknown: bool) -> list[str]:
        """Validate a request; return its unknown words (raise ``InputError`` if refused)."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate, e.g. JSON "\ud800" with no pair
            raise InputError(
                "text",
                f"text is not valid Unicode: character {e.start + 1} (counting from 1) is a "
                f"lone surrogate (U+{ord(text[e.start]):04X}), which cannot be encoded as UTF-8; "
                "a JSON \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one",
            ) from None
        if len(text) > self.max_chars:
            raise InputError(
                "text",
                f"text has {len(text)} characters, more than the limit of {self.max_chars}",
            )
        words = self.data.source_tokens(text)
        if not words:
            raise InputError("text", "text is empty: type an English sentence")
        if len(words) > self.max_tokens:
            unit = "words (punctuation included)" if self.data.tokenizer is None else "pieces"
            raise InputError(
                "text",
                f"text has {len(words)} {unit}, more than the limit of {self.max_tokens} "
                "for this model",
            )
        if not 1 <= beam_size <= self.max_beam:
            raise InputError(
                "beam_size", f"beam_size must be between 1 and {self.max_beam}, got {beam_size}"
            )
        if self.data.tokenizer is not None:  # subwords spell every word (bytes at worst)
            return []
        unknown = list(dict.fromkeys(w for w in words if w not in self.data.src_vocab))
        if unknown and not allow_unknown:
            hidden = dict.fromkeys(c for w in unknown for c in w if not c.isprintable())
            note = ""
            if hidden:
                note = (
                    "; the text contains invisible or control characters, shown above as "
                    f"\\u escapes: {', '.join(_char_name(c) for c in hidden)}"
                )
            raise InputError(
                "text",
                f"unknown words (not in the model's {len(self.data.src_vocab)}-word English "
                f"vocabulary): {', '.join(visible(w) for w in unknown)}{note}",
            )
        return unknown

    def translate(
        self,
        text: str,
        beam_size: int = 1,
        allow_unknown: bool = False,
        merge_pieces: bool = False,
    ) -> Translation:
        """Translate ``text`` (greedy for ``beam_size`` 1, else beam search) with its maps;
        ``merge_pieces``: maps over words instead of subword pieces
        (:func:`attnkit.inference.attention_maps.merge_pieces`)."""
        unknown = self.check(text, beam_size, allow_unknown)
        with self._lock, torch.inference_mode():
            start = time.perf_counter()
            tokens, finished = None, True
            if beam_size > 1:
                tokens, finished = self._beam(text, beam_size)
            maps = attention_maps(self.model, self.data, text, tokens=tokens, finished=finished)
            seconds = time.perf_counter() - start
        if tokens is None:  # greedy: finished when the outputs end with <eos>
            finished = bool(maps.outputs) and maps.outputs[-1] == "<eos>"
        if merge_pieces:
            maps = pieces_to_words(maps)
        return Translation(maps.translation, beam_size, seconds, finished, unknown, maps.to_json())

    def _beam(self, text: str, beam_size: int) -> tuple[list[int], bool]:
        tgt = self.data.tgt_vocab
        src, src_len = self.data.encode_source([text])
        search = BeamSearch(beam_size, self.data.max_len + 2, tgt["<bos>"], tgt["<eos>"])
        best = search(self.model, src.to(self.device), src_len.to(self.device))[0][0]
        return list(best.tokens), best.finished
