"""Text <-> token ids for generation (``attnkit.inference.generation``): a character or word
``Vocab`` (:class:`VocabCodec`) or any subword tokenizer with ``encode``/``decode``
(:class:`TextCodec`, used through ``_TokenizerCodec``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from attnkit._validate import one_of
from attnkit.data.text import Vocab
from attnkit.i18n import _

__all__ = ["TextCodec", "VocabCodec"]


class TextCodec(Protocol):
    """Any tokenizer: ``encode(text) -> ids``, ``decode(ids) -> text``."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


class VocabCodec:
    """Text <-> ids through a ``Vocab`` of characters (``token="char"``) or words ("word").

    ``encode`` refuses an empty text and tokens outside the vocabulary (``unknown="unk"``
    maps them to ``<unk>`` instead); ``name`` is how errors call the text.
    """

    def __init__(self, vocab: Vocab, token: str = "char", unknown: str = "error") -> None:
        if not isinstance(vocab, Vocab):
            message = _("vocab must be a Vocab, got {type}")
            raise TypeError(message.format(type=type(vocab).__name__))
        self.vocab = vocab
        self.token = one_of("token", token, ("char", "word"))
        self.unknown = one_of("unknown", unknown, ("error", "unk"))

    def tokens(self, text: str, name: str = "prompt") -> list[str]:
        """The text's tokens, checked."""
        if not isinstance(text, str):
            message = _("{name} must be a str, got {type}")
            raise TypeError(message.format(name=name, type=type(text).__name__))
        toks = list(text) if self.token == "char" else text.split()
        if not toks:
            message = _("{name} must contain at least one {token} token, got {text!r}")
            raise ValueError(message.format(name=name, token=self.token, text=text))
        missing = sorted({t for t in toks if t not in self.vocab})
        if missing and self.unknown == "error":
            message = _("{name} {text!r} has tokens outside the vocabulary: {missing}; expected "
                        "tokens from the {size}-token vocabulary (e.g. {examples}). Normalize the "
                        "{name} like the corpus, or pass unknown='unk' to map them to <unk>")  # fmt: skip
            fields = dict(size=len(self.vocab), examples=self.vocab.idx_to_token[1:8])
            raise ValueError(message.format(name=name, text=text, missing=missing, **fields))
        return toks

    def encode(self, text: str, name: str = "prompt") -> list[int]:
        return self.vocab[self.tokens(text, name)]

    def decode(self, ids: Sequence[int]) -> str:
        sep = "" if self.token == "char" else " "
        return sep.join(self.vocab.to_tokens(list(ids)))

    def piece(self, new_id: int) -> str:
        """The text one new token adds after the prompt (a word comes with its space)."""
        tok = self.vocab.to_tokens(int(new_id))
        return tok if self.token == "char" else " " + tok

    def continued(self, text: str, new_ids: Sequence[int]) -> str:
        """The prompt followed by the new tokens (words: joined by single spaces)."""
        new = self.vocab.to_tokens(list(new_ids))
        if self.token == "char":
            return text + "".join(new)
        return " ".join([*text.split(), *new])


class _TokenizerCodec:
    """A ``TextCodec`` used as is: pieces are what each new token adds to the decoded text."""

    def __init__(self, tokenizer: TextCodec) -> None:
        for method in ("encode", "decode"):
            if not callable(getattr(tokenizer, method, None)):
                message = _("tokenizer must have encode(text) and decode(ids), lacks {method}")
                raise TypeError(message.format(method=method))
        self.tokenizer = tokenizer

    def encode(self, text: str, name: str = "prompt") -> list[int]:
        if not isinstance(text, str):
            message = _("{name} must be a str, got {type}")
            raise TypeError(message.format(name=name, type=type(text).__name__))
        ids = [int(i) for i in self.tokenizer.encode(text)]
        if not ids:
            message = _("{name} must contain at least one token, got {text!r}")
            raise ValueError(message.format(name=name, text=text))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def continued(self, text: str, new_ids: Sequence[int], prompt_ids: Sequence[int]) -> str:
        return self.decode([*prompt_ids, *new_ids])
