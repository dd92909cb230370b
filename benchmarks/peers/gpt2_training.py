"""One bf16 training step at GPT-2 small's size on identical weights: attnkit's ``DecoderLM``
against Hugging Face's ``GPT2LMHeadModel`` (eager and SDPA attention), with FLOP/s against
this machine's bf16 matrix-multiply peak, measured in the same run.

    python -m benchmarks.peers.gpt2_training [--rounds 3] [--steps 1] [--batch 4] [--seq 128]
        [--threads 2] [--peak-size 1024] [--profile] [--quick]

One random-weight GPT-2 small (transformers' initialization, seed 0; 124 M parameters) is
saved as a Hugging Face folder; attnkit reads it with ``attnkit.convert.gpt2.gpt2_model``,
HF loads it twice (``attn_implementation`` eager and sdpa). Every contender runs the same
step on the same batches of random ids: forward under CPU autocast (bfloat16), the float32
cross-entropy of the next ids, backward, clipping at 1, foreach AdamW, dropout 0 (so the
first losses compare); parameters, gradients and optimizer state float32 (as attnkit's
engine keeps them). Interleaved rounds (harness)
of ``--steps`` steps; tokens/s median [min-max], attnkit's speed over each, and GFLOP/s:
6 N + 12 L T D FLOPs per token (N: the parameters the matrix products use, the tied output
layer included, the position table not; PaLM's count of attention), against the best bf16
``torch.matmul`` of two ``--peak-size`` squares measured before and after every round.
``--profile`` then prints the top operators of one attnkit step (torch.profiler).
Goals (issue 35): attnkit >= 1.2x HF, >= 50% of the bf16 peak.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.harness import interleaved_times, matmul_peak, ratio_table, set_threads
from benchmarks.peers.real_sizes import GPT2_SMALL, hf_gpt2

NO_DROPOUT = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # the same step everywhere


def train_step(model, logits_of):
    """forward (bf16 autocast), float32 cross-entropy, backward, clip, AdamW: one step."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    model.train()

    def step(batch: torch.Tensor) -> torch.Tensor:
        x, y = batch[:, :-1], batch[:, 1:]  # (B, T) each
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = logits_of(x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        return loss.detach()

    return step


def flops_per_token(T: int) -> float:
    D, L, V = GPT2_SMALL["n_embd"], GPT2_SMALL["n_layer"], GPT2_SMALL["vocab_size"]
    n = L * 12 * D * D + V * D  # the blocks' products (4 D^2 + 8 D^2) and the output layer
    return 6 * n + 12 * L * T * D


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=1, help="steps per contender per round")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128, help="tokens per row")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--peak-size", type=int, default=1024)
    p.add_argument("--profile", action="store_true", help="top operators of one attnkit step")
    p.add_argument("--quick", action="store_true", help="1 round, batch 1 x 16, peak size 256")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.batch, args.seq, args.peak_size = 1, 1, 16, 256
    set_threads(args.threads)
    import transformers
    from transformers import GPT2LMHeadModel

    from attnkit.convert.gpt2 import gpt2_model

    with tempfile.TemporaryDirectory(prefix="gpt2-size-") as tmp:
        hf_eager = hf_gpt2(Path(tmp) / "hf", **NO_DROPOUT)
        ours = gpt2_model(Path(tmp) / "hf")
        hf_sdpa = GPT2LMHeadModel.from_pretrained(Path(tmp) / "hf", attn_implementation="sdpa")
    for m in (hf_eager, hf_sdpa):
        m.config.use_cache = False
    steps = {
        "attnkit": train_step(ours, ours),
        "HF eager": train_step(hf_eager, lambda x: hf_eager(x, use_cache=False).logits),
        "HF sdpa": train_step(hf_sdpa, lambda x: hf_sdpa(x, use_cache=False).logits),
    }
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, GPT2_SMALL["vocab_size"], (args.batch, args.seq + 1), generator=gen)
               for _ in range(args.steps)]  # fmt: skip
    print(f"GPT-2 small shapes, random weights; torch {torch.__version__}, transformers "
          f"{transformers.__version__}, {args.threads} threads; batch {args.batch} x {args.seq} "
          f"tokens, {args.rounds} interleaved rounds of {args.steps} steps", flush=True)  # fmt: skip
    losses = {name: float(step(batches[0])) for name, step in steps.items()}  # warm-up
    print("first-step losses: " + ", ".join(f"{n} {v:.4f}" for n, v in losses.items()))
    peaks = [matmul_peak(torch.bfloat16, args.peak_size)]

    def all_steps(step):
        def run() -> float:
            for b in batches:
                loss = step(b)
            return float(loss)

        return run

    fns = {name: all_steps(step) for name, step in steps.items()}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(args.rounds):  # one interleaved round at a time, the peak after each
        for name, ts in interleaved_times(fns, repeats=1, warmup=0).items():
            times[name] += ts
        peaks.append(matmul_peak(torch.bfloat16, args.peak_size))
        print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.1f} s" for n, t in times.items()),
              flush=True)  # fmt: skip
    peak = max(peaks)
    tokens = args.steps * args.batch * args.seq
    per_token = flops_per_token(args.seq)
    extra = {}
    for name, ts in times.items():
        gflops = statistics.median(tokens / t for t in ts) * per_token / 1e9
        extra[name] = [f"{gflops:.2f}", f"{gflops / peak:.0%}"]
    print(f"\nbf16 matmul peak: {peak:.2f} GFLOP/s ({args.peak_size}^2, best of {3 * len(peaks)});"
          f" {per_token / 1e6:,.0f} MFLOP per token")  # fmt: skip
    ratio_table(times, "attnkit", unit="tokens/s", shown=lambda t: tokens / t, extra=extra,
                extra_headers=["GFLOP/s", "% of bf16 peak"])  # fmt: skip
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            steps["attnkit"](batches[0])
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    return 0


if __name__ == "__main__":
    sys.exit(main())
