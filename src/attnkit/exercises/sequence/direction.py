"""Exercise 8.1.3 of d2l 0.17 (1.0: 9.1.3): does text have a direction of time? Character
n-gram models read left to right and right to left give the same likelihood: exactly (up
to the two ends) for maximum-likelihood counts on the training text, and nearly so on
held-out text."""

from __future__ import annotations

import collections
import math

from attnkit.exercises import corpora
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["reading_direction"]

ORDERS = (2, 3, 5)
SMOOTHING = 0.1  # add-k counts for the held-out text (unseen continuations)


def _counts(text: str, n: int) -> tuple[collections.Counter, collections.Counter]:
    """Counts of the n-grams of ``text`` and of their (n-1)-character contexts."""
    grams = collections.Counter(text[i : i + n] for i in range(len(text) - n + 1))
    contexts = collections.Counter()
    for gram, c in grams.items():
        contexts[gram[:-1]] += c
    return grams, contexts


def _bits_per_char(train: str, test: str, n: int, k: float, alphabet: int) -> float:
    """Cross-entropy (bits per character) of ``test`` under the order-n model of ``train``
    with add-k smoothing over ``alphabet`` characters (k = 0: maximum likelihood)."""
    grams, contexts = _counts(train, n)
    total = 0.0
    for i in range(n - 1, len(test)):
        gram = test[i - n + 1 : i + 1]
        total -= math.log2((grams[gram] + k) / (contexts[gram[:-1]] + k * alphabet))
    return total / (len(test) - n + 1)


@topic
def reading_direction(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.1.3: bits per character of character n-grams, forward against backward."""
    check_args(small, seed)
    name, lines = corpora.text_lines(small)
    text = " ".join(line for line in lines if line)
    if small:
        text = text[:60_000]
    cut = int(0.9 * len(text))
    train, test = text[:cut], text[cut:]
    alphabet = len(set(text))
    fwd_train, bwd_train, fwd_test, bwd_test = {}, {}, {}, {}
    for n in ORDERS:
        fwd_train[f"o{n}"] = _bits_per_char(train, train, n, 0.0, alphabet)
        bwd_train[f"o{n}"] = _bits_per_char(train[::-1], train[::-1], n, 0.0, alphabet)
        fwd_test[f"o{n}"] = _bits_per_char(train, test, n, SMOOTHING, alphabet)
        bwd_test[f"o{n}"] = _bits_per_char(train[::-1], test[::-1], n, SMOOTHING, alphabet)
    train_gap = max(abs(fwd_train[n] - bwd_train[n]) for n in fwd_train)
    test_gap = {n: (bwd_test[n] - fwd_test[n]) / fwd_test[n] for n in fwd_test}
    values = {
        "corpus": name,
        "characters": len(text),
        "orders": list(ORDERS),
        "smoothing": SMOOTHING,
        "train_bits_forward": fwd_train,
        "train_bits_backward": bwd_train,
        "train_gap": train_gap,
        "test_bits_forward": fwd_test,
        "test_bits_backward": bwd_test,
        "test_relative_gap": test_gap,
        "largest_test_gap": max(abs(g) for g in test_gap.values()),
        "test_fwd_5": fwd_test["o5"],
        "test_bwd_5": bwd_test["o5"],
        "test_fwd_2": fwd_test["o2"],
    }
    finding = (
        f"{name}: training text, forward vs backward bits/char differ by at most "
        f"{train_gap:.1e}; held out: "
        + ", ".join(f"order {n[1:]}: {fwd_test[n]:.3f} vs {bwd_test[n]:.3f}" for n in fwd_test)
    )
    return TopicResult("sequence_direction_reading_direction", finding, values)
