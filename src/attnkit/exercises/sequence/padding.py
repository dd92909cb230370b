"""Exercise 8.3.6 of d2l 0.17 (1.0: 9.3.5): examples that are whole sentences. Their
lengths vary, so a minibatch pads every sentence to its longest; measured on the
corpus's sentences: the share of real tokens with random batches, with length bucketing
(``attnkit.data.batching.bucket_batches``) and with sentences packed into rows."""

from __future__ import annotations

import random
import re

from attnkit.data.batching import bucket_batches
from attnkit.data.lm import builtin_corpus_lines, normalize_line, read_text_lines
from attnkit.exercises import corpora
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["sentence_batches"]

BATCH = 32  # sentences per random batch
ROW = 64  # words per packed row; a longer sentence is cut into rows of ROW words
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(small: bool) -> tuple[str, list[int]]:
    """(corpus name, the word count of every sentence): the raw text split at blank lines
    and after . ! ?, each sentence normalized as the book normalizes lines."""
    path = None if small else corpora.time_machine_path()
    if path is not None:
        name, raw = "The Time Machine", read_text_lines(path, normalize=False)
    else:
        name, raw = corpora.text_lines(True)[0], builtin_corpus_lines(normalize=False)
    lengths = []
    for paragraph in re.split(r"\n\s*\n", "\n".join(raw)):
        for sentence in _SENTENCE_END.split(paragraph.replace("\n", " ")):
            n = len(normalize_line(sentence).split())
            if n:
                lengths.append(n)
    return name, lengths


def _efficiency(lengths: list[int], batches: list[list[int]]) -> float:
    """Real tokens / tokens after padding each batch to its longest sentence."""
    real = sum(lengths[i] for b in batches for i in b)
    return real / sum(len(b) * max(lengths[i] for i in b) for b in batches)


def _pack(lengths: list[int]) -> tuple[float, int]:
    """First-fit decreasing packing into rows of ROW words (sentences over ROW cut into
    pieces first): (real tokens / row tokens, sentences cut)."""
    pieces = [min(ROW, n - k) for n in lengths for k in range(0, n, ROW)]
    free: list[int] = []  # room left in each row
    for n in sorted(pieces, reverse=True):
        for i, room in enumerate(free):
            if room >= n:
                free[i] -= n
                break
        else:
            free.append(ROW - n)
    return sum(pieces) / (len(free) * ROW), sum(n > ROW for n in lengths)


@topic
def sentence_batches(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.3.6: padding waste of random batches, bucketing and packing."""
    check_args(small, seed)
    name, lengths = _sentences(small)
    if small:
        lengths = lengths[:3000]
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    random_batches = [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
    longest = max(lengths)
    # a budget of padded tokens for about 2 * BATCH sentences of mean length, and at least
    # the longest sentence (bucket_batches needs every sentence to fit in a batch)
    budget = max(longest, BATCH * 2 * round(sum(lengths) / len(lengths)))
    buckets = bucket_batches([(n, 0) for n in lengths], budget, seed=seed)
    packed, cut = _pack(lengths)
    ranked = sorted(lengths)
    values = {
        "corpus": name,
        "sentences": len(lengths),
        "mean_length": sum(lengths) / len(lengths),
        "median_length": ranked[len(ranked) // 2],
        "p99_length": ranked[int(0.99 * (len(ranked) - 1))],
        "longest": longest,
        "batch": BATCH,
        "budget": budget,
        "random_efficiency": _efficiency(lengths, random_batches),
        "bucket_efficiency": _efficiency(lengths, buckets),
        "bucket_batches": len(buckets),
        "row": ROW,
        "packed_efficiency": packed,
        "sentences_cut": cut,
    }
    finding = (
        f"{name}: {len(lengths)} sentences of {values['mean_length']:.1f} words on average "
        f"(longest {longest}); real tokens per padded token: random batches of {BATCH} "
        f"{values['random_efficiency']:.2f}, bucketed {values['bucket_efficiency']:.2f}, "
        f"packed into rows of {ROW} {packed:.3f}"
    )
    return TopicResult("sequence_padding_sentence_batches", finding, values)
