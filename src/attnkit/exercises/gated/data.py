"""Exercises of d2l 0.17 section 9.3 (1.0's 10.3) about the training text: more data
(9.3.3) and text by different authors (9.3.4), on character GRU language models trained
as in ``gated_lm`` (Adam, the book's sequential minibatches, equal steps).

Only one book can be on this machine (The Time Machine, when it was downloaded before);
the second text is the docstrings of Python's standard library (attnkit's fallback
prose), written by other people in another register than the language reference."""

from __future__ import annotations

import torch

from attnkit.data.lm import load_corpus, normalize_line, stdlib_docstrings
from attnkit.exercises import corpora
from attnkit.exercises.gated.lm import lm_size, train_lm
from attnkit.exercises.rnn.lm import evaluate_perplexity
from attnkit.models.rnn import build_lm
from attnkit.tour.base import TopicResult, describe_seeds, seed_summary, topic

__all__ = ["mixing_authors", "more_data"]


def _train_eval(vocab_size: int, train: torch.Tensor, helds: dict, *, small: bool,
                seed: int) -> dict:  # fmt: skip
    """A GRU LM (init from ``seed``) trained ``lm_size(small)['steps']`` steps on
    ``train``; its held-out perplexity on every text of ``helds``."""
    size = lm_size(small)
    torch.manual_seed(seed)
    model = build_lm("gru", vocab_size, size["num_hiddens"])
    train_lm(model, train, steps=size["steps"], lr=size["lr"], num_steps=size["num_steps"],
             batch_size=size["batch_size"], seed=seed)  # fmt: skip
    model.eval()
    return {k: evaluate_perplexity(model, h) for k, h in helds.items()}


def _held_chars(small: bool) -> int:
    """How much of the held-out tail is evaluated (reading it is sequential, so slow)."""
    return 3000 if small else 10000


@topic
def more_data(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.3.3: the whole available text is read (no ``max_tokens`` cut: the corpus has as
    many characters as its lines), the last 10% held out (its first ``_held_chars`` evaluated); GRUs trained
    for the same number of steps on the first 1/128, 1/16 and all of the rest, over seeds."""
    name, lines = corpora.text_lines(small)
    corpus, vocab = load_corpus(lines, "char")  # max_tokens = -1: all of it
    chars_in_lines = sum(len(line) for line in lines)
    data = torch.tensor(corpus)
    cut = int(0.9 * len(data))
    train, held = data[:cut], data[cut:][: _held_chars(small)]
    fractions = {"1/128": 1 / 128, "all": 1.0}
    if not small:
        fractions = {"1/128": 1 / 128, "1/16": 1 / 16, "all": 1.0}
    n_seeds = 2
    ppl: dict[str, list[float]] = {k: [] for k in fractions}
    for s in range(seed, seed + n_seeds):
        for k, f in fractions.items():
            part = train[: int(f * len(train))]
            ppl[k].append(_train_eval(len(vocab), part, {"held": held}, small=small,
                                      seed=s)["held"])  # fmt: skip
    keys = list(ppl)
    gain = seed_summary([a - b for a, b in zip(ppl["1/128"], ppl["all"])])
    values = {
        "data": name, "corpus_chars": len(corpus), "chars_in_lines": chars_in_lines,
        "train_chars": {k: int(f * len(train)) for k, f in fractions.items()},
        "held_chars": len(held), "steps": lm_size(small)["steps"], "seeds": n_seeds,
        "ppl": ppl, "ppl_mean": {k: sum(v) / len(v) for k, v in ppl.items()},
        "smallest_minus_all": gain,
        "tokens_seen": lm_size(small)["steps"] * lm_size(small)["batch_size"]
        * lm_size(small)["num_steps"],
    }  # fmt: skip
    finding = (
        f"{name}: all {len(corpus)} characters read ({chars_in_lines} in its lines); held-out "
        f"perplexity after {values['steps']} steps, trained on "
        + ", ".join(f"{values['train_chars'][k]} chars: {values['ppl_mean'][k]:.2f}" for k in keys)
        + ". 1/128 minus all: "
        + describe_seeds(gain)
    )
    return TopicResult("gated_data_more_data", finding, values)


@topic
def mixing_authors(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.3.4: text A (``corpora.text_lines``) and text B (the standard library's
    docstrings), equal lengths, one shared character vocabulary; GRUs trained on A, on
    B and on both (same steps), each evaluated on held-out A and held-out B."""
    name_a, lines_a = corpora.text_lines(small)
    name_b = "the Python standard library's docstrings"
    lines_b = [normalize_line(line) for line in stdlib_docstrings().splitlines()]
    _, vocab = load_corpus(lines_a + lines_b, "char")  # one vocabulary for both
    n = lm_size(small)["max_tokens"]
    texts = {}
    for key, lines in (("A", lines_a), ("B", lines_b)):
        ids = torch.tensor(vocab[list("".join(lines)[:n])])
        cut = int(0.9 * len(ids))
        texts[key] = (ids[:cut], ids[cut:][: _held_chars(small)])
    helds = {k: t[1] for k, t in texts.items()}
    # the mixed model sees alternating blocks of A and B, as long as one text's training part
    block = 2000
    a, b = texts["A"][0], texts["B"][0]
    half = min(len(a), len(b)) // (2 * block) * block
    mixed = torch.stack([a[:half].reshape(-1, block), b[:half].reshape(-1, block)], 1).reshape(-1)
    n_seeds = 2
    ppl: dict[str, dict[str, list]] = {k: {"A": [], "B": []} for k in ("A", "B", "A+B")}
    for s in range(seed, seed + n_seeds):
        for key, train in (("A", a), ("B", b), ("A+B", mixed)):
            r = _train_eval(len(vocab), train, helds, small=small, seed=s)
            for t in ("A", "B"):
                ppl[key][t].append(r[t])
    cross = {
        t: seed_summary([x - y for x, y in zip(ppl[o][t], ppl[t][t])])
        for t, o in (("A", "B"), ("B", "A"))
    }  # the other text's model minus the text's own model, on the text
    mix_cost = {t: [x / y for x, y in zip(ppl["A+B"][t], ppl[t][t])] for t in ("A", "B")}
    values = {
        "text_A": name_a, "text_B": name_b, "chars_each": n, "steps": lm_size(small)["steps"],
        "seeds": n_seeds, "ppl": ppl, "cross_minus_own": cross,
        "mixed_over_own": mix_cost,
        "mixed_over_own_max": max(max(v) for v in mix_cost.values()),
        "mixed_over_cross_max": max(x / y for t, o in (("A", "B"), ("B", "A"))
                                    for x, y in zip(ppl["A+B"][t], ppl[o][t])),
        "cross_over_own_min": min(min(x / y for x, y in zip(ppl[o][t], ppl[t][t]))
                                  for t, o in (("A", "B"), ("B", "A"))),
    }  # fmt: skip
    finding = (
        f"A = {name_a}, B = {name_b}: held-out perplexity (trained on -> evaluated on) "
        + "; ".join(
            f"{k} -> {t}: {sum(v) / len(v):.2f}" for k, d in ppl.items() for t, v in d.items()
        )
        + ". Other text's model minus own, on A: "
        + describe_seeds(cross["A"])
        + "; on B: "
        + describe_seeds(cross["B"])
    )
    return TopicResult("gated_data_mixing_authors", finding, values)
