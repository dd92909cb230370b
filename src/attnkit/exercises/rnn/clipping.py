"""Exercises 8.5.4 and 8.5.6 of d2l 0.17 (1.0's 9.5.9, 9.5.10): training the character
RNN without gradient clipping, and with ReLU in place of tanh, with and without it: at
the reduced width the other 8.5 experiments use, and at the book's own settings."""

from __future__ import annotations

import math

import torch

from attnkit.exercises.glossary import data_label
from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity, make_lm, train_char_lm
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, seed_summary, topic

__all__ = ["clipping_and_relu"]

# the book's settings for its character RNN: 512 hidden units, 35 time steps, batch 32,
# SGD at lr 1, gradient norm clipped to θ = 1
BOOK = {"num_hiddens": 512, "num_steps": 35, "batch_size": 32, "lr": 1.0}
_CAP = 1e300  # a perplexity that overflowed (inf) counts as this in the paired ratios


def _spikes(losses: list[float]) -> int:
    """Steps whose loss exceeds 1.5 times the lowest loss before them (after the first
    10): the sudden jumps that an exploding gradient causes."""
    count, low = 0, math.inf
    for i, loss in enumerate(losses):
        if i >= 10 and (not math.isfinite(loss) or loss > 1.5 * low):
            count += 1
        low = min(low, loss)
    return count


def _arms(vocab, train, held, unigram, seeds, *, steps, acts, lrs, num_hiddens=64,
          num_steps=35, batch_size=32, curves=None) -> dict[str, dict]:  # fmt: skip
    """Every (activation, lr, clipped or not) arm over ``seeds``, each seed with the same
    initialisation and batches in both arms: held-out perplexity, the largest gradient
    norm, the steps whose norm exceeded θ = 1 (where clipping acts) and the first such."""
    out: dict[str, dict] = {}
    for act in acts:
        for lr in lrs:
            for clip in (None, 1.0):
                key = f"{act} lr {lr:g} {'clipped' if clip else 'not clipped'}"
                r = {"perplexity": [], "max_grad_norm": [], "spikes": [], "clipped_steps": [],
                     "first_clipped_step": []}  # fmt: skip
                for s in seeds:
                    model = make_lm(len(vocab), num_hiddens, seed=s, activation=act)
                    run = train_char_lm(model, train, steps=steps, lr=lr, clip=clip, seed=s,
                                        num_steps=num_steps, batch_size=batch_size)  # fmt: skip
                    r["perplexity"].append(evaluate_perplexity(model, held))
                    r["max_grad_norm"].append(max(run["norms"]))
                    r["spikes"].append(_spikes(run["losses"]))
                    over = [i + 1 for i, n in enumerate(run["norms"]) if n > 1.0]
                    r["clipped_steps"].append(len(over))
                    r["first_clipped_step"].append(over[0] if over else 0)
                    if curves is not None and s == seeds[0]:
                        curves[key] = [min(x, 10.0) for x in run["losses"]]
                r["failed"] = sum(not (p <= unigram) for p in r["perplexity"])
                r["diverged"] = sum(not (p <= len(vocab)) for p in r["perplexity"])
                r["median_perplexity"] = sorted(r["perplexity"])[len(seeds) // 2]
                out[key] = r
    return out


def _log_ratio(worse: list[float], better: list[float]) -> dict:
    """seed_summary of log10(worse / better) per seed (> 0: ``better`` is lower)."""
    return seed_summary([math.log10(min(a, _CAP) / min(b, _CAP)) for a, b in zip(worse, better)])


@topic
def clipping_and_relu(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Part 1, the width of the other 8.5 experiments: tanh and ReLU RNNs (hidden 64, 35
    time steps, batch 32), SGD at the book's lr 1 and at lr 3, with and without clipping
    the gradient's norm to θ = 1. Part 2, the book's settings (``BOOK``: hidden 512, 35
    time steps, batch 32, lr 1, θ = 1), tanh and ReLU, with and without clipping, for a
    short run. Paired over seeds (same initialisation and batches). A run failed when its
    held-out perplexity ends above the unigram perplexity of the training text (guessing
    by letter frequencies) or is not finite; it diverged when it ends above the vocabulary
    size (worse than a uniform guess) or is not finite."""
    from attnkit.viz import plot_curves

    steps, n_seeds = (40, 2) if small else (100, 3)
    # 512 units cost 5x as much per step: 5 seeds where the claim is tested (tanh), 3 for ReLU
    book_steps, book_seeds, relu_seeds = (16, 1, 1) if small else (25, 5, 3)
    name, train, held, vocab = char_data(small, 30000 if small else 200000)
    freq = torch.bincount(train, minlength=len(vocab)).double() / len(train)
    unigram = float(torch.exp(-(freq[freq > 0] * freq[freq > 0].log()).sum()))
    seeds = list(range(seed, seed + n_seeds))
    curves: dict[str, list[float]] = {}
    r = _arms(vocab, train, held, unigram, seeds, steps=steps, acts=("tanh", "relu"),
              lrs=(1.0, 3.0), curves=curves)  # fmt: skip
    b = {}
    for act, n in (("tanh", book_seeds), ("relu", relu_seeds)):
        b |= _arms(vocab, train, held[:4000], unigram, list(range(seed, seed + n)),
                   steps=book_steps, acts=(act,), lrs=(BOOK["lr"],),
                   num_hiddens=BOOK["num_hiddens"], num_steps=BOOK["num_steps"],
                   batch_size=BOOK["batch_size"])  # fmt: skip
    labels = {k: (gettext("{act} lr {lr:g} clipped") if k.endswith(" clipped")
                  else gettext("{act} lr {lr:g} not clipped")).format(
                      act=k.split()[0], lr=float(k.split()[2]))
              for k in curves}  # fmt: skip
    fig = plot_curves({labels[k]: v for k, v in curves.items() if "lr 3" in k},
                      gettext("SGD step"), gettext("training loss (capped at 10)"),
                      title=gettext("lr 3, {data}").format(data=data_label(name)))  # fmt: skip
    tu, tc = b["tanh lr 1 not clipped"], b["tanh lr 1 clipped"]
    ru, rc = b["relu lr 1 not clipped"], b["relu lr 1 clipped"]
    values = {
        "data": name, "steps": steps, "n": n_seeds, "runs": r, "unigram_perplexity": unigram,
        "tanh_lr1_failed_unclipped": r["tanh lr 1 not clipped"]["failed"],
        "tanh_lr1_max_norm": max(r["tanh lr 1 not clipped"]["max_grad_norm"]),
        "tanh_lr1_gap": max(abs(x - y) for x, y in zip(r["tanh lr 1 not clipped"]["perplexity"],
                                                        r["tanh lr 1 clipped"]["perplexity"])),
        "tanh_lr3_failed_unclipped": r["tanh lr 3 not clipped"]["failed"],
        "tanh_lr3_max_norm": min(r["tanh lr 3 not clipped"]["max_grad_norm"]),
        "tanh_lr3_clipped_ppl": r["tanh lr 3 clipped"]["median_perplexity"],
        "tanh_lr3_unclipped_ppl": r["tanh lr 3 not clipped"]["median_perplexity"],
        "relu_lr1_failed_unclipped": r["relu lr 1 not clipped"]["failed"],
        "relu_lr3_failed_unclipped": r["relu lr 3 not clipped"]["failed"],
        "relu_lr3_failed_clipped": r["relu lr 3 clipped"]["failed"],
        "relu_minus_tanh_failed_lr3": r["relu lr 3 not clipped"]["failed"]
        - r["tanh lr 3 not clipped"]["failed"],
        "relu_max_norm": max(max(r[f"relu lr {lr:g} not clipped"]["max_grad_norm"])
                             for lr in (1.0, 3.0)),
        "relu_lr1_clipped_steps": sum(r["relu lr 1 clipped"]["clipped_steps"]),
        "relu_lr1_ppl": r["relu lr 1 not clipped"]["median_perplexity"],
        "tanh_lr1_ppl": r["tanh lr 1 clipped"]["median_perplexity"],
        # the book's settings
        "book": BOOK, "book_steps": book_steps, "book_n": book_seeds, "book_runs": b,
        "book_tanh_first_clipped_step": tc["first_clipped_step"],
        "book_tanh_clipped_steps": tc["clipped_steps"],
        "book_tanh_clipped_share": sum(tc["clipped_steps"]) / (book_steps * book_seeds),
        "book_tanh_diverged_unclipped": tu["diverged"],
        "book_tanh_diverged_clipped": tc["diverged"], "book_tanh_failed_clipped": tc["failed"],
        "book_tanh_unclipped_ppl": tu["median_perplexity"],
        "book_tanh_clipped_ppl": tc["median_perplexity"],
        "book_tanh_max_norm": min(tu["max_grad_norm"]),
        "book_clipping_gain": _log_ratio(tu["perplexity"], tc["perplexity"]),
        "book_relu_n": relu_seeds, "book_relu_diverged_unclipped": ru["diverged"],
        "book_relu_diverged_clipped": rc["diverged"],
        "book_relu_seeds_clipped": sum(n > 0 for n in rc["clipped_steps"]),
        "book_relu_max_norm": max(ru["max_grad_norm"]),
        "book_relu_unclipped_ppl": ru["median_perplexity"],
        "book_relu_clipped_ppl": rc["median_perplexity"],
        "book_relu_clipping_gain": seed_summary(
            [a - c for a, c in zip(ru["perplexity"], rc["perplexity"])]),
    }  # fmt: skip
    arms = [(k, v) for k, v in r.items()] + [(f"{k} (book)", v) for k, v in b.items()]
    finding = (
        f"{name}, {steps} steps, {n_seeds} seeds; at the book's size {book_steps} steps, "
        f"{book_seeds} seeds (ReLU {relu_seeds}): "
        + "; ".join(
            f"{k}: perplexity {'/'.join(f'{p:.3g}' for p in v['perplexity'])}, largest gradient "
            f"norm {'/'.join(f'{x:.3g}' for x in v['max_grad_norm'])}"
            for k, v in arms
        )
    )
    return TopicResult("rnn_clipping_clipping_and_relu", finding, values, {"lr3_loss": fig})
