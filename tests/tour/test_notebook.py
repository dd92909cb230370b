"""notebooks/tour.ipynb runs every topic at small sizes, executed here with nbclient."""

from __future__ import annotations

from pathlib import Path

from tests.notebooks import execute, nbformat_module
from tests.views.test_views import picture_in

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "tour.ipynb"


def test_tour_notebook_executes(tmp_path):
    nb = execute(nbformat_module().read(NOTEBOOK, as_version=4), tmp_path)
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
    # the trained Transformer's maps as the interactive view, with its static SVG (an <img>
    # of the same SVG inside the HTML, which untrusted notebooks keep)
    [view] = [o for o in outputs if "attnkit-view" in o.get("data", {}).get("text/html", "")]
    assert picture_in(view["data"]["text/html"]) == view["data"]["image/svg+xml"]
    assert 'data-kind="cross"' in view["data"]["image/svg+xml"]
