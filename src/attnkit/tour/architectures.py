"""CNN vs RNN vs self-attention (d2l 10.6.2) and normalization/residuals (d2l 10.7.2).

``architectures``: time against sequence length n and width d next to the theoretical
O(knd²), O(nd²), O(n²d); sequential operations (depth of the autograd graph) and the
maximum path length measured from gradients. ``norms``: LayerNorm vs BatchNorm on the
book's example; the first layer's gradient in a deep stack with and without residuals.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit.tour.base import TopicResult, check_args, timed, topic

__all__ = ["architectures", "graph_depth", "norms", "path_length"]


def graph_depth(t: Tensor) -> int:
    """The longest chain of autograd nodes behind ``t``: its sequential operations."""
    if not isinstance(t, Tensor):
        raise TypeError(f"t must be a torch.Tensor, got {type(t).__name__}")
    depth: dict = {}

    def visit(fn) -> int:
        if fn is None:
            return 0
        if fn not in depth:
            depth[fn] = 1 + max((visit(f) for f, _ in fn.next_functions), default=0)
        return depth[fn]

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        return visit(t.grad_fn)
    finally:
        sys.setrecursionlimit(limit)


def _depends(fn, X: Tensor) -> Tensor:
    """(n, n) bool: output i depends on input j (nonzero gradient of out[i] w.r.t. X[j])."""
    n = X.shape[1]
    dep = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        x = X.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(x)[0, i].sum(), x)
        dep[i] = g[0].abs().sum(-1) > 0
    return dep


def path_length(kind: str, n: int, d: int = 4, k: int = 3) -> int:
    """The smallest number of layers (steps, for an RNN) after which every output i
    depends on every input j it may see (j <= i for the RNN), measured from gradients."""
    if kind not in ("cnn", "rnn", "self-attention"):
        raise ValueError(f"kind must be 'cnn', 'rnn' or 'self-attention', got {kind!r}")
    for name, v, lo in (("n", n, 2), ("d", d, 1), ("k", k, 1)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {v!r}")
        if v < lo:
            raise ValueError(f"{name} must be >= {lo}, got {v}")
    if kind == "cnn" and k % 2 == 0:
        raise ValueError(f"k must be odd (a centred kernel), got {k}")
    with torch.random.fork_rng(devices=[]):  # seeded here, the caller's RNG left as it was
        torch.manual_seed(0)
        return _path_length(kind, n, d, k)


def _path_length(kind: str, n: int, d: int, k: int) -> int:
    X = torch.randn(1, n, d)
    want = torch.ones(n, n, dtype=torch.bool)
    if kind == "rnn":
        want = want.tril()
    for L in range(1, 2 * n + 2):
        if kind == "self-attention":
            from attnkit.attention import MultiHeadAttention

            layers = [MultiHeadAttention(d, 1) for _ in range(L)]

            def fn(x, layers=layers):
                for m in layers:
                    x = m(x)  # self-attention
                return x
        elif kind == "cnn":
            layers = [nn.Conv1d(d, d, k, padding=k // 2) for _ in range(L)]

            def fn(x, layers=layers):
                x = x.transpose(1, 2)
                for m in layers:
                    x = torch.tanh(m(x))
                return x.transpose(1, 2)
        else:  # output i from the last L inputs only: L sequential cell applications
            cell = nn.RNNCell(d, d)

            def fn(x, cell=cell, L=L):
                outs = []
                for i in range(n):
                    h = torch.zeros(1, d)
                    for t in range(max(0, i - L + 1), i + 1):
                        h = cell(x[:, t], h)
                    outs.append(h)
                return torch.stack(outs, 1)

        if bool((_depends(fn, X) == want).all()):
            return L
    raise RuntimeError("no path length found")  # pragma: no cover


def _layers(d: int, k: int):
    from attnkit.attention import MultiHeadAttention

    torch.manual_seed(0)
    conv, rnn, sa = nn.Conv1d(d, d, k, padding=k // 2), nn.RNN(d, d), MultiHeadAttention(d, 1)
    return {
        "cnn": lambda X: conv(X.transpose(1, 2)),
        "rnn": lambda X: rnn(X.transpose(0, 1))[0],
        "self-attention": lambda X: sa(X),
    }


@topic
def architectures(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Measured time, sequential operations and path length of the three layers."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    k, d = 3, 64
    lengths = [16, 64, 256, 1024] if small else [16, 64, 256, 1024, 2048]
    widths = [16, 64, 256] if small else [16, 64, 256, 512]
    repeat = 2 if small else 5
    times: dict[str, list[float]] = {"cnn": [], "rnn": [], "self-attention": []}
    with torch.no_grad():
        layers = _layers(d, k)
        for n in lengths:
            X = torch.randn(1, n, d)
            for name, f in layers.items():
                times[name].append(timed(lambda f=f, X=X: f(X), repeat))
        n_fixed = 256
        times_d: dict[str, list[float]] = {key: [] for key in times}
        for dd in widths:
            X = torch.randn(1, n_fixed, dd)
            for name, f in _layers(dd, k).items():
                times_d[name].append(timed(lambda f=f, X=X: f(X), repeat))
    flops = {
        "cnn": [k * n * d * d for n in lengths],
        "rnn": [n * d * d for n in lengths],
        "self-attention": [n * n * d for n in lengths],
    }
    # measured growth: log-log slope between the two largest n (1 = linear, 2 = quadratic)
    slopes = {
        name: math.log(ts[-1] / ts[-2]) / math.log(lengths[-1] / lengths[-2])
        for name, ts in times.items()
    }
    slopes_d = {
        name: math.log(ts[-1] / ts[-2]) / math.log(widths[-1] / widths[-2])
        for name, ts in times_d.items()
    }
    # the first n from which self-attention stays slower than the RNN
    slower = [a > r for a, r in zip(times["self-attention"], times["rnn"])]
    crossover = next((n for i, n in enumerate(lengths) if all(slower[i:])), None)
    # sequential operations: the depth of the autograd graph of one layer at length n
    seq_ops = {}
    for n in (8, 32):
        X = torch.randn(1, n, 16, requires_grad=True)
        seq_ops[n] = {name: graph_depth(f(X)) for name, f in _layers(16, k).items()}
    n_path = 6 if small else 10
    paths = {kind: path_length(kind, n_path) for kind in ("cnn", "rnn", "self-attention")}
    paths["cnn_k5"] = path_length("cnn", n_path, k=5)
    fig_t = plot_curves({f"{m} (measured)": t for m, t in times.items()}, "sequence length n",
                        "seconds (forward)", x=lengths, logy=True,
                        title=f"d = {d}, k = {k}: measured")  # fmt: skip
    fig_t.axes[0].set_xscale("log")
    lines = {ln.get_label(): ln for ln in fig_t.axes[0].get_lines()}
    for name, fl in flops.items():  # theory, scaled to meet the measurement at the largest n
        scale = times[name][-1] / fl[-1]
        fig_t.axes[0].plot(lengths, [f * scale for f in fl], "--", alpha=0.6,
                           color=lines[f"{name} (measured)"].get_color(), label=f"{name} theory")  # fmt: skip
    fig_t.axes[0].legend(fontsize=7)
    fig_d = plot_curves({m: t for m, t in times_d.items()}, "width d", "seconds (forward)",
                        x=widths, logy=True, title=f"n = {n_fixed}")  # fmt: skip
    fig_d.axes[0].set_xscale("log")
    values = {
        "lengths": lengths,
        "times": times,
        "widths": widths,
        "times_by_width": times_d,
        "flops": flops,
        "theoretical_crossover_n": d,
        "measured_crossover_n": crossover,
        "slopes": slopes,
        "slopes_by_width": slopes_d,
        "sequential_ops": seq_ops,
        "path_n": n_path,
        "path_length": paths,
    }
    finding = (
        f"Forward seconds at n = {lengths} (d = {d}): "
        + "; ".join(f"{m} " + "/".join(f"{t * 1e3:.2f}ms" for t in ts) for m, ts in times.items())
        + "; growth exponent in n between the two largest n: "
        + ", ".join(f"{m} {e:.2f}" for m, e in slopes.items())
        + f"; in d (n = {n_fixed}): "
        + ", ".join(f"{m} {e:.2f}" for m, e in slopes_d.items())
        + " (the self-attention layer includes its four n d² projections, which dominate "
        "when d > n)"
        + f". Theory: k n d² = {k}n·{d}², n d², n² d: self-attention's n² d passes the RNN's "
        + (
            f"n d² at n = d = {d}; measured, self-attention stays slower than the RNN from n = "
            f"{crossover} on "
            if crossover is not None
            else f"n d² at n = d = {d}; measured, "
            f"self-attention is still faster than the RNN at n = {lengths[-1]} "
        )
        + "(the RNN's n steps run one after another, and each pays fixed overhead). "
        "Sequential operations (autograd depth) at n = 8 / 32: "
        + "; ".join(f"{m} {seq_ops[8][m]} / {seq_ops[32][m]}" for m in times)
        + f": O(1), O(n), O(1). Maximum path length at n = {n_path}, measured from "
        f"gradients: self-attention {paths['self-attention']} layer, RNN {paths['rnn']} steps "
        f"(= n), CNN {paths['cnn']} layers with k = 3 and {paths['cnn_k5']} with k = 5 "
        "(= ceil((n-1) / floor(k/2)): O(n/k))."
    )
    return TopicResult("architectures", finding, values, {"time_n": fig_t, "time_d": fig_d})


@topic
def norms(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The book's [[1, 2], [2, 3]] through LayerNorm and BatchNorm; residual gradients."""
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
    fig = plot_curves({"plain": plain, "residual": resid}, "layers", "first layer's gradient norm",
                      x=depths, logy=True, title="deep tanh stack")  # fmt: skip
    values = {
        "layernorm": ln_out.tolist(),
        "batchnorm": bn_out.tolist(),
        "layernorm_by_hand_error": float((ln_out - ln_hand).abs().max()),
        "batchnorm_by_hand_error": float((bn_out - bn_hand).abs().max()),
        "depths": depths,
        "grad_plain": plain,
        "grad_residual": resid,
    }
    finding = (
        f"X = [[1, 2], [2, 3]]: LayerNorm (per example) gives {[[round(v, 4) for v in r] for r in ln_out.tolist()]}, "
        f"BatchNorm (per feature, over the batch) {[[round(v, 4) for v in r] for r in bn_out.tolist()]}: "
        f"both equal (x - mean) / sqrt(var + 1e-5) by hand to {max(values['layernorm_by_hand_error'], values['batchnorm_by_hand_error']):.1e}. "
        f"First layer's gradient norm at depth {depths}: plain "
        + "/".join(f"{g:.1e}" for g in plain)
        + ", residual "
        + "/".join(f"{g:.1e}" for g in resid)
        + f": at depth {depths[-1]} residuals keep {resid[-1] / max(plain[-1], 1e-30):.0e}x more gradient."
    )
    return TopicResult("norms", finding, values, {"residual_gradients": fig})
