"""The book as published: every section of both editions runs on attnkit's d2l layers.

Runs ``tools/book_conformance.py`` over ``../shared/reference/book-cells`` (the book's own
code cells, only the import line replaced, epochs capped at 1, offline, a fresh
interpreter per section, two at a time), then checks each section ran to the end and that
the values it printed which do not depend on training equal the book's printed ones.
Skips, saying so, when ``../shared`` is absent. ``-m "not book"`` leaves it out.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "book_conformance", ROOT / "tools/book_conformance.py"
)
book_conformance = importlib.util.module_from_spec(_spec)
sys.modules["book_conformance"] = book_conformance
_spec.loader.exec_module(book_conformance)

HAVE_BOOK = book_conformance.BOOK_CELLS.is_dir()
SKIP_REASON = f"the book's cells are not at {book_conformance.BOOK_CELLS} (../shared is absent)"


def _sections() -> list[tuple[str, str]]:
    if not HAVE_BOOK:
        return [("none", "none")]
    return [
        (edition, name)
        for edition in book_conformance.EDITIONS
        for name in book_conformance.load_sections(edition)
    ]


SECTIONS = _sections()
pytestmark = [pytest.mark.book, pytest.mark.skipif(not HAVE_BOOK, reason=SKIP_REASON)]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[tuple[str, str], object]:
    """Every section of both editions, run once (two interpreters at a time)."""
    lines: list[str] = []
    ran = book_conformance.run_all(
        list(book_conformance.EDITIONS),
        epochs=1,
        jobs=2,
        workdir=tmp_path_factory.mktemp("book"),
        report=lines.append,
        timeout=240,
    )
    print("\n".join(lines))
    return {(r.edition, r.section): r for r in ran}


def test_both_editions_have_every_section_with_code():
    counts = {e: len(book_conformance.load_sections(e)) for e in book_conformance.EDITIONS}
    assert counts == {"0.17": 20, "1.0": 21}


@pytest.mark.parametrize(("edition", "section"), SECTIONS, ids=[f"{e}:{s}" for e, s in SECTIONS])
def test_section_runs_to_the_end(results, edition, section):
    result = results[(edition, section)]
    assert result.ok, result.line() + "\n" + result.outputs[-1].get("traceback", "")


def _printed(results, edition: str, section: str, cell: int) -> str:
    name = next(s for e, s in results if e == edition and s.endswith("/" + section))
    output = results[(edition, name)].outputs[cell]
    return output["stdout"] + (output["shown"] or "")


# What the book prints for cells that do not depend on training (its HTML pages).
BOOK_PRINTS = [
    ("0.17", "text-preprocessing", 1, "# text lines: 3221"),
    ("0.17", "text-preprocessing", 6, "(170580, 28)"),
    ("0.17", "machine-translation-and-dataset", 5, "10012"),
    ("0.17", "machine-translation-and-dataset", 2, "go .\tva !\nhi .\tsalut !\nrun !\tcours !"),
    ("0.17", "seq2seq", 9, "tensor([2.3026, 1.1513, 0.0000])"),
    ("0.17", "nadaraya-watson", 8, "tensor([[[ 4.5000]],\n\n        [[14.5000]]])"),
    ("0.17", "attention-scoring-functions", 8, "[[10.0000, 11.0000, 12.0000, 13.0000]]"),
    ("0.17", "transformer", 3, "layer norm: tensor([[-1.0000,  1.0000],"),
    ("1.0", "text-sequence", 7, "(173428, 28)"),
    ("1.0", "machine-translation-and-dataset", 3, "Go.\tVa !\nHi.\tSalut !"),
    ("1.0", "machine-translation-and-dataset", 15, "source: ['hi', '.', '<eos>', '<pad>'"),
]


@pytest.mark.parametrize(("edition", "section", "cell", "expected"), BOOK_PRINTS)
def test_printed_values_equal_the_books(results, edition, section, cell, expected):
    assert expected in _printed(results, edition, section, cell)


def test_a_removed_shortcut_stops_the_section(tmp_path):
    """The suite is not blind: without ``d2l.reshape`` the book's 10.1 stops at its first cell."""
    cells = book_conformance.load_sections("0.17")["chapter_attention-mechanisms/attention-cues"]
    result = book_conformance.run_section(
        "0.17",
        "attention-cues",
        cells,
        tmp_path,
        d2l_import="from attnkit import d2l; del d2l.reshape",
        timeout=120,
    )
    assert not result.ok
    assert "has no attribute 'reshape'" in result.error
