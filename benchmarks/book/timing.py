"""The book's training sections timed as a reader runs them: attnkit against the book's library.

    python -m benchmarks.book.timing --book-017 PATH --book-10 PATH [--torchvision PATH]
        [--edition 0.17|1.0|both] [--section S ...] [--rounds 3] [--epochs N]
        [--sequential] [--out docs/book-timing.md]

Every section whose cells train (``train_ch8``, ``train_seq2seq``, ``trainer.fit``, the
book's own loops) runs with the book's own epoch counts (``--epochs N`` caps them for a
quick look) through ``tools/book_conformance.py``, once on attnkit's layer and once on the
published d2l package (set up as ``benchmarks/book/oracle.py`` does: the same stubs and
local data), the two side by side (one core each, one torch thread each), ``--rounds``
times; ``--sequential`` runs them one after the other instead, each with the machine to
itself, the order swapped every round (half as fast, free of what one run does to the
other: shared caches and memory bandwidth). The time of a section is the sum of its cells' times (what a reader waits for, the
interpreter start excluded). The table: median [min-max] seconds of each, and the ratio
book / attnkit of the medians (> 1: attnkit is faster).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import REPO, spread

TRAINS = re.compile(r"train_ch8\(|train_seq2seq\(|trainer\.fit\(|^train\(net|for epoch in range")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def training_sections(runner, edition: str) -> dict[str, list[str]]:
    return {
        name: cells
        for name, cells in runner.load_sections(edition).items()
        if any(TRAINS.search(line) for cell in cells for line in cell.splitlines())
    }


def section_seconds(result) -> float:
    if not result.ok:
        raise RuntimeError(result.line())
    return sum(o["seconds"] for o in result.outputs)


def main(argv: list[str] | None = None) -> int:
    oracle = _load("_book_oracle", REPO / "benchmarks" / "book" / "oracle.py")
    runner = oracle._load_runner()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", choices=["0.17", "1.0", "both"], default="both")
    parser.add_argument("--section", action="append", help="section name or its last part")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=None, help="cap (default: the book's)")
    parser.add_argument("--book-017", type=Path, default=os.environ.get("D2L0176"))
    parser.add_argument("--book-10", type=Path, default=os.environ.get("D2L103"))
    parser.add_argument(
        "--torchvision", type=Path, default=os.environ.get("BOOK_ORACLE_TORCHVISION")
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "book-timing.md")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--sequential", action="store_true",
                        help="one run at a time, the order swapped every round")  # fmt: skip
    parser.add_argument("--pin", action="store_true",
                        help="side by side, each run on its own core, the cores swapped every round")  # fmt: skip
    args = parser.parse_args(argv)
    if args.pin and args.sequential:
        parser.error("--pin is for side-by-side runs; --sequential runs one at a time")
    editions = ["0.17", "1.0"] if args.edition == "both" else [args.edition]
    books = {"0.17": args.book_017, "1.0": args.book_10}
    work = args.workdir or Path(tempfile.mkdtemp(prefix="book-timing-"))
    sites = [str(oracle._site_of(args.torchvision, work / "site-tv"))] if args.torchvision else []
    missing = oracle._missing_modules(sys.executable, sites, oracle.BOOK_TOP_IMPORTS)
    oracle._write_shims(work / "shims", missing)
    pythonpath = os.pathsep.join([str(work / "shims"), *sites])
    plans = {}  # edition -> (book root, book workdir, sections)
    for edition in editions:
        root = oracle._book_root(books[edition], work / f"d2l-{edition}")
        book_work = work / f"book-{edition}"
        runner.prepare_data(book_work / "data")
        oracle._gunzip_fashion(book_work / "data")
        sections = training_sections(runner, edition)
        if args.section:
            sections = {
                n: c for n, c in sections.items() if any(n.endswith("/" + s) for s in args.section)
            }
        plans[edition] = (root, book_work, sections)
    # (edition, section) -> (attnkit seconds, book seconds), one entry per round
    times = {(e, n): ([], []) for e, (_, _, sections) in plans.items() for n in sections}
    shown = argv if argv is not None else sys.argv[1:]
    for round_ in range(args.rounds):  # whole rounds over both editions: a cut run is even
        for edition, (root, book_work, sections) in plans.items():
            for name, cells in sections.items():
                runs = {
                    "attnkit": lambda n=name, c=cells, e=edition: runner.run_section(
                        e, n, c, work / f"attnkit-{e}", epochs=args.epochs, timeout=3600),
                    "book": lambda n=name, c=cells, e=edition, r=root, w=book_work: (
                        runner.run_section(
                            e, n, c, w, epochs=args.epochs, d2l_import=oracle.BOOK_IMPORT_LINE,
                            timeout=3600,
                            extra_env={"PYTHONPATH": pythonpath, "BOOK_ORACLE_D2L": str(r)},
                        )),
                }  # fmt: skip
                if args.sequential:  # one at a time; who goes first alternates
                    order = ["attnkit", "book"][:: 1 if round_ % 2 == 0 else -1]
                    done = {who: runs[who]() for who in order}
                else:
                    cores = sorted(os.sched_getaffinity(0))[:2][:: 1 if round_ % 2 == 0 else -1]
                    if args.pin and len(cores) == 2:  # a child inherits its thread's core
                        runs = {
                            who: lambda fn=fn, core=core: _on_core(core, fn)
                            for (who, fn), core in zip(runs.items(), cores)
                        }
                    with concurrent.futures.ThreadPoolExecutor(2) as pool:
                        futures = {who: pool.submit(fn) for who, fn in runs.items()}
                        done = {who: f.result() for who, f in futures.items()}
                a, b = section_seconds(done["attnkit"]), section_seconds(done["book"])
                times[edition, name][0].append(a)
                times[edition, name][1].append(b)
                print(f"round {round_ + 1} {edition} {name}: attnkit {a:.1f} s, book {b:.1f} s",
                      flush=True)  # fmt: skip
                # the report so far after every pair: a run stopped midway keeps its rounds
                rows = [(e, n.split("/")[-1], o, b) for (e, n), (o, b) in times.items() if o]
                write_report(args, rows, shown)
    return 0


def _on_core(core: int, fn):
    """Run ``fn`` with this thread (and the interpreter it starts) pinned to ``core``."""
    os.sched_setaffinity(0, {core})  # 0 = the calling thread on Linux
    return fn()


def _rounds(rows) -> str:
    counts = sorted({len(ours) for _, _, ours, _ in rows})
    return "-".join(map(str, counts[:: max(1, len(counts) - 1)])) if counts else "0"


def write_report(args, rows, argv) -> None:
    epochs = (
        "the book's own epoch counts" if args.epochs is None else f"epochs capped at {args.epochs}"
    )
    lines = [
        "# The book's training sections: attnkit against the book's library",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on this project's 2-core CPU machine, "
        f"{epochs}, {_rounds(rows)} round(s), the two runs of a section "
        + (
            "one after the other, the order swapped every round"
            if args.sequential
            else "side by side, each on its own core, the cores swapped every round"
            if args.pin
            else "side by side"
        )
        + " (one torch thread each). Seconds are the sum of the section's cell times (what a reader waits "
        "for, interpreter start excluded); median [min-max]; ratio = book / attnkit medians.",
        "",
        "```",
        "python -m benchmarks.book.timing " + " ".join(argv),
        "```",
        "",
        "| edition | section | attnkit s | book s | ratio |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for edition, name, ours, book in rows:
        ratio = statistics.median(book) / statistics.median(ours)
        lines.append(f"| {edition} | {name} | {spread(ours)} | {spread(book)} | {ratio:.2f}x |")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
