"""Cross-entropy with label smoothing, forward + backward, bf16 logits on the CPU:
``F.cross_entropy`` under autocast (float32 copies of all N x V logits) against
``attnkit.training.chunked_cross_entropy`` (row chunks, one float32 chunk at a time).

    python -m benchmarks.kernels.cross_entropy [--rows 1700] [--vocab 4000] [--rounds 5] [--threads 2]

Interleaved rounds of 10 calls each; median [min-max] ms per call and the ratio per
round. The default shapes are the base recipe's (a batch of ~1,700 target positions,
4,000 pieces); label smoothing 0.1 as the recipe.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from attnkit.training.chunked_cross_entropy import chunked_cross_entropy
from benchmarks.harness import print_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1700)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoothing", type=float, default=0.1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = 4 * torch.randn(args.rows, args.vocab)
    target = torch.randint(0, args.vocab, (args.rows,))
    weight = torch.rand(args.rows)

    def autocast_f():
        x = base.to(torch.bfloat16).requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(x, target, reduction="none", label_smoothing=args.smoothing)
        (loss * weight).sum().backward()
        return loss.detach()

    def chunked():
        x = base.to(torch.bfloat16).requires_grad_()
        loss = chunked_cross_entropy(x, target, args.smoothing)
        (loss * weight).sum().backward()
        return loss.detach()

    gap = float((autocast_f() - chunked()).abs().max())
    systems = {"F.cross_entropy (autocast)": autocast_f, "chunked_cross_entropy": chunked}
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name, fn in systems.items():
            fn()
            t0 = time.perf_counter()
            for _ in range(10):
                fn()
            times[name].append((time.perf_counter() - t0) / 10 * 1e3)
    ref = times["F.cross_entropy (autocast)"]
    rows = []
    for name, ts in times.items():
        ratios = [r / t for r, t in zip(ref, ts, strict=True)]
        rows.append([name, f"{statistics.median(ts):.1f} [{min(ts):.1f}-{max(ts):.1f}]",
                     f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}x-{max(ratios):.2f}x]"])  # fmt: skip
    print(f"{args.rows} x {args.vocab} bf16 logits, label smoothing {args.smoothing}, "
          f"{args.threads} threads, {args.rounds} interleaved rounds of 10 calls; "
          f"largest loss difference {gap:.1e}")  # fmt: skip
    print_table(["cross-entropy, forward + backward", "ms per call", "speed-up"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
