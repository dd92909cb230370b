"""Tokenization and vocabularies (the book's ``tokenize``, ``Vocab``, ``count_corpus``)."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

from attnkit._validate import one_of
from attnkit.i18n import _

__all__ = ["Vocab", "count_corpus", "tokenize"]


def tokenize(lines: Sequence[str], token: str = "word") -> list[list[str]]:
    """Split each line into words (``str.split``) or characters (``list``)."""
    if one_of("token", token, ("word", "char")) == "word":
        return [line.split() for line in lines]
    return [list(line) for line in lines]


def count_corpus(tokens: Iterable) -> collections.Counter:
    """Count tokens in a flat list or a list of token lists."""
    tokens = list(tokens)
    if tokens and isinstance(tokens[0], list):
        tokens = [tok for line in tokens for tok in line]
    return collections.Counter(tokens)


class Vocab:
    """Token <-> index mapping, most frequent first, as the book's ``Vocab``.

    Index 0 is ``<unk>``, then ``reserved_tokens`` in order, then tokens with
    frequency >= ``min_freq`` by decreasing frequency (ties keep first-seen order).
    Unknown tokens map to 0.
    """

    def __init__(
        self,
        tokens: Iterable | None = None,
        min_freq: int = 0,
        reserved_tokens: Sequence[str] | None = None,
    ) -> None:
        if tokens is None:
            tokens = []
        if reserved_tokens is None:
            reserved_tokens = []
        counter = count_corpus(tokens)
        self._token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        self.idx_to_token: list[str] = ["<unk>", *(t for t in reserved_tokens if t != "<unk>")]
        self.token_to_idx: dict[str, int] = {t: i for i, t in enumerate(self.idx_to_token)}
        for token, freq in self._token_freqs:
            if freq < min_freq:
                break
            if token not in self.token_to_idx:
                self.idx_to_token.append(token)
                self.token_to_idx[token] = len(self.idx_to_token) - 1

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, list | tuple):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    def __contains__(self, token: str) -> bool:
        return token in self.token_to_idx

    def to_tokens(self, indices):
        if not isinstance(indices, list | tuple):
            idx = int(indices)
            if not 0 <= idx < len(self.idx_to_token):
                message = _("index {idx} is outside the vocabulary [0, {size})")
                raise IndexError(message.format(idx=idx, size=len(self)))
            return self.idx_to_token[idx]
        return [self.to_tokens(index) for index in indices]

    @property
    def unk(self) -> int:
        return 0

    @property
    def token_freqs(self) -> list[tuple[str, int]]:
        return self._token_freqs

    # -- serialization (for checkpoints: plain JSON-able data, never pickles) --------------
    def to_dict(self) -> dict:
        return {"idx_to_token": list(self.idx_to_token), "token_freqs": self._token_freqs}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        v = cls()
        v.idx_to_token = list(d["idx_to_token"])
        v.token_to_idx = {t: i for i, t in enumerate(v.idx_to_token)}
        v._token_freqs = [tuple(x) for x in d.get("token_freqs", [])]
        return v
