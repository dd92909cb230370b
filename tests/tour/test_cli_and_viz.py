"""``attnkit tour --list / TOPIC / all`` and show_heatmaps' colour-scale options."""

from __future__ import annotations

import pytest
import torch

from attnkit.cli import main
from attnkit.tour import TOPICS
from attnkit.viz import show_heatmaps


def test_list_prints_each_topic_and_its_asserted_claims(capsys):
    assert main(["tour", "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    topics = [ln for ln in lines if not ln.startswith(" ")]
    assert [ln.split()[0] for ln in topics] == list(TOPICS)
    assert all(len(ln.split(maxsplit=1)[1]) > 10 for ln in topics)
    claims = [ln.strip() for ln in lines if ln.startswith(" ")]
    expected = [f"asserted: {c} [{k}]" for t in TOPICS.values() for k, c in t.claims]
    assert claims == expected and len(claims) >= 2 * len(TOPICS)


def test_one_topic_prints_finding_and_writes_figures(tmp_path, capsys):
    assert main(["tour", "positions", "--small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[positions] (") and "maps P_i to P_(i+δ)" in out
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "positions_binary.png",
        "positions_frequency.png",
        "positions_similarity.png",
        "positions_table.png",
    ]


def test_unknown_topic_is_an_error_message(capsys):
    assert main(["tour", "nope", "--out", "/tmp/unused"]) == 1
    err = capsys.readouterr().err
    assert "unknown topic 'nope'" in err and "Traceback" not in err


def test_demo_tour_entry_point_still_exists():
    from attnkit.cli.tour import run_tour

    assert callable(run_tour)


def test_show_heatmaps_per_panel_scales_and_colorbars():
    m = torch.stack([torch.rand(3, 4), 100 * torch.rand(3, 4)]).unsqueeze(0)  # (1, 2, 3, 4)
    shared = show_heatmaps(m, "k", "q")
    assert len(shared.axes) == 2 + 1
    assert shared.axes[0].images[0].get_clim() == shared.axes[1].images[0].get_clim()
    per = show_heatmaps(m, "k", "q", per_panel=True)
    assert len(per.axes) == 2 + 2  # a colour bar per panel
    (lo0, hi0), (lo1, hi1) = (per.axes[i].images[0].get_clim() for i in (0, 1))
    assert lo0 == lo1 == 0.0 and hi0 == pytest.approx(float(m[0, 0].max()))
    assert hi1 == pytest.approx(float(m[0, 1].max()))
    bare = show_heatmaps(m, "k", "q", shared_colorbar=False)
    assert len(bare.axes) == 2
    with pytest.raises(TypeError, match=r"per_panel must be a bool, got 'yes' \(str\)"):
        show_heatmaps(m, "k", "q", per_panel="yes")
