"""Attention cues and kernel regression (d2l 10.1-10.2).

``cues``: pooling without a query (average, max) gives the same output whatever one
looks for; attention pooling steered by a query changes with the query.
``kernels``: Nadaraya-Watson with five kernels and several widths, the estimator's
convergence as the training set grows, and the learned width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnkit._validate import one_of, positive_number
from attnkit.i18n import N_, _
from attnkit.tour.base import TopicResult, check_args, check_tensor, seed_summary, topic

__all__ = ["KERNELS", "closer_key_order", "cues", "kernel_weights", "kernels", "nw_predict", "pool"]


def pool(kind: str, X: Tensor, query: Tensor) -> Tensor:
    """Pool the rows of X (n, d) into one (d,) vector, given a query (d,).

    ``average``: weights softmax(0) = 1/n, a constant score, so the query cannot enter;
    ``max``: the largest value of each column; ``attention``: weights softmax(X q).
    """
    one_of("kind", kind, ("average", "max", "attention"))
    check_tensor("X", X, 2)
    check_tensor("query", query, 1)
    if kind == "max":
        return X.max(0).values
    scores = X @ query if kind == "attention" else torch.zeros(X.shape[0], dtype=X.dtype)
    return torch.softmax(scores, 0) @ X


@topic
def cues(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Non-volitional (no query) vs volitional (query-steered) pooling of the same inputs."""
    check_args(small, seed)
    from attnkit.viz import show_heatmaps

    g = torch.Generator().manual_seed(seed)
    n, d = (8, 4) if small else (12, 6)
    X = torch.randn(n, d, generator=g)  # the sensory inputs: keys = values
    q1, q2 = X[1] * 3, X[n - 2] * 3  # two queries, each looking for one input
    w1, w2 = torch.softmax(X @ q1, 0), torch.softmax(X @ q2, 0)
    o1, o2 = w1 @ X, w2 @ X
    # every pooling run with 100 pairs of random queries: how far apart are its outputs?
    pairs = torch.randn(100, 2, d, generator=g) * 3
    change = {
        kind: [float((pool(kind, X, qa) - pool(kind, X, qb)).norm()) for qa, qb in pairs]
        for kind in ("average", "max", "attention")
    }
    values = {
        "pooling_change": max(max(change["average"]), max(change["max"])),
        "attention_change": float((o1 - o2).norm()),
        "attention_change_random": sorted(change["attention"])[len(pairs) // 2],  # median
        "argmax_query1": int(w1.argmax()),
        "argmax_query2": int(w2.argmax()),
        "average_pooling": pool("average", X, q1).tolist(),
        "max_pooling": pool("max", X, q1).tolist(),
    }
    weights = torch.stack([torch.full((n,), 1.0 / n), w1, w2]).unsqueeze(1)  # (3, 1, n)
    fig = show_heatmaps(
        weights.unsqueeze(0),
        _("inputs (keys = values)"),
        _("query"),
        titles=[_("average pooling (no query)"), _("query 1"), _("query 2")],
        figsize=(3.5, 1.2),
        per_panel=True,
    )
    finding = _(
        "Over 100 pairs of random queries, average and max pooling give outputs at most "
        "{pooling_change:.1e} apart (the query cannot enter), attention pooling a median "
        "{attention_change_random:.2f} apart. Attention pooling with query 1 puts weight "
        "{w1:.2f} on input {argmax1}, query 2 {w2:.2f} on input {argmax2}: the same inputs give "
        "outputs {attention_change:.2f} apart (L2) when the query changes."
    ).format(pooling_change=values["pooling_change"],
             attention_change_random=values["attention_change_random"], w1=float(w1.max()),
             argmax1=values["argmax_query1"], w2=float(w2.max()), argmax2=values["argmax_query2"],
             attention_change=values["attention_change"])  # fmt: skip
    return TopicResult("cues", finding, values, {"weights": fig})


# the library's NadarayaWatson with the learned width, beside the five kernels (a key of
# ``_closer_key_property``'s result, shown translated)
LIBRARY = N_("library (learned w)")

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
    one_of("kernel", kernel, KERNELS)
    positive_number("width", width)
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


def closer_key_order(weights: Tensor, queries: Tensor, keys: Tensor) -> tuple[int, int, int]:
    """Over every query and every pair of keys where key a is strictly closer to the query
    than key b: (pairs, violations: a gets less weight than b, strict: a gets more).

    weights (Q, K); queries (Q,); keys (K,) shared or (Q, K) per query.
    """
    check_tensor("weights", weights, 2)
    check_tensor("queries", queries, 1)
    check_tensor("keys", keys, (1, 2))
    dist = (queries[:, None] - keys.expand(weights.shape)).abs()  # (Q, K)
    closer = dist[:, :, None] < dist[:, None, :]  # (Q, a, b): a strictly closer than b
    w_a, w_b = weights[:, :, None], weights[:, None, :]
    return int(closer.sum()), int((closer & (w_a < w_b)).sum()), int((closer & (w_a > w_b)).sum())


def _closer_key_property(g: torch.Generator, draws: int, w_learned: float) -> dict:
    """``closer_key_order`` for every kernel (float64, widths drawn in [0.2, 3]) and for
    the library's NadarayaWatson with the learned w, over ``draws`` random draws of
    10 queries and 20 keys in [0, 5]: the fraction of pairs violated and strictly ordered."""
    from attnkit.attention.kernel_regression import NadarayaWatson

    totals: dict[str, list[int]] = {k: [0, 0, 0] for k in [*KERNELS, LIBRARY]}
    lib = NadarayaWatson(learnable=False, width=w_learned).double()
    for _draw in range(draws):
        q = torch.rand(10, generator=g, dtype=torch.float64) * 5
        k = torch.rand(20, generator=g, dtype=torch.float64) * 5
        h = 0.2 + 2.8 * float(torch.rand(1, generator=g))
        for name in KERNELS:
            counts = closer_key_order(kernel_weights(name, q, k, h), q, k)
            totals[name] = [a + b for a, b in zip(totals[name], counts)]
        with torch.no_grad():
            lib(q, k, torch.zeros_like(k))
        counts = closer_key_order(lib.attention_weights, q, k)
        totals[LIBRARY] = [a + b for a, b in zip(totals[LIBRARY], counts)]
    return {name: {"pairs": p, "violated": v / p, "strictly_more": s / p}
            for name, (p, v, s) in totals.items()}  # fmt: skip


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
    curves[_("truth")] = data.y_truth.tolist()
    fig_k = plot_curves(curves, "x", "y", x=data.x_test.tolist(),
                        title=_("five kernels, width 0.3"))  # fmt: skip
    fig_w = plot_curves(
        {k: v for k, v in mse.items()}, _("kernel width h"), _("test MSE"), x=widths, logy=True,
        title=_("test MSE against the width"),
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
        {_("Gaussian, h = 0.5 (n/50)^(-1/5)"): conv}, _("training examples n"), _("test MSE"),
        x=sizes, logy=True, title=_("the non-parametric estimator converges"),
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

    fig_l = plot_curves({_("training loss"): losses}, _("epoch"), _("sum of squared errors"),
                        title=_("learned w = {w:.2f}").format(w=values_w))  # fmt: skip
    fig_p = plot_curves(
        {_("truth"): data.y_truth.tolist(), _("w = 1 (fixed)"): y_fixed.tolist(),
         _("w = {w:.2f} (learned)").format(w=values_w): y_param.tolist()},
        "x", "y", x=data.x_test.tolist(), title=_("the learned width fits less smoothly"),
    )  # fmt: skip
    fig_p.axes[0].plot(data.x_train, data.y_train, "o", alpha=0.4)
    # the best width over 10 data seeds: too narrow fits the noise, too wide the mean
    fine = [0.03, 0.1, 0.3, 1.0, 3.0]
    best_by_seed, extreme_ratio = {}, []
    for s in range(seed, seed + 10):
        d = make_nw_data(seed=s)
        e = [float(((nw_predict("gaussian", d.x_test, d.x_train, d.y_train, h) - d.y_truth) ** 2)
                    .mean()) for h in fine]  # fmt: skip
        best_by_seed[s] = fine[min(range(len(fine)), key=e.__getitem__)]
        extreme_ratio.append(min(e[0], e[-1]) / min(e))
    # per data seed, log(the better extreme's MSE / the best MSE): 0 when an extreme is best
    interior = seed_summary([math.log(r) for r in extreme_ratio])
    closer = _closer_key_property(torch.Generator().manual_seed(seed), 50 if small else 200,
                                  values_w)  # fmt: skip
    values = {
        "widths": widths,
        "mse": mse,
        # predicting the training targets' mean everywhere, computed apart from the kernels
        "mean_predictor_mse": float(((data.y_train.mean() - data.y_truth) ** 2).mean()),
        "fine_widths": fine,
        "best_width_by_seed": best_by_seed,
        "best_width_interior": sum(fine[0] < h < fine[-1] for h in best_by_seed.values()),
        "extreme_over_best_min": min(extreme_ratio),
        "extreme_over_best_log": interior,
        "closer_key": closer,
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
    best_counts = [list(best_by_seed.values()).count(h) for h in sorted(set(best_by_seed.values()))]
    finding = _(
        "Test MSE at widths {widths}: {mse}. The constant kernel is the mean of y at every width "
        "({constant:.2f}); best widths {best}. With h ~ n^(-1/5) the error falls {convergence} "
        "for n = {sizes}: the estimator converges. The learned w = {w:.2f} (loss {loss_first:.1f} "
        "-> {loss_last:.1f}) is a kernel {w:.1f}x narrower than w = 1, so each prediction rests "
        "on fewer, nearer noisy points: roughness {rough_learned:.3f} vs {rough_fixed:.3f}. Best "
        "Gaussian width among {fine} over 10 data seeds: {best_by_seed}; interior in "
        "{interior}/10, the narrowest and widest at least {extreme:.1f}x the best MSE in every "
        "seed. A closer key never gets less weight: {violated:.0%} of {pairs} closer/farther key "
        "pairs violated, for every kernel and the library's learned w; strictly more: {strict} "
        "(ties: the constant kernel everywhere, boxcar and Epanechnikov outside their window, "
        "the learned w where far weights underflow to 0)."
    ).format(
        widths="/".join(str(w) for w in widths),
        mse="; ".join(f"{k} " + "/".join(f"{e:.2f}" for e in v) for k, v in mse.items()),
        constant=mse["constant"][0], best=best, convergence=" -> ".join(f"{e:.3f}" for e in conv),
        sizes=sizes, w=values["learned_w"], loss_first=losses[0], loss_last=losses[-1],
        rough_learned=values["roughness_learned"], rough_fixed=values["roughness_fixed"],
        fine=fine, best_by_seed=", ".join(
            f"{h} ({c}x)" for h, c in zip(sorted(set(best_by_seed.values())), best_counts)),
        interior=values["best_width_interior"], extreme=min(extreme_ratio),
        violated=max(c["violated"] for c in closer.values()), pairs=closer["gaussian"]["pairs"],
        strict=", ".join(f"{_(k) if k == LIBRARY else k} {c['strictly_more']:.0%}"
                         for k, c in closer.items()),
    )  # fmt: skip
    figs = {"kernels": fig_k, "widths": fig_w, "convergence": fig_c, "learned_loss": fig_l,
            "learned_fit": fig_p}  # fmt: skip
    return TopicResult("kernels", finding, values, figs)
