"""CNN vs RNN vs self-attention (d2l 10.6.2).

``architectures``: FLOPs counted against sequence length n (O(knd²), O(nd²), O(n²d)),
with measured times beside them for illustration; sequential operations (depth of the
autograd graph) and the maximum path length measured from gradients.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit._validate import integer, one_of, positive_int
from attnkit.i18n import N_, _
from attnkit.tour.base import TopicResult, check_args, timed, topic

__all__ = ["architectures", "graph_depth", "path_length"]

# the layers' names that are words (shown translated in findings and figures; "cnn" and
# "rnn" are names as they are)
WORDS = (N_("self-attention"), N_("attention pooling"), N_("self-attention layer"))


def _shown(name: str) -> str:
    return _(name) if name in WORDS else name


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
    one_of("kind", kind, ("cnn", "rnn", "self-attention"))
    integer("n", n, minimum=2)
    positive_int("d", d)
    positive_int("k", k)
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


def _counted_flops(d: int, k: int, lengths: list[int]) -> dict:
    """FLOPs counted (``count_ops``) for one forward at each length n, batch 1: the CNN,
    the RNN, the attention pooling softmax(XXᵀ/√d)X alone, and the self-attention layer
    with its projections; the growth exponent between the two largest n; the first n
    from which the attention pooling costs more than the RNN (and than the CNN)."""
    from attnkit.attention import DotProductAttention
    from attnkit.tour.cost import count_ops

    layers = _layers(d, k)
    pooling = DotProductAttention().eval()
    layers = {"cnn": layers["cnn"], "rnn": layers["rnn"],
              "attention pooling": lambda X: pooling(X, X, X),
              "self-attention layer": layers["self-attention"]}  # fmt: skip
    flops: dict[str, list[int]] = {name: [] for name in layers}
    for n in lengths:
        X = torch.randn(1, n, d)
        for name, f in layers.items():
            flops[name].append(count_ops(lambda f=f, X=X: f(X)).flops)
    exponents = {name: math.log(f[-1] / f[-2]) / math.log(lengths[-1] / lengths[-2])
                 for name, f in flops.items()}  # fmt: skip

    def first_at_least(a: str, b: str) -> int | None:  # the first n where a costs >= b
        return next((n for n, x, y in zip(lengths, flops[a], flops[b]) if x >= y), None)

    return {
        "lengths": lengths,
        "flops": flops,
        "exponents": exponents,
        "crossover": first_at_least("attention pooling", "rnn"),
        "crossover_cnn": first_at_least("attention pooling", "cnn"),
        "layer_over_rnn": [a / r for a, r in zip(flops["self-attention layer"], flops["rnn"])],
    }


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
    counted = _counted_flops(d, k, [16, 32, 64, 128, 256, 512, 1024])
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
    measured = {m: _("{name} (measured)").format(name=_shown(m)) for m in times}
    fig_t = plot_curves({measured[m]: t for m, t in times.items()}, _("sequence length n"),
                        _("seconds (forward)"), x=lengths, logy=True,
                        title=_("d = {d}, k = {k}: measured").format(d=d, k=k))  # fmt: skip
    fig_t.axes[0].set_xscale("log")
    lines = {ln.get_label(): ln for ln in fig_t.axes[0].get_lines()}
    for name, fl in flops.items():  # theory, scaled to meet the measurement at the largest n
        scale = times[name][-1] / fl[-1]
        fig_t.axes[0].plot(lengths, [f * scale for f in fl], "--", alpha=0.6,
                           color=lines[measured[name]].get_color(),
                           label=_("{name} theory").format(name=_shown(name)))  # fmt: skip
    fig_t.axes[0].legend(fontsize=7)
    fig_d = plot_curves({_shown(m): t for m, t in times_d.items()}, _("width d"),
                        _("seconds (forward)"), x=widths, logy=True,
                        title=f"n = {n_fixed}")  # fmt: skip
    fig_d.axes[0].set_xscale("log")
    fig_f = plot_curves({_shown(m): f for m, f in counted["flops"].items()},
                        _("sequence length n"), _("FLOPs (counted)"), x=counted["lengths"],
                        logy=True, title=_("d = {d}, k = {k}: counted").format(d=d, k=k))  # fmt: skip
    fig_f.axes[0].set_xscale("log")
    values = {
        "lengths": lengths,
        "times": times,
        "widths": widths,
        "times_by_width": times_d,
        "flops": flops,
        "counted_lengths": counted["lengths"],
        "counted_flops": counted["flops"],
        "flop_exponents": counted["exponents"],
        "counted_crossover_n": counted["crossover"],
        "counted_crossover_cnn_n": counted["crossover_cnn"],
        "layer_over_rnn": counted["layer_over_rnn"],
        "theoretical_crossover_n": d,
        "measured_crossover_n": crossover,
        "slopes": slopes,
        "slopes_by_width": slopes_d,
        "sequential_ops": seq_ops,
        "path_n": n_path,
        "path_length": paths,
    }

    def exponents(found: dict) -> str:
        return ", ".join(f"{_shown(m)} {e:.2f}" for m, e in found.items())

    n_first, n_last = counted["lengths"][0], counted["lengths"][-1]
    finding = _(
        "Counted FLOPs (d = {d}, k = {k}) as n doubles {n_first} -> {n_last}: growth exponent "
        "in n between the two largest n: {counted_exponents}; the attention pooling's 2n²d (two "
        "n x n x d products) passes the RNN's 2nd² (input and state products) at n = "
        "{crossover} = d, the CNN's k n d² at n = {crossover_cnn} (k d / 2 = {kd2}); with its "
        "four n d² projections the self-attention layer costs {layer_first:.1f}x the RNN at n = "
        "{n_first} and {layer_last:.1f}x at n = {n_last}. Measured forward seconds, for "
        "illustration only, at n = {lengths} (d = {d}): {times}; growth exponent in n between "
        "the two largest n: {slopes}; in d (n = {n_fixed}): {slopes_d} (the self-attention "
        "layer includes its four n d² projections, which dominate when d > n)"
    ).format(
        d=d, k=k, n_first=n_first, n_last=n_last, counted_exponents=exponents(counted["exponents"]),
        crossover=counted["crossover"], crossover_cnn=counted["crossover_cnn"], kd2=k * d // 2,
        layer_first=counted["layer_over_rnn"][0], layer_last=counted["layer_over_rnn"][-1],
        lengths=lengths, times="; ".join(f"{_shown(m)} " + "/".join(f"{t * 1e3:.2f}ms" for t in ts)
                                         for m, ts in times.items()),
        slopes=exponents(slopes), n_fixed=n_fixed, slopes_d=exponents(slopes_d),
    ) + (
        _("; measured, self-attention stays slower than the RNN from n = {n} on ").format(
            n=crossover)
        if crossover is not None
        else _("; measured, self-attention is still faster than the RNN at n = {n} ").format(
            n=lengths[-1])
    ) + _(
        "(the RNN's n steps run one after another, and each pays fixed overhead: the clock and "
        "the count disagree, so the tests assert the count). Sequential operations (autograd "
        "depth) at n = 8 / 32: {sequential}: O(1), O(n), O(1). Maximum path length at n = "
        "{n_path}, measured from gradients: self-attention {path_sa} layer, RNN {path_rnn} steps "
        "(= n), CNN {path_cnn} layers with k = 3 and {path_cnn5} with k = 5 (= ceil((n-1) / "
        "floor(k/2)): O(n/k))."
    ).format(
        sequential="; ".join(f"{_shown(m)} {seq_ops[8][m]} / {seq_ops[32][m]}" for m in times),
        n_path=n_path, path_sa=paths["self-attention"], path_rnn=paths["rnn"],
        path_cnn=paths["cnn"], path_cnn5=paths["cnn_k5"],
    )  # fmt: skip
    figs = {"flops_n": fig_f, "time_n": fig_t, "time_d": fig_d}
    return TopicResult("architectures", finding, values, figs)
