"""Exercises 8.5.4 and 8.5.6 of d2l 0.17 (1.0's 9.5.9, 9.5.10): training the character
RNN without gradient clipping, and with ReLU in place of tanh, with and without it."""

from __future__ import annotations

import math

import torch

from attnkit.exercises.glossary import data_label
from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity, make_lm, train_char_lm
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, topic

__all__ = ["clipping_and_relu"]


def _spikes(losses: list[float]) -> int:
    """Steps whose loss exceeds 1.5 times the lowest loss before them (after the first
    10): the sudden jumps that an exploding gradient causes."""
    count, low = 0, math.inf
    for i, loss in enumerate(losses):
        if i >= 10 and (not math.isfinite(loss) or loss > 1.5 * low):
            count += 1
        low = min(low, loss)
    return count


@topic
def clipping_and_relu(*, small: bool = False, seed: int = 0) -> TopicResult:
    """tanh and ReLU RNNs (hidden 64, 20 time steps), SGD at the book's lr 1 and at lr 3,
    with and without clipping the gradient's norm to θ = 1; paired over seeds (same
    initialisation and batches). A run failed when its held-out perplexity ends above the
    unigram perplexity of the training text (guessing by letter frequencies) or is not
    finite."""
    from attnkit.viz import plot_curves

    steps, n_seeds = (50, 2) if small else (120, 3)
    name, train, held, vocab = char_data(small, 30000 if small else 200000)
    lrs = (1.0, 3.0)
    freq = torch.bincount(train, minlength=len(vocab)).double() / len(train)
    unigram = float(torch.exp(-(freq[freq > 0] * freq[freq > 0].log()).sum()))
    results: dict[str, dict] = {}
    curves, labels = {}, {}
    for act in ("tanh", "relu"):
        for lr in lrs:
            for clip in (None, 1.0):
                key = f"{act} lr {lr:g} {'clipped' if clip else 'not clipped'}"
                ppl, max_norm, spikes = [], [], []
                for s in range(seed, seed + n_seeds):
                    model = make_lm(len(vocab), 64, seed=s, activation=act)
                    run = train_char_lm(model, train, steps=steps, lr=lr, clip=clip, seed=s)
                    ppl.append(evaluate_perplexity(model, held))
                    max_norm.append(max(run["norms"]))
                    spikes.append(_spikes(run["losses"]))
                    if s == seed:
                        curves[key] = [min(x, 10.0) for x in run["losses"]]
                        shown = (gettext("{act} lr {lr:g} clipped") if clip
                                 else gettext("{act} lr {lr:g} not clipped"))  # fmt: skip
                        labels[key] = shown.format(act=act, lr=lr)
                results[key] = {
                    "perplexity": ppl, "max_grad_norm": max_norm, "spikes": spikes,
                    "failed": sum(not (p <= unigram) for p in ppl),
                    "median_perplexity": sorted(ppl)[len(ppl) // 2],
                }  # fmt: skip
    fig = plot_curves({labels[k]: v for k, v in curves.items() if "lr 3" in k},
                      gettext("SGD step"), gettext("training loss (capped at 10)"),
                      title=gettext("lr 3, {data}").format(data=data_label(name)))  # fmt: skip
    r = results
    values = {
        "data": name, "steps": steps, "n": n_seeds, "runs": r, "unigram_perplexity": unigram,
        "tanh_lr1_failed_unclipped": r["tanh lr 1 not clipped"]["failed"],
        "tanh_lr1_max_norm": max(r["tanh lr 1 not clipped"]["max_grad_norm"]),
        "tanh_lr1_gap": max(abs(a - b) for a, b in zip(r["tanh lr 1 not clipped"]["perplexity"],
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
        "relu_max_norm": max(max(r[f"relu lr {lr:g} not clipped"]["max_grad_norm"]) for lr in lrs),
        "relu_lr1_ppl": r["relu lr 1 not clipped"]["median_perplexity"],
        "tanh_lr1_ppl": r["tanh lr 1 clipped"]["median_perplexity"],
    }  # fmt: skip
    finding = f"{name}, {steps} steps, {n_seeds} seeds: " + "; ".join(
        f"{k}: perplexity {'/'.join(f'{p:.3g}' for p in v['perplexity'])}, largest gradient "
        f"norm {'/'.join(f'{x:.3g}' for x in v['max_grad_norm'])}"
        for k, v in r.items()
    )
    return TopicResult("rnn_clipping_clipping_and_relu", finding, values, {"lr3_loss": fig})
