"""Exercises on the Nadaraya-Watson kernel width: d2l 0.17's 10.2.3 (the width as a
hyperparameter chosen by leave-one-out cross-validation), 1.0's 11.2.2 (learning the width
by gradient descent, with and without each point in its own estimate) and 1.0's 11.2.4
(how fast the width should shrink with n, and how that depends on the dimension).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnkit.i18n import N_, gettext
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = ["gaussian_nw", "loo_width", "more_data", "sgd_width", "width_rate"]


def gaussian_nw(queries: Tensor, keys: Tensor, values: Tensor, width, *, leave_out=False):
    """Gaussian Nadaraya-Watson in d dimensions: queries (Q, d), keys (K, d), values (K,).
    ``width`` a float or a 0-dim tensor (differentiable). ``leave_out``: queries are the
    keys themselves and each one's own key is excluded (leave-one-out)."""
    sq = torch.cdist(queries, keys) ** 2  # (Q, K) squared distances
    scores = -sq / (2 * width**2)
    if leave_out:
        scores = scores.masked_fill(torch.eye(len(keys), dtype=torch.bool), -math.inf)
    return torch.softmax(scores, dim=1) @ values  # (Q,)


def _book_data(seed: int, n: int = 50):
    from attnkit.attention.kernel_regression import make_nw_data

    d = make_nw_data(n_train=n, seed=seed)
    return (
        d.x_train[:, None].double(),
        d.y_train.double(),
        d.x_test[:, None].double(),
        d.y_truth.double(),
    )


WIDTH_GRID = [0.05 * 1.25**i for i in range(20)]  # 0.05 ... 3.5


@topic
def loo_width(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.2.3: choose the width on the training set by leave-one-out error; compare the
    test MSE with the book's default width 1, on the book's data, over data seeds."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    seeds = 6 if small else 20
    chosen, mse_cv, mse_default, diffs, mse_best = [], [], [], [], []
    for s in range(seed, seed + seeds):
        x, y, xt, yt = _book_data(s)
        loo = [
            float(((gaussian_nw(x, x, y, h, leave_out=True) - y) ** 2).mean()) for h in WIDTH_GRID
        ]
        test = [float(((gaussian_nw(xt, x, y, h) - yt) ** 2).mean()) for h in WIDTH_GRID]
        i = min(range(len(WIDTH_GRID)), key=loo.__getitem__)
        default = float(((gaussian_nw(xt, x, y, 1.0) - yt) ** 2).mean())
        chosen.append(WIDTH_GRID[i])
        mse_cv.append(test[i])
        mse_default.append(default)
        mse_best.append(min(test))
        diffs.append(default - test[i])
        if s == seed:
            curves = {gettext("leave-one-out MSE (training set)"): loo, gettext("test MSE"): test}
    summary = seed_summary(diffs)
    fig = plot_curves(curves, gettext("kernel width h"), "MSE", x=WIDTH_GRID, logy=True,
                      title=gettext("the width chosen on the training set alone"))  # fmt: skip
    fig.axes[0].set_xscale("log")
    values = {
        "data": "the book's 50 noisy points of 2 sin x + x^0.8 (noise sd 0.5), test grid 0:5:0.1",
        "data_zh": "书中 2 sin x + x^0.8 的 50 个带噪声的点（噪声标准差 0.5），测试网格 0:5:0.1",
        "seeds": seeds,
        "chosen_widths": chosen,
        "median_width": sorted(chosen)[seeds // 2],
        "mse_cv_mean": sum(mse_cv) / seeds,
        "mse_default_mean": sum(mse_default) / seeds,
        "mse_oracle_mean": sum(mse_best) / seeds,
        "cv_beats_default": summary,
        "cv_beats_default_text": describe_seeds(summary),
    }
    finding = (
        f"Leave-one-out picks widths {min(chosen):.2f}-{max(chosen):.2f} (median "
        f"{values['median_width']:.2f}); test MSE {values['mse_cv_mean']:.3f} against "
        f"{values['mse_default_mean']:.3f} at the default width 1 and {values['mse_oracle_mean']:.3f}"
        f" for the best width in hindsight; better than the default in {describe_seeds(summary)}."
    )
    return TopicResult("attention_widths_loo_width", finding, values, {"loo": fig})


@topic
def more_data(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.2.1: more training examples from the book's distribution; the non-parametric
    estimator with a fixed width (the book's 1, and 0.3) against a width shrinking as
    n^(-1/5); test MSE on the interior [0.5, 4.5] (away from the edge bias), mean of reps."""
    check_args(small, seed)
    from attnkit.attention.kernel_regression import nw_target
    from attnkit.viz import plot_curves

    sizes = [50, 200, 1000] if small else [50, 200, 1000, 5000]
    reps = 3 if small else 5
    x_test = torch.arange(0.5, 4.5, 0.05, dtype=torch.float64)[:, None]
    truth = nw_target(x_test[:, 0])
    rules = {N_("fixed h = 1"): lambda n: 1.0, N_("fixed h = 0.3"): lambda n: 0.3,
             "h = 0.5 (n/50)^(-1/5)": lambda n: 0.5 * (n / 50) ** -0.2}  # fmt: skip
    mse = {k: [] for k in rules}
    for n in sizes:
        for name, rule in rules.items():
            err = 0.0
            for r in range(reps):
                g = torch.Generator().manual_seed(seed * 1000 + r)
                x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 5
                y = nw_target(x[:, 0]) + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
                err += float(((gaussian_nw(x_test, x, y, rule(n)) - truth) ** 2).mean()) / reps
            mse[name].append(err)
    fig = plot_curves({gettext(k): v for k, v in mse.items()}, gettext("training examples n"),
                      gettext("test MSE"), x=sizes, logy=True,
                      title=gettext("more data helps only if the width shrinks"))  # fmt: skip
    fig.axes[0].set_xscale("log")
    keys = {
        "fixed h = 1": "fixed_1",
        "fixed h = 0.3": "fixed_03",
        "h = 0.5 (n/50)^(-1/5)": "shrinking",
    }
    values = {
        "data": "the book's function 2 sin x + x^0.8, noise sd 0.5, x uniform on [0, 5]",
        "data_zh": "书中的函数 2 sin x + x^0.8，噪声标准差 0.5，x 在 [0, 5] 上均匀分布",
        "sizes": sizes,
        "n_first": sizes[0],
        "n_last": sizes[-1],
        "reps": reps,
        "mse": {keys[k]: v for k, v in mse.items()},
        "first": {keys[k]: v[0] for k, v in mse.items()},
        "last": {keys[k]: v[-1] for k, v in mse.items()},
        "shrinking_falls": all(
            a > b for a, b in zip(mse["h = 0.5 (n/50)^(-1/5)"], mse["h = 0.5 (n/50)^(-1/5)"][1:])
        ),
        # the fixed width's last gain against its error: near 1 = no more gain from data
        "fixed_1_last_ratio": mse["fixed h = 1"][-1] / mse["fixed h = 1"][-2],
    }
    finding = (
        "; ".join(f"{k}: " + " -> ".join(f"{e:.4f}" for e in v) for k, v in mse.items())
        + f" for n = {sizes}."
    )
    return TopicResult("attention_widths_more_data", finding, values, {"more_data": fig})


@topic
def sgd_width(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 11.2.2: learn log h by gradient descent on sum_i (f(x_i) - y_i)^2, first with
    (x_i, y_i) inside its own estimate, then leaving it out."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    steps = 150 if small else 200
    seeds = 5 if small else 8  # 5: the fewest whose unanimous sign test reaches 0.05
    out: dict[str, dict[str, list[float]]] = {
        k: {"width": [], "train": [], "test": []} for k in ("with_self", "leave_one_out")
    }
    for s in range(seed, seed + seeds):
        x, y, xt, yt = _book_data(s)
        for name in out:
            log_h = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)  # h = 1
            opt = torch.optim.Adam([log_h], lr=0.05)
            trace = []
            for _ in range(steps):
                opt.zero_grad()
                fit = gaussian_nw(x, x, y, log_h.exp(), leave_out=name == "leave_one_out")
                loss = ((fit - y) ** 2).mean()
                loss.backward()
                opt.step()
                trace.append(float(log_h.detach().exp()))
            h = log_h.detach().exp()
            with torch.no_grad():
                out[name]["width"].append(float(h))
                out[name]["train"].append(float(((gaussian_nw(x, x, y, h) - y) ** 2).mean()))
                out[name]["test"].append(float(((gaussian_nw(xt, x, y, h) - yt) ** 2).mean()))
            if s == seed:
                out[name]["trace"] = trace
    fig = plot_curves({k: v["trace"] for k, v in out.items()}, gettext("step"),
                      gettext("kernel width h"), logy=True,
                      title=gettext("gradient descent on the width"))  # fmt: skip
    mean = {k: {m: sum(v[m]) / seeds for m in ("width", "train", "test")} for k, v in out.items()}
    loo_better = seed_summary([a - b for a, b in
                               zip(out["with_self"]["test"], out["leave_one_out"]["test"])])  # fmt: skip
    values = {
        "data": "the book's 50 noisy points of 2 sin x + x^0.8 (noise sd 0.5)",
        "data_zh": "书中 2 sin x + x^0.8 的 50 个带噪声的点（噪声标准差 0.5）",
        "seeds": seeds,
        "steps": steps,
        "mean": mean,
        "max_width_with_self": max(out["with_self"]["width"]),
        "min_width_loo": min(out["leave_one_out"]["width"]),
        "max_train_mse_with_self": max(out["with_self"]["train"]),
        "loo_test_better": loo_better,
        "loo_test_better_text": describe_seeds(loo_better),
        "noise_variance": 0.25,
    }
    finding = (
        f"With each point in its own estimate the width falls from 1 to at most "
        f"{values['max_width_with_self']:.3f} in {steps} Adam steps: every point predicts "
        f"itself, training MSE {mean['with_self']['train']:.4f}, test "
        f"{mean['with_self']['test']:.3f}. Leaving it out, the width settles at "
        f"{mean['leave_one_out']['width']:.2f} (mean), training MSE "
        f"{mean['leave_one_out']['train']:.3f} (near the noise variance 0.25), test "
        f"{mean['leave_one_out']['test']:.3f}: better in {describe_seeds(loo_better)}."
    )
    return TopicResult("attention_widths_sgd_width", finding, values, {"width": fig})


def _target(x: Tensor) -> Tensor:
    """A smooth function on [0, 1]^d: (N, d) -> (N,)."""
    return torch.sin(2 * math.pi * x).sum(1)


NOISE_SD = 0.5


def expected_mse(sq: Tensor, f_train: Tensor, f_test: Tensor, h: float) -> float:
    """The test MSE of Gaussian NW averaged over the label noise, exactly: the estimate is
    linear in y = f + noise, so E(ŷ - f)^2 = (W f_train - f_test)^2 + sd^2 sum_j W_j^2.
    sq: (test, n) squared distances."""
    W = torch.softmax(-sq / (2 * h * h), dim=1)  # (test, n)
    bias2 = (W @ f_train - f_test) ** 2
    return float((bias2 + NOISE_SD**2 * (W * W).sum(1)).mean())


def best_width(sq: Tensor, f_train: Tensor, f_test: Tensor) -> tuple[float, float]:
    """The width minimising ``expected_mse`` (golden-section search on log h over
    [0.003, 1]) and that error."""
    lo, hi = math.log(0.003), math.log(1.0)
    ratio = (math.sqrt(5) - 1) / 2

    def err(t: float) -> float:
        return expected_mse(sq, f_train, f_test, math.exp(t))

    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = err(a), err(b)
    for _ in range(24):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = err(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = err(b)
    t = (lo + hi) / 2
    return math.exp(t), err(t)


@topic
def width_rate(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 11.2.4: the MSE-optimal width h* and the error at h* against n in d = 1, 2, 3;
    fitted exponents against the theory h* ~ n^(-1/(d+4)), MSE ~ n^(-4/(d+4)). The error
    is the exact average over the label noise (``expected_mse``), over random designs."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    sizes = [100, 400, 1600] if small else [100, 400, 1600, 6400]
    dims = [1, 2, 3]
    reps = 2
    g = torch.Generator().manual_seed(seed)
    best_h: dict[int, list[float]] = {}
    best_mse: dict[int, list[float]] = {}
    for d in dims:
        test = 0.25 + 0.5 * torch.rand(200, d, generator=g, dtype=torch.float64)  # interior
        f_test = _target(test)
        best_h[d], best_mse[d] = [], []
        for n in sizes:
            hs, es = [], []
            for _ in range(reps):
                x = torch.rand(n, d, generator=g, dtype=torch.float64)  # a random design
                h, e = best_width(torch.cdist(test, x) ** 2, _target(x), f_test)
                hs.append(h)
                es.append(e)
            best_h[d].append(math.exp(sum(map(math.log, hs)) / reps))  # geometric mean
            best_mse[d].append(sum(es) / reps)

    def slope(ys: list[float]) -> float:  # least-squares slope of log y against log n
        lx = [math.log(n) for n in sizes]
        ly = [math.log(v) for v in ys]
        mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
        return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)

    values = {
        "data": "y = sum_j sin(2 pi x_j) + N(0, 0.25), x uniform on [0, 1]^d, tested on [0.25, 0.75]^d",
        "data_zh": "y = sum_j sin(2 pi x_j) + N(0, 0.25)，x 在 [0, 1]^d 上均匀分布，在 [0.25, 0.75]^d 上测试",
        "sizes": sizes,
        "dims": dims,
        "reps": reps,
        "best_width": {f"d{d}": best_h[d] for d in dims},
        "best_mse": {f"d{d}": best_mse[d] for d in dims},
        "width_exponent": {f"d{d}": slope(best_h[d]) for d in dims},
        "mse_exponent": {f"d{d}": slope(best_mse[d]) for d in dims},
        "theory_width_exponent": {f"d{d}": -1 / (d + 4) for d in dims},
        "theory_mse_exponent": {f"d{d}": -4 / (d + 4) for d in dims},
    }
    fig = plot_curves({f"d = {d}": best_mse[d] for d in dims}, gettext("training examples n"),
                      gettext("test MSE at the best width"), x=sizes, logy=True,
                      title=gettext("higher dimension, slower convergence"))  # fmt: skip
    fig.axes[0].set_xscale("log")
    finding = "; ".join(
        f"d = {d}: h* exponent {values['width_exponent'][f'd{d}']:.3f} (theory "
        f"{-1 / (d + 4):.3f}), MSE exponent {values['mse_exponent'][f'd{d}']:.3f} (theory "
        f"{-4 / (d + 4):.3f})"
        for d in dims
    )
    return TopicResult("attention_widths_width_rate", finding, values, {"rate": fig})
