"""Self-attention in matrix form and multi-head attention (d2l 10.5-10.6).

``self_attention``: the column form (Q = W^q I, K = W^k I, V = W^v I, A = KᵀQ,
A' = softmax(A), O = V A') computed step by step equals attnkit's MultiHeadAttention,
one head and then h heads with W^o. ``multihead``: the heads of a trained Transformer
attend to different things; heads with an additive score; parameter counts.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit._validate import positive_int
from attnkit.i18n import N_, _
from attnkit.tour.base import (
    TopicResult,
    check_args,
    check_tensor,
    describe_seeds,
    seed_summary,
    topic,
)
from attnkit.tour.stats import supports

__all__ = [
    "AdditiveMultiHead",
    "head_entropy",
    "head_ranges",
    "matrix_form",
    "multihead",
    "range_spread",
    "self_attention",
]


def matrix_form(inputs: Tensor, Wq: Tensor, Wk: Tensor, Wv: Tensor, scale: float = 1.0) -> dict:
    """The explainer's steps on inputs I as columns (d, n): every intermediate matrix.

    A[j, i] = k_j · q_i * scale; each column of A' (one query) is a softmax over keys.
    """
    for name, t in (("inputs", inputs), ("Wq", Wq), ("Wk", Wk), ("Wv", Wv)):
        check_tensor(name, t, 2)
    if not (Wq.shape[1] == Wk.shape[1] == Wv.shape[1] == inputs.shape[0]):
        raise ValueError(
            f"Wq, Wk and Wv must all have {inputs.shape[0]} columns (the input width d), got "
            f"{tuple(Wq.shape)}, {tuple(Wk.shape)}, {tuple(Wv.shape)}"
        )
    if Wq.shape[0] != Wk.shape[0]:
        raise ValueError("Wq and Wk must have the same number of rows (queries and keys)")
    if inputs.dim() != 2:
        raise ValueError(
            f"inputs must be (d, n) with one input per column, got {tuple(inputs.shape)}"
        )
    Q, K, V = Wq @ inputs, Wk @ inputs, Wv @ inputs
    A = K.T @ Q * scale
    A_prime = torch.softmax(A, dim=0)
    return {"Q": Q, "K": K, "V": V, "A": A, "A'": A_prime, "O": V @ A_prime}


@topic
def self_attention(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The step-by-step form against the library, one head (scale 1) and h heads."""
    check_args(small, seed)
    from attnkit.attention import MultiHeadAttention
    from attnkit.viz import show_heatmaps

    g = torch.Generator().manual_seed(seed)
    d, n, h = (8, 5, 2) if small else (16, 6, 4)
    inputs = torch.randn(d, n, generator=g)
    Wq, Wk, Wv = (torch.randn(d, d, generator=g) / math.sqrt(d) for _ in range(3))
    steps = matrix_form(inputs, Wq, Wk, Wv)
    one = MultiHeadAttention(d, 1, record_weights=True).eval()
    with torch.no_grad():  # the library scales by 1/sqrt(d): fold sqrt(d) into W_q for scale 1
        one.W_qkv.weight.copy_(torch.cat([Wq * math.sqrt(d), Wk, Wv]))  # rows: W_q, W_k, W_v
        one.W_o.weight.copy_(torch.eye(d))
        lib = one(inputs.T[None])[0].T  # self-attention, (d, n)
    diff_one = float((lib - steps["O"]).abs().max())
    diff_weights = float((one.attention_weights[0, 0].T - steps["A'"]).abs().max())

    # h heads: head i uses rows i*d/h.. of W^q, W^k, W^v, scale 1/sqrt(d/h); O = W^o [O_1; ...]
    dh = d // h
    Wo = torch.randn(d, d, generator=g) / math.sqrt(d)
    heads = [
        matrix_form(inputs, Wq[i * dh : (i + 1) * dh], Wk[i * dh : (i + 1) * dh],
                    Wv[i * dh : (i + 1) * dh], scale=1 / math.sqrt(dh))["O"]
        for i in range(h)
    ]  # fmt: skip
    O_multi = Wo @ torch.cat(heads, dim=0)
    multi = MultiHeadAttention(d, h).eval()
    with torch.no_grad():
        multi.W_qkv.weight.copy_(torch.cat([Wq, Wk, Wv]))
        multi.W_o.weight.copy_(Wo)
        lib_multi = multi(inputs.T[None])[0].T
    diff_multi = float((lib_multi - O_multi).abs().max())
    mats = [steps[k] for k in ("A", "A'")] + [steps["O"], lib]
    fig = show_heatmaps(
        torch.stack([m[:n, :n] for m in mats]).unsqueeze(0),
        _("i (query / input)"),
        _("row"),
        titles=["A = KᵀQ", "A' = softmax(A)", _("O = VA' (rows :n)"), _("library (rows :n)")],
        cmap="RdBu_r",
        per_panel=True,
    )
    values = {"d": d, "n": n, "heads": h, "max_diff_one_head": diff_one,
              "max_diff_weights": diff_weights, "max_diff_multi_head": diff_multi}  # fmt: skip
    finding = _(
        "d = {d}, n = {n}: the explainer's O = V softmax(KᵀQ) equals attnkit's single-head "
        "self-attention with scale 1 to {one:.1e} (weights A' to {weights:.1e}); with {h} heads, "
        "O = W^o [O_1; ...; O_{h}] (each head scaled by 1/√{dh}) equals MultiHeadAttention to "
        "{multi:.1e}."
    ).format(d=d, n=n, one=diff_one, weights=diff_weights, h=h, dh=dh, multi=diff_multi)
    return TopicResult("self-attention", finding, values, {"steps": fig})


class AdditiveMultiHead(nn.Module):
    """h heads, each additive attention on its own slice of W_q q, W_k k, W_v v, then W_o."""

    def __init__(self, num_hiddens: int, num_heads: int, head_hiddens: int = 8) -> None:
        super().__init__()
        from attnkit.attention import AdditiveAttention

        num_hiddens = positive_int("num_hiddens", num_hiddens)
        self.num_heads = positive_int("num_heads", num_heads)
        if num_hiddens % num_heads:
            raise ValueError(f"num_hiddens ({num_hiddens}) must be divisible by num_heads")
        dh = num_hiddens // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (
            nn.Linear(num_hiddens, num_hiddens, bias=False) for _ in range(4)
        )
        self.heads = nn.ModuleList(
            AdditiveAttention(dh, dh, head_hiddens) for _ in range(num_heads)
        )

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor, valid_lens=None) -> Tensor:
        q, k, v = (t.chunk(self.num_heads, -1) for t in (self.W_q(queries), self.W_k(keys),
                                                          self.W_v(values)))  # fmt: skip
        outs = [head(qi, ki, vi, valid_lens) for head, qi, ki, vi in zip(self.heads, q, k, v)]
        return self.W_o(torch.cat(outs, dim=-1))

    @property
    def attention_weights(self) -> Tensor:  # (B, H, Q, K)
        return torch.stack([head.attention_weights for head in self.heads], dim=1)


def head_entropy(weights: Tensor, eps: float = 1e-12) -> Tensor:
    """Mean entropy (nats) of each head's rows: (..., H, Q, K) -> (H,)."""
    check_tensor("weights", weights)
    if weights.dim() < 3:
        raise ValueError(f"weights must be (..., H, Q, K), got shape {tuple(weights.shape)}")
    ent = -(weights * (weights + eps).log()).sum(-1)  # (..., H, Q)
    return ent.transpose(0, -2).reshape(weights.shape[-3], -1).mean(-1)


def head_ranges(model: nn.Module, data, sentences: list[str]) -> Tensor:
    """Mean attended distance sum_j w_ij |j - i| of every encoder head, averaged over each
    sentence's positions: (N sentences, L layers, H heads), one batched encoder pass."""
    from attnkit.attention.recording import record_attention

    src, src_len = data.encode_source(sentences)
    with torch.no_grad(), record_attention(model) as record:
        model.encoder(src, src_len)
    w = torch.stack([record.get(b.attention) for b in model.encoder.blks], 1)  # (N, L, H, S, S)
    S = w.shape[-1]
    pos = torch.arange(S)
    per_row = (w * (pos[None, :] - pos[:, None]).abs()).sum(-1)  # (N, L, H, S)
    valid = (pos[None, :] < src_len[:, None]).float()[:, None, None]  # (N, 1, 1, S)
    return (per_row * valid).sum(-1) / valid.sum(-1)


def range_spread(ranges: Tensor, layer: int = 0, perms: int = 500, seed: int = 0):
    """The spread (largest - smallest head) of the heads' mean ranges in ``layer``, and
    the permutation test's p: how often shuffling the head labels within each sentence
    gives a spread at least as large (so heads that did not differ would give p ~ U(0, 1))."""
    r = ranges[:, layer]  # (N, H)
    spread = float(r.mean(0).max() - r.mean(0).min())
    g = torch.Generator().manual_seed(seed)
    idx = torch.rand(perms, *r.shape, generator=g).argsort(-1)
    shuffled = torch.gather(r.expand(perms, *r.shape), 2, idx).mean(1)  # (perms, H)
    null = shuffled.max(-1).values - shuffled.min(-1).values
    return spread, float(((null >= spread).sum() + 1) / (perms + 1))


def _ranges_over_seeds(small: bool, seed: int, seeds: int) -> dict:
    """Layer-1 head ranges of the trained Transformer for ``seeds`` seeds, beside the same
    architecture freshly initialised with each seed (no training)."""
    from attnkit.models.registry import build_model
    from attnkit.tour.translation import TRANSFORMER_SIZES, trained_transformer

    out: dict[str, dict] = {"ranges": {}, "spread": {}, "p": {}, "spread_untrained": {}}
    for s in range(seed, seed + seeds):
        model, data, _history = trained_transformer(small=small, seed=s)
        sentences = [" ".join(src) for src, _ in data.train[:40]]
        torch.manual_seed(s)
        fresh = build_model("transformer", TRANSFORMER_SIZES, len(data.src_vocab),
                            len(data.tgt_vocab)).eval()  # fmt: skip
        trained, untrained = model, fresh  # the two arms: after training, at initialisation
        r = head_ranges(trained, data, sentences)
        out["ranges"][s] = r.mean(0).tolist()
        out["spread"][s], out["p"][s] = range_spread(r, seed=s)
        out["spread_untrained"][s] = range_spread(head_ranges(untrained, data, sentences),
                                                  perms=1)[0]  # fmt: skip
    return out


@topic
def multihead(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Per-head maps and entropies of a trained Transformer; additive heads; parameters."""
    check_args(small, seed)
    from attnkit.attention import MultiHeadAttention
    from attnkit.inference.attention_maps import attention_maps
    from attnkit.tour.translation import trained_transformer
    from attnkit.viz import show_heatmaps

    model, data, _history = trained_transformer(small=small, seed=seed)
    sentences = [" ".join(src) for src, _ in data.train[:8]] if hasattr(data, "train") else []
    ents, dists, first = [], [], None
    offsets = torch.arange(-3, 4)
    offset_mass = torch.zeros(0)
    for s in sentences:
        maps = attention_maps(model, data, s)
        w = maps.encoder_self  # (L, H, S, S)
        S = w.shape[-1]
        rel = torch.arange(S)[None, :] - torch.arange(S)[:, None]  # key j - query i
        mass = torch.stack([(w * (rel == o)).sum((-2, -1)) / S for o in offsets], -1)
        offset_mass = mass if offset_mass.numel() == 0 else offset_mass + mass  # (L, H, 7)
        first = maps if first is None else first
        ents.append(head_entropy(w))  # (H,)
        H = w.shape[1]
        pair = [float((w[:, a] - w[:, b]).abs().sum(-1).mean() / 2)
                for a in range(H) for b in range(a + 1, H)]  # fmt: skip
        dists.append(sum(pair) / len(pair))
    entropy = torch.stack(ents).mean(0)
    offset_mass = offset_mass / len(sentences)
    # the relative position each head of layer 1 weights most: j - i
    favourite = [int(offsets[offset_mass[0, h].argmax()]) for h in range(offset_mass.shape[1])]
    favourite_mass = [float(offset_mass[0, h].max()) for h in range(offset_mass.shape[1])]
    tv = sum(dists) / len(dists)  # mean total-variation distance between two heads' rows
    w = first.encoder_self
    fig = show_heatmaps(w, _("keys"), _("queries"),
                        titles=[_("head {i}").format(i=i + 1) for i in range(w.shape[1])],
                        row_titles=[_("layer {i}").format(i=i + 1) for i in range(w.shape[0])],
                        xticklabels=first.source, yticklabels=first.source)  # fmt: skip

    torch.manual_seed(seed)
    add = AdditiveMultiHead(16, 4).eval()
    X = torch.randn(2, 6, 16)
    with torch.no_grad():
        out = add(X, X, X, torch.tensor([4, 6]))
    aw = add.attention_weights
    add_tv = float((aw[:, 0] - aw[:, 1]).abs().sum(-1).mean() / 2)

    def count(m: nn.Module) -> int:
        return sum(p.numel() for p in m.parameters())

    d, h = 64, 8
    shapes = (
        (N_("{h} heads of width {w} (d = {d})"), MultiHeadAttention(d, h)),
        (N_("1 head of width {d}"), MultiHeadAttention(d, 1)),
        (N_("{h} heads of width {d} each"),
         MultiHeadAttention(d * h, h, query_size=d, key_size=d, value_size=d)),
    )  # fmt: skip
    params = {name.format(h=h, w=d // h, d=d): count(m) for name, m in shapes}  # English keys
    shown = [_(name).format(h=h, w=d // h, d=d) for name, _m in shapes]
    n_seeds = 5  # the fewest whose agreement a sign test can put at 0.05
    ranges = _ranges_over_seeds(small, seed, n_seeds)
    significant = sum(p < 0.01 for p in ranges["p"].values())  # within a model, over sentences
    # paired per seed: the trained heads' spread minus the same seed's fresh initialisation's
    over_init = seed_summary([ranges["spread"][s] - ranges["spread_untrained"][s]
                              for s in ranges["spread"]])  # fmt: skip
    values = {
        "head_ranges": ranges,
        "head_range_spread": list(ranges["spread"].values()),
        "head_range_over_untrained": over_init,
        "head_entropy": entropy.tolist(),
        "head_distance": tv,
        "layer1_favourite_offset": favourite,
        "layer1_favourite_mass": favourite_mass,
        "additive_output_shape": tuple(out.shape),
        "additive_head_distance": add_tv,
        "params": params,
    }
    per_seed = [
        _("seed {seed}: {ranges} (spread {spread:.2f}, permutation p {p:.3f}; untrained "
          "{untrained:.2f})").format(
            seed=s, ranges="/".join(f"{x:.2f}" for x in ranges["ranges"][s][0]),
            spread=ranges["spread"][s], p=ranges["p"][s], untrained=ranges["spread_untrained"][s])
        for s in ranges["ranges"]
    ]  # fmt: skip
    finding = _(
        "Encoder self-attention of a trained Transformer ({sentences} sentences): mean entropy "
        "per head {entropy} nats; two heads' rows differ by {tv:.2f} in total variation on "
        "average (0 = same, 1 = disjoint); in layer 1 the heads weight most the relative "
        "positions (key - query) {favourite}: the heads attend to different things. Additive "
        "heads work the same way (output {shape}, heads 1-2 differ by {add_tv:.2f}). "
        "Parameters: {params}: splitting d into h heads costs no more than one wide head. The "
        "heads' ranges: mean attended distance sum_j w_ij |j - i| per head in layer 1 "
        "over 40 sentences, {n_seeds} seeds: {per_seed}"
    ).format(
        sentences=len(sentences), entropy=", ".join(f"{e:.2f}" for e in entropy.tolist()),
        tv=tv, favourite=", ".join(f"{o:+d} ({m:.2f})" for o, m in zip(favourite, favourite_mass)),
        shape=tuple(out.shape), add_tv=add_tv,
        params="; ".join(_("{name}: {count}").format(name=k, count=v)
                         for k, v in zip(shown, params.values())),
        n_seeds=n_seeds, per_seed="; ".join(per_seed),
    ) + (
        _(". Within each model, a permutation test of the head labels over the 40 sentences "
          "gives p < 0.01 in {significant}/{n_seeds} models. Over the seeds, training spreads "
          "the heads' ranges more than a fresh initialisation does (whose heads already differ "
          "a little, through the positional encoding): {seeds}.")
        if supports(over_init)
        else _(". Within each model, a permutation test of the head labels over the 40 sentences "
               "gives p < 0.01 in {significant}/{n_seeds} models. Over the seeds, the trained "
               "heads' spread against a fresh initialisation's (whose heads already differ a "
               "little, through the positional encoding): {seeds}: not a significant effect at "
               "this size.")
    ).format(significant=significant, n_seeds=n_seeds,
             seeds=describe_seeds(over_init))  # fmt: skip
    return TopicResult("multihead", finding, values, {"heads": fig})
