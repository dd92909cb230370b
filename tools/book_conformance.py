"""Run the book's published code, section by section, on attnkit's d2l layers.

    python tools/book_conformance.py [--edition 0.17|1.0] [--section S] [--full]

Each section of ``../shared/reference/book-cells/en-0.17.6.json`` (d2l 0.17: ``from attnkit
import d2l``) and ``en-1.0.3.json`` (d2l 1.0: ``from attnkit.d2l import v1 as d2l``) runs in
a fresh interpreter, as a reader runs it: the working folder's ``../data`` holds the book's
files (``fra-eng/fra.txt``, ``timemachine.txt`` from ``../shared/data``, and small generated
Fashion-MNIST IDX files for 11.8), the network is blocked, and only the line
``from d2l import torch as d2l`` is replaced. Cells run in order in one namespace; a cell
whose last statement is an expression shows its value (``repr``), as a notebook does.

Without ``--full`` the epoch counts (``num_epochs = ...`` assignments, ``max_epochs=...``
arguments) are capped at ``--epochs`` (1), so both editions fit in CI; ``--full`` runs the
book's own counts. One line per section: ``ok`` with the time, or the cell and error where
it stopped. ``--json FILE`` writes every cell's printed output (what the oracle script
compares). Exit status 1 when a section stops.

``--d2l-import LINE`` replaces the import with another line (the oracle script,
``benchmarks/book/oracle.py``, runs the same cells on the published d2l package).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
BOOK_CELLS = SHARED / "reference" / "book-cells"
EDITIONS = {
    "0.17": ("en-0.17.6.json", "from attnkit import d2l"),
    "1.0": ("en-1.0.3.json", "from attnkit.d2l import v1 as d2l"),
}
BOOK_IMPORT = "from d2l import torch as d2l"


@dataclass
class SectionResult:
    """What one section did: ``ok`` when every cell ran; else the failing cell and error."""

    edition: str
    section: str
    cells: int
    ok: bool
    seconds: float
    failed_cell: int | None = None
    error: str = ""
    outputs: list[dict] = field(default_factory=list)

    def line(self) -> str:
        name = f"{self.edition:>4} {self.section}"
        if self.ok:
            return f"ok    {name:<75} {self.cells:>3} cells  {self.seconds:7.1f} s"
        return f"FAIL  {name:<75} cell {self.failed_cell}/{self.cells}: {self.error}"


def load_sections(edition: str, cells_dir: Path = BOOK_CELLS) -> dict[str, list[str]]:
    """``{section: [cell source, ...]}`` of one edition, sections with code only, in order."""
    if edition not in EDITIONS:
        raise ValueError(f"edition must be one of {sorted(EDITIONS)}, got {edition!r}")
    path = cells_dir / EDITIONS[edition][0]
    if not path.is_file():
        raise FileNotFoundError(f"the book's cells are not at {path} (../shared is absent)")
    sections = json.loads(path.read_text(encoding="utf-8"))
    return {name: cells for name, cells in sections.items() if cells}


def write_fashion_mnist(raw_dir: Path, num_train: int = 256, num_test: int = 64) -> None:
    """Small Fashion-MNIST files in the standard IDX format (gzipped), deterministic.

    Images are 28x28 uint8; each class has its own bright block so a model can learn it.
    """
    raw_dir.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", num_train), ("t10k", num_test)):
        labels = bytes((7 * i + 3) % 10 for i in range(count))
        pixels = bytearray()
        for i, label in enumerate(labels):
            image = bytearray((31 * i + 17 * p) % 64 for p in range(28 * 28))
            row0 = 2 + 2 * label
            for r in range(row0, row0 + 6):
                for c in range(4, 24):
                    image[r * 28 + c] = 200 + (i + c) % 56
            pixels += image
        images = struct.pack(">IIII", 2051, count, 28, 28) + bytes(pixels)
        label_file = struct.pack(">II", 2049, count) + labels
        (raw_dir / f"{prefix}-images-idx3-ubyte.gz").write_bytes(gzip.compress(images, mtime=0))
        (raw_dir / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(label_file, mtime=0))


def prepare_data(data_dir: Path, shared_data: Path = SHARED / "data") -> None:
    """The book's ``../data``: links to the real files, generated Fashion-MNIST."""
    data_dir.mkdir(parents=True, exist_ok=True)
    links = {
        "fra-eng": shared_data / "fra-eng",
        "timemachine.txt": shared_data / "timemachine" / "timemachine.txt",
    }
    for name, target in links.items():
        link = data_dir / name
        if not link.exists() and target.exists():
            link.symlink_to(target)
    if not (data_dir / "FashionMNIST" / "raw").exists():
        write_fashion_mnist(data_dir / "FashionMNIST" / "raw")


def run_section(
    edition: str,
    section: str,
    cells: list[str],
    workdir: Path,
    *,
    epochs: int | None = 1,
    d2l_import: str | None = None,
    threads: int = 1,
    seed: int = 0,
    timeout: float = 900.0,
    python: str = sys.executable,
    extra_env: dict[str, str] | None = None,
) -> SectionResult:
    """Run one section's cells in a fresh interpreter inside ``workdir/run`` (``../data``)."""
    import_line = d2l_import or EDITIONS[edition][1]
    prepare_data(workdir / "data")
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    spec = {
        "cells": cells,
        "book_import": BOOK_IMPORT,
        "import_line": import_line,
        "epochs": epochs,
        "threads": threads,
        "seed": seed,
    }
    spec_path = run_dir / "spec.json"
    out_path = run_dir / "result.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = {
        **os.environ,
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": str(threads),
        "PYTHONHASHSEED": "0",
        "HF_HUB_OFFLINE": "1",
        "ATTNKIT_CACHE": str(workdir / "cache"),
        **(extra_env or {}),
    }
    for name in ("ATTNKIT_FRA", "ATTNKIT_TIMEMACHINE"):
        env.pop(name, None)
    driver = Path(__file__).resolve().parent / "book_cell_driver.py"
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, str(driver), str(spec_path), str(out_path)],
            cwd=run_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return SectionResult(edition, section, len(cells), False, timeout, None, "timed out")
    seconds = time.perf_counter() - start
    if not out_path.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return SectionResult(
            edition, section, len(cells), False, seconds, None, "driver died: " + " | ".join(tail)
        )
    result = json.loads(out_path.read_text(encoding="utf-8"))
    outputs = result["outputs"]
    failed = next((o for o in outputs if o["status"] == "error"), None)
    if failed is None:
        return SectionResult(edition, section, len(cells), True, seconds, outputs=outputs)
    return SectionResult(
        edition,
        section,
        len(cells),
        False,
        seconds,
        failed["cell"],
        failed["error"],
        outputs=outputs,
    )


def run_all(
    editions: list[str],
    *,
    sections: list[str] | None = None,
    epochs: int | None = 1,
    jobs: int = 2,
    workdir: Path | None = None,
    d2l_import: str | None = None,
    report=print,
    **kwargs,
) -> list[SectionResult]:
    """Run the chosen sections of the chosen editions, ``jobs`` at a time, in book order."""
    work = Path(workdir or tempfile.mkdtemp(prefix="book-conformance-"))
    todo = []
    for edition in editions:
        for name, cells in load_sections(edition).items():
            if sections and not any(s == name or name.endswith("/" + s) for s in sections):
                continue
            todo.append((edition, name, cells))
    if sections and not todo:
        raise ValueError(f"no section matches {sections}")
    prepare_data(work / "data")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [
            pool.submit(
                run_section,
                edition,
                name,
                cells,
                work,
                epochs=epochs,
                d2l_import=d2l_import,
                **kwargs,
            )
            for edition, name, cells in todo
        ]
        results = []
        for future in futures:
            result = future.result()
            report(result.line())
            results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", choices=[*EDITIONS, "both"], default="both")
    parser.add_argument("--section", action="append", help="section name or its last part")
    parser.add_argument("--full", action="store_true", help="the book's own epoch counts")
    parser.add_argument("--epochs", type=int, default=1, help="epoch cap without --full")
    parser.add_argument("--jobs", type=int, default=2, help="sections run at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per section")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per section")
    parser.add_argument("--d2l-import", help="the line that replaces the book's import")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run cells in")
    parser.add_argument("--workdir", type=Path, help="folder for ../data and the runs")
    parser.add_argument("--json", type=Path, help="write every cell's output here")
    args = parser.parse_args(argv)
    if not BOOK_CELLS.is_dir():
        print(f"no book cells at {BOOK_CELLS}: ../shared is absent", file=sys.stderr)
        return 2
    editions = list(EDITIONS) if args.edition == "both" else [args.edition]
    start = time.perf_counter()
    results = run_all(
        editions,
        sections=args.section,
        epochs=None if args.full else args.epochs,
        jobs=args.jobs,
        workdir=args.workdir,
        d2l_import=args.d2l_import,
        threads=args.threads,
        seed=args.seed,
        timeout=args.timeout,
        python=args.python,
    )
    passed = sum(r.ok for r in results)
    print(
        f"{passed} of {len(results)} sections ran to the end in {time.perf_counter() - start:.0f} s"
    )
    if args.json:
        args.json.write_text(
            json.dumps([r.__dict__ for r in results], indent=1, ensure_ascii=False),
            encoding="utf-8",
        )
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
