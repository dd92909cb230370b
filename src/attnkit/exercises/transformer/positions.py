"""Exercises of d2l 0.17 section 10.6 and 1.0's 11.6.3: what deep stacks of pure
self-attention do to a sequence (10.6.1: rank collapse), and relative position
embeddings (Shaw et al. 2018) learned per clipped query-key offset (1.0's 11.6.3)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = ["RelativeSelfAttention", "learned_positions", "rank_collapse", "relative_positions"]


def distance_from_rank_one(X: torch.Tensor) -> float:
    """‖X - 1 x̄ᵀ‖ / ‖X‖ for X (n, d): 0 when every token has the same vector."""
    return float((X - X.mean(0, keepdim=True)).norm() / X.norm())


@topic
def rank_collapse(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.6.1: random (untrained) stacks of attnkit's MultiHeadAttention over n tokens with
    sinusoidal positions: pure attention X <- MHA(X) against X <- LN(X + MHA(X)) and the
    full block (AddNorm + FFN): how far the tokens stay from all being the same."""
    check_args(small, seed)
    from attnkit.attention import MultiHeadAttention, PositionalEncoding

    n, d, depth = 16, 32, 24
    seeds = 5 if small else 8  # 5: the fewest whose unanimous sign test reaches 0.05
    curves: dict[str, list[list[float]]] = {"pure": [], "residual": []}
    for s in range(seed, seed + seeds):
        torch.manual_seed(s)
        layers = [MultiHeadAttention(d, 4).eval() for _ in range(depth)]
        norm = nn.LayerNorm(d)
        X0 = PositionalEncoding(d)(torch.randn(1, n, d))  # (1, n, d)
        for kind in curves:
            X, dist = X0, [distance_from_rank_one(X0[0])]
            with torch.no_grad():
                for mha in layers:
                    X = mha(X) if kind == "pure" else norm(X + mha(X))  # (1, n, d)
                    dist.append(distance_from_rank_one(X[0]))
            curves[kind].append(dist)
    final = {k: [c[-1] for c in v] for k, v in curves.items()}
    gap = seed_summary([r - p for p, r in zip(final["pure"], final["residual"])])
    values = {"tokens": n, "width": d, "depth": depth, "seeds": seeds,
              "start": [c[0] for c in curves["pure"]], "final": final,
              "pure_worst": max(final["pure"]), "residual_worst": min(final["residual"]),
              "residual_keeps": gap, "residual_keeps_text": describe_seeds(gap)}  # fmt: skip
    finding = (
        f"{depth} random attention layers (d = {d}, 4 heads) over {n} tokens, {seeds} seeds: "
        f"the tokens' distance from all being equal (‖X - mean‖/‖X‖) falls from "
        f"{min(values['start']):.2f} to at most {values['pure_worst']:.1e} with pure attention, "
        f"and stays at least {values['residual_worst']:.2f} with residual connections and "
        f"LayerNorm."
    )
    return TopicResult("transformer_positions_rank_collapse", finding, values)


class RelativeSelfAttention(nn.Module):
    """One head of self-attention with Shaw et al.'s relative keys: the score of query i
    and key j is q_i · (k_j + a_{clip(j - i)}) / √d, one learned vector a per offset in
    [-max_offset, max_offset]; no absolute position anywhere."""

    def __init__(self, d: int, max_offset: int) -> None:
        super().__init__()
        self.max_offset = max_offset
        self.W_q, self.W_k, self.W_v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.offsets = nn.Embedding(2 * max_offset + 1, d)  # (2M + 1, d)

    def scores(self, X: torch.Tensor) -> torch.Tensor:  # X (B, n, d) -> (B, n, n)
        n = X.shape[1]
        q, k = self.W_q(X), self.W_k(X)
        rel = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # j - i, (n, n)
        a = self.offsets(rel.clamp(-self.max_offset, self.max_offset) + self.max_offset)
        content = q @ k.transpose(1, 2)  # (B, n, n)
        position = torch.einsum("bid,ijd->bij", q, a)  # (B, n, n)
        return (content + position) / X.shape[-1] ** 0.5

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # (B, n, d) -> (B, n, d)
        return torch.softmax(self.scores(X), -1) @ self.W_v(X)


def _lookback_task(n: int, batch: int, vocab: int, back: int, g: torch.Generator):
    """Random tokens; the target at position i is the token ``back`` places earlier."""
    x = torch.randint(0, vocab, (batch, n), generator=g)
    return x[:, back:], x[:, :-back]  # the inputs from position back on, their targets


@topic
def relative_positions(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 11.6.3: a content-free input gives scores that depend on j - i only; shifting
    a sequence leaves its scores unchanged; a one-layer model trained to output the token
    3 places back learns with relative embeddings, not without, and keeps working at 4x
    the training length."""
    check_args(small, seed)
    d, M, vocab, back, n = 32, 4, 10, 3, 16
    steps = 80 if small else 200
    torch.manual_seed(seed)
    layer = RelativeSelfAttention(d, M).eval()
    with torch.no_grad():
        same = layer.scores(torch.ones(1, 12, d))[0]  # every token the same vector
        toeplitz = max(float((same.diagonal(o) - same.diagonal(o)[0]).abs().max())
                       for o in range(-11, 12))  # fmt: skip
        X = torch.randn(1, 12, d)
        shifted = layer.scores(torch.cat([torch.randn(1, 5, d), X], 1))[0, 5:, 5:]
        shift_error = float((shifted - layer.scores(X)[0]).abs().max())

    acc: dict[str, dict[str, list[float]]] = {"relative": {}, "none": {}}
    seeds = 2 if small else 5
    for kind in acc:
        acc[kind] = {"1x": [], "4x": []}
        for s in range(seed, seed + seeds):
            torch.manual_seed(100 + s)
            embed, head = nn.Embedding(vocab, d), nn.Linear(d, vocab)
            attn = RelativeSelfAttention(d, M)
            if kind == "none":
                attn.offsets.weight.data.zero_()
                attn.offsets.weight.requires_grad_(False)
            params = [p for m in (embed, attn, head) for p in m.parameters() if p.requires_grad]
            opt = torch.optim.Adam(params, lr=1e-2)
            g = torch.Generator().manual_seed(100 + s)

            def predict(x, embed=embed, attn=attn, head=head):  # every position attends
                return head(attn(embed(x)))  # (B, n, vocab)

            for _ in range(steps):
                x, _ = _lookback_task(n, 64, vocab, back, g)
                logits = predict(x)[:, back:]  # positions with a token 3 back
                loss = nn.functional.cross_entropy(logits.flatten(0, 1), x[:, :-back].flatten())
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                for name, length in (("1x", n), ("4x", 4 * n)):
                    x, _ = _lookback_task(length, 256, vocab, back, g)
                    pred = predict(x)[:, back:].argmax(-1)
                    acc[kind][name].append(float((pred == x[:, :-back]).float().mean()))
    gain = seed_summary([r - z for r, z in zip(acc["relative"]["1x"], acc["none"]["1x"])])
    values = {"offset_clip": M, "toeplitz_error": toeplitz, "shift_error": shift_error,
              "steps": steps, "seeds": seeds, "back": back, "length": n, "vocab": vocab,
              "chance": 1 / vocab, "accuracy": acc, "gain": gain,
              "gain_text": describe_seeds(gain),
              "relative_worst_1x": min(acc["relative"]["1x"]),
              "relative_worst_4x": min(acc["relative"]["4x"]),
              "none_best_1x": max(acc["none"]["1x"])}  # fmt: skip
    finding = (
        f"Relative keys clipped at ±{M}: with every token the same, each diagonal of the "
        f"scores is constant (largest deviation {toeplitz:.1e}); a sequence's scores do not "
        f"change when 5 tokens are put before it ({shift_error:.1e}). Output the token {back} "
        f"places back ({vocab} tokens, length {n}, {steps} steps, {seeds} seeds): accuracy "
        f"with relative embeddings {min(acc['relative']['1x']):.2f} or more, at 4x the length "
        f"{min(acc['relative']['4x']):.2f} or more; without any position "
        f"{max(acc['none']['1x']):.2f} at most (chance {1 / vocab:.2f})."
    )
    return TopicResult("transformer_positions_relative_positions", finding, values)


def _position_loss(model, held: torch.Tensor, length: int) -> torch.Tensor:
    """Mean held-out loss at each position of non-overlapping windows of ``length``
    characters: (length,)."""
    n = (len(held) - 1) // length
    x, y = held[: n * length].view(n, length), held[1 : n * length + 1].view(n, length)
    with torch.no_grad():
        return F.cross_entropy(model(x).transpose(1, 2), y, reduction="none").mean(0)


def _split_perplexity(loss: torch.Tensor, split: int) -> tuple[float, float]:
    """Perplexity over the positions before ``split`` and over those from ``split`` on."""
    return math.exp(float(loss[:split].mean())), math.exp(float(loss[split:].mean()))


def _longer_table(model, config, rows: torch.Tensor):
    """The trained learned-position ``model`` with its (C, D) table extended by ``rows``
    (E, D): the same weights in a model of context C + E."""
    from dataclasses import replace

    bigger = replace(config, context_length=config.context_length + len(rows)).build().eval()
    state = dict(model.state_dict())
    state["input_positions.weight"] = torch.cat([state["input_positions.weight"], rows])
    bigger.load_state_dict(state)
    return bigger


@topic
def learned_positions(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.6.2: a learned position table (C rows) in a character LM trained at length C,
    against ALiBi (no table) trained alike: the table refuses position C + 1; extended
    (its last row repeated, or rows left as initialised), the positions past C are
    measured, at length 2C, against the trained positions and against ALiBi's."""
    from attnkit.exercises.transformer.lm import (
        CONTEXT,
        char_data,
        heldout_loss,
        lm_config,
        train_lm,
    )
    from attnkit.viz import plot_curves

    check_args(small, seed)
    C = CONTEXT
    train, held, V = char_data(small)
    steps, seeds = (80, 2) if small else (250, 5)
    freq = torch.bincount(train, minlength=V).double() + 1
    unigram = math.exp(float(-(freq / freq.sum()).log()[held].mean()))
    one = {"learned": [], "alibi": []}  # perplexity at the training length
    past = {"repeat": [], "untrained": [], "alibi": []}  # positions C..2C-1 at length 2C
    inside = {"repeat": [], "untrained": [], "alibi": []}  # positions 0..C-1 at length 2C
    ran, refusal = [], ""
    for s in range(seed, seed + seeds):
        config = lm_config(V, positions="learned")
        model, _ = train_lm(config, train, steps, 1000 + s)
        one["learned"].append(math.exp(heldout_loss(model, held)))
        for length in (C, C + 1):  # the longest input the table takes
            try:
                with torch.no_grad():
                    model(held[:length][None])
                ran.append(length)
            except ValueError as error:
                refusal = refusal or str(error)
        table = model.input_positions.weight.detach()  # (C, D)
        g = torch.Generator().manual_seed(s)
        extended = {"repeat": table[-1:].expand(C, -1),  # every later position = the last
                    "untrained": 0.02 * torch.randn(C, table.shape[1], generator=g)}  # fmt: skip
        losses = {name: _position_loss(_longer_table(model, config, rows), held, 2 * C)
                  for name, rows in extended.items()}  # fmt: skip
        alibi, _ = train_lm(lm_config(V, positions="alibi"), train, steps, 1000 + s)
        one["alibi"].append(math.exp(heldout_loss(alibi, held)))
        losses["alibi"] = _position_loss(alibi, held, 2 * C)
        for name, loss in losses.items():
            i, p = _split_perplexity(loss, C)
            inside[name].append(i)
            past[name].append(p)
        if s == seed:
            curves = {label: loss.exp().tolist() for label, loss in
                      zip((gettext("learned table, last row repeated"),
                           gettext("learned table, rows as initialised"), "ALiBi"),
                          losses.values(), strict=True)}  # fmt: skip
    base = {"repeat": one["learned"], "untrained": one["learned"], "alibi": one["alibi"]}
    # past / 1x per seed, on the log scale: positive when the positions past C do worse
    log_ratio = {k: [math.log(p / b) for p, b in zip(past[k], base[k])] for k in past}
    worse_past = {k: seed_summary(log_ratio[k]) for k in ("repeat", "untrained")}
    vs_alibi = seed_summary([a - b for a, b in zip(log_ratio["repeat"], log_ratio["alibi"])])
    mean = {
        k: sum(v) / seeds for k, v in {**one, **{f"past_{k}": v for k, v in past.items()}}.items()
    }
    values = {
        "data": "the English side of attnkit's generated corpus, as characters",
        "context": C, "steps": steps, "seeds": seeds, "unigram_perplexity": unigram,
        "longest_run": max(ran), "refusal": refusal, "perplexity": one,
        "past_context": past, "inside_context": inside,
        "past_over_1x": {k: [math.exp(r) for r in v] for k, v in log_ratio.items()},
        "worst_past_over_1x": {k: min(math.exp(r) for r in log_ratio[k])
                               for k in ("repeat", "untrained")},
        "alibi_past_over_1x_max": max(math.exp(r) for r in log_ratio["alibi"]),
        "mean_perplexity": mean, "worse_past": worse_past,
        "worse_past_text": {k: describe_seeds(v) for k, v in worse_past.items()},
        "vs_alibi": vs_alibi, "vs_alibi_text": describe_seeds(vs_alibi),
    }  # fmt: skip
    fig = plot_curves(curves, gettext("position"), gettext("held-out perplexity"),
                      x=list(range(1, 2 * C + 1)), logy=True,
                      title=gettext("trained at {C} characters; past {C}, the table is extended")
                      .format(C=C))  # fmt: skip
    finding = (
        f"A learned table of {C} rows (character LM, {steps} steps, {seeds} seeds) runs at "
        f"{max(ran)} characters and refuses {C + 1} ({refusal}). Perplexity at {C}: learned "
        f"{mean['learned']:.2f}, ALiBi {mean['alibi']:.2f}, character frequencies "
        f"{unigram:.2f}. At {2 * C}, on the positions past {C}: table extended by repeating "
        f"its last row {mean['past_repeat']:.2f}, by rows left as initialised "
        f"{mean['past_untrained']:.2f}, ALiBi {mean['past_alibi']:.2f}; log(past / {C}) for "
        f"the repeated table minus ALiBi's: {values['vs_alibi_text']}."
    )
    return TopicResult("transformer_positions_learned_positions", finding, values,
                       {"by_position": fig})  # fmt: skip
