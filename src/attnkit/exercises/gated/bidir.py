"""Exercises 9.4.2 and 9.4.3 of d2l 0.17 (1.0's 10.4.2-10.4.3): a two-layer
bidirectional GRU on a task that needs both sides of every position, against a two-layer
unidirectional GRU of the same output width; and its outputs as contextual vectors: the
same token gets a different vector in each context, and a linear probe reads both
neighbours from it (a word-embedding table gives one vector per token, whatever the
context)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.tour.base import TopicResult, describe_seeds, seed_summary, topic

__all__ = ["both_sides"]

K, T = 5, 12  # tokens 0..K-1, sequence length


class Tagger(nn.Module):
    """Embedding -> ``nn.GRU(num_layers=2, bidirectional)`` -> Linear: ``forward(x (B, T))``
    -> ``(logits (B, T, K), outputs (T, B, D*hidden))``."""

    def __init__(self, bidirectional: bool, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(K, 8)
        hidden = width // 2 if bidirectional else width  # the same output width either way
        self.rnn = nn.GRU(8, hidden, num_layers=2, bidirectional=bidirectional)
        self.out = nn.Linear(width, K)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        Y, _ = self.rnn(self.embed(x.T))  # (T, B, width)
        return self.out(Y).transpose(0, 1), Y


def _batch(g: torch.Generator, B: int) -> tuple[Tensor, Tensor]:
    """Random tokens (B, T); the target at t is (x_{t-1} + x_{t+1}) mod K (t = 1..T-2)."""
    x = torch.randint(K, (B, T), generator=g)
    return x, (x[:, :-2] + x[:, 2:]) % K


def _accuracy(model: Tagger, x: Tensor, y: Tensor) -> float:
    with torch.no_grad():
        return float((model(x)[0][:, 1:-1].argmax(-1) == y).float().mean())


def _probe(vectors: Tensor, labels: Tensor) -> float:
    """Held-out accuracy of a least-squares linear probe (one-hot targets, 50/50 split)."""
    n = len(vectors) // 2
    A = torch.cat([vectors, torch.ones(len(vectors), 1)], 1)
    W = torch.linalg.lstsq(A[:n], F.one_hot(labels[:n], K).float()).solution
    return float(((A[n:] @ W).argmax(-1) == labels[n:]).float().mean())


@topic
def both_sides(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.4.2: shapes of a two-layer bidirectional GRU; it against a unidirectional one
    on (x_{t-1} + x_{t+1}) mod K, paired over seeds (same init seed, same batches).
    9.4.3: the trained models' outputs at the middle position as contextual vectors."""
    steps, n_seeds = (100, 2) if small else (150, 3)
    acc: dict[str, list[float]] = {"bidirectional": [], "unidirectional": []}
    test = _batch(torch.Generator().manual_seed(10_000 + seed), 1000)
    models = {}
    for s in range(seed, seed + n_seeds):
        for name in acc:
            torch.manual_seed(s)
            model = Tagger(name == "bidirectional")
            opt = torch.optim.Adam(model.parameters(), lr=0.02)
            g = torch.Generator().manual_seed(s)
            for _ in range(steps):
                x, y = _batch(g, 32)
                loss = F.cross_entropy(model(x)[0][:, 1:-1].reshape(-1, K), y.reshape(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
            acc[name].append(_accuracy(model, *test))
            models.setdefault(name, model)  # the first seed's, for the probe
    gap = seed_summary([a - b for a, b in zip(acc["bidirectional"], acc["unidirectional"])])
    bi = models["bidirectional"]
    x, _ = test
    with torch.no_grad():
        Y = bi.rnn(bi.embed(x.T))[0]  # (T, B, 2 * 16)
        _, h_n = bi.rnn(bi.embed(x.T))
        mid = T // 2
        ctx = Y[mid]  # (B, 32): the contextual vector of the middle token
        emb = bi.embed(x[:, mid])  # (B, 8): its context-free embedding
        uni_ctx = models["unidirectional"].rnn(models["unidirectional"].embed(x.T))[0][mid]
    same = x[:, mid] == 0  # every sequence whose middle token is 0

    def spread(V: Tensor) -> float:  # mean 1 - cosine similarity over pairs
        cos = F.cosine_similarity(V[:, None], V[None], dim=-1)
        return float(1 - cos[~torch.eye(len(V), dtype=torch.bool)].mean())

    left, right = x[:, mid - 1], x[:, mid + 1]
    values = {
        "K": K, "T": T, "steps": steps, "seeds": n_seeds, "accuracy": acc,
        "chance": 1 / K, "bi_minus_uni": gap,
        "output_shape": list(Y.shape), "state_shape": list(h_n.shape),
        "layer2_input_weight_shape": list(bi.rnn.weight_ih_l1.shape),
        "embedding_spread": spread(emb[same]), "context_spread": spread(ctx[same]),
        "probe": {
            "bidirectional": {"left": _probe(ctx, left), "right": _probe(ctx, right)},
            "unidirectional": {"left": _probe(uni_ctx, left), "right": _probe(uni_ctx, right)},
            "embedding": {"left": _probe(emb, left), "right": _probe(emb, right)},
        },
    }  # fmt: skip
    finding = (
        f"two-layer bidirectional GRU: outputs {values['output_shape']} (T, B, 2h), final "
        f"states {values['state_shape']} (layers*2, B, h), layer 2 reads 2h "
        f"({values['layer2_input_weight_shape']}). (x_(t-1) + x_(t+1)) mod {K}: accuracy "
        f"bidirectional {acc['bidirectional']}, unidirectional {acc['unidirectional']} (chance "
        f"{1 / K:.2f}); " + describe_seeds(gap) + f". Token 0 in {int(same.sum())} contexts: "
        f"embedding spread {values['embedding_spread']:.2f}, contextual {values['context_spread']:.2f}"
        f"; probe accuracies {values['probe']}."
    )
    return TopicResult("gated_bidir_both_sides", finding, values)
