"""The book's own code cells, run on attnkit and on the published d2l package, compared.

    python -m benchmarks.book.oracle --book-017 PATH --book-10 PATH [--torchvision PATH]
        [--edition 0.17|1.0|both] [--section S ...] [--epochs 1] [--jobs 2]
        [--out docs/book-oracle.md] [--json FILE] [--workdir DIR]

For each edition, every section of ``../shared/reference/book-cells`` runs twice through
``tools/book_conformance.py`` (fresh interpreter per section, ``../data`` prepared, network
blocked, seed 0 at the top, epochs capped at ``--epochs``): once with attnkit's layers
(``from attnkit import d2l`` / ``from attnkit.d2l import v1 as d2l``) and once with the
published package (d2l 0.17.6 / 1.0.3) in place of ``from d2l import torch as d2l``. Then
every cell's printed text (``stdout``) and shown value (``shown``, the ``repr`` of its last
expression) are compared after normalisation (see ``normalise``; numbers within
``REL_TOL``/``ABS_TOL``). Each difference needs a reason in ``REASONS`` (found by
investigating it); one without a reason is UNEXPLAINED and the exit status is 1.

The published packages are oracles only, never dependencies of attnkit. Get them with

    pip download --no-deps d2l==0.17.6 -d /tmp/d2lpkg
    pip download --no-deps d2l==1.0.3 -d /tmp/d2lpkg

and pass the wheels (or folders they were extracted to: the folder holding ``d2l/``) as
``--book-017`` / ``--book-10`` (or set ``D2L0176`` / ``D2L103``). Their ``torch.py`` imports
modules at top level that attnkit does not need (torchvision, PIL, pandas, requests,
IPython, matplotlib_inline, 1.0 also scipy): the ones the interpreter lacks get stub modules
in a temporary folder on the oracle runs' ``PYTHONPATH``; the notebook display calls
(``display.display``/``clear_output``, ``backend_inline.set_matplotlib_formats``) are
no-ops in the oracle whatever is installed (outside a notebook IPython's ``display`` would
print ``Figure(350x250)`` on every ``Animator.add``). The book's downloads read the local
files: ``timemachine.txt`` is found by its sha1 as the book looks for it; for ``fra-eng``,
whose ``../data`` has the extracted ``fra-eng/fra.txt`` but no ``fra-eng.zip``, 0.17's
``download_extract('fra-eng')`` returns ``../data/fra-eng`` and 1.0's ``download`` returns
the would-be zip path with ``extract`` a no-op (only when that folder is there; nothing
else changes).

11.8 (vision transformer, 1.0) needs the real torchvision (``FashionMNIST``,
``transforms.Resize``/``ToTensor``): ``pip download --no-deps torchvision==0.28.0`` (the
release for torch 2.13) into a folder of its own and pass the wheel, or the folder it was
extracted to, as ``--torchvision`` (or ``BOOK_ORACLE_TORCHVISION``). PyPI's wheel is built
against CUDA torch, so its compiled ops (``nms``, ``roi_align``...) cannot load on a CPU
torch, and its ``_meta_registrations`` then fails at import; the oracle replaces those two
registration modules with empty ones (no op 11.8 uses is compiled: the dataset reads IDX
files, the transforms are PIL/tensor code). torchvision reads uncompressed IDX files, so
the oracle's ``../data/FashionMNIST/raw`` also gets the gunzipped copies of the generated
files (what its ``download`` would leave). PIL (pillow) comes with matplotlib; ``--pillow``
adds a wheel/folder when the interpreter lacks it. Without torchvision, 11.8 is not
compared (and the table says why).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import REPO

REL_TOL = 1e-4
ABS_TOL = 1e-6
DATE = "2026-11-24"
BOOK_VERSIONS = {"0.17": "0.17.6", "1.0": "1.0.3"}
BOOK_ENV = {"0.17": "D2L0176", "1.0": "D2L103"}
BOOT_MODULE = "_book_oracle_boot"
BOOK_IMPORT_LINE = f"import {BOOT_MODULE}; d2l = {BOOT_MODULE}.load()"
# what the published torch.py files import at top level beyond torch/numpy/matplotlib
BOOK_TOP_IMPORTS = (
    "torchvision",
    "PIL",
    "pandas",
    "requests",
    "IPython",
    "matplotlib_inline",
    "scipy",
)
VISION_SECTION = "chapter_attention-mechanisms-and-transformers/vision-transformer"

GET_THE_BOOK = """\
benchmarks/book/oracle.py needs the published d2l packages (oracles only, not dependencies of attnkit):

    pip download --no-deps d2l==0.17.6 -d /tmp/d2lpkg
    pip download --no-deps d2l==1.0.3 -d /tmp/d2lpkg

then pass --book-017 /tmp/d2lpkg/d2l-0.17.6-py3-none-any.whl and
--book-10 /tmp/d2lpkg/d2l-1.0.3-py3-none-any.whl (the wheels, or the folders they were
extracted to), or set D2L0176 / D2L103."""


# ------------------------------------------------------------------ reasons for differences

# (edition, section's last part, cell index) -> (the fields that differ, why). Filled in after
# investigating each difference (the experiments are quoted); a difference not listed, or
# one whose fields are not the listed ones, is UNEXPLAINED.
_BLEU_017 = (
    "the book's 0.17 `bleu` divides by zero (`len_pred - n + 1`) for a prediction shorter "
    "than k=2 tokens, which the 1-epoch model gives ('!' or ''): the book's cell stops with "
    "ZeroDivisionError; attnkit's `bleu` returns 0.0 there (deliberate fix, "
    "attnkit/d2l/seq2seq.py docstring). Later cells are not compared"
)
_DROPOUT = (
    "dropout draws differ: attnkit's `MultiHeadAttention` drops attention weights inside the "
    "fused `scaled_dot_product_attention` kernel and `PositionalEncoding` uses attnkit's CPU "
    "`Dropout` (one int64 draw per 3 units, attnkit/attention/dropout.py), where the book calls "
    "`nn.Dropout`; same keep probability, other masks"
)
REASONS: dict[tuple[str, str, int], tuple[str, str]] = {
    ("0.17", "bahdanau-attention", 4): (
        "stdout",
        "attnkit's `Seq2SeqEncoder` runs its GRU on the packed source when given valid lengths "
        "(state at each sentence's last token; the book runs the GRU over the padding: "
        "deliberate, attnkit/d2l/seq2seq.py docstring), and `train_seq2seq` trims each batch "
        "to its longest sentence, which changes the GRU's dropout draws: loss 0.462 (book) vs "
        "0.473 after 1 epoch. With packing and trimming both turned off, attnkit prints the "
        "book's 0.462; the book's own loop on attnkit's layers gives 0.472.",
    ),
    ("0.17", "bahdanau-attention", 5): ("status, stdout", _BLEU_017 + "."),
    ("0.17", "multihead-attention", 3): (
        "shown",
        "repr only: attnkit's `DotProductAttention` keeps `dropout` as a probability for the "
        "fused `scaled_dot_product_attention` kernel, not as an `nn.Dropout` child, so the "
        "cell's module prints `DotProductAttention()` without `(dropout): Dropout(p=0.5)`; "
        "same parameters, dropout still applied in training.",
    ),
    ("0.17", "self-attention-and-positional-encoding", 1): (
        "shown",
        "repr only: attnkit's `d2l.MultiHeadAttention` runs the fused kernel itself; its "
        "`attention` attribute is a plain holder of `attention_weights` (book layout), not a "
        "submodule, and dropout is a probability, so the repr lacks the `(attention): "
        "DotProductAttention((dropout): Dropout(p=0.5))` lines; same W_q/W_k/W_v/W_o and "
        "state_dict keys.",
    ),
    ("0.17", "transformer", 14): ("status, stdout", _BLEU_017 + "."),
    ("1.0", "transformer", 15): (
        "stdout",
        _DROPOUT + ". After 1 epoch the model is barely trained and greedy decoding starts "
        "with '<pad>' in the book's run, '<eos>' in attnkit's (an empty translation); with "
        "the attention and positional-encoding dropout set to 0 in both, both print `[]` "
        "for all four sentences.",
    ),
}


# ------------------------------------------------------------------ the runner, as a library


def _load_runner():
    path = REPO / "tools" / "book_conformance.py"
    spec = importlib.util.spec_from_file_location("_book_conformance", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ the oracle's environment

BOOT_SOURCE = '''\
"""Loads the published d2l package for benchmarks/book/oracle.py, offline (written there; not d2l)."""

import os
import sys
import types

NOTE = "book_oracle.py stand-in; not the real module"


def _noop(*args, **kwargs):
    return None


def _import_torchvision():
    """The real torchvision when it is on the path, its compiled ops aside (see the script)."""
    try:
        import torchvision  # noqa: F401
    except RuntimeError:
        # PyPI's wheel is built for CUDA torch: _C cannot load on a CPU torch, and then
        # _meta_registrations' register_fake("torchvision::nms") raises. 11.8 uses no op.
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
            sys.modules[name] = types.ModuleType(name, NOTE)
        import torchvision  # noqa: F401


def _local_fra(book):
    """The book's downloads of fra-eng use ../data/fra-eng when it is extracted there."""
    if hasattr(book, "download_extract") and not hasattr(book, "extract"):  # 0.17
        original = book.download_extract

        def download_extract(name, folder=None):
            if name == "fra-eng" and folder is None:
                data_dir = os.path.join("..", "data", "fra-eng")
                if os.path.isfile(os.path.join(data_dir, "fra.txt")):
                    return data_dir
            return original(name, folder)

        book.download_extract = download_extract
        return
    download, extract = book.download, book.extract  # 1.0

    def _extracted(fname):
        return fname.endswith("fra-eng.zip") and not os.path.exists(fname) and os.path.isfile(
            os.path.join(os.path.dirname(fname), "fra-eng", "fra.txt")
        )

    def local_download(url, folder="../data", sha1_hash=None):
        fname = os.path.join(folder, url.split("/")[-1])
        if _extracted(fname):
            return fname
        return download(url, folder, sha1_hash)

    def local_extract(filename, folder=None):
        if folder is None and _extracted(filename):
            return None
        return extract(filename, folder)

    book.download, book.extract = local_download, local_extract


def load():
    import torch.multiprocessing

    # 11.8's DataLoader(num_workers=4) hands batches over by file descriptors, through a
    # Unix socket, which the runner's network block refuses; shared-memory files need none
    torch.multiprocessing.set_sharing_strategy("file_system")
    sys.path.insert(0, os.environ["BOOK_ORACLE_D2L"])
    try:
        _import_torchvision()
    except ImportError:
        pass  # a stub (no torchvision given) or none: the book's import says
    from d2l import torch as book

    # notebook display only: outside IPython, display() would print the figure's repr
    book.display = types.SimpleNamespace(display=_noop, clear_output=_noop)
    book.backend_inline = types.SimpleNamespace(set_matplotlib_formats=_noop)
    _local_fra(book)
    return book
'''

STUB_SOURCES = {
    "torchvision": (
        "from types import SimpleNamespace as _NS\n"
        "transforms = _NS()\n"
        "datasets = _NS()\n"
        "def __getattr__(name):\n"
        "    raise ImportError('torchvision is a book_oracle.py stub: pass --torchvision')\n"
    ),
    "PIL": "from types import SimpleNamespace as _NS\nImage = _NS()\n",
    "pandas": "",
    "requests": (
        "def get(*args, **kwargs):\n"
        "    raise OSError('requests is a book_oracle.py stub: offline')\n"
    ),
    "IPython": (
        "from types import SimpleNamespace as _NS\n"
        "display = _NS(display=lambda *a, **k: None, clear_output=lambda *a, **k: None)\n"
        "def get_ipython():\n    return None\n"
    ),
    "matplotlib_inline": (
        "from types import SimpleNamespace as _NS\n"
        "backend_inline = _NS(set_matplotlib_formats=lambda *a, **k: None)\n"
    ),
    "scipy": "",
    # submodules the book imports by name: `from torchvision import transforms` works on
    # the attributes above; `from scipy.spatial import distance_matrix` needs a module
    "scipy/spatial": (
        "def distance_matrix(*args, **kwargs):\n"
        "    raise NotImplementedError('scipy is a book_oracle.py stub')\n"
    ),
}


def _site_of(path: Path, into: Path) -> Path:
    """A folder to put on ``sys.path`` for PATH: a wheel is extracted into ``into``."""
    if path.is_file() and zipfile.is_zipfile(path):
        into.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path) as zf:
            zf.extractall(into)
        return into
    if path.is_dir():
        return path
    raise FileNotFoundError(f"{path} is neither a wheel nor a folder")


def _book_root(path: Path, into: Path) -> Path:
    """The folder holding the published ``d2l/torch.py`` (a wheel is extracted)."""
    root = _site_of(path, into)
    for candidate in (root, root.parent):
        if (candidate / "d2l" / "torch.py").is_file():
            return candidate
    raise FileNotFoundError(f"no d2l/torch.py in {path}\n\n{GET_THE_BOOK}")


def _book_version(root: Path) -> str:
    text = (root / "d2l" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return found.group(1) if found else "?"


def _missing_modules(python: str, pythonpath: list[str], names) -> list[str]:
    """Which of ``names`` the interpreter that runs the cells cannot import."""
    code = (
        "import importlib.util, sys\n"
        f"print(' '.join(n for n in {list(names)!r} if importlib.util.find_spec(n) is None))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def _write_shims(shim_dir: Path, missing: list[str]) -> None:
    shim_dir.mkdir(parents=True, exist_ok=True)
    (shim_dir / f"{BOOT_MODULE}.py").write_text(BOOT_SOURCE, encoding="utf-8")
    for name, source in STUB_SOURCES.items():
        top = name.split("/")[0]
        if top not in missing:
            continue
        package = shim_dir / name
        package.mkdir(parents=True, exist_ok=True)
        header = f'"""book_oracle.py stub for {name.replace("/", ".")}: not the real module."""\n'
        (package / "__init__.py").write_text(header + source, encoding="utf-8")


def _gunzip_fashion(data_dir: Path) -> None:
    """Uncompressed copies of ``FashionMNIST/raw/*.gz``, as torchvision's download leaves."""
    for gz in sorted((data_dir / "FashionMNIST" / "raw").glob("*.gz")):
        target = gz.with_suffix("")
        if not target.exists():
            target.write_bytes(gzip.decompress(gz.read_bytes()))


# ------------------------------------------------------------------ comparison

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?\b(?:nan|inf)\b")
_NORMALISE = [
    (re.compile(r" at 0x[0-9a-fA-F]+"), " at 0x…"),
    (re.compile(r"[\d.]+(?:e[-+]?\d+)? (tokens|examples|samples)/sec"), r"<speed> \1/sec"),
    (re.compile(r"[\d.]+(?:e[-+]?\d+)? sec\b"), "<time> sec"),
    (re.compile(r"\bcuda:\d+\b|\bcuda\b|\bcpu\b"), "<device>"),
]


def normalise(text: str | None) -> str | None:
    """Addresses, speeds, timings and device names masked; trailing whitespace dropped."""
    if text is None:
        return None
    for pattern, replacement in _NORMALISE:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _numbers_close(a: str, b: str) -> bool:
    if a == b:
        return True
    is_int = not re.search(r"[.eEn]", a + b)
    if is_int:
        return int(a) == int(b)
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def texts_equal(a: str | None, b: str | None) -> bool:
    """Equal after ``normalise``, numbers within the tolerance, the rest exactly."""
    a, b = normalise(a), normalise(b)
    if a is None or b is None:
        return a is b
    if a == b:
        return True
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    return all(_numbers_close(x, y) for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)))


def first_difference(a: str | None, b: str | None, width: int = 90) -> tuple[str, str]:
    """The first differing line of each (normalised) text, shortened around the change."""
    a, b = normalise(a), normalise(b)
    if a is None or b is None:
        return (a or "(nothing)")[:width], (b or "(nothing)")[:width]
    la, lb = a.splitlines() or [""], b.splitlines() or [""]
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "(no line)"
        y = lb[i] if i < len(lb) else "(no line)"
        if not texts_equal(x, y):
            start = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            start = max(0, start - width // 3)
            prefix = f"l{i + 1}: " + ("…" if start else "")
            return prefix + x[start : start + width], prefix + y[start : start + width]
    return a[:width], b[:width]


@dataclass
class CellDiff:
    cell: int
    fields: list[str]
    book: str
    attnkit: str
    reason: str | None


@dataclass
class SectionComparison:
    edition: str
    section: str
    cells: int
    compared: int = 0
    with_output: int = 0  # compared cells where either run printed or showed something
    equal: int = 0
    diffs: list[CellDiff] = field(default_factory=list)
    note: str = ""  # why cells were not compared

    @property
    def short(self) -> str:
        return self.section.split("/")[-1]

    @property
    def unexplained(self) -> int:
        return sum(d.reason is None for d in self.diffs)


def _cell_text(output: dict | None, key: str) -> str | None:
    if output is None:
        return None
    if key == "status":
        return output["status"] if output["status"] == "ok" else f"error: {output.get('error')}"
    return output.get(key)


def compare_section(edition: str, ours, book) -> SectionComparison:
    """Cell by cell: ``stdout``, ``shown`` and ``status`` of attnkit's run against the book's."""
    result = SectionComparison(edition, ours.section, ours.cells)
    notes = []
    for name, run in (("attnkit", ours), ("book", book)):
        if not run.ok:
            notes.append(f"{name} run stopped at cell {run.failed_cell}: {run.error}")
    n = min(len(ours.outputs), len(book.outputs))
    for index in range(n):
        a, b = ours.outputs[index], book.outputs[index]
        result.compared += 1
        result.with_output += any(o.get("stdout") or o.get("shown") for o in (a, b))
        fields = [
            key
            for key in ("status", "stdout", "shown")
            if not texts_equal(_cell_text(b, key), _cell_text(a, key))
        ]
        if not fields:
            result.equal += 1
            continue
        key = fields[0]
        book_text, ours_text = first_difference(_cell_text(b, key), _cell_text(a, key))
        listed = REASONS.get((edition, result.short, index))
        reason = listed[1] if listed and listed[0] == ", ".join(fields) else None
        result.diffs.append(CellDiff(index, fields, book_text, ours_text, reason))
    if n < ours.cells:
        notes.append(f"cells {n}-{ours.cells - 1} not compared")
    result.note = "; ".join(notes)
    return result


# ------------------------------------------------------------------ the report


def _md(text: str) -> str:
    text = text.replace("|", "\\|").replace("`", "'")
    return f"`{text}`" if text.strip() else "(blank)"


def write_report(path: Path, comparisons, command: str, setup: list[str], seconds: float, epochs):
    lines = [
        "# The book's cells on attnkit vs the published d2l packages",
        "",
        f"Date: {DATE}. Produced by `{command}` in {seconds:.0f} s on {os.cpu_count()} CPU "
        "cores (runner: `tools/book_conformance.py`).",
        "",
        "Every code cell of the book's sections (`../shared/reference/book-cells`) runs in a "
        "fresh interpreter per section, seed 0 at the top, network blocked, epochs capped at "
        f"{epochs} (`num_epochs`/`max_epochs`), once with attnkit (`from attnkit import d2l` / "
        "`from attnkit.d2l import v1 as d2l`) and once with the published package as oracle. "
        "Each cell's printed text (`stdout`), shown value (`shown`, the repr of its last "
        "expression) and status are compared.",
        "",
        "Normalisations before comparing: memory addresses (` at 0x…`), speeds "
        "(`N tokens/sec`, `N examples/sec`), times (`N sec`), device names (`cpu`, `cuda:N`), "
        "trailing whitespace and trailing blank lines. Numbers are compared with "
        f"`math.isclose(rel_tol={REL_TOL:g}, abs_tol={ABS_TOL:g})` (integers exactly); the "
        "rest of the text must match exactly.",
        "",
        "Oracle setup:",
        "",
        *[f"- {line}" for line in setup],
        "",
        "`with output`: compared cells where either run printed or showed something (the "
        "others compare only that both ran and stayed silent). In 1.0 the training loops "
        "(`Trainer.fit`) draw on a `ProgressBoard` and print nothing, so 1.0's trained models "
        "are compared only where a cell prints from them (translations, predictions). Cells "
        "after a run stopped are not compared (note column).",
        "",
        "| edition | section | cells | compared | with output | equal | different | "
        "unexplained | note |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for c in comparisons:
        lines.append(
            f"| {c.edition} | {c.short} | {c.cells} | {c.compared} | {c.with_output} | "
            f"{c.equal} | {len(c.diffs)} | {c.unexplained} | {c.note.replace('|', '/')} |"
        )
    lines += ["", "## Totals", ""]
    lines += [
        "| edition | sections | cells | cells compared | with output | equal | different "
        "| unexplained |"
    ]
    lines += ["| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for edition in dict.fromkeys(c.edition for c in comparisons):
        cs = [c for c in comparisons if c.edition == edition]
        lines.append(
            f"| {edition} | {len(cs)} | {sum(c.cells for c in cs)} | "
            f"{sum(c.compared for c in cs)} | {sum(c.with_output for c in cs)} | "
            f"{sum(c.equal for c in cs)} | {sum(len(c.diffs) for c in cs)} | "
            f"{sum(c.unexplained for c in cs)} |"
        )
    lines += ["", "## Differences", ""]
    lines += ["Excerpts show the first differing line (normalised), book then attnkit.", ""]
    lines += ["| edition | section | cell | field | book | attnkit | reason |"]
    lines += ["| --- | --- | ---: | --- | --- | --- | --- |"]
    for c in comparisons:
        for d in c.diffs:
            lines.append(
                f"| {c.edition} | {c.short} | {d.cell} | {', '.join(d.fields)} | "
                f"{_md(d.book)} | {_md(d.attnkit)} | "
                f"{(d.reason or '**UNEXPLAINED**').replace('|', '/')} |"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", choices=["0.17", "1.0", "both"], default="both")
    parser.add_argument("--section", action="append", help="section name or its last part")
    parser.add_argument("--epochs", type=int, default=1, help="epoch cap (as the test)")
    parser.add_argument("--jobs", type=int, default=2, help="sections run at once")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "book-oracle.md")
    parser.add_argument(
        "--book-017",
        type=Path,
        default=os.environ.get("D2L0176"),
        help="d2l 0.17.6 wheel or extracted folder (default $D2L0176)",
    )
    parser.add_argument(
        "--book-10",
        type=Path,
        default=os.environ.get("D2L103"),
        help="d2l 1.0.3 wheel or extracted folder (default $D2L103)",
    )
    parser.add_argument(
        "--torchvision",
        type=Path,
        default=os.environ.get("BOOK_ORACLE_TORCHVISION"),
        help="torchvision wheel or extracted folder, for 11.8 (default $BOOK_ORACLE_TORCHVISION)",
    )
    parser.add_argument("--pillow", type=Path, help="PIL wheel/folder if the interpreter lacks it")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run cells in")
    parser.add_argument("--workdir", type=Path, help="folder for ../data and the runs")
    parser.add_argument("--json", type=Path, help="write both runs' cell outputs here")
    args = parser.parse_args(argv)
    runner = _load_runner()
    if not runner.BOOK_CELLS.is_dir():
        print(f"no book cells at {runner.BOOK_CELLS}: ../shared is absent", file=sys.stderr)
        return 2
    editions = ["0.17", "1.0"] if args.edition == "both" else [args.edition]
    books = {"0.17": args.book_017, "1.0": args.book_10}
    for edition in editions:
        if books[edition] is None or not books[edition].exists():
            print(f"no d2l {BOOK_VERSIONS[edition]} given\n\n{GET_THE_BOOK}", file=sys.stderr)
            return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="book-oracle-"))
    try:
        argv = sys.argv[1:] if argv is None else argv
        return _compare(args, runner, editions, books, work, argv)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _compare(args, runner, editions, books, work: Path, argv: list[str]) -> int:
    """Both runs of every chosen section, the comparison and the report; the exit status."""
    work.mkdir(parents=True, exist_ok=True)
    sites: list[str] = []
    setup: list[str] = []
    if args.torchvision:
        sites.append(str(_site_of(args.torchvision, work / "site-torchvision")))
    if args.pillow:
        sites.append(str(_site_of(args.pillow, work / "site-pillow")))
    missing = _missing_modules(args.python, sites, BOOK_TOP_IMPORTS)
    shim_dir = work / "shims"
    _write_shims(shim_dir, missing)
    pythonpath = os.pathsep.join([str(shim_dir), *sites])
    have_vision = "torchvision" not in missing
    setup.append(
        "stub modules for the book's top-level imports the interpreter lacks: "
        + (", ".join(f"`{m}`" for m in missing) or "none")
        + "; `display`/`backend_inline` calls are no-ops in the oracle"
    )
    if have_vision:
        probe = f"import {BOOT_MODULE} as b; b._import_torchvision(); import torchvision as t; "
        version = subprocess.run(
            [args.python, "-c", probe + "print(t.__version__)"],
            env={**os.environ, "PYTHONPATH": pythonpath},
            capture_output=True,
            text=True,
        ).stdout.strip()
        setup.append(
            f"torchvision {version or '?'} for 11.8 (PyPI wheel on the oracle's PYTHONPATH; "
            "its compiled ops do not load on CPU torch, so its two op-registration modules "
            "are empty stand-ins; FashionMNIST IDX files gunzipped for it)"
        )
    setup.append(
        "fra-eng read from the extracted `../data/fra-eng/fra.txt` (0.17 `download_extract`, "
        "1.0 `download`/`extract` patched for that archive only); `timemachine.txt` found "
        "by its sha1"
    )
    print(f"workdir {work}; stubs: {', '.join(missing) or 'none'}", flush=True)
    start = time.perf_counter()
    comparisons = []
    dump = []
    for edition in editions:
        root = _book_root(books[edition], work / f"d2l-{edition}")
        version = _book_version(root)
        if version != BOOK_VERSIONS[edition]:
            wanted = BOOK_VERSIONS[edition]
            print(f"warning: d2l {version} given for {edition} ({wanted})", file=sys.stderr)
        setup.append(f"d2l {edition}: published d2l {version} from `{books[edition]}`")
        chosen = args.section
        names = list(runner.load_sections(edition))
        if chosen:
            names = [n for n in names if any(s == n or n.endswith("/" + s) for s in chosen)]
        skip_book = [n for n in names if n == VISION_SECTION and not have_vision]
        book_names = [n for n in names if n not in skip_book]
        if not names:
            continue
        print(f"== d2l {edition}: attnkit", flush=True)
        ours = runner.run_all(
            [edition],
            sections=names,
            epochs=args.epochs,
            jobs=args.jobs,
            workdir=work / f"attnkit-{edition}",
            python=args.python,
        )
        book_work = work / f"book-{edition}"
        runner.prepare_data(book_work / "data")
        _gunzip_fashion(book_work / "data")
        print(f"== d2l {edition}: published d2l {version}", flush=True)
        book = (
            runner.run_all(
                [edition],
                sections=book_names,
                epochs=args.epochs,
                jobs=args.jobs,
                workdir=book_work,
                d2l_import=BOOK_IMPORT_LINE,
                extra_env={"PYTHONPATH": pythonpath, "BOOK_ORACLE_D2L": str(root)},
                python=args.python,
            )
            if book_names
            else []
        )
        by_name = {r.section: r for r in book}
        for run in ours:
            if run.section not in by_name:
                c = SectionComparison(edition, run.section, run.cells)
                c.note = "not compared: the book needs torchvision (pass --torchvision)"
                comparisons.append(c)
                continue
            comparisons.append(compare_section(edition, run, by_name[run.section]))
            dump.append({"attnkit": run.__dict__, "book": by_name[run.section].__dict__})
    seconds = time.perf_counter() - start
    in_venv = Path(sys.executable).is_relative_to(REPO / ".venv")
    command = (".venv/bin/python" if in_venv else "python") + " -m benchmarks.book.oracle "
    command += " ".join(shlex.quote(a) for a in argv)
    write_report(args.out, comparisons, command, setup, seconds, args.epochs)
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1, ensure_ascii=False), encoding="utf-8")
    unexplained = 0
    for c in comparisons:
        for d in c.diffs:
            tag = "explained" if d.reason else "UNEXPLAINED"
            unexplained += d.reason is None
            print(f"{c.edition} {c.short} cell {d.cell} [{', '.join(d.fields)}]: {tag}")
            if d.reason is None:
                print(f"    book:    {d.book}\n    attnkit: {d.attnkit}")
    # a listed reason for a cell that now agrees is stale: the table must say what is true
    differing = {(c.edition, c.short, d.cell) for c in comparisons for d in c.diffs}
    compared = {(c.edition, c.short) for c in comparisons if c.compared}
    stale = [k for k in REASONS if k[:2] in compared and k not in differing]
    for key in stale:
        print(f"{key[0]} {key[1]} cell {key[2]}: STALE reason (the cell now agrees): remove it")
    total = sum(len(c.diffs) for c in comparisons)
    print(
        f"{sum(c.compared for c in comparisons)} cells compared, {total} different, "
        f"{unexplained} unexplained; report: {args.out} ({seconds:.0f} s)"
    )
    return 1 if unexplained or stale else 0


if __name__ == "__main__":
    sys.exit(main())
