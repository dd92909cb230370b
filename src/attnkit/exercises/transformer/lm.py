"""Exercises of d2l 0.17 sections 10.5 and 10.7 measured on tiny decoder-only character
language models (attnkit's ``DecoderLM``) trained on the English side of attnkit's
generated corpus (the tour's extrapolation corpus): head importance by ablation and by
gradient (10.5.2), deeper stacks (10.7.1), and a causal mask against none (10.7.3).

A character LM trains in about a second at these sizes; the book's translator takes
minutes per model on this machine, so these questions are asked of the LM."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = [
    "causal_mask_cheat",
    "char_data",
    "deeper_stacks",
    "head_importance",
    "heldout_loss",
    "lm_config",
    "train_lm",
]

CONTEXT = 32
DATA_NAME = "the English side of attnkit's generated corpus, as characters"


def char_data(small: bool):
    """Train ids, held-out ids (the first 32 or 96 windows of the held-out 20%), vocabulary."""
    from attnkit.tour.extrapolation import synthetic_char_corpus

    train, held, V = synthetic_char_corpus(1500 if small else 4000)
    return train, held[: (32 if small else 96) * CONTEXT + 1], V


def lm_config(V: int, layers: int = 2, heads: int = 4, positions: str = "rope",
              context: int = CONTEXT):  # fmt: skip
    """The exercises' character LM: width 32, feed-forward 64, no dropout."""
    from attnkit.models.decoder_lm import DecoderLMConfig

    return DecoderLMConfig(vocab_size=V, d_model=32, num_heads=heads, num_layers=layers,
                           ffn_hidden=64, dropout=0.0, context_length=context,
                           positions=positions)  # fmt: skip


def _windows(ids: torch.Tensor, count: int, g: torch.Generator) -> torch.Tensor:
    start = torch.randint(0, len(ids) - CONTEXT - 1, (count,), generator=g)
    return ids[start[:, None] + torch.arange(CONTEXT + 1)]  # (count, C + 1)


def train_lm(config, train: torch.Tensor, steps: int, seed: int, bidirectional: bool = False):
    """AdamW on random windows of ``train``; ``bidirectional``: every block's attention
    runs without its causal mask (each position sees the whole window)."""
    torch.manual_seed(seed)
    model = config.build()
    if bidirectional:
        for block in model.blocks:
            block.attention.register_forward_pre_hook(
                lambda m, a, kw: (a, {**kw, "causal": False}), with_kwargs=True
            )
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    loss = torch.zeros(())
    for _ in range(steps):
        chunk = _windows(train, 32, g)  # (32, C + 1)
        logits = model(chunk[:, :-1])  # (32, C, V)
        loss = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval(), float(loss.detach())


def heldout_loss(model, held: torch.Tensor) -> float:
    """Mean next-character cross-entropy (nats) over non-overlapping held-out windows."""
    n = (len(held) - 1) // CONTEXT
    x = held[: n * CONTEXT].view(n, CONTEXT)
    y = held[1 : n * CONTEXT + 1].view(n, CONTEXT)
    with torch.no_grad():
        return float(F.cross_entropy(model(x).flatten(0, 1), y.flatten()))


def _gate_heads(model, gates: torch.Tensor):
    """Multiply head h of block l by gates[l, h] (the input of W_o is the heads' outputs
    side by side); returns the hook handles."""
    handles = []
    for layer, block in enumerate(model.blocks):
        H = block.attention.num_heads

        def scale(m, args, layer=layer, H=H):
            x = args[0]  # (B, T, D): H slices of width D / H
            g = gates[layer].repeat_interleave(x.shape[-1] // H)  # (D,)
            return (x * g,)

        handles.append(block.attention.W_o.register_forward_pre_hook(scale))
    return handles


def _masked_loss(model, held, gates) -> float:
    handles = _gate_heads(model, gates)
    try:
        return heldout_loss(model, held)
    finally:
        for h in handles:
            h.remove()


def _rank_corr(a: list[float], b: list[float]) -> float:
    ra = torch.tensor(a).argsort().argsort().float()
    rb = torch.tensor(b).argsort().argsort().float()
    return float(torch.corrcoef(torch.stack([ra, rb]))[0, 1])


@topic
def head_importance(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.5.2: the held-out loss increase when each head alone is masked; pruning the
    least important half against the most important half; gradient importance."""
    check_args(small, seed)
    from attnkit.viz import show_heatmaps

    train, held, V = char_data(small)
    steps, seeds = (80, 1) if small else (250, 5)
    config = lm_config(V)
    L, H = config.num_layers, config.num_heads
    base, drops, prune_low, prune_high, grad_corr = [], [], [], [], []
    for s in range(seed, seed + seeds):
        model, _ = train_lm(config, train, steps, 1000 + s)
        b = heldout_loss(model, held)
        inc = []
        for layer in range(L):
            for h in range(H):
                gates = torch.ones(L, H)
                gates[layer, h] = 0.0
                inc.append(_masked_loss(model, held, gates) - b)
        order = sorted(range(L * H), key=lambda i: inc[i])  # least important first
        half = L * H // 2
        low, high = torch.ones(L * H), torch.ones(L * H)
        low[order[:half]] = 0.0
        high[order[half:]] = 0.0
        prune_low.append(_masked_loss(model, held, low.view(L, H)) - b)
        prune_high.append(_masked_loss(model, held, high.view(L, H)) - b)
        # Michel et al. 2019: |d loss / d gate| at gates = 1, on held-out windows
        gates = torch.ones(L, H, requires_grad=True)
        handles = _gate_heads(model, gates)
        n = (len(held) - 1) // CONTEXT
        x, y = held[: n * CONTEXT].view(n, CONTEXT), held[1 : n * CONTEXT + 1].view(n, CONTEXT)
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        for hd in handles:
            hd.remove()
        grad_corr.append(_rank_corr(gates.grad.abs().flatten().tolist(), inc))
        base.append(b)
        drops.append(inc)
    gap = seed_summary([hi - lo for lo, hi in zip(prune_low, prune_high)])
    fig = show_heatmaps(torch.tensor(drops[0]).view(1, 1, L, H), gettext("head"), gettext("layer"),
                        figsize=(3, 2))  # fmt: skip
    values = {
        "data": DATA_NAME, "steps": steps, "seeds": seeds, "heads": L * H, "pruned": L * H // 2,
        "base_loss": base, "head_loss_increase": drops,
        "largest_increase": [max(d) for d in drops], "smallest_increase": [min(d) for d in drops],
        "prune_least_increase": prune_low, "prune_most_increase": prune_high,
        "prune_gap": gap, "prune_gap_text": describe_seeds(gap, " nats"),
        "prune_ratio_max": max(lo / hi for lo, hi in zip(prune_low, prune_high)),
        "gradient_rank_correlation": grad_corr, "gradient_min": min(grad_corr),
        "gradient_max": max(grad_corr),
    }  # fmt: skip
    finding = (
        f"{L} layers x {H} heads, {steps} steps, {seeds} seeds ({DATA_NAME}): held-out loss "
        f"{', '.join(f'{b:.3f}' for b in base)} nats; masking one head raises it by "
        + "; ".join(f"{min(d):.3f} to {max(d):.3f}" for d in drops)
        + f". Pruning the {L * H // 2} least important heads costs "
        + ", ".join(f"{p:.3f}" for p in prune_low)
        + ", the most important "
        + ", ".join(f"{p:.3f}" for p in prune_high)
        + " nats; gradient importance ranks the heads as ablation does with Spearman "
        + ", ".join(f"{c:.2f}" for c in grad_corr)
        + "."
    )
    return TopicResult("transformer_lm_head_importance", finding, values, {"importance": fig})


@topic
def deeper_stacks(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.7.1: 1, 2 and 4 blocks at equal steps: counted FLOPs per batch, held-out loss."""
    check_args(small, seed)
    from attnkit.tour.cost import count_ops

    train, held, V = char_data(small)
    steps, seeds = (20, 1) if small else (150, 2)
    depths = (1, 2, 4)
    x = held[: 32 * CONTEXT].view(32, CONTEXT)  # one batch of 32 windows
    flops, params, loss = {}, {}, {}
    for depth in depths:
        config = lm_config(V, layers=depth)
        model = config.build()
        flops[str(depth)] = count_ops(lambda m=model: m(x)).flops
        params[str(depth)] = sum(p.numel() for p in model.parameters())
        loss[str(depth)] = [heldout_loss(train_lm(config, train, steps, 1000 + s)[0], held)
                            for s in range(seed, seed + seeds)]  # fmt: skip
    block = flops["2"] - flops["1"]  # one block's FLOPs
    deeper_better = seed_summary([a - b for a, b in zip(loss["2"], loss["4"])])
    mean_loss = [sum(loss[str(d)]) / seeds for d in depths]
    c = lm_config(V)
    values = {
        "data": DATA_NAME, "steps": steps, "seeds": seeds, "depths": list(depths),
        "flops": [flops[str(d)] for d in depths], "params": [params[str(d)] for d in depths],
        # the sizes the closed form needs: B windows of T characters, width D, FFN F, vocab V
        "batch": list(x.shape), "width": c.d_model, "ffn": c.ffn_hidden, "vocab": V,
        "flops_per_block": block, "flops_4_over_1": flops["4"] / flops["1"],
        "heldout_loss": loss, "mean_loss": mean_loss, "four_vs_two": deeper_better,
        "four_vs_two_text": describe_seeds(deeper_better, " nats"),
    }  # fmt: skip
    finding = (
        f"Blocks 1/2/4 (d_model 32, {steps} steps, {seeds} seeds, {DATA_NAME}): counted "
        f"forward FLOPs per batch of 32 x {CONTEXT} "
        + "/".join(f"{flops[str(d)]:,}" for d in depths)
        + f" (each block adds {block:,}); held-out loss mean "
        + "/".join(f"{x:.3f}" for x in mean_loss)
        + f" nats; 4 blocks below 2 in {deeper_better['agree']}/{seeds} seeds."
    )
    return TopicResult("transformer_lm_deeper_stacks", finding, values)


def _generation_loss(model, held: torch.Tensor, windows: int) -> float:
    """Cross-entropy of each next character predicted from its prefix alone (as when
    generating: the future does not exist yet), over ``windows`` held-out windows."""
    n = min(windows, (len(held) - 1) // CONTEXT)
    x = held[: n * CONTEXT].view(n, CONTEXT)
    y = held[1 : n * CONTEXT + 1].view(n, CONTEXT)
    total = 0.0
    with torch.no_grad():
        for t in range(CONTEXT):
            logits = model(x[:, : t + 1])[:, -1]  # (n, V): the last position of the prefix
            total += float(F.cross_entropy(logits, y[:, t]))
    return total / CONTEXT


@topic
def causal_mask_cheat(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.7.3: the same LM trained with and without the causal mask: training loss
    (teacher-forced) and the loss of predicting each character from its prefix."""
    check_args(small, seed)
    train, held, V = char_data(small)
    steps, windows = (80, 16) if small else (250, 64)
    config = lm_config(V)
    freq = torch.bincount(train, minlength=V).double() + 1
    unigram = float(-(freq / freq.sum()).log()[held].mean())
    res = {}
    for name, bidir in (("causal", False), ("unmasked", True)):
        model, train_loss = train_lm(config, train, steps, 1000 + seed, bidirectional=bidir)
        res[name] = {"train_loss": train_loss,
                     "generation_loss": _generation_loss(model, held, windows)}  # fmt: skip
    values = {"data": DATA_NAME, "steps": steps, "unigram_loss": unigram, **res}
    finding = (
        f"{steps} steps ({DATA_NAME}): the causal LM's training loss "
        f"{res['causal']['train_loss']:.3f} nats, predicting from the prefix "
        f"{res['causal']['generation_loss']:.3f}; without the mask, training loss "
        f"{res['unmasked']['train_loss']:.3f} (it reads the answer, one position ahead) but "
        f"{res['unmasked']['generation_loss']:.3f} from the prefix, against "
        f"{unigram:.3f} for character frequencies alone (perplexity "
        f"{math.exp(res['unmasked']['generation_loss']):.1f})."
    )
    return TopicResult("transformer_lm_causal_mask_cheat", finding, values)
