"""The 1.0-only exercises 9.5.1 and 9.5.2 of d2l: does the character RNN condition on
every earlier token, and which hyperparameter sets how much history it uses?"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnkit.exercises.glossary import data_label
from attnkit.exercises.rnn.lm import (
    evaluate_perplexity,
    make_lm,
    reference_model,
    reference_size,
    train_char_lm,
)
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, topic

__all__ = ["history_reach"]


def _influence(model, windows: torch.Tensor, vocab_size: int, seed: int) -> tuple[list, list]:
    """For windows (B, L) of text, the prediction of the character after the last one:
    the mean norm of d log P(next) / d x_{L-1-k} (the one-hot input k steps back), and the
    mean total-variation change of P(next) when the token k steps back is replaced by a
    random other one, for k = 0..L-2."""
    X, target = windows[:, :-1], windows[:, -1]  # (B, L-1), (B,)
    onehot = F.one_hot(X.T, vocab_size).float().requires_grad_(True)  # (T, B, V)
    Y, _ = model.rnn(onehot)
    logp = torch.log_softmax(model.linear(Y[-1]), -1)  # (B, V)
    (grad,) = torch.autograd.grad(logp.gather(1, target[:, None]).sum(), onehot)
    grad_norm = grad.norm(dim=-1).mean(-1).flip(0).tolist()  # index k: k steps back
    g = torch.Generator().manual_seed(seed)
    T = X.shape[1]
    with torch.no_grad():
        base = logp.exp()
        change = []
        for k in range(T):
            Xk = X.clone()
            shift = torch.randint(1, vocab_size - 1, (X.shape[0],), generator=g)
            Xk[:, T - 1 - k] = (Xk[:, T - 1 - k] - 1 + shift) % (vocab_size - 1) + 1  # not <unk>
            probs = torch.softmax(model(Xk)[0].reshape(T, X.shape[0], -1)[-1], -1)
            change.append(float(0.5 * (probs - base).abs().sum(-1).mean()))
    return grad_norm, change


@torch.no_grad()
def _perplexity_reset(model, tokens: torch.Tensor, every: int) -> float:
    """Held-out perplexity with the state reset to zero every ``every`` tokens: each
    prediction sees at most the ``every`` - 1 tokens before it in its chunk, as in
    training with random sampling (``evaluate_perplexity`` carries the state instead)."""
    n = (len(tokens) - 1) // every * every
    X = tokens[:n].reshape(-1, every)  # (chunks, every), each chunk from a zero state
    Y = tokens[1 : n + 1].reshape(-1, every)
    logits, _ = model(X)  # (every * chunks, V)
    return float(torch.exp(F.cross_entropy(logits, Y.T.reshape(-1))))


@torch.no_grad()
def _first_below(curve: list[float], fraction: float) -> int:
    """The first k whose value is below ``fraction`` of the value at k = 0 (len: none)."""
    return next((k for k, v in enumerate(curve) if v < fraction * curve[0]), len(curve))


@topic
def history_reach(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The shared reference model (trained with 20 time steps, the state carried between
    minibatches) reads 64 held-out windows of 61 characters from a zero state: how
    strongly the prediction after the window depends on the token k steps back; and a
    twin trained with 5 time steps (same seed, steps and batches per step)."""
    from attnkit.viz import plot_curves

    name, model, vocab, train, held = reference_model(small, seed)
    size = reference_size(small)
    L, B = 61, 64
    starts = torch.linspace(0, len(held) - L - 1, B).long()
    windows = held[starts[:, None] + torch.arange(L)]  # (B, L)
    grad20, change20 = _influence(model, windows, len(vocab), seed)
    short = make_lm(len(vocab), size["num_hiddens"], seed=seed)
    train_char_lm(short, train, steps=size["steps"], num_steps=5, seed=seed)
    short.eval()
    grad5, change5 = _influence(short, windows, len(vocab), seed)
    T = size["num_steps"]
    values = {
        "data": name, "num_steps": T, "window": L - 1,
        "grad_norm": grad20, "prediction_change": change20,
        "grad_at_num_steps_over_0": grad20[T] / grad20[0],
        "grad_at_40_over_0": grad20[40] / grad20[0],
        "change_0": change20[0], "change_at_num_steps": change20[T], "change_at_40": change20[40],
        "reach_1pct": _first_below(grad20, 0.01),
        "short_grad_norm": grad5, "short_prediction_change": change5,
        "short_reach_1pct": _first_below(grad5, 0.01),
        "short_change_at_10": change5[10], "change_at_10": change20[10],
        "perplexity": evaluate_perplexity(model, held),
        "short_perplexity": evaluate_perplexity(short, held),
        # the same held-out text with the state reset every num_steps tokens: what the
        # model would have without the state carried across minibatch boundaries
        "perplexity_reset": _perplexity_reset(model, held, T),
        "short_perplexity_reset": _perplexity_reset(short, held, 5),
    }  # fmt: skip
    trained = gettext("trained with {steps} steps")
    fig = plot_curves({trained.format(steps=20): grad20, trained.format(steps=5): grad5},
                      gettext("k (tokens back)"), "|d log P(next) / d x_(t-k)|", logy=True,
                      title=gettext("influence of a token k steps back, {data}").format(
                          data=data_label(name)))  # fmt: skip
    finding = (
        f"{name}: gradient of log P(next) w.r.t. the token k back, relative to k = 0: "
        f"k = {T}: {values['grad_at_num_steps_over_0']:.1e}, k = 40: "
        f"{values['grad_at_40_over_0']:.1e} (below 1% from k = {values['reach_1pct']}); "
        f"changing that token moves P(next) by {change20[0]:.3f} (k = 0), "
        f"{change20[T]:.1e} (k = {T}), {change20[40]:.1e} (k = 40) in total variation. "
        f"Trained with 5 time steps: below 1% from k = {values['short_reach_1pct']}, change "
        f"at k = 10 {change5[10]:.1e} against {change20[10]:.1e}; held-out perplexity "
        f"{values['short_perplexity']:.2f} against {values['perplexity']:.2f} (state reset "
        f"every 5 / {T} tokens: {values['short_perplexity_reset']:.2f} / "
        f"{values['perplexity_reset']:.2f})."
    )
    return TopicResult("rnn_memory_history_reach", finding, values, {"influence": fig})
