"""Training throughput of attnkit's decoder-only Transformer LM against two peers at the same
shapes (issue 24, item 4): nanoGPT's formulation of the model and x-transformers.

    python -m benchmarks.peers.lm_training [--shape recipe|wide] [--dtype fp32|bf16|both]
        [--rounds 5] [--steps 10] [--threads 2]

The contenders, each the same model: pre-norm blocks, causal self-attention, GELU
feed-forward (D -> 4D -> D), no biases (nanoGPT's ``bias=False``), no dropout, tied input and
output embeddings, GPT-2's initialization:

- **attnkit**: ``DecoderLM`` (``attnkit.models.decoder_lm``), its attention core.
- **nanoGPT**: ``NanoGPT`` below, nanoGPT's formulation (``model.py``: one ``c_attn``
  projection split into q, k, v, ``F.scaled_dot_product_attention(is_causal=True)``,
  ``wte``/``wpe`` tables, ``lm_head`` tied to ``wte``), written here from its structure so
  that the benchmark needs no clone. It has learned positions only.
- **x-transformers**: ``TransformerWrapper`` with a ``Decoder`` (the ``peers`` extra),
  ``attn_dim_head`` = D / H, ``ff_no_bias``, ``tie_embedding``; its own attention (explicit
  matrix products, its default) and, as a second row, ``attn_flash=True`` (SDPA).

Two position schemes: ``learned`` (all three) and ``rope`` (attnkit and x-transformers'
``rotary_pos_emb``; nanoGPT has none). The step is the same loop for all: forward, cross
entropy over every position, backward, gradient clipping at 1, AdamW (foreach); bf16 is
``torch.autocast`` on the CPU with fp32 weights. Inputs are random token ids (speed does not
depend on them). Each round times ``--steps`` steps of every contender in turn
(interleaved); the table gives training tokens/s, median [min-max] over ``--rounds``
rounds, and the ratio attnkit / peer of the medians (> 1: attnkit is faster).

Shapes: ``recipe`` is attnkit's ``transformer`` LM recipe (D 128, 4 heads, 4 blocks, context
128, batch 16, The Time Machine's 28 characters); ``wide`` is D 256, 8 heads, 6 blocks,
context 256, batch 16, a 1,000-piece vocabulary.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.models.decoder_lm import DecoderLMConfig
from benchmarks.harness import print_table

SHAPES = {
    "recipe": dict(d=128, heads=4, layers=4, ctx=128, batch=16, vocab=28),
    "wide": dict(d=256, heads=8, layers=6, ctx=256, batch=16, vocab=1000),
}
INSTALL = "pip install -e '.[peers]'"


class NanoGPTBlock(nn.Module):
    """x + proj(attn(ln_1(x))), then x + mlp(ln_2(x)): nanoGPT's ``Block``, no biases."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, bias=False)
        self.c_attn = nn.Linear(d, 3 * d, bias=False)  # q, k, v in one matrix
        self.c_proj = nn.Linear(d, d, bias=False)
        self.ln_2 = nn.LayerNorm(d, bias=False)
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.mlp_proj = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # (B, T, D)
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)  # 3 x (B, T, D)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPT(nn.Module):
    """nanoGPT's ``GPT``: token + learned position tables, blocks, final LayerNorm, tied head."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int, ctx: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(NanoGPTBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, bias=False)
        for name, p in self.named_parameters():  # GPT-2's initialization
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, D)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # (B, T, V)


def build_attnkit(s: dict, positions: str) -> nn.Module:
    config = DecoderLMConfig(
        vocab_size=s["vocab"], d_model=s["d"], num_heads=s["heads"], num_layers=s["layers"],
        ffn_hidden=4 * s["d"], dropout=0.0, context_length=s["ctx"], positions=positions,
        bias=False,
    )  # fmt: skip
    return config.build()


def build_xtransformers(s: dict, positions: str, flash: bool) -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(
        num_tokens=s["vocab"], max_seq_len=s["ctx"], tie_embedding=True,
        use_abs_pos_emb=positions == "learned",
        attn_layers=Decoder(
            dim=s["d"], depth=s["layers"], heads=s["heads"], attn_dim_head=s["d"] // s["heads"],
            ff_mult=4, ff_no_bias=True, rotary_pos_emb=positions == "rope", attn_flash=flash,
        ),
    )  # fmt: skip


def contenders(s: dict, positions: str) -> dict[str, nn.Module]:
    out = {}
    torch.manual_seed(0)
    out["attnkit"] = build_attnkit(s, positions)
    if positions == "learned":
        torch.manual_seed(0)
        out["nanoGPT"] = NanoGPT(s["vocab"], s["d"], s["heads"], s["layers"], s["ctx"])
    try:
        for flash in (False, True):
            torch.manual_seed(0)
            out[f"x-transformers{' (SDPA)' if flash else ''}"] = build_xtransformers(
                s, positions, flash
            )
    except ImportError:
        print(f"skipped x-transformers: not installed; {INSTALL}")
    return out


def train_step(model: nn.Module, bf16: bool):
    """One step on a batch ``(ids (B, T + 1))``: forward, loss, backward, clip, AdamW."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def step(batch: torch.Tensor) -> torch.Tensor:
        x, y = batch[:, :-1], batch[:, 1:]  # (B, T) each
        with autocast:
            logits = model(x)  # (B, T, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        return loss.detach()

    model.train()
    return step


def measure(s: dict, positions: str, bf16: bool, rounds: int, steps: int) -> list[list[str]]:
    models = contenders(s, positions)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, s["vocab"], (s["batch"], s["ctx"] + 1), generator=gen)
               for _ in range(steps)]  # fmt: skip
    fns = {name: train_step(m, bf16) for name, m in models.items()}
    for fn in fns.values():  # warm-up: allocator, kernels, optimizer state
        for b in batches[:3]:
            fn(b)
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for b in batches:
                loss = fn(b)
            float(loss)
            seconds[name].append(time.perf_counter() - t0)
    tokens = steps * s["batch"] * s["ctx"]
    rate = {n: [tokens / t for t in ts] for n, ts in seconds.items()}
    ours = statistics.median(rate["attnkit"])
    rows = []
    for name, rs in rate.items():
        params = sum(p.numel() for p in models[name].parameters())
        med = statistics.median(rs)
        ratio = "1.00x" if name == "attnkit" else f"{ours / med:.2f}x"
        rows.append([positions, "bf16" if bf16 else "fp32", name, f"{params:,}",
                     f"{med:,.0f} [{min(rs):,.0f}-{max(rs):,.0f}]", ratio])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="recipe")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "both"], default="both")
    parser.add_argument("--positions", choices=["learned", "rope", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per contender per round")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    s = SHAPES[args.shape]
    print(f"shape {args.shape}: {s}; {args.rounds} rounds x {args.steps} steps, "
          f"{args.threads} threads, torch {torch.__version__}")  # fmt: skip
    rows = []
    for positions in ["learned", "rope"] if args.positions == "both" else [args.positions]:
        for bf16 in {"fp32": [False], "bf16": [True], "both": [False, True]}[args.dtype]:
            rows += measure(s, positions, bf16, args.rounds, args.steps)
    print_table(["positions", "dtype", "model", "parameters", "tokens/s", "attnkit / it"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
