"""Exercises of d2l 0.17 section 10.6 and 1.0's 11.6.3: what deep stacks of pure
self-attention do to a sequence (10.6.1: rank collapse), and relative position
embeddings (Shaw et al. 2018) learned per clipped query-key offset (1.0's 11.6.3)."""

from __future__ import annotations

import torch
from torch import nn

from attnkit.tour.base import TopicResult, check_args, seed_summary, topic

__all__ = ["RelativeSelfAttention", "rank_collapse", "relative_positions"]


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
    seeds = 3 if small else 8
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
              "residual_keeps": gap}  # fmt: skip
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
    seeds = 2 if small else 3
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
