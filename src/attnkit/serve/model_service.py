"""The model behind the explorer: load a checkpoint once, translate concurrently.

Shape legend: L layers, H heads, S source tokens (``<eos>`` included), T target steps.

Everything here is plain Python (no HTTP), so it can be tested and reused on its own.
``ModelService`` wraps the one translator service, ``attnkit.inference.translator.Translator``
(its input limits, decoding and attention maps), adding the explorer's request limits
(``max_chars``, ``max_beam``) and its JSON-ready ``Translation``.
Requests run on the shared model at the same time, in the server's worker threads: the
model is only read, and each request's attention maps are recorded in its own context
(``attnkit.attention.recording``), never on the modules. ``max_concurrent`` bounds how many run at once (1: one
request at a time instead (a lock; ``benchmarks/models/serve_concurrency.py`` compares both).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from torch import nn

from attnkit._validate import boolean, integer, optional, positive_int
from attnkit.data.translation import TranslationData
from attnkit.i18n import _
from attnkit.inference.translator import InputError, Translator, escape_unencodable, visible

__all__ = [
    "CheckpointLoadError",
    "InputError",
    "ModelService",
    "Translation",
    "escape_unencodable",
    "visible",
]


def request_slots(max_concurrent: int | None):
    """What a service holds while a request runs on its shared model: at most
    ``max_concurrent`` at once (a semaphore), or no bound (None)."""
    if max_concurrent is None:
        return contextlib.nullcontext()
    return threading.BoundedSemaphore(max_concurrent)


class CheckpointLoadError(RuntimeError):
    """The checkpoint could not be loaded (missing, corrupted, or not a translator)."""


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
        max_concurrent: translations running at once (the others wait); None: no bound,
            1: one at a time. Default 2 (the best of 1, 2 and unbounded on 2 cores:
            ``benchmarks/models/serve_concurrency.py``).
        max_len: the most new tokens of a translation, ``<eos>`` included (as
            transformers' ``max_new_tokens`` and ``attnkit translate run --max-len``);
            None: the model's length limit (``Translator.decode_steps``).
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
        max_concurrent: int | None = 2,
        max_len: int | None = None,
    ) -> None:
        max_chars = positive_int("max_chars", max_chars)
        max_beam = positive_int("max_beam", max_beam)
        max_concurrent = optional(positive_int, "max_concurrent", max_concurrent)
        self.translator = Translator(model, data, model_config=model_config, arch=arch)
        self.max_len = optional(positive_int, "max_len", max_len)
        self.translator.decode_steps(self.max_len)  # more than the model can take: refused
        self.model = self.translator.model
        self.data = data
        self.arch = arch
        self.model_config = self.translator.model_config
        self.max_chars = max_chars
        self.max_beam = max_beam
        self.device = self.translator.device
        self._lock = request_slots(max_concurrent)

    @classmethod
    def from_checkpoint(
        cls, directory: str | os.PathLike, *, device: str = "cpu", **options: Any
    ) -> ModelService:
        """Load a checkpoint directory; raise ``CheckpointLoadError`` with the reason."""
        try:
            translator = Translator.load(directory, device=device)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
            # another task's checkpoint (a language model) is named as such by load_model
            reason = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise CheckpointLoadError(
                _("cannot load checkpoint {directory}: {reason}").format(
                    directory=directory, reason=reason
                )
            ) from e
        return cls(
            translator.model,
            translator.data,
            str(translator.arch),
            model_config=translator.model_config,
            **options,
        )

    @property
    def max_tokens(self) -> int:
        """The most source words (or subword pieces) per sentence (``<eos>`` is added)."""
        return self.translator.max_tokens

    @property
    def tokenizer(self) -> str:
        """ "word" (the book's words) or "sentencepiece" (subword pieces)."""
        return "word" if self.data.tokenizer is None else "sentencepiece"

    def info(self) -> dict[str, Any]:
        return {
            "task": "translation",
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
        """Validate a request: the text's limits are the translator's
        (:meth:`Translator.check`), the beam is at most ``max_beam``.

        Args:
            text: one English sentence; beam_size: 1 (greedy) to ``max_beam``;
            allow_unknown: accept words outside a word-level model's vocabulary.

        Returns:
            The text's unknown words (empty for subword models).

        Raises:
            InputError: a request refused, naming its field; TypeError: a beam that is not
            an int or an ``allow_unknown`` that is not a bool.
        """
        integer("beam_size", beam_size)
        boolean("allow_unknown", allow_unknown)
        unknown = self.translator.check(
            [text], allow_unknown=True, max_chars=self.max_chars, field="text"
        )
        if not 1 <= beam_size <= self.max_beam:
            raise InputError(
                "beam_size",
                _("beam_size must be between 1 and {max}, got {beam_size}").format(
                    max=self.max_beam, beam_size=beam_size
                ),
            )
        if unknown and not allow_unknown:  # refused after the beam size: raises, naming them
            self.translator.check([text], allow_unknown=False, field="text")
        return unknown

    def translate(
        self,
        text: str,
        beam_size: int = 1,
        allow_unknown: bool = False,
        merge_pieces: bool = False,
    ) -> Translation:
        """Translate ``text`` with its attention maps, through the one decoding path
        (``Translator.translate``: greedy for ``beam_size`` 1, else beam search ranked by
        raw log-probability, as the explorer always has).

        Args:
            text: one English sentence (checked: :meth:`check`).
            beam_size: 1 for greedy decoding, else beam search's beam (<= ``max_beam``).
            allow_unknown: translate unknown words as ``<unk>`` instead of refusing them.
            merge_pieces: maps over words instead of subword pieces
                (:func:`attnkit.inference.attention_maps.merge_pieces`; a word-level
                model's maps are words already and stay as they are).

        Shape:
            maps: encoder self (L, H, S, S), decoder self (L, H, T, T), cross (L, H, T, S).

        Returns:
            A :class:`Translation` (text, beam, seconds, finished, unknown words, maps).
        """
        unknown = self.check(text, beam_size, allow_unknown)
        boolean("merge_pieces", merge_pieces)
        with self._lock:
            start = time.perf_counter()
            beam = None if beam_size == 1 else beam_size
            [best] = self.translator.translate(
                [text], beam=beam, length_penalty=0.0, max_len=self.max_len
            )
            maps = self.translator.maps(text, best.ids, best.finished, merge_pieces=merge_pieces)
            seconds = time.perf_counter() - start
        return Translation(
            maps.translation, beam_size, seconds, best.finished, unknown, maps.to_json()
        )
