"""Exercises of d2l 0.17 sections 8.2 and 8.3 that count words on the corpus: the
vocabulary against ``min_freq`` (8.2.2; 1.0: 9.2.1), what an n-gram model must store
(8.3.1; 1.0: 9.3.1) and Zipf's exponents of 1-, 2- and 3-grams (8.3.3; 1.0: 9.2.2).
The helpers also serve the other-corpora comparison (1.0's 9.2.3)."""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Sequence

from attnkit.data.text import Vocab, tokenize
from attnkit.exercises import corpora
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["ngram_storage", "vocab_min_freq", "words_of", "zipf_exponent", "zipf_exponents"]

MIN_FREQS = (0, 1, 2, 3, 5, 10, 20, 50, 100)
ZIPF_FIRST_RANK, ZIPF_MIN_COUNT = 10, 5  # the fit: ranks 10 .. the last with count >= 5
_LETTERS = re.compile(r"[^\W\d_]+")  # runs of letters, accented ones included


def words_of(lines: Sequence[str]) -> list[str]:
    """Lowercased runs of letters (the book's normalization, kept for accented letters)."""
    return [w for line in lines for w in _LETTERS.findall(line.lower())]


def ngram_counts(words: Sequence[str], n: int) -> collections.Counter:
    return collections.Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def zipf_exponent(counts: collections.Counter) -> tuple[float, int]:
    """(α, last rank fitted) of frequency ∝ rank^-α: least squares of log count on log
    rank over ranks ZIPF_FIRST_RANK .. the last rank whose count is >= ZIPF_MIN_COUNT."""
    freqs = sorted(counts.values(), reverse=True)
    last = sum(f >= ZIPF_MIN_COUNT for f in freqs)
    if last < ZIPF_FIRST_RANK + 5:
        raise ValueError(f"too few frequent n-grams to fit ({last} with count >= 5)")
    xs = [math.log(r) for r in range(ZIPF_FIRST_RANK, last + 1)]
    ys = [math.log(freqs[r - 1]) for r in range(ZIPF_FIRST_RANK, last + 1)]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return -slope, last


def zipf_exponents(words: Sequence[str], orders=(1, 2, 3)) -> dict[str, dict]:
    """{"1": {"alpha", "last_rank", "types"}, ...} for each n-gram order."""
    found = {}
    for n in orders:
        counts = ngram_counts(words, n)
        alpha, last = zipf_exponent(counts)
        found[f"n{n}"] = {"alpha": alpha, "last_rank": last, "types": len(counts)}
    return found


@topic
def vocab_min_freq(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.2.2: the word and character vocabulary sizes of ``Vocab`` against ``min_freq``,
    the words seen once, and how many of the corpus's tokens each vocabulary covers."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    name, lines = corpora.text_lines(small)
    words = tokenize(lines, "word")
    chars = tokenize(lines, "char")
    counts = collections.Counter(w for line in words for w in line)
    n_tokens = sum(counts.values())
    word_vocabs = {m: Vocab(words, min_freq=m) for m in MIN_FREQS}
    word_sizes = {f"m{m}": len(v) for m, v in word_vocabs.items()}
    char_sizes = {f"m{m}": len(Vocab(chars, min_freq=m)) for m in MIN_FREQS}
    # counted apart from Vocab: the words seen at least min_freq times
    at_least = {f"m{m}": sum(c >= m for c in counts.values()) for m in MIN_FREQS}
    hapaxes = sum(c == 1 for c in counts.values())
    # the text encoded by each vocabulary: the share of its tokens that are not <unk>
    coverage = {f"m{m}": sum(v[w] != v.unk for line in words for w in line) / n_tokens
                for m, v in word_vocabs.items()}  # fmt: skip
    fig = plot_curves(
        {gettext("words"): [word_sizes[f"m{m}"] for m in MIN_FREQS[1:]],
         gettext("characters"): [char_sizes[f"m{m}"] for m in MIN_FREQS[1:]]},
        "min_freq", gettext("vocabulary size"), x=list(MIN_FREQS[1:]), logy=True, figsize=(4.5, 3),
    )  # fmt: skip
    fig.axes[0].set_xscale("log")
    values = {
        "corpus": name,
        "tokens": n_tokens,
        "word_types": len(counts),
        "word_vocab": word_sizes,
        "char_vocab": char_sizes,
        "hapaxes": hapaxes,
        "hapax_share_of_types": hapaxes / len(counts),
        "hapax_share_of_tokens": hapaxes / n_tokens,
        "drop_1_to_2": word_sizes["m1"] - word_sizes["m2"],
        "words_at_least": at_least,
        "token_coverage": coverage,
        "kept_at_10": word_sizes["m10"] / word_sizes["m1"],
        "removed_at_3": 1 - word_sizes["m3"] / word_sizes["m1"],
    }
    finding = (
        f"{name}: word vocabulary by min_freq "
        + ", ".join(f"{m}: {s}" for m, s in word_sizes.items())
        + f"; {hapaxes} words seen once ({hapaxes / len(counts):.0%} of the words, "
        f"{hapaxes / n_tokens:.1%} of the tokens)"
    )
    return TopicResult("sequence_counts_vocab_min_freq", finding, values, {"sizes": fig})


@topic
def ngram_storage(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.3.1: distinct 1- to 4-grams in the corpus (and in its first quarter and half)
    against the bounds: positions (N - n + 1) and V^n."""
    check_args(small, seed)
    name, lines = corpora.text_lines(small)
    words = words_of(lines)
    if small:
        words = words[:30_000]
    n_tokens = len(words)
    distinct, singletons, by_prefix = {}, {}, {}
    for n in (1, 2, 3, 4):
        counts = ngram_counts(words, n)
        distinct[f"n{n}"] = len(counts)
        singletons[f"n{n}"] = sum(c == 1 for c in counts.values()) / len(counts)
        by_prefix[f"n{n}"] = [len(ngram_counts(words[: n_tokens * q // 4], n)) / (n_tokens * q // 4)
                             for q in (1, 2, 4)]  # fmt: skip
    vocab = distinct["n1"]
    values = {
        "corpus": name,
        "tokens": n_tokens,
        "distinct": distinct,
        "total_counts": sum(distinct.values()),
        "position_bound": sum(n_tokens - n + 1 for n in (1, 2, 3, 4)),
        "fraction_of_positions": {n: d / (n_tokens - int(n[1:]) + 1) for n, d in distinct.items()},
        "singleton_share": singletons,
        "distinct_per_token_by_prefix": by_prefix,
        "log10_vocab_power_4": 4 * math.log10(vocab),
    }
    finding = (
        f"{name} ({n_tokens} tokens): distinct n-grams "
        + ", ".join(f"n = {n}: {d}" for n, d in distinct.items())
        + f" ({sum(distinct.values())} counts to store, against {vocab}^4 possible 4-grams)"
    )
    return TopicResult("sequence_counts_ngram_storage", finding, values)


@topic
def zipf(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.3.3: Zipf exponents of unigrams, bigrams and trigrams by a log-log fit."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    name, lines = corpora.text_lines(small)
    words = words_of(lines)
    found = zipf_exponents(words)
    freqs = {n: sorted(ngram_counts(words, n).values(), reverse=True) for n in (1, 2, 3)}
    fig = plot_curves(
        {gettext("{n}-grams (α = {alpha:.2f})").format(n=n, alpha=found[f"n{n}"]["alpha"]):
         f[:5000] for n, f in freqs.items()},
        gettext("rank"), gettext("count"), x=list(range(1, 5001)), logy=True, figsize=(4.5, 3),
    )  # fmt: skip
    fig.axes[0].set_xscale("log")
    alphas = {n: f["alpha"] for n, f in found.items()}
    values = {
        "corpus": name,
        "tokens": len(words),
        "first_rank": ZIPF_FIRST_RANK,
        "min_count": ZIPF_MIN_COUNT,
        "fits": found,
        "alpha": alphas,
        "top_counts": {f"n{n}": f[:3] for n, f in freqs.items()},
    }
    finding = f"{name}: Zipf exponents " + ", ".join(
        f"{n[1:]}-grams {a:.2f} (ranks {ZIPF_FIRST_RANK}-{found[n]['last_rank']})"
        for n, a in alphas.items()
    )
    return TopicResult("sequence_counts_zipf", finding, values, {"ranks": fig})
