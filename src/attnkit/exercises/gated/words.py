"""Exercise 9.2.2 of d2l 0.17 (1.0's 10.1.2): the word-level language model the question
asks about, built on the same text as the character models and compared with them in
one unit, bits per character of the same held-out characters.

The character stream is the book's (lowercase letters and single spaces), so its words
are ``text.split()`` and the text is exactly the words joined by spaces. The word model
(an embedding, a GRU, a softmax over the training words seen at least ``MIN_FREQ``
times and ``<unk>``) pays for a word outside its vocabulary twice: the probability it
gives ``<unk>``, and the bits to spell the word letter by letter with the training
text's letter frequencies (an end-of-word mark included), so its bits count every
character, as the character model's do."""

from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.data.text import Vocab

__all__ = [
    "MIN_FREQ", "Speller", "WordLM", "char_model_bits", "held_words", "real_word_fraction",
    "sample_words", "word_model_bits",
]  # fmt: skip

MIN_FREQ = 2  # a training word seen once is <unk> (the book's min_freq for words)


class WordLM(nn.Module):
    """Embedding(V, h) -> ``nn.GRU(h, h)`` -> Linear(h, V): ``forward(inputs (B, T),
    state)`` -> ``(logits (T*B, V), state)`` like ``RNNLM``."""

    def __init__(self, vocab_size: int, num_hiddens: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.rnn = nn.GRU(num_hiddens, num_hiddens)
        self.linear = nn.Linear(num_hiddens, vocab_size)

    def forward(self, inputs: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        Y, state = self.rnn(self.embedding(inputs.T), state)  # (T, B, h)
        return self.linear(Y.reshape(-1, Y.shape[-1])), state


class Speller:
    """Letter unigram over the training words, with an end-of-word mark: the bits to
    spell a word the word model does not know."""

    def __init__(self, words: list[str]) -> None:
        self.counts = Counter(c for w in words for c in w)
        self.end = len(words)
        self.total = sum(self.counts.values()) + self.end

    def bits(self, word: str) -> float:
        letters = sum(-math.log2(max(self.counts[c], 0.5) / self.total) for c in word)
        return letters - math.log2(self.end / self.total)


def held_words(text: str) -> str:
    """``text`` cut to whole words: from after its first space to before its last."""
    return text[text.index(" ") + 1 : text.rindex(" ")]


@torch.no_grad()
def char_model_bits(model: nn.Module, vocab, text: str, start: int) -> float:
    """Bits the character model spends on ``text[start:]``, reading ``text`` from a zero
    state in one row (``text[:start]`` is context only)."""
    ids = torch.tensor(vocab[list(text)])
    logits, _ = model(ids[None, :-1])  # (L - 1, V)
    nll = F.cross_entropy(logits, ids[1:], reduction="none")  # the loss of ids[1:]
    return float(nll[start - 1 :].sum()) / math.log(2)


@torch.no_grad()
def word_model_bits(model: nn.Module, vocab: Vocab, words: list[str],
                    speller: Speller) -> tuple[float, float]:  # fmt: skip
    """(bits for ``words[1:]`` read from a zero state in one row, the part of them spent
    spelling unknown words). Each predicted word stands for a space and its letters."""
    ids = torch.tensor(vocab[words])
    logits, _ = model(ids[None, :-1])
    softmax = float(F.cross_entropy(logits, ids[1:], reduction="sum")) / math.log(2)
    spelling = sum(speller.bits(w) for w in words[1:] if w not in vocab)
    return softmax + spelling, spelling


@torch.no_grad()
def sample_words(model: nn.Module, vocab: Vocab, prefix: list[str], length: int,
                 seed: int) -> list[str]:  # fmt: skip
    """``length`` words drawn from the model's softmax after ``prefix`` (seeded)."""
    g = torch.Generator().manual_seed(seed)
    logits, state = model(torch.tensor([vocab[prefix]]))
    out = []
    for _ in range(length):
        nxt = int(torch.multinomial(torch.softmax(logits[-1], -1), 1, generator=g))
        out.append(vocab.to_tokens(nxt))
        logits, state = model(torch.tensor([[nxt]]), state)
    return out


def real_word_fraction(words: list[str], known: set[str]) -> float:
    """The fraction of ``words`` that are words of the training text."""
    return sum(w in known for w in words) / max(1, len(words))
