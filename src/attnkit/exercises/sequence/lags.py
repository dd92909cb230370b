"""Exercise 8.1.1 of d2l 0.17 (1.0: 9.1.1): the section's noisy sine and its τ-lag
autoregressive model (the tour's ``autoregressive`` topic): how many past values it needs
with and without noise, older values at a fixed feature count, and other architectures
evaluated k steps ahead.

The data are the tour's: x_t = sin(0.01 t) + N(0, 0.2²), t = 1..1000, trained on the
first 600 time steps. Linear autoregressions are fitted by least squares (float64, exact
and deterministic); the networks are trained as the tour trains its MLP.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic
from attnkit.tour.recurrent import fit_window_net

__all__ = ["lags_and_architectures"]

T, N_TRAIN, OMEGA, NOISE_SD = 1000, 600, 0.01, 0.2
MAX_LAG = 64  # every model is tested on the same time steps: t >= N_TRAIN + MAX_LAG
TAUS = (1, 2, 4, 8, 16, 32, 64)
STEPS = (1, 4, 16, 64)


def _series(seed: int, noise_sd: float = NOISE_SD) -> tuple[Tensor, Tensor]:
    """(noisy series, clean sine), both (T,) float64."""
    g = torch.Generator().manual_seed(seed)
    time_ = torch.arange(1, T + 1, dtype=torch.float64)
    clean = torch.sin(OMEGA * time_)
    return clean + noise_sd * torch.randn(T, generator=g, dtype=torch.float64), clean


def _design(x: Tensor, features) -> tuple[Tensor, Tensor]:
    """Rows t = MAX_LAG..T-1: features of x's past (callables of the past window) and x_t."""
    # window[t - MAX_LAG, j] = x_{t-1-j}: the MAX_LAG values before t, most recent first
    window = torch.stack([x[MAX_LAG - 1 - j : T - 1 - j] for j in range(MAX_LAG)], 1)
    return torch.stack([f(window) for f in features], 1), x[MAX_LAG:]  # (rows, F), (rows,)


def _lags(lags) -> list:
    return [lambda w, j=j: w[:, j - 1] for j in lags]


def _linear_fit(x: Tensor, features) -> tuple[Tensor, Tensor, Tensor]:
    """Least squares on the training rows: (coefficients, test predictions, test rows)."""
    X, y = _design(x, features)
    X = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1)  # an intercept
    n_fit = N_TRAIN - MAX_LAG  # rows whose target lies in the training span
    coef = torch.linalg.lstsq(X[:n_fit], y[:n_fit, None]).solution[:, 0]
    return coef, X[n_fit:] @ coef, torch.arange(n_fit, len(X)) + MAX_LAG


def _test_mse(x: Tensor, clean: Tensor, features) -> tuple[float, float]:
    """One-step test MSE against the noisy data and against the clean sine."""
    _, pred, t = _linear_fit(x, features)
    return float(((pred - x[t]) ** 2).mean()), float(((pred - clean[t]) ** 2).mean())


def _train_net(net: nn.Module, x: Tensor, tau: int, epochs: int, seed: int) -> nn.Module:
    """The tour's training: Adam lr 0.01, batches of 16, MSE, on the first 600 steps."""
    xf = x.float()
    feats = torch.stack([xf[i : T - tau + i] for i in range(tau)], 1)  # (T - tau, tau)
    labels = xf[tau:, None]
    g = torch.Generator().manual_seed(seed)
    return fit_window_net(net, feats, labels, N_TRAIN - tau, epochs, g)


def _k_step_mse(predict, x: Tensor, tau: int) -> dict[int, float]:
    """MSE against the data of predictions k steps ahead, each made from observed values
    up to t - k and its own predictions after, over targets t in the test span."""
    xf = x.float()
    first = N_TRAIN + MAX_LAG  # the first target, as in the one-step tests
    starts = torch.arange(first - STEPS[-1] + 1, T)  # where each prediction run begins
    hist = torch.stack([xf[s - tau : s] for s in starts.tolist()], 0)  # (n, tau)
    out = {}
    with torch.no_grad():
        for k in range(1, STEPS[-1] + 1):
            nxt = predict(hist).reshape(-1)  # prediction of x at starts + k - 1
            hist = torch.cat([hist[:, 1:], nxt[:, None]], 1)
            if k in STEPS:
                target_t = starts + k - 1
                keep = (target_t >= first) & (target_t < T)  # the same targets for every k
                out[k] = float(((nxt[keep] - xf[target_t[keep].clamp(max=T - 1)]) ** 2).mean())
    return out


def _architectures(seed: int, epochs: int) -> dict[str, dict[int, float]]:
    """k-step-ahead test MSE of the book's MLP (τ = 4, 10 hidden), a linear model (τ = 4,
    least squares), a wider and deeper MLP (τ = 4) and a linear model with τ = 16."""
    x, _ = _series(seed)
    found = {}
    for name, tau in (("linear tau=4", 4), ("linear tau=16", 16)):
        coef, _, _ = _linear_fit(x, _lags(range(1, tau + 1)))
        w = coef[:tau].flip(0).float()  # the window runs oldest..newest
        b = float(coef[tau])
        found[name] = _k_step_mse(lambda h, w=w, b=b: h @ w + b, x, tau)
    nets = {
        "book MLP (4-10-1)": lambda: nn.Sequential(nn.Linear(4, 10), nn.ReLU(), nn.Linear(10, 1)),
        "MLP 4-32-32-1": lambda: nn.Sequential(
            nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1)
        ),
    }
    for name, make in nets.items():
        torch.manual_seed(seed)
        net = _train_net(make(), x, 4, epochs, seed)
        found[name] = _k_step_mse(net, x, 4)
    return found


@topic
def lags_and_architectures(*, small: bool = False, seed: int = 0) -> TopicResult:
    """8.1.1: test error against the number of lags (linear, over seeds); the noise-free
    sine fitted exactly by two lags; older values at four features; architectures k
    steps ahead."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    seeds = list(range(seed, seed + 10))  # least squares is cheap: 10 draws at both sizes
    # (1) more lags: one-step test MSE of a linear AR(τ), against the data and the sine
    by_tau = {tau: [_test_mse(*_series(s), _lags(range(1, tau + 1))) for s in seeds]
              for tau in TAUS}  # fmt: skip
    mse_data = {tau: sum(m for m, _ in v) / len(v) for tau, v in by_tau.items()}
    mse_sine = {tau: sum(c for _, c in v) / len(v) for tau, v in by_tau.items()}
    best = min(mse_data.values())
    # the smallest τ whose mean test MSE is within 1% of the best τ's
    enough = min(tau for tau in TAUS if mse_data[tau] <= 1.01 * best)
    gain_4_to_16 = seed_summary([by_tau[4][i][0] - by_tau[16][i][0] for i in range(len(seeds))])
    # (2) no noise: sin obeys x_t = 2 cos(ω) x_{t-1} - x_{t-2} exactly
    clean_x, clean = _series(seed, noise_sd=0.0)
    coef2, _, _ = _linear_fit(clean_x, _lags((1, 2)))
    clean_mse = {tau: _test_mse(clean_x, clean, _lags(range(1, tau + 1)))[0] for tau in (1, 2)}
    # (3) four features reaching further back
    designs = {
        "lags 1-4": _lags((1, 2, 3, 4)),
        "lags 1, 2, 4, 8": _lags((1, 2, 4, 8)),
        "means of lags 1, 2-3, 4-7, 8-15": [
            lambda w, a=a, b=b: w[:, a - 1 : b].mean(1)
            for a, b in ((1, 1), (2, 3), (4, 7), (8, 15))
        ],
    }
    four = {name: [_test_mse(*_series(s), f)[0] for s in seeds] for name, f in designs.items()}
    four_mean = {name: sum(v) / len(v) for name, v in four.items()}
    window_means = four["means of lags 1, 2-3, 4-7, 8-15"]
    means_vs_lags = seed_summary([a - b for a, b in zip(four["lags 1-4"], window_means)])
    means_vs_sparse = seed_summary([a - b for a, b in zip(four["lags 1, 2, 4, 8"], window_means)])
    # (4) architectures, k steps ahead (fewer seeds: the networks train; 6 at full size, a
    # sign test's 0.016 when all agree)
    arch_seeds = seeds[: 2 if small else 6]
    runs = [_architectures(s, 5 if small else 10) for s in arch_seeds]
    arch = {name: {f"k{k}": sum(r[name][k] for r in runs) / len(runs) for k in STEPS}
            for name in runs[0]}  # fmt: skip
    # positive when the first model's k-step error is the larger
    by_seed = lambda a, b, k: seed_summary([r[a][k] - r[b][k] for r in runs])  # noqa: E731
    mlp, deep, lin4, lin16 = "book MLP (4-10-1)", "MLP 4-32-32-1", "linear tau=4", "linear tau=16"
    fig = plot_curves(
        {gettext("test MSE vs data"): [mse_data[t] for t in TAUS],
         gettext("test MSE vs sine"): [mse_sine[t] for t in TAUS]},
        gettext("number of lags τ"), "MSE", x=list(TAUS), logy=True, figsize=(4.5, 3),
        title=gettext("linear AR(τ), one step ahead"),
    )  # fmt: skip
    values = {
        "seeds": len(seeds),
        "noise_variance": NOISE_SD**2,
        "mse_by_tau": {f"tau{t}": m for t, m in mse_data.items()},
        "mse_vs_sine_by_tau": {f"tau{t}": m for t, m in mse_sine.items()},
        **{f"mse_tau{t}": mse_data[t] for t in TAUS},
        "best_tau_vs_sine": min(TAUS, key=mse_sine.get),
        "best_vs_sine": min(mse_sine.values()),
        "mse_vs_sine_tau4": mse_sine[4],
        "mse_vs_sine_tau64": mse_sine[64],
        "enough_lags": enough,
        "gain_4_to_16": gain_4_to_16,
        "gain_4_to_16_words": describe_seeds(gain_4_to_16),
        "noise_free_coef": [float(coef2[0]), float(coef2[1])],
        "two_cos_omega": float(2 * torch.cos(torch.tensor(OMEGA, dtype=torch.float64))),
        "noise_free_mse_tau1": clean_mse[1],
        "noise_free_mse_tau2": clean_mse[2],
        "four_features_mse": four_mean,
        "four_lags": four_mean["lags 1-4"],
        "four_sparse": four_mean["lags 1, 2, 4, 8"],
        "four_means": four_mean["means of lags 1, 2-3, 4-7, 8-15"],
        "means_vs_lags": means_vs_lags,
        "means_vs_lags_words": describe_seeds(means_vs_lags),
        "means_vs_sparse": means_vs_sparse,
        "arch_seeds": len(arch_seeds),
        "arch_k_step_mse": arch,
        # the same, flat, for the answers: {k_linear4[k64]}
        **{
            key: {f"k{k}": arch[name][f"k{k}"] for k in STEPS}
            for key, name in (
                ("k_linear4", "linear tau=4"),
                ("k_linear16", "linear tau=16"),
                ("k_mlp", "book MLP (4-10-1)"),
                ("k_deep", "MLP 4-32-32-1"),
            )
        },
        # the 16-lag linear model against the book's MLP, 16 and 64 steps ahead
        "linear16_vs_mlp": {f"k{k}": by_seed(mlp, lin16, k) for k in (16, 64)},
        "linear16_vs_mlp_words": describe_seeds(by_seed(mlp, lin16, 64)),
        "linear4_vs_mlp_64": by_seed(mlp, lin4, 64),
        # positive when the wider, deeper MLP does better than the book's, 16 steps ahead
        "deep_vs_mlp_16": by_seed(mlp, deep, 16),
    }
    finding = (
        "linear AR one-step test MSE (noise 0.04): "
        + ", ".join(f"τ={t}: {m:.4f}" for t, m in mse_data.items())
        + f"; τ = {enough} is within 1% of the best. Noise-free, τ = 2 fits with MSE "
        f"{clean_mse[2]:.1e} (coefficients {coef2[0]:.5f}, {coef2[1]:.5f}). Four features: "
        + ", ".join(f"{k}: {m:.4f}" for k, m in four_mean.items())
    )
    return TopicResult("sequence_lags_lags_and_architectures", finding, values, {"lags": fig})
