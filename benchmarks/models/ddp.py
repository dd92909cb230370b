"""Speed-up of multi-process training (DDP on Gloo) over one process, same global batch.

Runs ``attnkit translate train`` with ``--nproc 1`` and ``--nproc 2`` (1 thread per
process), the same data, model, global ``--batch-tokens`` and epochs, and reports the
training tokens/s of the whole job and the wall time of each run.

    python -m benchmarks.models.ddp [--nproc 2] [--epochs 5] [--preset small]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import print_table


def run(nproc: int, args: argparse.Namespace) -> tuple[float, list[float], float]:
    out = Path(tempfile.mkdtemp()) / f"ddp-{nproc}"
    cmd = [sys.executable, "-m", "attnkit", "translate", "train", "--arch", "transformer"]
    cmd += ["--preset", args.preset, "--num-pairs", str(args.num_pairs), "--epochs"]
    cmd += [str(args.epochs), "--batch-tokens", str(args.batch_tokens), "--threads", "1"]
    cmd += ["--no-progress", "--bleu-sentences", "0", "--out", str(out), "--nproc", str(nproc)]
    start = time.perf_counter()
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    rates = [float(x.replace(",", "")) for x in re.findall(r"([\d,]+) tokens/s", text)]
    timed = rates[1:] or rates  # skip the first epoch (warm-up) when there are more
    return statistics.median(timed), rates, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--num-pairs", type=int, default=6000)
    ap.add_argument("--batch-tokens", type=int, default=4000, help="global, both runs")
    args = ap.parse_args()
    one, one_rates, one_wall = run(1, args)
    many, many_rates, many_wall = run(args.nproc, args)
    print(
        f"Transformer preset {args.preset!r}, {args.num_pairs} generated pairs, global batch "
        f"{args.batch_tokens} tokens, {args.epochs} epochs, 1 thread per process\n"
    )
    print_table(
        [
            "processes",
            "train tokens/s (job, median)",
            "per epoch",
            "wall s (incl. start-up)",
            "speed-up",
        ],
        [
            [1, f"{one:,.0f}", _rates(one_rates), f"{one_wall:.1f}", "1.00x"],
            [
                args.nproc,
                f"{many:,.0f}",
                _rates(many_rates),
                f"{many_wall:.1f}",
                f"{many / one:.2f}x",
            ],
        ],
    )
    print("\n(median over the epochs after the first, which includes warm-up)")


def _rates(rates: list[float]) -> str:
    return " ".join(f"{r / 1000:.1f}k" for r in rates)


if __name__ == "__main__":
    main()
