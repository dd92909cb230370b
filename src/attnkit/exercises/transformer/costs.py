"""Exercises of d2l 0.17 section 10.7 and 1.0's 11.9.4 answered by counting operations
(``attnkit.tour.cost.count_ops``), never by timing: long inputs (10.7.4), cheaper
attention (10.7.5), additive attention's cost (10.7.2), decoder-only against
encoder-decoder for a sequence pair (1.0's 11.9.4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnkit.tour.base import TopicResult, check_args, topic
from attnkit.tour.cost import count_ops

__all__ = ["additive_cost", "decoder_only_cost", "long_inputs"]

HEAD_DIM = 64


def explicit_attention(q, k, v, *, return_weights: bool = False):
    """softmax(Q Kᵀ / √d) V with the n x n weights written out: (B, n, d) each (and the
    weights, (B, n, n), with ``return_weights``)."""
    w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)  # (B, n, n)
    return (w @ v, w) if return_weights else w @ v


def local_attention(q, k, v, window: int):
    """Each query attends to the keys of its own block of ``window`` positions and the
    block before (a sliding-window pattern, Longformer/BigBird's local part): (B, n, d)."""
    B, n, d = q.shape
    nb = n // window
    qb = q.view(B, nb, window, d)
    kb, vb = k.view(B, nb, window, d), v.view(B, nb, window, d)
    prev_k = torch.cat([torch.zeros_like(kb[:, :1]), kb[:, :-1]], 1)
    prev_v = torch.cat([torch.zeros_like(vb[:, :1]), vb[:, :-1]], 1)
    keys, vals = torch.cat([prev_k, kb], 2), torch.cat([prev_v, vb], 2)  # (B, nb, 2w, d)
    scores = qb @ keys.transpose(-1, -2) / d**0.5  # (B, nb, w, 2w)
    first = torch.zeros(nb, 1, 2 * window, dtype=torch.bool)
    first[0, 0, :window] = True  # the first block has no block before it
    scores = scores.masked_fill(first, float("-inf"))
    return (torch.softmax(scores, -1) @ vals).view(B, n, d)


def linear_attention(q, k, v):
    """Katharopoulos et al. 2020: φ(Q) (φ(K)ᵀ V), φ = elu + 1; no n x n matrix: (B, n, d)."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    kv = fk.transpose(-1, -2) @ v  # (B, d, d)
    norm = fq @ fk.sum(1, keepdim=True).transpose(-1, -2)  # (B, n, 1)
    return (fq @ kv) / norm


@topic
def long_inputs(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.7.4 and 10.7.5: one head (d = 64) at n = 128 ... 8192: counted FLOPs and the
    elements written by full attention, a 128-wide local window and linear attention."""
    check_args(small, seed)
    lengths = [128, 256, 512] if small else [128, 512, 2048, 8192]
    window = 128
    g = torch.Generator().manual_seed(seed)
    rows = {}
    for n in lengths:
        q, k, v = (torch.randn(1, n, HEAD_DIM, generator=g) for _ in range(3))  # (1, n, d)
        full = count_ops(lambda q=q, k=k, v=v: explicit_attention(q, k, v))
        local = count_ops(lambda q=q, k=k, v=v: local_attention(q, k, v, window))
        linear = count_ops(lambda q=q, k=k, v=v: linear_attention(q, k, v))
        with torch.no_grad():
            out, w = explicit_attention(q, k, v, return_weights=True)
            err = float((local_attention(q, k, v, n) - out).abs().max())
        rows[str(n)] = {
            "full_flops": full.flops, "full_written": full.elementwise,
            "weights_bytes": w.numel() * w.element_size(),  # the (1, n, n) float32 weights
            "local_flops": local.flops, "linear_flops": linear.flops,
            "linear_written": linear.elementwise, "window_equals_full_error": err,
        }  # fmt: skip
    a, b = str(lengths[0]), str(lengths[-1])
    growth = lengths[-1] / lengths[0]
    values = {
        "lengths": lengths, "window": window, "head_dim": HEAD_DIM, "costs": rows,
        "growth": growth,
        "full_flops_growth": rows[b]["full_flops"] / rows[a]["full_flops"],
        "local_flops_growth": rows[b]["local_flops"] / rows[a]["local_flops"],
        "linear_flops_growth": rows[b]["linear_flops"] / rows[a]["linear_flops"],
        "longest": lengths[-1], "longest_weights_mib": rows[b]["weights_bytes"] / 2**20,
        "longest_full_over_local": rows[b]["full_flops"] / rows[b]["local_flops"],
        "full_written_longest": rows[b]["full_written"],
        "window_equals_full_error": max(r["window_equals_full_error"] for r in rows.values()),
    }  # fmt: skip
    finding = (
        f"One head of width {HEAD_DIM}, n = {lengths[0]}..{lengths[-1]} ({growth:.0f}x longer): "
        f"full attention's counted FLOPs grow {values['full_flops_growth']:.0f}x, the n x n "
        f"weights reach {values['longest_weights_mib']:.0f} MiB (float32, per head, per "
        f"sequence); a {window}-wide local window grows {values['local_flops_growth']:.0f}x "
        f"and linear attention {values['linear_flops_growth']:.0f}x."
    )
    return TopicResult("transformer_costs_long_inputs", finding, values)


@topic
def additive_cost(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.7.2: attnkit's AdditiveAttention against DotProductAttention on the same
    queries and keys (d = 64, additive hidden width 64): counted operations."""
    check_args(small, seed)
    from attnkit.attention import AdditiveAttention, DotProductAttention

    torch.manual_seed(seed)
    d = hidden = HEAD_DIM
    lengths = [16, 64] if small else [16, 64, 256]
    additive = AdditiveAttention(d, d, hidden).eval()
    dot = DotProductAttention().eval()
    rows = {}
    for n in lengths:
        x = torch.randn(2, n, d)  # (B, n, d): self-attention
        a = count_ops(lambda x=x: additive(x, x, x))
        p = count_ops(lambda x=x: dot(x, x, x))
        rows[str(n)] = {"additive_flops": a.flops, "additive_written": a.elementwise,
                        "dot_flops": p.flops, "dot_written": p.elementwise,
                        "written_ratio": a.elementwise / p.elementwise,
                        "total_ratio": a.total / p.total}  # fmt: skip
    last = rows[str(lengths[-1])]
    values = {"lengths": lengths, "hidden": hidden, "width": d, "batch": 2, "costs": rows,
              "written_ratio_longest": last["written_ratio"],
              "written_ratio_shortest": rows[str(lengths[0])]["written_ratio"],
              "total_ratio_longest": last["total_ratio"], "longest": lengths[-1]}  # fmt: skip
    finding = (
        f"Additive attention (hidden {hidden}) writes a (B, n, n, {hidden}) tensor of q + k "
        f"sums and its tanh: at n = {lengths[-1]} it writes {last['written_ratio']:.0f}x the "
        f"elements of scaled dot product and costs {last['total_ratio']:.1f}x its counted "
        "operations (FLOPs + elements written)."
    )
    return TopicResult("transformer_costs_additive_cost", finding, values)


def _weights_computed(model, src, tgt, n: int | None = None) -> int:
    """Attention-weight entries one forward computes (all heads, all attention modules),
    read from ``record_attention``: an encoder-decoder when ``n`` (the source length) is
    given, else a decoder-only LM on source + target."""
    from attnkit.attention.recording import record_attention

    with torch.no_grad(), record_attention() as record:
        model(src, tgt, torch.tensor([n])) if n is not None else model(torch.cat([src, tgt], 1))
    found = [record.get(m) for m in model.modules()]
    return sum(w.numel() for w in found if w is not None)


@topic
def decoder_only_cost(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 11.9.4: a source of n tokens and a target of n tokens, one training forward:
    attnkit's encoder-decoder Transformer (L encoder + L decoder blocks) against a
    decoder-only LM of 2L blocks reading source + target; counted FLOPs and the
    attention-weight entries each computes."""
    check_args(small, seed)
    from attnkit.models.decoder_lm import DecoderLMConfig
    from attnkit.models.registry import build_model

    torch.manual_seed(seed)
    d, L, V = 64, 2, 100
    encdec = build_model("transformer", {"d_model": d, "num_heads": 4, "num_layers": L,
                                         "d_ff": 4 * d, "dropout": 0.0, "max_len": 4096}, V, V).eval()  # fmt: skip
    deconly = DecoderLMConfig(vocab_size=V, d_model=d, num_heads=4, num_layers=2 * L,
                              ffn_hidden=4 * d, dropout=0.0, context_length=4096,
                              positions="rope").build().eval()  # fmt: skip
    lengths = [16, 64] if small else [16, 64, 256, 1024]
    rows = {}
    for n in lengths:
        src, tgt = torch.randint(0, V, (1, n)), torch.randint(0, V, (1, n))
        ed = count_ops(lambda s=src, t=tgt, n=n: encdec(s, t, torch.tensor([n])))
        do = count_ops(lambda s=src, t=tgt: deconly(torch.cat([s, t], 1)))
        # the attention weights each forward computes, recorded (every head of every block)
        rows[str(n)] = {"encdec_flops": ed.flops, "deconly_flops": do.flops,
                        "ratio": do.flops / ed.flops,
                        "encdec_weights": _weights_computed(encdec, src, tgt, n),
                        "deconly_weights": _weights_computed(deconly, src, tgt)}  # fmt: skip
    params = {"encdec": sum(p.numel() for p in encdec.parameters()),
              "deconly": sum(p.numel() for p in deconly.parameters())}  # fmt: skip
    last = rows[str(lengths[-1])]
    values = {"lengths": lengths, "costs": rows, "params": params, "layers": L, "width": d,
              "ffn": 4 * d, "vocab": V, "heads": 4,
              "ratio_longest": last["ratio"], "ratio_shortest": rows[str(lengths[0])]["ratio"],
              "weights_ratio": last["deconly_weights"] / last["encdec_weights"],
              "longest": lengths[-1]}  # fmt: skip
    finding = (
        f"Source and target of n tokens each, d = {d}: encoder-decoder ({L} + {L} blocks, "
        f"{params['encdec']:,} parameters) against decoder-only ({2 * L} blocks, "
        f"{params['deconly']:,}): decoder-only / encoder-decoder counted FLOPs "
        + ", ".join(f"{r['ratio']:.2f} at n = {k}" for k, r in rows.items())
        + f"; attention-weight entries {values['weights_ratio']:.2f}x."
    )
    return TopicResult("transformer_costs_decoder_only_cost", finding, values)
