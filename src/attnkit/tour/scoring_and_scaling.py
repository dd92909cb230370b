"""Scoring functions (d2l 10.3 and its exercises) and why dot products are scaled by 1/√d.

``scoring``: random keys make additive and dot-product weights differ; the bilinear
score qᵀWk for queries and keys of different widths; the vector-sum score wᵀ(q + k),
whose query term cancels in the softmax. ``scaling``: Var(q·k) = d; without 1/√d the
softmax saturates and its gradients vanish as d grows.
"""

from __future__ import annotations

import math

import torch

from attnkit.i18n import _
from attnkit.tour.base import TopicResult, check_args, check_tensor, timed, topic

__all__ = ["scaling", "scoring", "softmax_jacobian_norm", "vector_sum_weights"]


def vector_sum_weights(w, queries, keys):
    """Weights of the score a(q, k) = wᵀ(q + k): (B, Q, D), (B, K, D), w (D,) -> (B, Q, K)."""
    check_tensor("w", w, 1)
    check_tensor("queries", queries, 3)
    check_tensor("keys", keys, 3)
    if queries.shape[0] != keys.shape[0]:
        raise ValueError("queries and keys must share the batch size")
    if queries.shape[-1] != keys.shape[-1] or w.shape != (queries.shape[-1],):
        raise ValueError("queries, keys and w must share the width D")
    scores = (queries @ w).unsqueeze(-1) + (keys @ w).unsqueeze(-2)  # wᵀq + wᵀk
    return torch.softmax(scores, dim=-1)


@topic
def scoring(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The three scoring exercises, each shown numerically."""
    check_args(small, seed)
    from attnkit.attention import AdditiveAttention, DotProductAttention
    from attnkit.attention.bilinear import BilinearAttention
    from attnkit.viz import show_heatmaps

    torch.manual_seed(seed)
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    valid_lens = torch.tensor([2, 6])
    additive = AdditiveAttention(key_size=2, query_size=2, num_hiddens=8).eval()
    dot = DotProductAttention(record_weights=True).eval()
    queries = torch.normal(0, 1, (2, 1, 2))
    diffs = {}
    maps = []
    uniform = torch.zeros(2, 1, 10)  # the weights a constant score gives: 1/valid_len
    uniform[0, :, :2], uniform[1, :, :6] = 1 / 2, 1 / 6
    uniform_error = 0.0
    with torch.no_grad():
        for name, keys in (("ones", torch.ones(2, 10, 2)), ("random", torch.randn(2, 10, 2))):
            additive(queries, keys, values, valid_lens)
            dot(queries, keys, values, valid_lens)
            a, d = additive.attention_weights, dot.attention_weights
            diffs[name] = float((a - d).abs().max())
            maps += [a.reshape(2, 10), d.reshape(2, 10)]
            if name == "ones":
                uniform_error = float(max((a - uniform).abs().max(), (d - uniform).abs().max()))

        # bilinear: queries of width 20, keys of width 2, matrix products only
        bil = BilinearAttention(query_size=20, key_size=2).eval()
        q20, k2 = torch.normal(0, 1, (2, 1, 20)), torch.randn(2, 10, 2)
        out = bil(q20, k2, values, valid_lens)
        by_hand = torch.einsum("bqi,ij,bkj->bqk", q20, bil.W, k2)  # sum_ij q_i W_ij k_j
        bil_err = float((bil.scores(q20, k2) - by_hand).abs().max())
        bil_w = bil.attention_weights
        masked_mass = float(bil_w[0, :, 2:].sum() + bil_w[1, :, 6:].sum())

        # vector sum: w^T(q + k) = w^T q + w^T k; the first term is the same for every key
        w = torch.randn(4)
        keys4 = torch.randn(1, 10, 4)
        qs = torch.randn(1, 5, 4) * torch.tensor([[[1.0], [3.0], [10.0], [-5.0], [0.1]]])
        vs = vector_sum_weights(w, qs, keys4)  # (1, 5, 10)
        vs_spread = float((vs - vs[:, :1]).abs().max())
    cost = _score_cost(small)
    v = {
        "ones_keys_max_diff": diffs["ones"],
        "ones_keys_uniform_error": uniform_error,
        "score_sizes": cost["sizes"],
        "score_cost": cost["counts"],
        "additive_over_dot": cost["ratio"],
        "additive_over_dot_flops": cost["ratio_flops"],
        "score_seconds": cost["seconds"],
        "random_keys_max_diff": diffs["random"],
        "bilinear_vs_einsum": bil_err,
        "bilinear_masked_mass": masked_mass,
        "bilinear_output_shape": tuple(out.shape),
        "vector_sum_query_spread": vs_spread,
    }
    fig = show_heatmaps(
        torch.stack(maps).reshape(2, 2, 2, 10),
        _("keys"),
        _("queries"),
        titles=[_("additive"), _("dot product")],
        row_titles=[_("keys = ones"), _("random keys")],
        figsize=(3.0, 1.2),
    )
    fig_b = show_heatmaps(bil_w.reshape(1, 1, 2, 10), _("keys"), _("queries"), figsize=(3.0, 1.2))
    fig_v = show_heatmaps(vs[0], _("keys"), _("5 queries (scaled 0.1x to 10x)"), figsize=(3.0, 2.0))
    finding = _(
        "With the book's keys (all ones) additive and dot-product weights agree (max diff "
        "{ones:.1e}, uniform over the valid keys to {uniform:.1e}); with random keys they differ "
        "by up to {random:.2f}. The bilinear score qᵀWk takes queries of width 20 and keys of "
        "width 2 with two matmuls (equal to the explicit sum to {bilinear:.1e}), masked keys get "
        "weight {masked:.1f}. The vector-sum score wᵀ(q+k): five very different queries give "
        "the same weights to {spread:.1e}, because wᵀq is a constant per row and softmax is "
        "shift-invariant: the score cannot attend by query. Cost, counted (d = hidden = {d}, n "
        "queries and n keys, n = {sizes}): additive attention runs {ops}x the operations of "
        "dot-product attention ({flops}x its FLOPs; it also writes an n x n x hidden tensor "
        "through the tanh); measured forward time, for illustration: {seconds}x."
    ).format(
        ones=diffs["ones"], uniform=uniform_error, random=diffs["random"], bilinear=bil_err,
        masked=masked_mass, spread=vs_spread, d=cost["d"], sizes=cost["sizes"],
        ops="/".join(f"{r:.1f}" for r in cost["ratio"]),
        flops="/".join(f"{r:.1f}" for r in cost["ratio_flops"]),
        seconds="/".join(f"{a / b:.1f}"
                         for a, b in zip(cost["seconds"]["additive"], cost["seconds"]["dot"])),
    )  # fmt: skip
    figs = {"additive_vs_dot": fig, "bilinear": fig_b, "vector_sum": fig_v}
    return TopicResult("scoring", finding, v, figs)


def _score_cost(small: bool) -> dict:
    """Operations (counted) and seconds (measured) of additive and dot-product attention
    for n queries and n keys of width d, additive hidden width d (the same n, d)."""
    from attnkit.attention import AdditiveAttention, DotProductAttention
    from attnkit.tour.cost import count_ops

    d = 64
    sizes = [8, 32, 128] if small else [8, 32, 128, 512]
    clock = (1, 0.001) if small else (3, 0.005)  # repeats, seconds: an illustration only
    torch.manual_seed(0)
    layers = {"dot": DotProductAttention().eval(),
              "additive": AdditiveAttention(key_size=d, query_size=d, num_hiddens=d).eval()}  # fmt: skip
    counts = {k: {"flops": [], "elementwise": []} for k in layers}
    seconds: dict[str, list[float]] = {k: [] for k in layers}
    for n in sizes:
        X = torch.randn(1, n, d)
        for name, layer in layers.items():
            c = count_ops(lambda layer=layer, X=X: layer(X, X, X))
            counts[name]["flops"].append(c.flops)
            counts[name]["elementwise"].append(c.elementwise)
            with torch.no_grad():
                seconds[name].append(timed(lambda layer=layer, X=X: layer(X, X, X), *clock))
    total = {k: [f + e for f, e in zip(c["flops"], c["elementwise"])] for k, c in counts.items()}
    return {
        "d": d,
        "sizes": sizes,
        "counts": counts,
        "ratio": [a / b for a, b in zip(total["additive"], total["dot"])],
        "ratio_flops": [a / b for a, b in zip(counts["additive"]["flops"], counts["dot"]["flops"])],
        "seconds": seconds,
    }


def softmax_jacobian_norm(scores):
    """Frobenius norm of d softmax / d scores per row: ||diag(p) - p pᵀ||, (..., K) -> (...)."""
    check_tensor("scores", scores)
    if scores.dim() < 1:
        raise ValueError("scores must have at least 1 dim (..., K)")
    p = torch.softmax(scores, dim=-1)
    J = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    return J.flatten(-2).norm(dim=-1)


@topic
def scaling(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Var(q·k) against d, and the softmax's saturation and gradient with and without 1/√d."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    g = torch.Generator().manual_seed(seed)
    dims = [4, 16, 64, 256] if small else [4, 16, 64, 256, 1024]
    n_samples, n_keys = (2000, 10) if small else (10000, 10)
    var, jac_raw, jac_scaled, max_raw, max_scaled = [], [], [], [], []
    for d in dims:
        q = torch.randn(n_samples, 1, d, generator=g)
        k = torch.randn(n_samples, n_keys, d, generator=g)
        s = (q @ k.transpose(1, 2)).squeeze(1)  # (N, K) unscaled scores
        var.append(float(s.var()))
        jac_raw.append(float(softmax_jacobian_norm(s).mean()))
        jac_scaled.append(float(softmax_jacobian_norm(s / math.sqrt(d)).mean()))
        max_raw.append(float(torch.softmax(s, -1).max(-1).values.mean()))
        max_scaled.append(float(torch.softmax(s / math.sqrt(d), -1).max(-1).values.mean()))
    ratio = [v / d for v, d in zip(var, dims)]
    fig_v = plot_curves({"Var(q·k)": var, "d": dims}, "d", _("variance"), x=dims,
                        title="q, k ~ N(0, I): Var(q·k) = d")  # fmt: skip
    fig_v.axes[0].set_xscale("log")
    fig_v.axes[0].set_yscale("log")
    fig_g = plot_curves(
        {_("unscaled"): jac_raw, _("scaled by 1/√d"): jac_scaled}, "d",
        "||d softmax / d scores||", x=dims, logy=True,
        title=_("softmax gradient ({n} keys)").format(n=n_keys),
    )  # fmt: skip
    fig_g.axes[0].set_xscale("log")
    fig_m = plot_curves({_("unscaled"): max_raw, _("scaled"): max_scaled}, "d",
                        _("mean largest weight"), x=dims, title=_("saturation"))  # fmt: skip
    fig_m.axes[0].set_xscale("log")
    values = {
        "dims": dims,
        "variance": var,
        "variance_over_d": ratio,
        # the two arms, each on one line: scores as they are, and scaled by 1/√d
        "jacobian_unscaled": jac_raw, "jacobian_scaled": jac_scaled,
        "max_weight_unscaled": max_raw, "max_weight_scaled": max_scaled,
    }  # fmt: skip
    finding = _(
        "Var(q·k)/d = {ratios} for d = {dims}: the variance grows linearly in d. Unscaled, the "
        "largest of {n_keys} weights goes {max_first:.2f} -> {max_last:.2f} (one-hot) and the "
        "softmax gradient norm {jac_first:.3f} -> {jac_last:.4f} ({jac_ratio:.0f}x smaller); "
        "with 1/√d they stay at {max_scaled:.2f} and {jac_scaled_first:.3f} -> "
        "{jac_scaled_last:.3f}."
    ).format(ratios=", ".join(f"{r:.2f}" for r in ratio), dims=dims, n_keys=n_keys,
             max_first=max_raw[0], max_last=max_raw[-1], jac_first=jac_raw[0],
             jac_last=jac_raw[-1], jac_ratio=jac_raw[0] / jac_raw[-1], max_scaled=max_scaled[-1],
             jac_scaled_first=jac_scaled[0], jac_scaled_last=jac_scaled[-1])  # fmt: skip
    figs = {"variance": fig_v, "gradient": fig_g, "saturation": fig_m}
    return TopicResult("scaling", finding, values, figs)
