"""Exercises of 1.0's section 11.8 (vision Transformer) and d2l 0.17's 10.7.6: a tiny ViT
built from attnkit's Transformer encoder blocks (patches as tokens, a <cls> token,
learned position embeddings). Its counted cost against the image size (11.8.1); <cls>
against mean-pooled patches and a hyperparameter change (11.8.2, 11.8.3) on a synthetic
image task generated in code: Fashion-MNIST is not on this machine."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = ["TinyViT", "bars", "vit_cost", "vit_pooling"]

DATA_NAME = "synthetic oriented bars (generated in code; not Fashion-MNIST)"


class TinyViT(nn.Module):
    """Patches (a strided convolution) -> tokens, + a <cls> token, + learned positions,
    attnkit EncoderBlocks, then the <cls> token's vector (``pool="cls"``) or the patch
    vectors' mean (``pool="mean"``) through LayerNorm and a linear classifier."""

    def __init__(self, img: int, patch: int, classes: int, d: int = 32, layers: int = 2,
                 heads: int = 4, pool: str = "cls") -> None:  # fmt: skip
        super().__init__()
        from attnkit.models.transformer import EncoderBlock, TransformerConfig

        if pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {pool!r}")
        self.pool = pool
        self.patches = nn.Conv2d(1, d, patch, stride=patch)  # (B, 1, H, W) -> (B, d, H/p, W/p)
        tokens = (img // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.positions = nn.Parameter(torch.randn(1, tokens + 1, d) * 0.02)
        config = TransformerConfig(d_model=d, num_heads=heads, num_layers=layers, d_ff=2 * d,
                                   dropout=0.0, pre_norm=True)  # fmt: skip
        self.blocks = nn.Sequential(*(EncoderBlock(config) for _ in range(layers)))
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, 1, H, W) -> (B, classes)
        X = self.patches(images).flatten(2).transpose(1, 2)  # (B, tokens, d)
        X = torch.cat([self.cls.expand(X.shape[0], -1, -1), X], 1) + self.positions
        X = self.blocks(X)  # (B, tokens + 1, d)
        return self.head(X[:, 0] if self.pool == "cls" else X[:, 1:].mean(1))


def bars(count: int, img: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Images with one bar of length 5 at a random place in one of 4 orientations
    (horizontal, vertical, diagonal, anti-diagonal) plus Gaussian noise; label = orientation."""
    labels = torch.randint(0, 4, (count,), generator=g)
    images = 0.3 * torch.randn(count, 1, img, img, generator=g)
    step = torch.tensor([[0, 1], [1, 0], [1, 1], [1, -1]])[labels]  # (count, 2): (dr, dc)
    centre = torch.randint(3, img - 3, (count, 2), generator=g)
    t = torch.arange(-2, 3)  # 5 pixels through the centre
    rows = centre[:, :1] + t * step[:, :1]  # (count, 5)
    cols = centre[:, 1:] + t * step[:, 1:]
    idx = torch.arange(count)[:, None].expand(-1, 5)
    images[idx, 0, rows, cols] += 1.0
    return images, labels


@topic
def vit_cost(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 11.8.1: counted FLOPs of one training-size forward (batch 8) of the same ViT
    at growing image sizes, patch 4: tokens grow as (img / patch)², attention as its square."""
    check_args(small, seed)
    from attnkit.tour.cost import count_ops

    torch.manual_seed(seed)
    sizes = [16, 32, 64] if small else [16, 32, 64, 128]
    rows = {}
    for img in sizes:
        model = TinyViT(img, 4, 10).eval()
        x = torch.randn(8, 1, img, img)
        seen = []  # the tokens the blocks read: measured, not computed from the sizes
        hook = model.blocks.register_forward_pre_hook(
            lambda m, a, seen=seen: seen.append(a[0].shape[1])
        )
        rows[str(img)] = {"flops": count_ops(lambda m=model, x=x: m(x)).flops}
        hook.remove()
        rows[str(img)]["tokens"] = seen[0]
    a, b = rows[str(sizes[0])], rows[str(sizes[-1])]
    values = {"sizes": sizes, "largest": sizes[-1], "patch": 4, "costs": rows, "batch": 8,
              "width": 32, "blocks": 2, "ffn": 64, "classes": 10,
              "side_growth": sizes[-1] / sizes[0],
              "token_growth": b["tokens"] / a["tokens"],
              "flops_growth": b["flops"] / a["flops"],
              "flops_per_doubling": [rows[str(s2)]["flops"] / rows[str(s1)]["flops"]
                                     for s1, s2 in itertools.pairwise(sizes)]}  # fmt: skip
    finding = (
        f"ViT (d 32, 2 blocks, patch 4), images {sizes[0]}..{sizes[-1]} pixels a side: "
        f"tokens {a['tokens']} -> {b['tokens']} ({values['token_growth']:.0f}x), counted FLOPs "
        f"per forward {values['flops_growth']:.0f}x; each doubling of the side multiplies "
        "them by " + ", ".join(f"{r:.1f}" for r in values["flops_per_doubling"]) + "."
    )
    return TopicResult("transformer_vit_vit_cost", finding, values)


def _train(pool: str, lr: float, img: int, steps: list[int], seed: int, test) -> list[float]:
    """Train one ViT; its test accuracy after each number of ``steps`` (increasing)."""
    torch.manual_seed(seed)
    model = TinyViT(img, 4, 4, pool=pool)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)  # the same batches for every variant of a seed
    accuracy = []
    for step in range(1, steps[-1] + 1):
        x, y = bars(32, img, g)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in steps:
            model.eval()
            with torch.no_grad():
                accuracy.append(float((model(test[0]).argmax(-1) == test[1]).float().mean()))
            model.train()
    return accuracy


@topic
def vit_pooling(*, small: bool = False, seed: int = 0) -> TopicResult:
    """1.0's 11.8.2 and 11.8.3: <cls> against mean-pooled patches (lr 1e-3), and <cls>
    with the learning rate raised to 3e-3 or trained twice as long, paired over seeds
    (same init, same batches)."""
    check_args(small, seed)
    img = 16
    steps, seeds = (100, 1) if small else (150, 5)
    test = bars(512, img, torch.Generator().manual_seed(10_000 + seed))
    acc: dict[str, list[float]] = {"cls": [], "mean": [], "cls_lr3e-3": [], "cls_2x_steps": []}
    for s in range(seed, seed + seeds):
        at, twice = _train("cls", 1e-3, img, [steps, 2 * steps], s, test)  # one run, read twice
        acc["cls"].append(at)
        acc["cls_2x_steps"].append(twice)
        acc["mean"] += _train("mean", 1e-3, img, [steps], s, test)
        acc["cls_lr3e-3"] += _train("cls", 3e-3, img, [steps], s, test)
    # paired per seed (same initialisation, same batches), positive when the claim holds
    mean_vs_cls = seed_summary([c - m for m, c in zip(acc["mean"], acc["cls"])])
    lr_gain = seed_summary([a - b for a, b in zip(acc["cls_lr3e-3"], acc["cls"])])
    steps_gain = seed_summary([a - b for a, b in zip(acc["cls_2x_steps"], acc["cls"])])
    values = {"data": DATA_NAME, "image": img, "patch": 4, "steps": steps, "seeds": seeds,
              "test_images": 512, "accuracy": acc,
              "mean_accuracy": {k: sum(v) / len(v) for k, v in acc.items()},
              "cls_ahead_of_mean": mean_vs_cls, "cls_ahead_text": describe_seeds(mean_vs_cls),
              "lr_gain": lr_gain, "lr_gain_text": describe_seeds(lr_gain),
              "steps_gain": steps_gain, "steps_gain_text": describe_seeds(steps_gain),
              "cls_models_worst": min(acc["cls"] + acc["cls_lr3e-3"])}  # fmt: skip
    finding = (
        f"{DATA_NAME}, {img}x{img}, 4 classes, {steps} steps, {seeds} seeds, 512 test images: "
        "mean accuracy "
        + ", ".join(f"{k} {v:.2f}" for k, v in values["mean_accuracy"].items())
        + f"; <cls> ahead of mean pooling: {values['cls_ahead_text']}; lr 3e-3 against 1e-3: "
        f"{values['lr_gain_text']}; {2 * steps} steps against {steps}: "
        f"{values['steps_gain_text']}."
    )
    return TopicResult("transformer_vit_vit_pooling", finding, values)
