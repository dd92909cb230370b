"""BLEU (the book's and sacrebleu's), chrF, perplexity."""

from __future__ import annotations

import math

import pytest

from attnkit.metrics import (
    bleu,
    bleu_from_stats,
    bleu_stats,
    corpus_bleu,
    corpus_chrf,
    perplexity,
)


def test_book_bleu_values():
    assert bleu("va !", "va !", 2) == 1.0
    assert bleu("j'ai perdu .", "j'ai perdu .", 2) == 1.0
    # the book prints 0.658: p1 = 3/4, p2 = 1/3
    expected = (3 / 4) ** 0.5 * (1 / 3) ** 0.25
    assert bleu("il est riche .", "il est calme .", 2) == pytest.approx(expected)
    assert round(bleu("il est riche .", "il est calme .", 2), 3) == 0.658
    # the book prints 0.447: p1 = 2/5, p2 = 1/4
    assert round(bleu("je suis en retard ?", "je suis chez moi .", 2), 3) == 0.447
    # brevity penalty exp(1 - 4/2), clipped counts: "a a" vs one "a"
    assert bleu("a b", "a b c d", 2) == pytest.approx(math.exp(-1))
    assert bleu("a a", "a b", 1) == pytest.approx(0.5**0.5)


def test_short_predictions_give_zero_instead_of_dividing_by_zero():
    assert bleu("va", "va !", 2) == 0.0  # the book raises ZeroDivisionError
    assert bleu("", "va !", 2) == 0.0
    assert bleu("", "va !", 1) == 0.0
    with pytest.raises(ValueError, match="k must be a positive int, got 0"):
        bleu("a", "a", 0)
    with pytest.raises(TypeError, match=r"k must be a positive int, got 2\.0 \(float\)"):
        bleu("a", "a", 2.0)
    with pytest.raises(TypeError, match="must be str"):
        bleu(["a"], "a", 1)


def test_sacrebleu_known_pair():
    # matches 5/6, 3/5, 2/4, 1/3, equal lengths: BLEU = (5/6 * 3/5 * 2/4 * 1/3) ** (1/4)
    score = corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"])
    assert score == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-6)
    assert corpus_bleu(["je suis chez moi ."], ["je suis chez moi ."]) == pytest.approx(100)
    # tokenize="none": the apostrophe is not split, so "j'ai" vs "j' ai" never match
    assert corpus_bleu(["j'ai perdu ."], ["j' ai perdu ."]) < 60


def test_bleu_stats_add_up_over_shards():
    hyps = ["a b c d", "il est calme .", "je suis en retard ?", "x y"]
    refs = ["a b c e", "il est calme .", "je suis chez moi .", "x y z"]
    whole = bleu_stats(hyps, refs)
    parts = [bleu_stats(hyps[i::2], refs[i::2]) for i in range(2)]
    summed = [a + b for a, b in zip(*parts)]
    assert summed == whole
    assert bleu_from_stats(summed) == pytest.approx(corpus_bleu(hyps, refs))
    assert bleu_stats([], []) == [0] * 10 and bleu_from_stats([0] * 10) == 0.0
    with pytest.raises(ValueError, match="same length"):
        corpus_bleu(["a"], [])


def test_chrf_and_perplexity():
    assert corpus_chrf(["il est calme ."], ["il est calme ."]) == pytest.approx(100)
    assert 0 < corpus_chrf(["il est riche ."], ["il est calme ."]) < 100
    assert perplexity(math.log(5)) == pytest.approx(5)
    assert perplexity(0.0) == 1.0
    with pytest.raises(ValueError, match="non-negative"):
        perplexity(-1)
