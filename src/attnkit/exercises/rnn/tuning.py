"""Exercise 8.5.2 of d2l 0.17 (1.0's 9.5.4, 9.5.5) and the 1.0-only 9.5.6, 9.5.7: tuning
the character RNN for held-out perplexity, a learned embedding against the one-hot
input, and the model read on a text it was not trained on."""

from __future__ import annotations

import torch

from attnkit.data.lm import normalize_line
from attnkit.exercises.glossary import data_label
from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity, make_lm, train_char_lm
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, describe_seeds, seed_summary, topic

__all__ = ["perplexity_grid"]


def _other_text(data_name: str, vocab) -> tuple[str, torch.Tensor]:
    """A text of another author and kind than the training data, as tokens of ``vocab``:
    the built-in corpus when the model read The Time Machine, else the docstrings of
    Python's standard library (prose by other authors about other things)."""
    from attnkit.data import lm

    if data_name == "The Time Machine":
        name, lines = "the built-in corpus (Python's reference topics)", lm.builtin_corpus_lines()
    else:
        name = "docstrings of Python's standard library"
        lines = [normalize_line(line) for line in lm.stdlib_docstrings().splitlines()]
    tokens = [vocab[ch] for line in lines for ch in line][:20000]
    return name, torch.tensor(tokens)


@topic
def perplexity_grid(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.5.2: one hyperparameter changed at a time from a base recipe (hidden 64, 20
    time steps, lr 1, clipping θ = 1), held-out perplexity; one-hot against a learned
    16-dimensional embedding over paired seeds; 9.5.6/9.5.7: the base model's perplexity
    on another text against its own held-out text."""
    from attnkit.viz import plot_curves

    steps, n_seeds = (50, 2) if small else (200, 5)
    name, train, held, vocab = char_data(small, 30000 if small else 200000)
    base = {"num_hiddens": 64, "num_steps": 20, "lr": 1.0, "steps": steps}
    changes = {"base": {}, "hidden 128": {"num_hiddens": 128}, "35 time steps": {"num_steps": 35},
               "lr 2": {"lr": 2.0}, "2x steps": {"steps": 2 * steps}}  # fmt: skip
    held_ppl, train_ppl, curves, models, clipped = {}, {}, {}, {}, {}
    for label, change in changes.items():
        cfg = {**base, **change}
        model = make_lm(len(vocab), cfg["num_hiddens"], seed=seed)
        run = train_char_lm(model, train, steps=cfg["steps"], lr=cfg["lr"],
                            num_steps=cfg["num_steps"], seed=seed)  # fmt: skip
        held_ppl[label] = evaluate_perplexity(model, held)
        clipped[label] = sum(n > 1.0 for n in run["norms"])  # steps where clipping acted
        train_ppl[label] = evaluate_perplexity(model, train[: len(held)])
        curves[label] = [float(torch.tensor(run["losses"][max(0, i - 9) : i + 1]).mean().exp())
                         for i in range(len(run["losses"]))]  # fmt: skip
        models[label] = model
    best = min(held_ppl, key=held_ppl.get)

    # one-hot (a fixed 28-dimensional code) against a learned 16-dimensional embedding
    onehot, embed = [], []
    for s in range(seed, seed + n_seeds):
        for out, size in ((onehot, 0), (embed, 16)):
            model = make_lm(len(vocab), 64, seed=s, embed_size=size)
            train_char_lm(model, train, steps=steps, seed=s)  # same batches per seed
            out.append(evaluate_perplexity(model, held))
    embedding = seed_summary([a - b for a, b in zip(onehot, embed)])  # > 0: embedding better

    other_name, other = _other_text(name, vocab)
    other_ppl = evaluate_perplexity(models["base"], other)
    # how different the texts are: total variation between their letter frequencies
    letters = torch.bincount(train, minlength=len(vocab)).double() / len(train)
    tv = {label: 0.5 * float((torch.bincount(t, minlength=len(vocab)).double() / len(t)
                              - letters).abs().sum())
          for label, t in (("held_out", held), ("other", other))}  # fmt: skip
    fig = plot_curves(curves, gettext("SGD step"), gettext("training perplexity (10-step mean)"),
                      logy=True,
                      title=gettext("character RNN on {data}").format(
                          data=data_label(name)))  # fmt: skip
    values = {
        "data": name, "steps": steps, "held_out_perplexity": held_ppl,
        "train_perplexity": train_ppl, "best": best, "best_perplexity": held_ppl[best],
        "base_perplexity": held_ppl["base"], "improvement": held_ppl["base"] - held_ppl[best],
        "onehot_perplexity": onehot, "embedding_perplexity": embed,
        "embedding_gain": embedding, "embedding_words": describe_seeds(embedding),
        "other_text": other_name, "other_text_perplexity": other_ppl,
        "other_over_own": other_ppl / held_ppl["base"], "vocab_size": len(vocab),
        "letter_tv": tv, "clipped_steps": clipped, "n": n_seeds,
    }  # fmt: skip
    finding = (
        f"{name}, {steps} SGD steps: held-out perplexity "
        + ", ".join(f"{k} {v:.2f}" for k, v in held_ppl.items())
        + f"; best {best}. Embedding 16 vs one-hot: one-hot minus embedding "
        + describe_seeds(embedding)
        + f". On {other_name}: {other_ppl:.2f} against {held_ppl['base']:.2f} on its own text."
    )
    return TopicResult("rnn_tuning_perplexity_grid", finding, values, {"curves": fig})
