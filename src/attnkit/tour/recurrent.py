"""Recurrent networks (d2l 8.1, 8.7, 9.1-9.2): gates at their extremes, backpropagation
through time, and autoregressive prediction k steps ahead."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit.tour.base import TopicResult, check_args, check_tensor, topic

__all__ = ["autoregressive", "bptt", "gates", "randomized_grad"]

BIG = 30.0  # a gate bias this large drives the sigmoid to 1 (or 0 with -BIG) to ~1e-13


@topic
def gates(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The scratch GRU and LSTM with gate biases forced to ±30."""
    check_args(small, seed)
    from attnkit.models.rnn import GRUScratchLayer, LSTMScratchLayer, RNNScratchLayer
    from attnkit.viz import plot_curves

    torch.manual_seed(seed)
    D, H, T, B = 5, 6, 7, 3
    X = torch.randn(T, B, D)
    H0, H0b = torch.randn(B, H), torch.randn(B, H)

    def gru(b_z: float, b_r: float) -> GRUScratchLayer:
        g = GRUScratchLayer(D, H)
        with torch.no_grad():
            for p in g.parameters():
                p.normal_(0, 0.5)
            g.b_z.fill_(b_z)
            g.b_r.fill_(b_r)
        return g

    v: dict[str, float] = {}
    with torch.no_grad():
        g = gru(-BIG, BIG)  # update 0, reset 1: H = tanh(X W_xh + H W_hh + b_h)
        rnn = RNNScratchLayer(D, H)
        rnn.W_xh.copy_(g.W_xh), rnn.W_hh.copy_(g.W_hh), rnn.b_h.copy_(g.b_h)
        v["gru_reset1_vs_rnn"] = float((g(X, (H0,))[0] - rnn(X, (H0,))[0]).abs().max())
        g = gru(-BIG, -BIG)  # update 0, reset 0: H_t = tanh(X_t W_xh + b_h), an MLP on X_t
        Y, _ = g(X, (H0,))
        v["gru_reset0_vs_mlp"] = float((Y - torch.tanh(X @ g.W_xh + g.b_h)).abs().max())
        v["gru_reset0_state_effect"] = float((Y - g(X, (H0b,))[0]).abs().max())
        g = gru(BIG, 0.0)  # update 1: H_t = H_{t-1}, the state is copied through
        v["gru_update1_copy"] = float((g(X, (H0,))[0] - H0).abs().max())

        def lstm(b_i: float, b_f: float, b_o: float) -> LSTMScratchLayer:
            m = LSTMScratchLayer(D, H)
            for p in m.parameters():
                p.normal_(0, 0.5)
            m.b_i.fill_(b_i), m.b_f.fill_(b_f), m.b_o.fill_(b_o)
            return m

        C0 = torch.randn(B, H)
        m = lstm(-BIG, BIG, 0.0)  # forget 1, input 0: C_t = C_{t-1} = C_0
        _, (_, C) = m(X, (H0, C0))
        v["lstm_keep_cell"] = float((C - C0).abs().max())
        m = lstm(0.0, 0.0, -BIG)  # output 0: H_t = 0 * tanh(C_t), the memory is hidden
        Y, (_, C) = m(X, (H0, C0))
        v["lstm_output0_max_h"] = float(Y.abs().max())
        v["lstm_output0_max_c"] = float(C.abs().max())
    traces = {}
    with torch.no_grad():  # hidden unit 0 of batch row 0 over time, per forced setting
        traces["GRU free"] = gru(0.0, 0.0)(X, (H0,))[0][:, 0, 0].tolist()
        traces["GRU update≈1 (copy)"] = gru(BIG, 0.0)(X, (H0,))[0][:, 0, 0].tolist()
        traces["GRU reset≈0 (MLP on X_t)"] = gru(-BIG, -BIG)(X, (H0,))[0][:, 0, 0].tolist()
        traces["LSTM cell, forget=1 input=0"] = (
            lstm(-BIG, BIG, 0.0)(X, (H0, C0))[1][1][0, 0].repeat(T).tolist()
        )
        traces["LSTM H, output≈0"] = lstm(0.0, 0.0, -BIG)(X, (H0, C0))[0][:, 0, 0].tolist()
    fig = plot_curves(traces, "step t", "unit 0", title="gates at their extremes")
    finding = (
        f"GRU, reset≈1 (update≈0): equals the plain RNN with the same weights to "
        f"{v['gru_reset1_vs_rnn']:.1e}. reset≈0: equals tanh(X_t W_xh + b_h), an MLP on X_t "
        f"({v['gru_reset0_vs_mlp']:.1e}); another initial state changes the outputs by "
        f"{v['gru_reset0_state_effect']:.1e}. update≈1: every H_t equals H_0 to "
        f"{v['gru_update1_copy']:.1e}, the state is copied. LSTM, forget=1, input=0: C_T = C_0 "
        f"to {v['lstm_keep_cell']:.1e}; output≈0: |H| <= {v['lstm_output0_max_h']:.1e} while "
        f"the cell holds values up to {v['lstm_output0_max_c']:.2f} (kept, but hidden)."
    )
    return TopicResult("gates", finding, v, {"traces": fig})


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
    if not 0 < pi <= 1:
        raise ValueError(f"pi must be in (0, 1], got {pi}")
    check_tensor("W", W, 2)
    check_tensor("X", X, 2)
    if W.shape[0] != W.shape[1] or X.shape[1] != W.shape[0]:
        raise ValueError(
            f"W must be (d, d) and X (T, d), got {tuple(W.shape)} and {tuple(X.shape)}"
        )
    if keep is not None and tuple(keep.shape) != (X.shape[0],):
        raise ValueError(f"keep must have shape (T,) = ({X.shape[0]},), got {tuple(keep.shape)}")
    if truncate is not None and not 1 <= truncate <= X.shape[0]:
        raise ValueError(f"truncate must be in [1, T = {X.shape[0]}], got {truncate}")
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


@topic
def bptt(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Gradient norms over steps; full, truncated and randomized truncation; sampling."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    g = torch.Generator().manual_seed(seed)
    d, T = 8, 40
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    x0 = torch.randn(d, generator=g)
    norms = {}
    for rho in (0.8, 1.0, 1.2):  # linear recurrence h_t = W h_{t-1}: dh_t/dx_0 = W^t
        W = rho * Q
        h = x0.clone().requires_grad_(True)
        ys, out = h, []
        for _ in range(T):
            ys = W @ ys
            (gr,) = torch.autograd.grad(ys.sum(), h, retain_graph=True)
            out.append(float(gr.norm()))
        norms[rho] = out
    slopes = {rho: (math.log(v[-1]) - math.log(v[9])) / (T - 10) for rho, v in norms.items()}

    # full vs truncated vs randomized truncation on a tanh RNN
    W = 0.9 * Q
    X = torch.randn(30, d, generator=g) * 0.5
    full = randomized_grad(W, X)
    rel = {f"truncated k={k}": float((randomized_grad(W, X, truncate=k) - full).norm() / full.norm())
           for k in (1, 5, 10)}  # fmt: skip
    pi, draws = 0.7, (300 if small else 1500)
    samples = torch.stack([
        randomized_grad(W, X, keep=torch.rand(30, generator=g) < pi, pi=pi) for _ in range(draws)
    ])  # fmt: skip
    rel["randomized, mean of draws"] = float((samples.mean(0) - full).norm() / full.norm())
    rel["randomized, one draw (rms)"] = float(
        ((samples - full).norm(dim=(1, 2)).pow(2).mean().sqrt()) / full.norm()
    )

    # random vs sequential sampling on a tiny character LM
    from attnkit.data.lm import LMDataLoader, load_corpus, read_corpus_lines
    from attnkit.models.rnn import build_lm
    from attnkit.training.lm import train_lm

    corpus, vocab = load_corpus(read_corpus_lines(None), "char", 4000 if small else 20000)
    epochs = 3 if small else 12
    ppl = {}
    for name, rnd in (("sequential", False), ("random", True)):
        torch.manual_seed(seed)
        model = build_lm("gru", len(vocab), 32)
        loader = LMDataLoader(corpus, 16, 20, use_random_iter=rnd, seed=seed)
        hist = train_lm(model, loader, num_epochs=epochs, lr=0.01, optimizer="adam",
                        progress=False, use_random_iter=rnd)  # fmt: skip
        ppl[name] = hist.perplexity
    fig_n = plot_curves({f"ρ = {r}": v for r, v in norms.items()}, "steps t", "||dh_t / dx_0||",
                        logy=True, title="gradient through t steps of W = ρQ")  # fmt: skip
    fig_p = plot_curves(ppl, "epoch", "perplexity", title="GRU LM: sampling")
    values = {"grad_norms": norms, "log_slopes": slopes, "relative_error": rel, "perplexity": ppl,
              "draws": draws, "pi": pi}  # fmt: skip
    finding = (
        f"||dh_t/dx_0|| after {T} steps: "
        + ", ".join(f"ρ = {r}: {v[-1]:.1e}" for r, v in norms.items())
        + " (log-slope per step "
        + ", ".join(f"{s:.3f}" for s in slopes.values())
        + " = log ρ: vanishing, stable, exploding). Gradient error against full BPTT (30 steps): "
        + ", ".join(f"{k} {e:.3f}" for k, e in rel.items())
        + f": truncation is biased, less so as k grows; randomized truncation "
        f"(π = {pi}) is unbiased on average over {draws} draws but one draw is noisy. Character "
        f"GRU, {epochs} epochs: perplexity sequential {ppl['sequential'][-1]:.2f}, random "
        f"{ppl['random'][-1]:.2f}."
    )
    return TopicResult("bptt", finding, values, {"gradient_norms": fig_n, "sampling": fig_p})


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
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(5 if small else 10):
        perm = torch.randperm(n_train, generator=g)
        for i in range(0, n_train, 16):
            idx = perm[i : i + 16]
            opt.zero_grad()
            nn.functional.mse_loss(net(features[idx]), labels[idx]).backward()
            opt.step()
    steps = (1, 4, 16, 64)
    max_k = steps[-1]
    # k-step-ahead: column i holds x_{t+i} for i < tau, then predictions
    n = T - tau - max_k + 1
    cols = [x[i : i + n] for i in range(tau)]
    with torch.no_grad():
        for i in range(tau, tau + max_k):
            cols.append(net(torch.stack(cols[i - tau : i], 1)).reshape(-1))
    mse = {
        k: float(((cols[tau + k - 1] - x[tau + k - 1 : tau + k - 1 + n]) ** 2).mean())
        for k in steps
    }
    truth_mse = {k: float(((cols[tau + k - 1] - torch.sin(0.01 * time_[tau + k - 1 : tau + k - 1 + n])) ** 2).mean()) for k in steps}  # fmt: skip
    # multistep from the end of the training data onward: predictions feed predictions
    multi = x[: n_train + tau].clone().tolist()
    with torch.no_grad():
        for _ in range(n_train + tau, T):
            multi.append(float(net(torch.tensor(multi[-tau:]).reshape(1, tau))))
    multi_mse = float(((torch.tensor(multi[n_train + tau :]) - x[n_train + tau :]) ** 2).mean())
    fig_k = plot_curves({"data": x[tau + max_k - 1 :].tolist(),
                         **{f"{k}-step preds": cols[tau + k - 1].tolist() for k in steps}},
                        "time", "x", x=time_[tau + max_k - 1 :].tolist(),
                        title="k-step-ahead predictions")  # fmt: skip
    fig_m = plot_curves({"data": x.tolist(), "multistep from t = 604": multi}, "time", "x",
                        x=time_.tolist(), title="predictions fed back")  # fmt: skip
    values = {"k_step_mse": mse, "k_step_mse_vs_sine": truth_mse, "multistep_mse": multi_mse,
              "noise_variance": 0.04}  # fmt: skip
    finding = (
        "MSE against the data of k-step-ahead predictions: "
        + ", ".join(f"k = {k}: {e:.3f}" for k, e in mse.items())
        + f" (the noise alone is 0.04). One step ahead is as good as the noise allows; errors "
        f"compound as predictions feed predictions. Feeding back from t = {n_train + tau} to "
        f"{T}: MSE {multi_mse:.3f}, the prediction decays to a flat line."
    )
    return TopicResult("autoregressive", finding, values, {"k_step": fig_k, "multistep": fig_m})
