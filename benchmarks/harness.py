"""The one harness of the benchmark scripts: interleaved rounds, medians and ranges, ratio
tables side by side, the matrix-multiply peak, and the one checkpoint loader.

Every script runs from the repository root as a module, ``python -m benchmarks.GROUP.NAME``
(``--help`` lists its flags), and imports what it shares from here.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def set_threads(threads: int) -> None:
    """Run the timed work on ``threads`` CPU threads (intra-op)."""
    import torch

    torch.set_num_threads(threads)


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


class ContenderProcesses:
    """Each contender in its own process (spawned): no two libraries share a thread pool or
    an allocator (CTranslate2 brings its own libgomp; in one process with it, attnkit ran
    25% slower once it had run). ``loader`` ("module:function") is called in the worker as
    ``loader(name, *args)`` and returns ``run(request) -> output``; :meth:`timed` sends one
    request to one process at a time (interleaved rounds), timed inside the worker."""

    def __init__(self, names: list[str], loader: str, args: tuple = ()) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conns, self.procs = {}, []
        for name in names:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_contender_worker, args=(child, loader, name, args))
            proc.start()
            self.conns[name], self.procs = parent, [*self.procs, proc]
        for name, conn in self.conns.items():
            if conn.recv() != "ready":
                raise RuntimeError(f"contender {name} did not load")

    def timed(self, request, rounds: int) -> tuple[dict[str, list[float]], dict[str, object]]:
        """A warm-up call each (its output returned), then ``rounds`` interleaved rounds:
        (seconds per round, outputs) per contender."""

        def ask(name):
            self.conns[name].send(request)
            return self.conns[name].recv()

        outputs = {name: ask(name)[1] for name in self.conns}
        times: dict[str, list[float]] = {name: [] for name in self.conns}
        for _ in range(rounds):
            for name in self.conns:
                times[name].append(ask(name)[0])
        return times, outputs

    def close(self) -> None:
        for conn in self.conns.values():
            conn.send(None)
        for proc in self.procs:
            proc.join()


def _contender_worker(conn, loader: str, name: str, args: tuple) -> None:
    import importlib

    module, function = loader.split(":")
    run = getattr(importlib.import_module(module), function)(name, *args)
    conn.send("ready")
    while (request := conn.recv()) is not None:
        t0 = time.perf_counter()
        output = run(request)
        conn.send((time.perf_counter() - t0, output))


def call_us(fn: Callable[[], object], *, calls: int | None = None, budget_s: float = 0.1,
            warmup: int = 1) -> float:  # fmt: skip
    """Microseconds per call of ``fn()``: after ``warmup`` calls, ``calls`` timed calls, or
    as many as fit ``budget_s`` (3 to 300) when ``calls`` is None."""
    for _ in range(warmup):
        fn()
    if calls is None:
        t0 = time.perf_counter()
        fn()
        calls = max(3, min(300, int(budget_s / max(time.perf_counter() - t0, 1e-7))))
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def spread(values: list[float], fmt: str = "{:,.1f}") -> str:
    """``median [min-max]`` of ``values`` (just the value when there is one)."""
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def round_ratios(times: dict[str, list[float]], reference: str) -> dict[str, list[float]]:
    """Per round, the reference's time over each contender's (> 1: faster than the reference)."""
    ref = times[reference]
    return {name: [r / t for r, t in zip(ref, ts)] for name, ts in times.items()}


def ratio_table(
    times: dict[str, list[float]],
    reference: str,
    *,
    unit: str = "ms",
    shown: Callable[[float], float] = lambda seconds: seconds * 1e3,
    fmt: str = "{:,.1f}",
    extra: dict[str, list[object]] | None = None,
    extra_headers: list[str] | None = None,
) -> None:
    """Print the contenders side by side: ``shown(seconds)`` of every round (milliseconds by
    default; tokens/s with ``shown=lambda s: tokens / s``), median [min-max], and the
    reference's speed over each contender's, per round (``REFERENCE / it``: > 1, the
    reference is faster). ``extra`` adds cells per contender under ``extra_headers``."""
    ratios = round_ratios(times, reference)  # reference time / its: its speed over the ref's
    rows = []
    for name, ts in times.items():
        over = "1.00x" if name == reference else spread([1 / r for r in ratios[name]], "{:.2f}x")
        cells = (extra or {}).get(name, [])
        rows.append([name, spread([shown(t) for t in ts], fmt), over, *cells])
    print_table(["contender", unit, f"{reference} / it", *(extra_headers or [])], rows)


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    """A GitHub-markdown table (so it can be pasted into the docs as is)."""
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print(line(r))


def matmul_peak(dtype, n: int = 2048, reps: int = 3) -> float:
    """The best GFLOP/s of ``reps`` (n, n) @ (n, n) products in ``dtype`` on this machine."""
    import torch

    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    torch.matmul(a, b)
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = max(best, 2 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def load_translator_checkpoint(directory, *, with_data: bool = True, data_file=None):
    """The one checkpoint loader: ``(model, config, data)`` of a translator's checkpoint
    folder, ``data`` its ``TranslationData`` with the splits as ``translate eval`` builds them
    (its SentencePiece models from the folder; ``data_file`` in place of the recorded file), or
    None without ``with_data``."""
    from attnkit.data.subword import SubwordTokenizer
    from attnkit.data.translation import load_translation_data
    from attnkit.inference.loading import load_model

    model, cfg = load_model(directory)
    if not with_data:
        return model, cfg, None
    data_args = dict(cfg.get("data_args") or {})
    if data_file:
        data_args["data"] = str(data_file)
    record = (cfg.get("data") or {}).get("tokenizer")
    if record is not None:
        data_args["subword"] = SubwordTokenizer.load(directory, record)
    return model, cfg, load_translation_data(**data_args)


def attnkit_lm_train(flags: list[str], out, *, data: str, budget: float, threads: int) -> dict:
    """Run ``attnkit lm train FLAGS --data DATA --time-budget BUDGET --threads THREADS --seed 0
    --out OUT --overwrite`` in a fresh interpreter (the command printed first, its last line
    after); return the checkpoint's ``config.json`` (its "history": per-epoch training
    seconds and validation perplexity)."""
    import json
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "attnkit", "lm", "train", *flags, "--data", data,
           "--time-budget", str(budget), "--threads", str(threads), "--seed", "0",
           "--out", str(out), "--overwrite"]  # fmt: skip
    print("$ attnkit " + " ".join(cmd[3:]), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        raise RuntimeError(f"attnkit lm train {' '.join(flags)} failed:\n{proc.stderr[-2000:]}")
    print("  " + proc.stdout.strip().splitlines()[-1], flush=True)
    return json.loads((Path(out) / "config.json").read_text())
