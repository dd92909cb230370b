"""Attention cues and kernel regression (d2l 10.1-10.2).

``cues``: pooling without a query (average, max) gives the same output whatever one
looks for; attention pooling steered by a query changes with the query.
``kernels``: Nadaraya-Watson with five kernels and several widths, the estimator's
convergence as the training set grows, and the learned width.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.tour.base import TopicResult, check_args, check_tensor, topic

__all__ = ["KERNELS", "cues", "kernel_weights", "kernels", "nw_predict"]


@topic
def cues(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Non-volitional (no query) vs volitional (query-steered) pooling of the same inputs."""
    check_args(small, seed)
    from attnkit.viz import show_heatmaps

    g = torch.Generator().manual_seed(seed)
    n, d = (8, 4) if small else (12, 6)
    X = torch.randn(n, d, generator=g)  # the sensory inputs: keys = values
    q1, q2 = X[1] * 3, X[n - 2] * 3  # two queries, each looking for one input
    average, maximum = X.mean(0), X.max(0).values  # neither depends on any query
    w1, w2 = torch.softmax(X @ q1, 0), torch.softmax(X @ q2, 0)
    o1, o2 = w1 @ X, w2 @ X
    values = {
        "pooling_change": 0.0,  # no query enters average/max pooling: same output
        "attention_change": float((o1 - o2).norm()),
        "argmax_query1": int(w1.argmax()),
        "argmax_query2": int(w2.argmax()),
        "average_pooling": average.tolist(),
        "max_pooling": maximum.tolist(),
    }
    weights = torch.stack([torch.full((n,), 1.0 / n), w1, w2]).unsqueeze(1)  # (3, 1, n)
    fig = show_heatmaps(
        weights.unsqueeze(0),
        "inputs (keys = values)",
        "query",
        titles=["average pooling (no query)", "query 1", "query 2"],
        figsize=(3.5, 1.2),
        per_panel=True,
    )
    finding = (
        f"Average and max pooling ignore any query: their output is fixed. Attention pooling "
        f"with query 1 puts weight {float(w1.max()):.2f} on input {values['argmax_query1']}, "
        f"query 2 {float(w2.max()):.2f} on input {values['argmax_query2']}: the same inputs "
        f"give outputs {values['attention_change']:.2f} apart (L2) when the query changes."
    )
    return TopicResult("cues", finding, values, {"weights": fig})


# kernel(u) of the scaled distance u = (x - x_i) / h; the estimator normalises them
KERNELS = {
    "gaussian": lambda u: torch.exp(-(u**2) / 2),
    "laplacian": lambda u: torch.exp(-u.abs()),
    "boxcar": lambda u: (u.abs() <= 1).float(),
    "constant": lambda u: torch.ones_like(u),
    "epanechnikov": lambda u: torch.clamp(1 - u**2, min=0.0),
}


def kernel_weights(kernel: str, queries: Tensor, keys: Tensor, width: float) -> Tensor:
    """(Q,), (K,) -> (Q, K) Nadaraya-Watson weights K(u) / sum K(u); a query with no
    key inside a compact kernel's support gets all-zero weights (prediction 0)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    if isinstance(width, bool) or not isinstance(width, int | float):
        raise TypeError(f"width must be a number, got {width!r}")
    if not width > 0:
        raise ValueError(f"width must be > 0, got {width!r}")
    check_tensor("queries", queries, 1)
    check_tensor("keys", keys, 1)
    k = KERNELS[kernel]((queries[:, None] - keys[None, :]) / width)
    total = k.sum(1, keepdim=True)
    return torch.where(total > 0, k / total.clamp_min(1e-30), torch.zeros_like(k))


def nw_predict(kernel: str, x: Tensor, x_train: Tensor, y_train: Tensor, width: float) -> Tensor:
    """The non-parametric estimate f(x) = sum_i w_i(x) y_i."""
    check_tensor("y_train", y_train, 1)
    if isinstance(x_train, torch.Tensor) and y_train.shape != x_train.shape:
        raise ValueError(
            f"x_train and y_train must have the same shape, got {tuple(x_train.shape)} "
            f"and {tuple(y_train.shape)}"
        )
    return kernel_weights(kernel, x, x_train, width) @ y_train


@topic
def kernels(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Five kernels at several widths; convergence in n; the learned width's fit."""
    check_args(small, seed)
    from attnkit.attention.kernel_regression import (
        NadarayaWatson,
        fit_nadaraya_watson,
        make_nw_data,
        nw_target,
    )
    from attnkit.viz import plot_curves

    data = make_nw_data(seed=seed)
    widths = [0.1, 0.3, 1.0, 3.0]
    mse = {
        k: [
            float(
                (
                    (nw_predict(k, data.x_test, data.x_train, data.y_train, h) - data.y_truth) ** 2
                ).mean()
            )
            for h in widths
        ]
        for k in KERNELS
    }
    curves = {
        k: nw_predict(k, data.x_test, data.x_train, data.y_train, 0.3).tolist() for k in KERNELS
    }
    curves["truth"] = data.y_truth.tolist()
    fig_k = plot_curves(curves, "x", "y", x=data.x_test.tolist(), title="five kernels, width 0.3")
    fig_w = plot_curves(
        {k: v for k, v in mse.items()}, "kernel width h", "test MSE", x=widths, logy=True,
        title="test MSE against the width",
    )  # fmt: skip
    fig_w.axes[0].set_xscale("log")

    # convergence: more data, a narrower Gaussian (h ~ n^(-1/5)), smaller error
    sizes = [50, 200, 1000] if small else [50, 200, 1000, 5000]
    reps = 3 if small else 5
    x_test = torch.arange(0.5, 4.5, 0.05)  # away from the edges, where the estimator is biased
    conv = []
    for n in sizes:
        errs = []
        for r in range(reps):
            g = torch.Generator().manual_seed(seed * 1000 + r)
            x = torch.rand(n, generator=g) * 5
            y = nw_target(x) + torch.normal(0.0, 0.5, (n,), generator=g)
            h = 0.5 * (n / 50) ** -0.2
            pred = nw_predict("gaussian", x_test, x, y, h)
            errs.append(float(((pred - nw_target(x_test)) ** 2).mean()))
        conv.append(sum(errs) / reps)
    fig_c = plot_curves(
        {"Gaussian, h = 0.5 (n/50)^(-1/5)": conv}, "training examples n", "test MSE",
        x=sizes, logy=True, title="the non-parametric estimator converges",
    )  # fmt: skip
    fig_c.axes[0].set_xscale("log")

    # the learned width: w > 1 is a narrower kernel, so the fit follows the noise
    net, losses = fit_nadaraya_watson(data, epochs=5, seed=seed)
    values_w = float(net.w.detach())
    fixed = NadarayaWatson(learnable=False, width=1.0)
    with torch.no_grad():
        y_param = net(data.x_test, data.x_train, data.y_train)
        y_fixed = fixed(data.x_test, data.x_train, data.y_train)

    def rough(y: Tensor) -> float:  # mean |second difference|: 0 for a straight line
        return float((y[2:] - 2 * y[1:-1] + y[:-2]).abs().mean())

    fig_l = plot_curves({"training loss": losses}, "epoch", "sum of squared errors",
                        title=f"learned w = {values_w:.2f}")  # fmt: skip
    fig_p = plot_curves(
        {"truth": data.y_truth.tolist(), "w = 1 (fixed)": y_fixed.tolist(),
         f"w = {values_w:.2f} (learned)": y_param.tolist()},
        "x", "y", x=data.x_test.tolist(), title="the learned width fits less smoothly",
    )  # fmt: skip
    fig_p.axes[0].plot(data.x_train, data.y_train, "o", alpha=0.4)
    values = {
        "widths": widths,
        "mse": mse,
        "sizes": sizes,
        "convergence_mse": conv,
        "learned_w": values_w,
        "losses": losses,
        "roughness_fixed": rough(y_fixed),
        "roughness_learned": rough(y_param),
    }
    best = {
        k: widths[min(range(len(widths)), key=v.__getitem__)]
        for k, v in mse.items()
        if k != "constant"
    }
    finding = (
        "Test MSE at widths "
        + "/".join(str(w) for w in widths)
        + ": "
        + "; ".join(f"{k} " + "/".join(f"{e:.2f}" for e in v) for k, v in mse.items())
        + f". The constant kernel is the mean of y at every width ({mse['constant'][0]:.2f}); "
        f"best widths {best}. With h ~ n^(-1/5) the error falls "
        + " -> ".join(f"{e:.3f}" for e in conv)
        + f" for n = {sizes}: the estimator converges. The learned w = {values['learned_w']:.2f} "
        f"(loss {losses[0]:.1f} -> {losses[-1]:.1f}) is a kernel {values['learned_w']:.1f}x narrower "
        f"than w = 1, so each prediction rests on fewer, nearer noisy points: roughness "
        f"{values['roughness_learned']:.3f} vs {values['roughness_fixed']:.3f}."
    )
    figs = {"kernels": fig_k, "widths": fig_w, "convergence": fig_c, "learned_loss": fig_l,
            "learned_fit": fig_p}  # fmt: skip
    return TopicResult("kernels", finding, values, figs)
