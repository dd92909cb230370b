"""Recurrent networks (d2l 8.1, 8.5, 8.7): backpropagation through time (gradient norms,
truncation, random against sequential sampling, gradient clipping) and autoregressive
prediction k steps ahead. The GRU and LSTM gates are in ``attnkit.tour.gates``."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit._validate import integer, optional, positive_int, real
from attnkit.i18n import N_, _
from attnkit.tour.base import (
    TopicResult,
    check_args,
    check_tensor,
    describe_seeds,
    seed_summary,
    topic,
)

__all__ = ["autoregressive", "bptt", "clipping_divergence", "fit_window_net", "randomized_grad"]


def randomized_grad(
    W: Tensor,
    X: Tensor,
    *,
    keep: Tensor | None = None,
    pi: float = 1.0,
    truncate: int | None = None,
) -> Tensor:
    """d(sum h_T)/dW for h_t = tanh(W h_{t-1} + x_t), h_0 = 0, X (T, d).

    ``truncate=k`` backpropagates through the last k steps only (the state is detached
    before). ``keep`` (T,) bools with ``pi``: the book's randomized truncation, step t
    passes its state's gradient on scaled by ξ_t / π (ξ_t = keep[t]), unbiased in mean.
    """
    real("pi", pi, above=0.0, at_most=1.0, expected=N_("a probability in (0, 1]"))
    check_tensor("W", W, 2)
    check_tensor("X", X, 2)
    if W.shape[0] != W.shape[1] or X.shape[1] != W.shape[0]:
        raise ValueError(
            f"W must be (d, d) and X (T, d), got {tuple(W.shape)} and {tuple(X.shape)}"
        )
    if keep is not None and tuple(keep.shape) != (X.shape[0],):
        raise ValueError(f"keep must have shape (T,) = ({X.shape[0]},), got {tuple(keep.shape)}")
    optional(integer, "truncate", truncate, minimum=1, maximum=X.shape[0])  # at most T
    W = W.detach().clone().requires_grad_(True)
    T = X.shape[0]
    h = torch.zeros(W.shape[0])
    for t in range(T):
        if truncate is not None and t == T - truncate:
            h = h.detach()
        if keep is not None:
            s = float(keep[t]) / pi  # same value, gradient scaled by ξ_t / π
            h = h * s + h.detach() * (1 - s)
        h = torch.tanh(W @ h + X[t])
    (g,) = torch.autograd.grad(h.sum(), W)
    return g


# the keys of bptt's ``relative_error`` (English, as the tests read them; shown translated)
TRUNCATED = N_("truncated k={k}")
MEAN_OF_DRAWS = N_("randomized, mean of draws")
ONE_DRAW = N_("randomized, one draw (rms)")
# the two ways of sampling, shown translated in the figure
SAMPLINGS = (N_("sequential"), N_("random"))


def _shown_error(key: str) -> str:
    """A ``relative_error`` key in the language in force."""
    if key.startswith("truncated k="):
        return _(TRUNCATED).format(k=key.removeprefix("truncated k="))
    return _(key)


@topic
def bptt(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Gradient norms over steps; full, truncated and randomized truncation; sampling."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    g = torch.Generator().manual_seed(seed)
    d, T = 8, 40
    Q, _r = torch.linalg.qr(torch.randn(d, d, generator=g))
    x0 = torch.randn(d, generator=g)
    norms = {}
    for rho in (0.8, 1.0, 1.2):  # linear recurrence h_t = W h_{t-1}: dh_t/dx_0 = W^t
        W = rho * Q
        h = x0.clone().requires_grad_(True)
        ys, out = h, []
        for _step in range(T):
            ys = W @ ys
            (gr,) = torch.autograd.grad(ys.sum(), h, retain_graph=True)
            out.append(float(gr.norm()))
        norms[rho] = out
    slopes = {rho: (math.log(v[-1]) - math.log(v[9])) / (T - 10) for rho, v in norms.items()}

    # full vs truncated vs randomized truncation on a tanh RNN
    W = 0.9 * Q
    X = torch.randn(30, d, generator=g) * 0.5
    full = randomized_grad(W, X)
    rel = {TRUNCATED.format(k=k): float((randomized_grad(W, X, truncate=k) - full).norm() / full.norm())
           for k in (1, 5, 10)}  # fmt: skip
    pi, draws = 0.7, (300 if small else 1500)
    samples = torch.stack([
        randomized_grad(W, X, keep=torch.rand(30, generator=g) < pi, pi=pi) for _ in range(draws)
    ])  # fmt: skip
    rel[MEAN_OF_DRAWS] = float((samples.mean(0) - full).norm() / full.norm())
    rel[ONE_DRAW] = float(((samples - full).norm(dim=(1, 2)).pow(2).mean().sqrt()) / full.norm())

    # random vs sequential sampling on a tiny character LM
    from attnkit.data.lm import LMDataLoader, load_corpus, read_corpus_lines
    from attnkit.models.rnn import build_lm
    from attnkit.training.lm import train_lm

    corpus, vocab = load_corpus(read_corpus_lines(None), "char", 4000 if small else 20000)
    epochs, n_seeds = (3, 6) if small else (12, 6)  # 5 or more: a sign test can reach 0.05
    runs: dict[str, list[list[float]]] = {"sequential": [], "random": []}
    for s in range(seed, seed + n_seeds):
        for name, rnd in (("sequential", False), ("random", True)):
            torch.manual_seed(s)
            model = build_lm("gru", len(vocab), 32)
            loader = LMDataLoader(corpus, 16, 20, use_random_iter=rnd, seed=s)
            hist = train_lm(model, loader, num_epochs=epochs, lr=0.01, optimizer="adam",
                            progress=False, use_random_iter=rnd)  # fmt: skip
            runs[name].append(hist.perplexity)
    ppl = {name: r[0] for name, r in runs.items()}  # the first seed's curves
    last = {name: [c[-1] for c in r] for name, r in runs.items()}
    sampling = seed_summary([a - b for a, b in zip(last["random"], last["sequential"])])

    n_clip, clip_steps = (6, 60) if small else (10, 150)
    clip = clipping_divergence(seeds=n_clip, steps=clip_steps, seed=seed)
    fig_n = plot_curves({f"ρ = {r}": v for r, v in norms.items()}, _("steps t"), "||dh_t / dx_0||",
                        logy=True, title=_("gradient through t steps of W = ρQ"))  # fmt: skip
    fig_p = plot_curves({_("{sampling} (seed {seed})").format(sampling=_(k), seed=seed): v
                         for k, v in ppl.items()}, _("epoch"), _("perplexity"),
                        title=_("GRU LM: sampling, {n} seeds").format(n=n_seeds))  # fmt: skip
    for name, style in (("sequential", "C0"), ("random", "C1")):
        for curve in runs[name][1:]:
            fig_p.axes[0].plot(range(1, epochs + 1), curve, color=style, alpha=0.3, lw=0.8)
    values = {"grad_norms": norms, "log_slopes": slopes, "relative_error": rel, "perplexity": ppl,
              "draws": draws, "pi": pi, "sampling_final_perplexity": last,
              "sampling_random_minus_sequential": sampling,
              "clipping": clip}  # fmt: skip
    lrs, div = clip["lrs"], clip["diverged"]
    finding = _(
        "||dh_t/dx_0|| after {T} steps: {norms} (log-slope per step {slopes} = log ρ: vanishing, "
        "stable, exploding). Gradient error against full BPTT (30 steps): {errors}: truncation "
        "is biased, less so as k grows; randomized truncation (π = {pi}) is unbiased on average "
        "over {draws} draws but one draw is noisy. Character GRU, {epochs} epochs, {n_seeds} "
        "seeds: training perplexity sequential {sequential}, random {random}: sequential "
        "partitioning (the state carried across batches) ends lower in {sampling}. Gradient "
        "clipping (θ = {theta}): a tanh RNN started with ρ(W) ≈ {rho}, {clip_steps} SGD steps, "
        "{n_clip} seeds; diverged without / with clipping at lr {diverged} (largest gradient "
        "norm without clipping, median per lr {max_norm}): clipping prevents the divergence (at "
        "lr {lr_max} it prevents it in {prevented}/{n_clip} seeds, sign test p = {p:.2g}); at "
        "the smallest lr neither diverges and clipping changes the final loss little "
        "({final_none:.3f} without, {final_clipped:.3f} with)."
    ).format(
        T=T, norms=", ".join(f"ρ = {r}: {v[-1]:.1e}" for r, v in norms.items()),
        slopes=", ".join(f"{s:.3f}" for s in slopes.values()),
        errors=", ".join(f"{_shown_error(k)} {e:.3f}" for k, e in rel.items()), pi=pi,
        draws=draws, epochs=epochs, n_seeds=n_seeds,
        sequential="/".join(f"{x:.2f}" for x in last["sequential"]),
        random="/".join(f"{x:.2f}" for x in last["random"]), sampling=describe_seeds(sampling),
        theta=clip["theta"], rho=clip["rho"], clip_steps=clip_steps, n_clip=n_clip,
        diverged=", ".join(f"{lr}: {div['none'][i]}/{n_clip} / {div['clipped'][i]}/{n_clip}"
                           for i, lr in enumerate(lrs)),
        max_norm="/".join(f"{x:.1e}" for x in clip["max_norm_none"]),
        lr_max=lrs[-1], prevented=clip["prevented_at_largest_lr"]["agree"],
        p=clip["prevented_at_largest_lr"]["p_no_effect"],
        final_none=clip["final_median"]["none"][0],
        final_clipped=clip["final_median"]["clipped"][0],
    )  # fmt: skip
    figs = {"gradient_norms": fig_n, "sampling": fig_p}
    return TopicResult("bptt", finding, values, figs)


def clipping_divergence(*, seeds: int, steps: int, lrs: tuple[float, ...] = (0.1, 0.3, 0.5),
                        theta: float = 1.0, rho: float = 1.5, T: int = 20, d: int = 16,
                        seed: int = 0) -> dict:  # fmt: skip
    """SGD on a tanh RNN (h_t = tanh(W h_{t-1} + u x_t), y = vᵀh_T, the target the sum of
    the last 3 inputs), W started at spectral radius about ``rho``, with and without
    clipping the gradient's norm to ``theta``; every (clipping, lr, seed) is one model of
    a batch, trained on the same batches. A run diverged when its final loss (the mean
    of the last 10% of steps) is not finite or above its first loss."""
    positive_int("seeds", seeds)
    positive_int("steps", steps)
    real("theta", theta, above=0.0)
    S, R = seeds, len(lrs)
    M = 2 * R * S  # model m = (clipped * R + lr index) * S + seed
    g = torch.Generator().manual_seed(seed)
    params = [(torch.randn(S, *shape, generator=g) * scale).repeat(2 * R, 1, 1).requires_grad_(True)
              for shape, scale in (((d, d), rho / math.sqrt(d)), ((1, d), 1.0),
                                   ((d, 1), 1 / math.sqrt(d)))]  # fmt: skip
    W, U, v = params
    lr = torch.tensor(lrs).repeat_interleave(S).repeat(2)
    clipped = torch.arange(M) >= R * S
    data = torch.Generator().manual_seed(seed + 1)
    losses, norms = [], []
    for _step in range(steps):
        X = torch.randn(S, 32, T, generator=data).repeat(2 * R, 1, 1)
        h = torch.zeros(M, 32, d)
        for t in range(T):
            h = torch.tanh(torch.bmm(h, W) + X[:, :, t, None] * U)
        loss = ((torch.bmm(h, v)[..., 0] - X[:, :, -3:].sum(-1)) ** 2).mean(1)  # (M,)
        grads = torch.autograd.grad(loss.sum(), params)
        norm = torch.sqrt(sum(gr.pow(2).sum((1, 2)) for gr in grads))  # (M,)
        scale = torch.where(clipped, (theta / norm).clamp(max=1.0), torch.ones_like(norm))
        with torch.no_grad():
            for p, gr in zip(params, grads):
                p -= (lr * scale)[:, None, None] * gr
        losses.append(loss.detach())
        norms.append(norm.detach())
    L = torch.stack(losses).reshape(steps, 2, R, S)
    final = L[-max(1, steps // 10) :].mean(0)  # (2, R, S)
    diverged = ~torch.isfinite(final) | (final > L[0])
    max_norm = torch.stack(norms).reshape(steps, 2, R, S).nan_to_num(math.inf).amax(0)
    names = ("none", "clipped")
    return {
        "lrs": list(lrs), "theta": theta, "rho": rho,
        "diverged": {k: [int(x) for x in diverged[i].sum(-1)] for i, k in enumerate(names)},
        "final": {k: final[i].tolist() for i, k in enumerate(names)},
        "final_over_start": {k: (final[i] / L[0, i]).tolist() for i, k in enumerate(names)},
        "final_median": {k: final[i].nan_to_num(math.inf).median(-1).values.tolist()
                         for i, k in enumerate(names)},
        "max_norm_none": max_norm[0].median(-1).values.tolist(),
        # per seed at the largest lr: 1 when the run diverges without clipping and not with
        # it, -1 the other way round, 0 otherwise (a binary outcome: its sign test is the
        # test; the t interval of 0/1 values says nothing more)
        "prevented_at_largest_lr": seed_summary([float(a) - float(b) for a, b in
                                                 zip(diverged[0, -1].tolist(),
                                                     diverged[1, -1].tolist())]),
    }  # fmt: skip


def fit_window_net(
    net: nn.Module,
    features: Tensor,
    labels: Tensor,
    n_train: int,
    epochs: int,
    generator: torch.Generator,
) -> nn.Module:
    """The book's training of a window model: Adam (lr 0.01), MSE, minibatches of 16
    drawn by ``generator`` from the first ``n_train`` rows of ``features`` (N, tau) and
    ``labels`` (N, 1), for ``epochs`` passes. Returns ``net``, trained in place."""
    check_tensor("features", features, 2)
    check_tensor("labels", labels, 2)
    if not 1 <= n_train <= min(len(features), len(labels)):
        raise ValueError(
            f"n_train must be in [1, {min(len(features), len(labels))}] (the rows of "
            f"features and labels), got {n_train}"
        )
    positive_int("epochs", epochs)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for _epoch in range(epochs):
        perm = torch.randperm(n_train, generator=generator)
        for i in range(0, n_train, 16):
            idx = perm[i : i + 16]
            opt.zero_grad()
            nn.functional.mse_loss(net(features[idx]), labels[idx]).backward()
            opt.step()
    return net


@topic
def autoregressive(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The book's noisy sine, a τ = 4 MLP, and its k-step-ahead predictions."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    g = torch.Generator().manual_seed(seed)
    T, tau, n_train = 1000, 4, 600
    time_ = torch.arange(1, T + 1, dtype=torch.float32)
    x = torch.sin(0.01 * time_) + torch.normal(0.0, 0.2, (T,), generator=g)
    features = torch.stack([x[i : T - tau + i] for i in range(tau)], 1)  # (T - tau, tau)
    labels = x[tau:].reshape(-1, 1)
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(tau, 10), nn.ReLU(), nn.Linear(10, 1))
    fit_window_net(net, features, labels, n_train, 5 if small else 10, g)
    steps = (1, 4, 16, 64)
    max_k = steps[-1]
    # k-step-ahead: column i holds x_{t+i} for i < tau, then predictions
    n = T - tau - max_k + 1
    cols = [x[i : i + n] for i in range(tau)]
    with torch.no_grad():
        for i in range(tau, tau + max_k):
            cols.append(net(torch.stack(cols[i - tau : i], 1)).reshape(-1))

    def error(k: int) -> float:  # the k-step-ahead predictions against the data
        return float(((cols[tau + k - 1] - x[tau + k - 1 : tau + k - 1 + n]) ** 2).mean())

    mse = {k: error(k) for k in steps}
    truth_mse = {k: float(((cols[tau + k - 1] - torch.sin(0.01 * time_[tau + k - 1 : tau + k - 1 + n])) ** 2).mean()) for k in steps}  # fmt: skip
    # multistep from the end of the training data onward: predictions feed predictions
    multi = x[: n_train + tau].clone().tolist()
    with torch.no_grad():
        for _t in range(n_train + tau, T):
            multi.append(float(net(torch.tensor(multi[-tau:]).reshape(1, tau))))
    multi_mse = float(((torch.tensor(multi[n_train + tau :]) - x[n_train + tau :]) ** 2).mean())
    fig_k = plot_curves({_("data"): x[tau + max_k - 1 :].tolist(),
                         **{_("{k}-step preds").format(k=k): cols[tau + k - 1].tolist()
                            for k in steps}},
                        _("time"), "x", x=time_[tau + max_k - 1 :].tolist(),
                        title=_("k-step-ahead predictions"))  # fmt: skip
    fig_m = plot_curves({_("data"): x.tolist(), _("multistep from t = 604"): multi}, _("time"),
                        "x", x=time_.tolist(), title=_("predictions fed back"))  # fmt: skip
    values = {"k_step_mse": mse, "k_step_mse_vs_sine": truth_mse, "multistep_mse": multi_mse,
              "noise_variance": 0.04}  # fmt: skip
    finding = _(
        "MSE against the data of k-step-ahead predictions: {mse} (the noise alone is 0.04). One "
        "step ahead is as good as the noise allows; errors compound as predictions feed "
        "predictions. Feeding back from t = {start} to {T}: MSE {multi_mse:.3f}, the prediction "
        "decays to a flat line."
    ).format(mse=", ".join(f"k = {k}: {e:.3f}" for k, e in mse.items()), start=n_train + tau, T=T,
             multi_mse=multi_mse)  # fmt: skip
    return TopicResult("autoregressive", finding, values, {"k_step": fig_k, "multistep": fig_m})
