"""notebooks/exercises.ipynb runs a selection of exercises at small sizes, executed here with
nbclient: each answer is displayed with the values the kernel measured, and its figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.notebooks import execute, nbformat_module

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "exercises.ipynb"


def test_exercises_notebook_executes_and_shows_the_answers(tmp_path):
    nb = execute(nbformat_module().read(NOTEBOOK, as_version=4), tmp_path)
    chosen = re.findall(r'show\("([^"]+)"\)', "".join(c.source for c in nb.cells))
    assert len(chosen) >= 10
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    markdown = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    from attnkit.exercises import find_exercise

    for key in chosen:
        e = find_exercise(key, "1.0" if key.startswith("1.0/") else "0.17")
        label = e.id or key.removeprefix("1.0/")
        assert f"### {label}" in markdown and e.question in markdown, key
        for _, claim in e.claims:
            assert claim in markdown
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    # every figure the answer book has for these exercises is drawn in the notebook too
    record = json.loads((NOTEBOOK.parents[1] / "docs" / "exercises.json").read_text())
    drawn = {f for key in chosen for f in record["exercises"][key]["figures"]}
    assert drawn and len(images) >= len(drawn)
    stream = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "exercises" in stream and "this notebook: 11 run" in stream
