"""Timing helpers shared by the benchmark scripts: interleaved repeats, median times."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_times(
    fns: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1
) -> dict[str, list[float]]:
    """Wall times (s) of each function over ``repeats`` rounds, timed in turn (A B C A B C ...).

    Interleaving spreads machine noise evenly over the contenders, so the ratios
    between them are fair even when absolute times drift.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def interleaved_median(
    fns: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1
) -> dict[str, float]:
    """Median wall time (s) of each function, timed in turn (see ``interleaved_times``)."""
    times = interleaved_times(fns, repeats, warmup)
    return {name: statistics.median(ts) for name, ts in times.items()}


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    """A GitHub-markdown table (so it can be pasted into the README as is)."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print(line(r))


def attnkit_lm_train(flags: list[str], out, *, data: str, budget: float, threads: int) -> dict:
    """Run ``attnkit lm train FLAGS --data DATA --time-budget BUDGET --threads THREADS --seed 0
    --out OUT --overwrite`` in a fresh interpreter (the command printed first, its last line
    after); return the checkpoint's ``config.json`` (its "history": per-epoch training
    seconds and validation perplexity)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    cmd = [sys.executable, "-m", "attnkit", "lm", "train", *flags, "--data", data,
           "--time-budget", str(budget), "--threads", str(threads), "--seed", "0",
           "--out", str(out), "--overwrite"]  # fmt: skip
    print("$ attnkit " + " ".join(cmd[3:]), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        raise RuntimeError(f"attnkit lm train {' '.join(flags)} failed:\n{proc.stderr[-2000:]}")
    print("  " + proc.stdout.strip().splitlines()[-1], flush=True)
    return json.loads((Path(out) / "config.json").read_text())
