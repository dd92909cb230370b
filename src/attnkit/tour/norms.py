"""The Transformer's per-position parts (d2l 10.7.2): LayerNorm against BatchNorm on the
book's example, the position-wise FFN, residual connections, and whether LayerNorm
speeds convergence (measured over seeds).

``layernorm_convergence`` trains the same deep ReLU MLP with and without LayerNorm after
each hidden layer, every seed and learning rate at once (the models are stacked along
a batch dimension, so S seeds cost about as much as one).
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import positive_int
from attnkit.i18n import _
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = ["layernorm_convergence", "norms"]


def layernorm_convergence(
    *, seeds: int, steps: int, lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0),
    depth: int = 8, width: int = 32, seed: int = 0,
) -> dict:  # fmt: skip
    """Plain SGD on y = tanh(x · t_s) (x in R^8, a teacher t_s per seed s) with a
    ``depth``-layer ReLU MLP in PyTorch's default Linear initialisation, without biases;
    "layernorm" normalises every hidden layer (no affine) before its ReLU. Every
    (variant, learning rate, seed) is one model of a batch, trained on the same batches.

    Returns per variant: the ``best_lr`` (lowest mean log final loss, a diverged run
    counting as infinite), ``final`` per seed at it (the mean loss of the last 10% of
    steps over Var(y)), its median ``curve``, and ``start``: the loss before training.
    """
    positive_int("seeds", seeds)
    positive_int("steps", steps)
    positive_int("depth", depth)
    S, R, din = seeds, len(lrs), 8
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(S, din, 1, generator=g)
    dims = [din] + [width] * depth + [1]
    Ws = [
        ((torch.rand(S, a, b, generator=g) * 2 - 1) / math.sqrt(a))  # nn.Linear's default
        .repeat(2 * R, 1, 1)
        .requires_grad_(True)
        for a, b in itertools.pairwise(dims)
    ]
    var_y = torch.tanh(torch.bmm(torch.randn(S, 4096, din, generator=g), teacher)).var((1, 2))
    # model m = (variant * R + lr index) * S + seed; variant 0 plain, 1 LayerNorm
    lr = torch.tensor(lrs).repeat_interleave(S).repeat(2)[:, None, None]
    half = R * S  # models from half on normalise
    data = torch.Generator().manual_seed(seed + 1)
    losses = []
    for _step in range(steps + 1):  # the first pass measures the starting loss only
        X = torch.randn(S, 32, din, generator=data)
        y = torch.tanh(torch.bmm(X, teacher)).repeat(2 * R, 1, 1)
        h = X.repeat(2 * R, 1, 1)
        for W in Ws[:-1]:
            h = torch.bmm(h, W)
            h = torch.relu(torch.cat([h[:half], F.layer_norm(h[half:], h.shape[-1:])]))
        loss = ((torch.bmm(h, Ws[-1]) - y) ** 2).mean((1, 2))  # (2 R S,)
        grads = torch.autograd.grad(loss.sum(), Ws)
        if losses:
            with torch.no_grad():
                for W, gr in zip(Ws, grads):
                    W -= lr * gr
        losses.append(loss.detach())
    L = torch.stack(losses).reshape(steps + 1, 2, R, S) / var_y
    out = {}
    for v, name in enumerate(("plain", "layernorm")):
        final = L[-max(1, steps // 10) :, v].mean(0)  # (R, S)
        final = torch.where(torch.isfinite(final), final, torch.full_like(final, math.inf))
        best = int(final.clamp_min(1e-12).log().mean(1).argmin())
        out[name] = {"best_lr": lrs[best], "final": final[best].tolist(),
                     "start": L[0, v, best].tolist(),
                     "curve": L[1:, v, best].nan_to_num(math.inf).median(1).values.tolist()}  # fmt: skip
    return out


def _ffn_position_wise(seed: int) -> dict:
    """The library's PositionWiseFFN on a sequence, on its permutation and per position."""
    from attnkit.models.transformer import PositionWiseFFN

    torch.manual_seed(seed)
    ffn = PositionWiseFFN(32, 64, 32).eval()
    X = torch.randn(4, 10, 32)
    perm = torch.randperm(10)
    with torch.no_grad():
        Y = ffn(X)
        permuted = float((ffn(X[:, perm]) - Y[:, perm]).abs().max())
        per_position = float((torch.cat([ffn(X[:, i : i + 1]) for i in range(10)], 1) - Y)
                             .abs().max())  # fmt: skip
    return {"permuted": permuted, "per_position": per_position}


@topic
def norms(*, small: bool = False, seed: int = 0) -> TopicResult:
    """LayerNorm vs BatchNorm by hand; the FFN per position; residual gradients; LayerNorm
    and convergence over seeds."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    X = torch.tensor([[1.0, 2.0], [2.0, 3.0]])
    ln, bn = nn.LayerNorm(2), nn.BatchNorm1d(2)
    with torch.no_grad():
        ln_out, bn_out = ln(X), bn.train()(X)
    eps = 1e-5

    def by_hand(mean: Tensor, var: Tensor) -> Tensor:
        return (X - mean) / torch.sqrt(var + eps)

    ln_hand = by_hand(X.mean(1, keepdim=True), X.var(1, unbiased=False, keepdim=True))
    bn_hand = by_hand(X.mean(0, keepdim=True), X.var(0, unbiased=False, keepdim=True))
    ffn = _ffn_position_wise(seed)

    depths = [2, 8, 16, 32] if small else [2, 8, 16, 32, 64]
    width = 32
    plain, resid = [], []
    for L in depths:
        for residual, out in ((False, plain), (True, resid)):
            torch.manual_seed(seed)
            layers = [nn.Linear(width, width) for _ in range(L)]
            h = torch.randn(16, width)
            for m in layers:
                h = h + torch.tanh(m(h)) if residual else torch.tanh(m(h))
            h.pow(2).mean().backward()
            out.append(float(layers[0].weight.grad.norm()))
    fig = plot_curves({_("plain"): plain, _("residual"): resid}, _("layers"),
                      _("first layer's gradient norm"), x=depths, logy=True,
                      title=_("deep tanh stack"))  # fmt: skip

    n_seeds, steps = (5, 100) if small else (10, 300)  # 5: the fewest a sign test needs
    conv = layernorm_convergence(seeds=n_seeds, steps=steps, seed=seed)
    p, q = conv["plain"], conv["layernorm"]
    ratio = [
        math.log(a / b) if math.isfinite(a) else math.inf for a, b in zip(p["final"], q["final"])
    ]
    stats = seed_summary([min(r, 50.0) for r in ratio])  # a diverged plain run: capped
    fig_c = plot_curves({_("plain (lr {lr})").format(lr=p["best_lr"]): p["curve"],
                         _("LayerNorm (lr {lr})").format(lr=q["best_lr"]): q["curve"]},
                        _("SGD step"), _("loss / Var(y), median of seeds"), logy=True,
                        title=_("depth-8 ReLU MLP, {n} seeds").format(n=n_seeds))  # fmt: skip
    values = {
        "layernorm": ln_out.tolist(),
        "batchnorm": bn_out.tolist(),
        "layernorm_by_hand_error": float((ln_out - ln_hand).abs().max()),
        "batchnorm_by_hand_error": float((bn_out - bn_hand).abs().max()),
        "ffn_position_wise": ffn,
        "depths": depths,
        "grad_plain": plain,
        "grad_residual": resid,
        "layernorm_convergence": {
            "plain": p["final"],
            "layernorm": q["final"],
            "start": {"plain": p["start"], "layernorm": q["start"]},
            "best_lr": {"plain": p["best_lr"], "layernorm": q["best_lr"]},
            "steps": steps,
            "log_ratio": stats,
        },
    }
    err = max(values["layernorm_by_hand_error"], values["batchnorm_by_hand_error"])
    med = sorted(p["final"])[n_seeds // 2], sorted(q["final"])[n_seeds // 2]
    start = sorted(p["start"])[n_seeds // 2], sorted(q["start"])[n_seeds // 2]
    finding = _(
        "X = [[1, 2], [2, 3]]: LayerNorm (per example) gives {layernorm}, BatchNorm (per "
        "feature, over the batch) {batchnorm}: both equal (x - mean) / sqrt(var + 1e-5) by hand "
        "to {err:.1e}. The position-wise FFN is one MLP at every position: on a permuted "
        "sequence its outputs are the permuted outputs to {permuted:.1e}, one position at a "
        "time the same to {per_position:.1e}. First layer's gradient norm at depth {depths}: "
        "plain {plain}, residual {residual}: at depth {depth} residuals keep {kept:.0e}x more "
        "gradient. LayerNorm speeds convergence: a depth-8 ReLU MLP in PyTorch's default "
        "initialisation, each variant at its best of 5 learning rates (lr {lr_plain} without, "
        "{lr_layernorm} with), after {steps} SGD steps has loss/Var(y) median {med_plain:.3f} "
        "without LayerNorm (from {start_plain:.3f}: the unnormalised signal fades layer by layer "
        "and the net barely moves) and {med_layernorm:.3f} with it (from "
        "{start_layernorm:.3f}); LayerNorm lower in {seeds}."
    ).format(
        layernorm=[[round(v, 4) for v in r] for r in ln_out.tolist()],
        batchnorm=[[round(v, 4) for v in r] for r in bn_out.tolist()], err=err,
        permuted=ffn["permuted"], per_position=ffn["per_position"], depths=depths,
        plain="/".join(f"{g:.1e}" for g in plain), residual="/".join(f"{g:.1e}" for g in resid),
        depth=depths[-1], kept=resid[-1] / max(plain[-1], 1e-30), lr_plain=p["best_lr"],
        lr_layernorm=q["best_lr"], steps=steps, med_plain=med[0], start_plain=start[0],
        med_layernorm=med[1], start_layernorm=start[1],
        seeds=describe_seeds(stats, _(" in log ratio")),
    )  # fmt: skip
    figs = {"residual_gradients": fig, "layernorm_convergence": fig_c}
    return TopicResult("norms", finding, values, figs)
