"""Exercise 8.2.1 of d2l 0.17 (dropped in 1.0): other ways to tokenize. Words, characters
and two subword methods (SentencePiece's BPE and unigram models, attnkit's
``SubwordTokenizer``) trained on 90% of the corpus's lines and measured on the other 10%:
vocabulary size, tokens per word, words the vocabulary has never seen."""

from __future__ import annotations

from attnkit.data.subword import SubwordTokenizer
from attnkit.data.text import Vocab, tokenize
from attnkit.exercises import corpora
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["tokenizers"]

EXAMPLE = "the interpreter reinitializes the unhashable dictionaries"


@topic
def tokenizers(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.2.1: word, character, BPE and unigram tokenizations of held-out lines."""
    check_args(small, seed)
    name, lines = corpora.text_lines(small)
    lines = [line for line in lines if line]
    if small:
        lines = lines[:4000]
    cut = int(0.9 * len(lines))
    train, held_out = lines[:cut], lines[cut:]
    held_words = [w for line in held_out for w in line.split()]
    n_words = len(held_words)
    word_vocab = Vocab(tokenize(train, "word"))
    char_vocab = Vocab(tokenize(train, "char"))
    unseen = sum(w not in word_vocab for w in held_words)
    found = {
        "word": {"vocab": len(word_vocab), "tokens_per_word": 1.0, "unknown": unseen / n_words},
        "char": {
            "vocab": len(char_vocab),
            # every character of a line, spaces included, per word
            "tokens_per_word": sum(len(line) for line in held_out) / n_words,
            "unknown": sum(c not in char_vocab for line in held_out for c in line) / n_words,
        },
    }
    pieces_size = 1000 if small else 2000
    examples = {}
    round_trip = True
    for kind in ("bpe", "unigram"):
        # a joint model trains on sources + targets: the even and the odd lines, all of them once
        tok = SubwordTokenizer.train(
            train[0::2], train[1::2], vocab_size=pieces_size, model_type=kind
        )
        pieces = [tok.encode_source(line) for line in held_out]
        n_pieces = sum(len(p) for p in pieces)
        unknown = sum(p == "<unk>" or p.startswith("<0x") for ps in pieces for p in ps)
        for line, ps in zip(held_out[:50], pieces[:50]):
            round_trip &= tok.decode_target(tok.tgt_vocab[ps]) == line
        found[kind] = {"vocab": len(tok.src_vocab), "tokens_per_word": n_pieces / n_words,
                       "unknown": unknown / n_words}  # fmt: skip
        examples[kind] = " ".join(tok.encode_source(EXAMPLE))
    values = {
        "corpus": name,
        "train_lines": len(train),
        "held_out_words": n_words,
        "pieces": pieces_size,
        "tokenizers": found,
        "examples": examples,
        "example_sentence": EXAMPLE,
        "round_trip": round_trip,
        "word_unknown": found["word"]["unknown"],
    }
    finding = f"{name}, held-out lines: " + "; ".join(
        f"{k}: vocabulary {v['vocab']}, {v['tokens_per_word']:.2f} tokens/word, "
        f"{v['unknown']:.2%} unknown"
        for k, v in found.items()
    )
    return TopicResult("sequence_tokenizers_tokenizers", finding, values)
