"""The language model behind the explorer: a prompt in, its continuation and the attention
that chose every new token out.

Shape legend: L layers, H heads, P prompt tokens, N new tokens, K = P + N - 1 positions
(the prompt and every new token but the last: each new token is predicted at the position
before it).

``LMService`` wraps a checkpoint of ``attnkit lm train`` (a decoder-only Transformer or the
book's RNN/GRU/LSTM models) and the one generation path, ``attnkit.inference.generation``
(greedy, temperature, top-k, top-p, a seed for a repeatable sample). A Transformer's
continuation comes with its attention: one pass over the prompt and the new tokens with
the weights recorded (``DecoderLM(return_attention=True)``, which computes exact weights,
the same the cached decoding used), cut to the rows that chose the new tokens: the
attention of new token ``j`` over the context is row ``P - 1 + j`` of every layer and head,
(L, H, N, K). An RNN has no attention: its maps are ``None``.

Requests run concurrently on the shared model (read only; attention is recorded per
request context); ``max_concurrent`` bounds how many at once, as ``ModelService``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from attnkit._validate import integer, optional, positive_int
from attnkit.data.lm import normalize_line
from attnkit.i18n import _, use_language
from attnkit.inference.generation import VocabCodec, generate_ids
from attnkit.inference.loading import load_lm_checkpoint, load_lm_tokenizer
from attnkit.inference.sampling import token_picker
from attnkit.inference.translator import InputError
from attnkit.models.registry import lm_arch, lm_model_keys
from attnkit.serve.model_service import request_slots

__all__ = ["Continuation", "LMService"]

DECIMALS = 5  # attention weights sent with 5 decimals: a fifth of the JSON, same picture
DEFAULT_NEW_TOKENS = 50  # a request that does not say (within the limit and the context)


@dataclass
class Continuation:
    prompt: str  # the prompt the model continued (normalized for character/word models)
    text: str  # the prompt followed by its continuation
    continuation: str  # the new text only
    prompt_tokens: list[str]  # P
    new_tokens: list[str]  # N
    seconds: float  # generation + attention maps
    attention: list | None  # (L, H, N, K) nested lists; None for an RNN


class LMService:
    """A loaded language model with its tokenizer and the explorer's request limits.

    Args:
        model: a ``DecoderLM`` or a recurrent LM (``RNNLM``), in eval mode.
        vocab: its vocabulary (characters, words, or a subword model's pieces).
        config: the checkpoint's config.json (``arch``, ``token``, the model's keys).
        tokenizer: a subword model's ``LMSubwordTokenizer`` or GPT-2's ``GPT2BPETokenizer``
            (None: ``vocab`` tokenizes).
        max_chars: the longest accepted prompt, in characters.
        max_new_tokens: the most tokens one request may ask for.
        max_concurrent: generations running at once (None: no bound).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        vocab,
        config: dict[str, Any],
        tokenizer=None,
        *,
        max_chars: int = 200,
        max_new_tokens: int = 200,
        max_concurrent: int | None = 2,
    ) -> None:
        if not isinstance(model, torch.nn.Module) or not (
            hasattr(model, "new_cache") or hasattr(model, "begin_state")
        ):
            raise TypeError(
                _("model must be a language model (a DecoderLM or an RNNLM), got {type}").format(
                    type=type(model).__name__
                )
            )
        self.max_chars = positive_int("max_chars", max_chars)
        self.max_new_tokens = positive_int("max_new_tokens", max_new_tokens)
        max_concurrent = optional(positive_int, "max_concurrent", max_concurrent)
        self.model, self.vocab, self.config, self.tokenizer = model, vocab, config, tokenizer
        self.arch = lm_arch(config)
        # "sentencepiece", "gpt2-bpe" (GPT-2's byte-level BPE), or a book model's "char"/"word"
        self.token = (
            config.get("tokenizer", "sentencepiece") if tokenizer is not None
            else config.get("token", "char")
        )  # fmt: skip
        self.codec = None if tokenizer is not None else VocabCodec(vocab, self.token)
        self.context_length = getattr(model, "context_length", None)  # None: an RNN
        self.device = next(model.parameters()).device
        self._lock = request_slots(max_concurrent)

    @classmethod
    def from_checkpoint(
        cls, directory: str | os.PathLike, *, device: str = "cpu", **options: Any
    ) -> LMService:
        """Load an ``attnkit lm train`` or ``attnkit lm import`` folder, or a GPT-2 folder
        (errors as ``load_lm_checkpoint``)."""
        model, vocab, config = load_lm_checkpoint(directory, device)
        return cls(model, vocab, config, load_lm_tokenizer(directory, config), **options)

    @property
    def model_config(self) -> dict[str, Any]:
        """The keys that define the model (as its checkpoint records them; unset ones left out)."""
        keys = [k for k in lm_model_keys(lm_arch(self.config)) if k != "vocab_size"]
        return {k: self.config[k] for k in keys if self.config.get(k) is not None}

    def info(self) -> dict[str, Any]:
        return {
            "task": "language-model",
            "arch": self.arch,
            "tokenizer": self.token,
            "model_config": self.model_config,
            "vocab_size": len(self.vocab),
            "context_length": self.context_length,
            "max_chars": self.max_chars,
            "max_new_tokens": self.max_new_tokens,
            "device": str(self.device),
        }

    # ------------------------------------------------------------------ requests

    def prompt_ids(self, prompt: str) -> tuple[str, list[int]]:
        """The prompt as the model reads it (character and word models: normalized like
        their corpus, letters and spaces, lowercase) and its token ids; ``InputError``
        naming "prompt" for an empty, too long or unreadable prompt."""
        if not isinstance(prompt, str):
            raise TypeError(
                _("prompt must be a str, got {type}").format(type=type(prompt).__name__)
            )
        if len(prompt) > self.max_chars:
            raise InputError(
                "prompt",
                _("prompt has {n} characters; at most {max}").format(
                    n=len(prompt), max=self.max_chars
                ),
            )
        text = prompt if self.codec is None else normalize_line(prompt)
        if not text.strip():
            if self.codec is None:
                message = _("prompt has nothing to continue: got {prompt}")
            else:
                message = _(
                    "prompt has nothing to continue (the model reads letters and spaces only): "
                    "got {prompt}"
                )
            raise InputError("prompt", message.format(prompt=repr(prompt)))
        try:
            ids = self.tokenizer.encode(text) if self.codec is None else self.codec.encode(text)
        except ValueError as e:
            raise InputError("prompt", str(e)) from None
        return text, [int(i) for i in ids]

    def check(
        self, prompt: str, max_new_tokens: int | None, **sampling: Any
    ) -> tuple[str, list[int], int]:
        """Validate a request: the prompt (:meth:`prompt_ids`), ``1 <= max_new_tokens <=
        max_new_tokens`` of the service, and for a Transformer, the prompt and its
        continuation within the model's context; the sampling options as ``generate``.

        Returns:
            The prompt as read, its ids, and the number of new tokens (``max_new_tokens``;
            None: ``DEFAULT_NEW_TOKENS`` within the limit and the context).
        """
        optional(integer, "max_new_tokens", max_new_tokens)
        try:
            token_picker(**sampling)
        except ValueError as e:
            raise InputError(_sampling_field(sampling), str(e)) from None
        text, ids = self.prompt_ids(prompt)
        ctx = self.context_length
        if max_new_tokens is None:
            room = self.max_new_tokens if ctx is None else ctx - len(ids)
            max_new_tokens = max(1, min(DEFAULT_NEW_TOKENS, self.max_new_tokens, room))
        if not 1 <= max_new_tokens <= self.max_new_tokens:
            raise InputError(
                "max_new_tokens",
                _("max_new_tokens must be between 1 and {max}, got {n}").format(
                    max=self.max_new_tokens, n=max_new_tokens
                ),
            )
        if ctx is not None and len(ids) + max_new_tokens > ctx:
            room = ctx - len(ids)
            field = "prompt" if room < 1 else "max_new_tokens"
            if room >= 1:
                message = _(
                    "the prompt ({n} tokens) and max_new_tokens ({new}) must fit the model's "
                    "context of {context} tokens: at most {room} new tokens"
                )
            else:
                message = _(
                    "the prompt ({n} tokens) and max_new_tokens ({new}) must fit the model's "
                    "context of {context} tokens: shorten the prompt"
                )
            raise InputError(
                field, message.format(n=len(ids), new=max_new_tokens, context=ctx, room=room)
            )
        return text, ids, max_new_tokens

    def generate(
        self,
        prompt: str,
        max_new_tokens: int | None = None,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Continuation:
        """Continue ``prompt`` with ``max_new_tokens`` tokens (None: ``DEFAULT_NEW_TOKENS``
        within the limit and the context; greedy at temperature 0, else sampled; ``seed``
        repeats a sample) and, for a Transformer, the attention of every new token over
        its context.

        Shape:
            attention (L, H, N, K): row j is the attention at the position that chose new
            token j (the prompt's last token for j = 0) over the K positions before it.
        """
        sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
        text, ids, count = self.check(prompt, max_new_tokens, **sampling)
        with self._lock:
            start = time.perf_counter()
            [new] = generate_ids(
                self.model, [ids], max_new_tokens=count, device=self.device, **sampling
            )
            attention = self._attention(ids, new)
            seconds = time.perf_counter() - start
        if self.codec is not None:  # characters or words: the prompt as read, then the new
            whole = self.codec.continued(text, new)
            continuation = whole[len(text) :]
        else:  # subword pieces: decoded together (a piece may join the prompt's last word)
            whole, before = self.tokenizer.decode([*ids, *new]), self.tokenizer.decode(ids)
            continuation = whole[len(before) :] if whole.startswith(before) else whole
        return Continuation(
            text, whole, continuation, self._labels(ids), self._labels(new), seconds, attention
        )

    # ------------------------------------------------------------------ helpers

    def _labels(self, ids: list[int]) -> list[str]:
        """Each token as the maps label it: characters, words or subword pieces (GPT-2's:
        each piece's own text, its space included, not its byte-level spelling)."""
        label = getattr(self.tokenizer, "label", None)
        if label is not None:
            return [label(i) for i in ids]
        return self.vocab.to_tokens(list(ids))

    @torch.no_grad()
    def _attention(self, prompt: list[int], new: list[int]) -> list | None:
        """(L, H, N, K) nested lists of the rows that chose ``new``; None for an RNN."""
        if self.context_length is None:
            return None
        seq = torch.tensor([[*prompt, *new[:-1]]], device=self.device)  # (1, K)
        _logits, weights = self.model(seq, return_attention=True)  # L x (1, H, K, K)
        rows = torch.stack([w[0, :, len(prompt) - 1 :] for w in weights])  # (L, H, N, K)
        return rows.double().cpu().round(decimals=DECIMALS).tolist()


def _sampling_field(sampling: dict[str, Any]) -> str:
    """The sampling option ``token_picker`` refused: its English message starts with the
    option's name (asked again in English: the request's language may be another)."""
    with use_language("en"):
        try:
            token_picker(**sampling)
        except ValueError as e:
            return next((k for k in sampling if str(e).startswith(k)), "temperature")
    return "temperature"
