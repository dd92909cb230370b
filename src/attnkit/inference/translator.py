"""The one translator service: a trained model, its ``TranslationData`` and its limits.

``attnkit translate run`` and ``translate eval``, the explorer's ``ModelService`` and the
demo's test report all go through a ``Translator``:

    tr = Translator.load("runs/bahdanau")
    unknown = tr.check(["i lost ."])              # or an InputError saying what is wrong
    [hyp] = tr.translate(["i lost ."], beam=4)    # Hypothesis(ids, text, finished)
    maps = tr.maps("i lost .", hyp.ids, hyp.finished)

Input limits live in :meth:`Translator.check`, once: a sentence must be valid Unicode
(no lone surrogates), at most ``max_chars`` characters when a limit is given, not empty,
at most :attr:`Translator.max_tokens` words or pieces (``<eos>`` is added; the data's
``max_len`` and, for models with positions, the model config's ``max_len``), and for
word-level data made of known words unless ``allow_unknown``.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnkit._validate import boolean, one_of, optional, positive_int
from attnkit.i18n import _
from attnkit.inference import decoding
from attnkit.inference.attention_maps import AttentionMaps, attention_maps
from attnkit.inference.attention_maps import merge_pieces as pieces_to_words
from attnkit.inference.decoding import Hypothesis
from attnkit.inference.evaluation import split_texts, translate_and_score
from attnkit.inference.shortlist import Shortlist
from attnkit.metrics import bleu_from_stats, bleu_signature, corpus_chrf

__all__ = [
    "Evaluation",
    "Hypothesis",
    "InputError",
    "Translator",
    "escape_char",
    "escape_unencodable",
    "model_max_len",
    "visible",
]


class InputError(ValueError):
    """A sentence (or request) the model cannot translate; ``field`` names the input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Evaluation:
    split: str
    bleu: float  # sacreBLEU corpus BLEU, 0-100
    chrf: float  # sacreBLEU corpus chrF, 0-100
    signature: str  # sacreBLEU's BLEU signature (its tokenizer included)
    sources: list[str]
    hyps: list[str]
    refs: list[str]


def escape_char(c: str) -> str:
    n = ord(c)
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def visible(word: str) -> str:
    """``word`` as it can be read: invisible, control and format characters as escapes.

    ``"cat\\u200b"`` (a zero-width space after ``cat``) is shown as
    ``cat\\u200b``; printable characters (``é``, ``ß``, CJK ...) are kept as they are.
    """
    if word.isprintable():
        return word
    return "".join(c if c.isprintable() else escape_char(c) for c in word)


def _char_name(c: str) -> str:
    name = unicodedata.name(c, "") or f"a {unicodedata.category(c)} character"
    return f"U+{ord(c):04X} {name}"


def _short(sentence: str, limit: int = 60) -> str:
    """``sentence`` cut to its first ``limit`` characters (+ "…"), for messages."""
    return sentence if len(sentence) <= limit else sentence[:limit].rstrip() + "…"


def model_max_len(model_config: dict | None) -> int | None:
    """The most positions a model can encode (its config's ``max_len``), if it has one."""
    value = (model_config or {}).get("max_len")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Translator:
    """A trained translator: ``model`` (an attnkit ``EncoderDecoder``), ``data`` (the
    ``TranslationData`` it was trained with: vocabularies, tokenizer, ``max_len``; with
    splits for :meth:`evaluate`) and the model's config (for its positional ``max_len``).
    """

    def __init__(
        self,
        model: nn.Module,
        data,
        *,
        model_config: dict[str, Any] | None = None,
        arch: str | None = None,
    ) -> None:
        if not isinstance(model, nn.Module) or not all(
            hasattr(model, part) for part in ("encoder", "decoder")
        ):
            message = _("model must be an attnkit EncoderDecoder, got {type}")
            raise TypeError(message.format(type=type(model).__name__))
        missing = [n for n in ("encode_source", "detokenize", "source_tokens", "max_len")
                   if not hasattr(data, n)]  # fmt: skip
        if missing:
            message = _("data must be a TranslationData, got {type} (no {missing})")
            raise TypeError(message.format(type=type(data).__name__, missing=", ".join(missing)))
        self.model = model.eval()
        self.data = data
        self.model_config = dict(model_config or {})
        self.arch = arch
        self.device = next(model.parameters()).device
        self.config: dict[str, Any] = {}  # the checkpoint's config.json (``load``)
        # a vocabulary shortlist every decoding call uses (``attnkit.inference.shortlist``)
        self.shortlist: Shortlist | None = None

    @classmethod
    def load(
        cls,
        checkpoint_dir: str | os.PathLike,
        device: str = "cpu",
        *,
        int8: bool = False,
        shortlist: str | os.PathLike | None = None,
    ) -> Translator:
        """The translator saved in ``checkpoint_dir`` (its tokenizer files included);
        ``int8``: its linear layers in int8 (``attnkit.inference.int8``, CPU only);
        ``shortlist``: a file ``attnkit translate shortlist`` wrote, which every decoding
        call then uses (:mod:`attnkit.inference.shortlist`)."""
        from attnkit.data.translation import TranslationData
        from attnkit.inference.int8 import quantize_int8
        from attnkit.inference.loading import load_model

        int8 = boolean("int8", int8)
        if int8 and torch.device(device).type != "cpu":
            message = _("int8 runs on the CPU: device must be 'cpu', got {device!r}")
            raise ValueError(message.format(device=device))
        model, cfg = load_model(checkpoint_dir, device, prepack=not int8)
        if int8:
            quantize_int8(model)
        # a MarianMT folder's tokenizer files are in it ("folder": a hub name's download)
        data = TranslationData.from_dict(cfg["data"], cfg.get("folder", checkpoint_dir))
        translator = cls(model, data, model_config=cfg.get("model_config"), arch=str(cfg["arch"]))
        translator.config = cfg
        if shortlist is not None:
            translator.shortlist = Shortlist.load(shortlist)
        return translator

    # ------------------------------------------------------------------------- limits

    @property
    def max_tokens(self) -> int:
        """The most source words (or pieces) per sentence; ``<eos>`` is added."""
        limit = self.data.max_len - 1
        model_max = model_max_len(self.model_config)
        return limit if model_max is None else min(limit, model_max - 1)

    def check(
        self,
        sentences: list[str] | str,
        *,
        allow_unknown: bool = False,
        max_chars: int | None = None,
        line_numbers: list[int] | None = None,
        where: str = "",
        field: str | None = None,
    ) -> list[str]:
        """The unknown words of ``sentences`` (word-level data; subwords spell every
        word), or an ``InputError`` naming the first sentence the model cannot take.

        ``where`` names where the sentences came from (``"--input f.txt"``): messages
        then start with ``"--input f.txt line N: "`` (N from ``line_numbers``, else
        1, 2, ...). ``field`` (the explorer's ``"text"``) words the messages about that
        request field instead of "sentence ..." and leaves out the CLI's
        ``--allow-unknown`` hint.
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        boolean("allow_unknown", allow_unknown)
        optional(positive_int, "max_chars", max_chars)
        data = self.data
        limit = self.max_tokens
        numbers = line_numbers or list(range(1, len(sentences) + 1))
        unknown: dict[str, None] = {}
        for number, sentence in zip(numbers, sentences):
            at = _("{where} line {number}: ").format(where=where, number=number) if where else ""
            subject = field or _("sentence {sentence!r}").format(sentence=_short(sentence))
            try:
                sentence.encode("utf-8")
            except UnicodeEncodeError as e:  # a lone surrogate: JSON "\ud800" with no pair
                message = _(
                    "{at}{subject} is not valid Unicode: character {position} (counting from "
                    "1) is a lone surrogate (U+{code:04X}), which cannot be encoded as UTF-8; "
                    "a JSON \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one"
                )
                subject = field or _("the sentence")
                position, code = e.start + 1, ord(sentence[e.start])
                raise InputError(
                    field or "text",
                    message.format(at=at, subject=subject, position=position, code=code),
                ) from None
            if max_chars is not None and len(sentence) > max_chars:
                message = _("{at}{subject} has {count} characters, more than the limit of {limit}")
                raise InputError(
                    field or "text",
                    message.format(at=at, subject=subject, count=len(sentence), limit=max_chars),
                )
            words = data.source_tokens(sentence)
            if not words:
                raise InputError(
                    field or "text",
                    _("{at}{field} is empty: type an English sentence").format(at=at, field=field)
                    if field
                    else _("{at}cannot translate an empty sentence: {sentence!r}").format(
                        at=at, sentence=sentence
                    ),
                )
            if len(words) > limit:
                if field:  # the explorer counts what the user typed
                    unit = (
                        _("words (punctuation included)") if data.tokenizer is None else _("pieces")
                    )
                    message = _(
                        "{at}{field} has {count} {unit}, more than the limit of {limit} for "
                        "this model"
                    )
                    count = len(words)
                    raise InputError(
                        field,
                        message.format(at=at, field=field, count=count, unit=unit, limit=limit),
                    )
                message = _(
                    "{at}{subject} has {count} {unit} + <eos>, more than max_len={max_len} of "
                    "this model"
                )
                raise InputError(
                    "text",
                    message.format(
                        at=at,
                        subject=subject,
                        count=len(words),
                        unit=_(data.unit),
                        max_len=limit + 1,
                    ),
                )
            if data.tokenizer is None:  # subwords spell every word (bytes at worst)
                unknown.update((w, None) for w in words if w not in data.src_vocab)
        if unknown and not allow_unknown:
            hidden = dict.fromkeys(c for w in unknown for c in w if not c.isprintable())
            note = ""
            if hidden:
                note = _(
                    "; the text contains invisible or control characters, shown above as "
                    "\\u escapes: {chars}"
                ).format(chars=", ".join(_char_name(c) for c in hidden))
            hint = "" if field else _("; pass --allow-unknown to translate them as <unk>")
            message = _(
                "unknown words (not in the model's {size}-word English vocabulary): "
                "{words}{note}{hint}"
            )
            words = ", ".join(visible(w) for w in unknown)
            raise InputError(
                field or "text",
                message.format(size=len(data.src_vocab), words=words, note=note, hint=hint),
            )
        return list(unknown)

    def decode_steps(self, max_len: int | None = None) -> int:
        """Decoder steps for a ``max_len`` of new tokens, ``<eos>`` included: ``max_len``
        itself, as transformers' ``max_new_tokens`` (default: the data's ``max_len`` + 2
        steps), checked against the model.

        A model with positional encodings (the Transformer) takes at most its config's
        ``max_len`` decoder positions; the attention maps' teacher-forced pass adds
        ``<bos>`` to the steps, so they stay one below it (transformers' ``max_length``
        counts the decoder's start too: Marian's 512 positions give 511 new tokens).
        """
        model_max = model_max_len(self.model_config)
        if max_len is None:
            steps = self.data.max_len + 2
            return steps if model_max is None else max(1, min(steps, model_max - 1))
        if model_max is not None and max_len > model_max - 1:
            message = _(
                "--max-len {max_len} is more than this model can produce: its config has "
                "max_len={model_max} positions, so --max-len can be at most {most}"
            )
            raise ValueError(
                message.format(max_len=max_len, model_max=model_max, most=model_max - 1)
            )
        return max_len

    # ------------------------------------------------------------------------- decoding

    def translate(
        self,
        sentences: list[str],
        *,
        beam: int | None = None,
        length_penalty: float = 0.6,
        max_len: int | None = None,
        batch_size: int = 64,
    ) -> list[Hypothesis]:
        """The best translation of each sentence, in input order, through the one decoding
        path (:func:`attnkit.inference.decoding.translate`). The sentences are not checked
        here (see :meth:`check`).

        Args:
            sentences: source sentences (a list of str).
            beam: None for batched greedy decoding, else beam search's beam size.
            length_penalty: beam search's GNMT alpha (0: raw log-probability).
            max_len: the most new tokens, ``<eos>`` included, as transformers'
                ``max_new_tokens`` (default: see :meth:`decode_steps`).
            batch_size: sentences decoded at once, in order of length; results do not
                depend on it.

        Shape:
            each batch: src (B, S) long, src_len (B,), on the model's device.

        Returns:
            One :class:`Hypothesis` (ids, text, finished) per sentence, in input order.
        """
        steps = self.decode_steps(optional(positive_int, "max_len", max_len))
        with torch.inference_mode():
            return decoding.translate(  # looked up at call time (patchable)
                self.model, self.data, sentences,
                beam=beam, length_penalty=length_penalty, max_len=steps, batch_size=batch_size,
                shortlist=self.shortlist,
            )  # fmt: skip

    def maps(
        self,
        sentence: str,
        ids: list[int] | None = None,
        finished: bool = True,
        merge_pieces: bool = False,
    ) -> AttentionMaps:
        """The attention maps of ``sentence`` translated as ``ids``.

        Args:
            sentence: one source sentence.
            ids: its translation's target ids (``<eos>`` excluded); None: translated here
                greedily by :meth:`translate`.
            finished: whether ``ids`` ended with ``<eos>`` (ignored when ``ids`` is None).
            merge_pieces: maps over words instead of subword pieces (``merge_pieces`` of
                ``attention_maps``); a word-level model's maps are words already.

        Shape:
            see :class:`AttentionMaps`: encoder self (L, H, S, S), decoder self
            (L, H, T, T), cross (L, H, T, S).

        Returns:
            The sentence's :class:`AttentionMaps`.
        """
        if not isinstance(sentence, str):
            message = _("sentence must be a str, got {type}")
            raise TypeError(message.format(type=type(sentence).__name__))
        boolean("finished", finished)
        boolean("merge_pieces", merge_pieces)
        if ids is None:
            [best] = self.translate([sentence])
            ids, finished = best.ids, best.finished
        with torch.inference_mode():
            maps = attention_maps(
                self.model, self.data, sentence, tokens=list(ids), finished=finished
            )
        subwords = getattr(self.data, "tokenizer", None) is not None
        return pieces_to_words(maps) if merge_pieces and subwords else maps

    # ------------------------------------------------------------------------- scoring

    def evaluate(
        self,
        split: str = "test",
        limit: int | None = None,
        *,
        batch_size: int = 256,
        beam: int | None = None,
        length_penalty: float = 0.6,
        max_len: int | None = None,
    ) -> Evaluation:
        """Corpus BLEU and chrF of the translations of ``split``, decoded through the one
        path (``evaluation.translate_and_score``), scored as ``data.bleu_tokenize`` says.

        Args:
            split: "train", "val" or "test".
            limit: score the split's first ``limit`` sentences (None: all).
            batch_size: sentences decoded at once.
            beam: None for greedy decoding, else beam search's beam size.
            length_penalty: beam search's GNMT alpha.
            max_len: the most new tokens per sentence, ``<eos>`` included (as
                :meth:`translate`'s).

        Shape:
            decoded in batches of src (B, S) long, src_len (B,), B <= ``batch_size``.

        Returns:
            An :class:`Evaluation`: BLEU, chrF, sacreBLEU's signature, and the sources,
            translations and references it scored.
        """
        one_of("split", split, ("train", "val", "test"))
        optional(positive_int, "limit", limit)
        steps = self.decode_steps(optional(positive_int, "max_len", max_len))
        sources, refs = split_texts(self.data, split)
        if limit is not None:
            sources, refs = sources[:limit], refs[:limit]
        if not sources:
            raise ValueError(_("the {split} split is empty").format(split=split))
        with torch.inference_mode():
            hyps, stats = translate_and_score(
                self.model, self.data, sources, refs, max_len=steps,
                batch_size=batch_size, beam=beam, length_penalty=length_penalty,
                shortlist=self.shortlist,
            )  # fmt: skip
        return Evaluation(
            split=split,
            bleu=bleu_from_stats(stats),
            chrf=corpus_chrf(hyps, refs),
            signature=bleu_signature(getattr(self.data, "bleu_tokenize", "none")),
            sources=sources,
            hyps=hyps,
            refs=refs,
        )


def escape_unencodable(s: str) -> str:
    """``s`` with every lone surrogate (which UTF-8 cannot encode) as a ``\\udxxx`` escape."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(escape_char(c) if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)
    return s
