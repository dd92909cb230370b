"""Exercise 9.2.3 of d2l 1.0 (not in 0.17): other corpora against the section's. Every
corpus on this machine without a download (the corpus of ``corpora.text_lines``, the
built-in one, both sides of the generated English-French pairs, both sides of Tatoeba's
``fra.txt`` when it is here), cut to the same number of words: word and character
vocabulary sizes at equal ``min_freq`` and the Zipf exponents of 1- and 2-grams."""

from __future__ import annotations

import random

from attnkit.data.lm import builtin_corpus_lines
from attnkit.data.text import Vocab
from attnkit.exercises import corpora
from attnkit.exercises.sequence.counts import (
    ZIPF_FIRST_RANK,
    ZIPF_MIN_COUNT,
    words_of,
    zipf_exponents,
)
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["other_corpora"]

BUILTIN = "the built-in corpus (Python's reference topics)"
MIN_FREQS = (1, 2, 5)


def _sources(small: bool, n_words: int, seed: int) -> dict[str, list[str]]:
    """name -> lines of every corpus here (the generated pairs: enough for n_words)."""
    from attnkit.data.synthetic_fr import generate_pairs

    name, lines = corpora.text_lines(small)
    found = {name: lines}
    if name != BUILTIN:
        found[BUILTIN] = builtin_corpus_lines()
    pairs = generate_pairs(n_words // 5 + 500, seed)  # about 6 words a sentence
    found["generated English (toy grammar)"] = [en for en, _ in pairs]
    found["generated French (toy grammar)"] = [fr for _, fr in pairs]
    path = None if small else corpora.fra_path()
    if path is not None:
        with open(path, encoding="utf-8") as f:
            rows = [line.split("\t") for line in f.read().splitlines()]
        rows = [r for r in rows if len(r) >= 2]
        random.Random(seed).shuffle(rows)  # the file is sorted by length
        found["Tatoeba English (fra.txt)"] = [r[0] for r in rows]
        found["Tatoeba French (fra.txt)"] = [r[1] for r in rows]
    return found


def _measure(words: list[str]) -> dict:
    chars = [list(" ".join(words))]
    zipf = zipf_exponents(words, (1, 2))
    return {
        "accented_letters": len({c for c in chars[0] if ord(c) > 127}),
        "word_vocab": {f"m{m}": len(Vocab([words], min_freq=m)) for m in MIN_FREQS},
        "char_vocab": {f"m{m}": len(Vocab(chars, min_freq=m)) for m in MIN_FREQS},
        "alpha_1": zipf["n1"]["alpha"],
        "alpha_2": zipf["n2"]["alpha"],
    }


@topic
def other_corpora(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 9.2.3: vocabularies and Zipf exponents of every corpus here, at equal size."""
    check_args(small, seed)
    n_words = 20_000 if small else 30_000
    sources = _sources(small, n_words, seed)
    found = {}
    for name, lines in sources.items():
        words: list[str] = []
        for i in range(0, len(lines), 2000):  # only as many lines as the n_words need
            words += words_of(lines[i : i + 2000])
            if len(words) >= n_words:
                break
        if len(words) < n_words:
            continue  # too short to compare at this size
        found[name] = _measure(words[:n_words])
    main = next(iter(found))
    rows = [
        f"{name}: words {m['word_vocab']['m1']} / {m['word_vocab']['m2']} / "
        f"{m['word_vocab']['m5']}, characters {m['char_vocab']['m1']} / {m['char_vocab']['m5']}, "
        f"Zipf {m['alpha_1']:.2f} (1-grams), {m['alpha_2']:.2f} (2-grams)"
        for name, m in found.items()
    ]
    gen_en, gen_fr = (
        found["generated English (toy grammar)"],
        found["generated French (toy grammar)"],
    )
    natural = [m for name, m in found.items() if not name.startswith("generated")]
    natural_1 = [m["alpha_1"] for m in natural]
    natural_2 = [m["alpha_2"] for m in natural]
    values = {
        "main": main,
        "words": n_words,
        "corpora": list(found),
        "corpus_names": "; ".join(found),
        "tatoeba_here": any(name.startswith("Tatoeba") for name in found),
        "measures": found,
        "table": "; ".join(rows),
        "first_rank": ZIPF_FIRST_RANK,
        "min_count": ZIPF_MIN_COUNT,
        "main_word_vocab": found[main]["word_vocab"]["m1"],
        "generated_word_vocab": gen_en["word_vocab"]["m1"],
        "main_alpha_1": found[main]["alpha_1"],
        "main_alpha_2": found[main]["alpha_2"],
        "generated_alpha_1": gen_en["alpha_1"],
        "generated_alpha_2": gen_en["alpha_2"],
        "generated_french_vocab": gen_fr["word_vocab"]["m1"],
        "natural_alpha_1": [min(natural_1), max(natural_1)],
        "natural_alpha_2": [min(natural_2), max(natural_2)],
        "french_extra_chars": gen_fr["accented_letters"],
        "english_accented": max(found[main]["accented_letters"], gen_en["accented_letters"]),
    }
    finding = f"{n_words} words each: " + "; ".join(rows)
    return TopicResult("sequence_corpora_other_corpora", finding, values)
