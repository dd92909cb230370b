"""notebooks/attention.ipynb runs end to end (at the test's sizes, ATTNKIT_NOTEBOOK_SMALL=1),
executed by nbclient: every view renders into an output with its static SVG, the files it
saves are valid, and the imported-checkpoint section says so when no checkpoint is there."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tests.notebooks import execute, nbformat_module
from tests.views.test_views import picture_in

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "attention.ipynb"


@pytest.mark.slow
def test_attention_notebook_executes(tmp_path, monkeypatch):
    nbformat = nbformat_module()
    monkeypatch.setenv("ATTNKIT_NOTEBOOK_SMALL", "1")  # the kernel inherits the environment
    monkeypatch.delenv("ATTNKIT_GPT2", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not [o for c in nb.cells for o in c.get("outputs", [])]  # stored without outputs
    execute(nb, tmp_path, timeout=300)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o["data"] for o in outputs if "attnkit-view" in o.get("data", {}).get("text/html", "")]
    assert len(views) == 4  # translator (head and model views), the LM, the book's encoder
    for data in views:
        assert picture_in(data["text/html"]) == data["image/svg+xml"]
        assert "attnkitViews.mount" in data["text/html"]
    kinds = [ET.fromstring(d["image/svg+xml"]).find("{*}g").get("data-kind") for d in views]
    assert kinds == ["encoder_self", "encoder_self", "lm", "attention"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "no GPT-2 folder here" in text and "the whole notebook ran in" in text
    assert ET.parse(tmp_path / "attention.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
    png = (tmp_path / "attention.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and min(struct.unpack(">II", png[16:24])) > 100
    assert "attnkitViews.mount" in (tmp_path / "attention.html").read_text("utf-8")
