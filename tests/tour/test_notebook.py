"""notebooks/tour.ipynb runs every topic at small sizes, executed here with nbclient."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "tour.ipynb"
HINT = "not installed (pip install -e '.[dev]')"


def test_tour_notebook_executes(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason=f"nbformat {HINT}")
    nbclient = pytest.importorskip("nbclient", reason=f"nbclient {HINT}")
    pytest.importorskip("ipykernel", reason=f"ipykernel {HINT}")
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # "python3" is ipykernel's spec for this interpreter (the venv's python)
    client = nbclient.NotebookClient(
        nb, timeout=120, startup_timeout=60, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )  # fmt: skip
    try:
        client.execute()
    except CellExecutionError:
        raise  # a cell failed: that is a test failure, not an environment problem
    except Exception as e:  # no kernel: no ZMQ sockets, no kernelspec, startup timeout
        pytest.skip(f"the Jupyter kernel could not start or run: {type(e).__name__}: {e}")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    for name in ("cues", "positions", "transformer"):
        assert f"[{name}]" in text
    assert "total" in text
    from attnkit.tour import TOPICS

    for t in TOPICS.values():  # every topic's asserted claims are shown under its finding
        for key, claim in t.claims:
            assert f"  - {claim} [{key}]" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 14  # at least one figure per topic
    # the trained Transformer's maps as the interactive view, with its static SVG
    [view] = [o for o in outputs if "attnkit-view" in o.get("data", {}).get("text/html", "")]
    assert view["data"]["image/svg+xml"] in view["data"]["text/html"]
    assert 'data-kind="cross"' in view["data"]["image/svg+xml"]
