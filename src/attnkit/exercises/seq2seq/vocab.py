"""Exercises of d2l 0.17 section 9.5 (machine translation data): vocabulary sizes
against the number of pairs read (9.5.1), and word-level tokens for text written
without spaces (9.5.2). Both count on the book's own preprocessing and ``Vocab``."""

from __future__ import annotations

import itertools

from attnkit.exercises.glossary import data_label
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["no_spaces", "vocab_growth"]

RESERVED = ["<pad>", "<bos>", "<eos>"]


def _raw_text(small: bool, seed: int) -> tuple[str, str]:
    """(name, fra.txt-format text): Tatoeba's fra.txt at full size when it is on this
    machine, else attnkit's generated pairs (1000 at small size, 16000 at full size)."""
    from attnkit.exercises import corpora

    path = None if small else corpora.fra_path()
    if path is not None:
        from attnkit.data.fra import read_fra

        return "Tatoeba fra.txt (the book's data)", read_fra(path)
    from attnkit.data.synthetic_fr import generate_pairs

    pairs = generate_pairs(1000 if small else 16000, seed)
    return "generated English-French pairs (attnkit.data.synthetic_fr)", "\n".join(
        f"{en}\t{fr}" for en, fr in pairs
    )


@topic
def vocab_growth(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.5.1: source and target vocabulary sizes (the book's preprocess_nmt, tokenize_nmt,
    min_freq=2) for num_examples doubling from 125 up to the corpus size."""
    check_args(small, seed)
    from attnkit.data.fra import preprocess_nmt, tokenize_nmt
    from attnkit.data.text import Vocab
    from attnkit.viz import plot_curves

    name, raw = _raw_text(small, seed)
    text = preprocess_nmt(raw)
    lines = text.split("\n")
    total = len(lines)
    sizes, n = [], 125
    while n < total:
        sizes.append(n)
        n *= 2
    sizes.append(total)
    rows = []
    for n in sizes:
        # the book's reader: lines 0..n (n + 1 lines); handed a line more than it should
        # read, not the whole file it would split again for every size
        source, target = tokenize_nmt("\n".join(lines[: n + 2]), n)
        src_v = Vocab(source, min_freq=2, reserved_tokens=RESERVED)
        tgt_v = Vocab(target, min_freq=2, reserved_tokens=RESERVED)
        types = len({w for line in target for w in line})
        rows.append({"num_examples": n, "pairs_read": len(source), "source": len(src_v),
                     "target": len(tgt_v), "target_types": types})  # fmt: skip
    growth = [b["target"] / a["target"] for a, b in itertools.pairwise(rows)]
    pair_growth = [b["pairs_read"] / a["pairs_read"] for a, b in itertools.pairwise(rows)]
    fig = plot_curves(
        {gettext("source (English)"): [r["source"] for r in rows],
         gettext("target (French)"): [r["target"] for r in rows]},
        gettext("num_examples (doubling)"), gettext("vocabulary size"),
        title=data_label(name)[:40],
    )  # fmt: skip
    values = {
        "data": name,
        "rows": rows,
        "first": rows[0],
        "last": rows[-1],
        "target_growth_per_doubling": growth,
        "pairs_growth_per_doubling": pair_growth,
        "max_target_growth": max(growth),
        "last_target_growth": growth[-1],
        "off_by_one": rows[0]["pairs_read"] - rows[0]["num_examples"],
    }
    finding = f"{name}: vocab {rows[0]} -> {rows[-1]}"
    return TopicResult("seq2seq_vocab_vocab_growth", finding, values, {"growth": fig})


def max_match(text: str, lexicon: set[str], longest: int) -> list[str]:
    """Forward maximum matching: at each position take the longest lexicon word that
    starts there (a single character when none does)."""
    out, i = [], 0
    while i < len(text):
        for j in range(min(len(text), i + longest), i, -1):
            if text[i:j] in lexicon or j == i + 1:
                out.append(text[i:j])
                i = j
                break
    return out


@topic
def no_spaces(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.5.2: French with its spaces removed (as Chinese or Japanese is written):
    whitespace "words", characters, and words recovered by a dictionary segmenter;
    vocabulary from 80% of the sentences, unseen tokens counted on the other 20%."""
    check_args(small, seed)
    from attnkit.data.fra import preprocess_nmt
    from attnkit.data.synthetic_fr import generate_pairs

    n = 1000 if small else 8000
    french = [preprocess_nmt(fr).split() for _, fr in generate_pairs(n, seed)]
    cut = int(0.8 * len(french))
    train, held = french[:cut], french[cut:]

    def measure(tokenize) -> dict:
        seen = {t for s in train for t in tokenize(s)}
        tokens = [t for s in held for t in tokenize(s)]
        unseen = sum(t not in seen for t in tokens)
        return {"vocab": len(seen), "unseen_rate": unseen / len(tokens)}

    results = {
        "words_with_spaces": measure(lambda s: s),
        "whitespace_without_spaces": measure(lambda s: ["".join(s)]),  # one "word"/sentence
        "characters": measure(lambda s: list("".join(s))),
    }
    lexicon = {w for s in train for w in s}
    longest = max(map(len, lexicon))
    exact = sum(max_match("".join(s), lexicon, longest) == s for s in held)
    word_hits = sum(len(set(max_match("".join(s), lexicon, longest)) & set(s)) for s in held)
    values = {
        "data": "French side of generated pairs (attnkit.data.synthetic_fr), spaces removed",
        "sentences": {"train": len(train), "held_out": len(held)},
        **results,
        "segmenter_exact_sentences": exact / len(held),
        "segmenter_word_recall": word_hits / sum(len(set(s)) for s in held),
    }
    finding = (
        f"whitespace tokens without spaces: vocab {results['whitespace_without_spaces']}, "
        f"characters {results['characters']}, words {results['words_with_spaces']}; "
        f"max-match recovers {values['segmenter_exact_sentences']:.1%} of sentences"
    )
    return TopicResult("seq2seq_vocab_no_spaces", finding, values)
