"""Figures are written headless; the tour runs end to end."""

from __future__ import annotations

import pytest
import torch

from attnkit.cli import main
from attnkit.viz import plot_curves, show_heatmaps


def test_show_heatmaps_grid_and_files(tmp_path):
    m = torch.rand(2, 3, 4, 5)
    fig = show_heatmaps(m, "keys", "queries", titles=["a", "b", "c"], path=tmp_path / "h.png")
    assert len(fig.axes) == 2 * 3 + 1  # panels + colorbar
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"
    show_heatmaps(m[0, 0], "k", "q", path=tmp_path / "h.svg")
    assert b"<svg" in (tmp_path / "h.svg").read_bytes()[:500]
    fig = show_heatmaps(m[0, :1], "k", "q", xticklabels=list("abcde"), yticklabels=list("wxyz"))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list("abcde")


def test_show_heatmaps_errors():
    with pytest.raises(ValueError, match="xticklabels has 2 labels for 5 columns"):
        show_heatmaps(torch.rand(4, 5), "k", "q", xticklabels=["a", "b"])
    with pytest.raises(ValueError, match="2 to 4 dims"):
        show_heatmaps(torch.rand(5), "k", "q")
    with pytest.raises(ValueError, match=r"titles has 2 entries; expected 3 \(one per column\)"):
        show_heatmaps(torch.rand(2, 3, 4, 5), "k", "q", titles=["a", "b"])
    with pytest.raises(ValueError, match="row_titles has 1 entries for 2 rows"):
        show_heatmaps(torch.rand(2, 3, 4, 5), "k", "q", row_titles=["r"])


def test_show_heatmaps_color_range():
    weights = show_heatmaps(torch.tensor([[0.25, 0.75]]), "k", "q")
    assert weights.axes[0].images[0].get_clim() == (0.0, 0.75)  # weights: from 0, as the book
    signed = show_heatmaps(torch.tensor([[-1.0, 0.5]]), "k", "q")
    assert signed.axes[0].images[0].get_clim() == (-1.0, 0.5)  # negatives are not clipped


def test_plot_curves(tmp_path):
    fig = plot_curves(
        {"train": [3, 2, 1], "val": [3.5, 2.5]}, ylabel="loss", path=tmp_path / "c.png"
    )
    lines = fig.axes[0].get_lines()
    assert [list(ln.get_ydata()) for ln in lines] == [[3, 2, 1], [3.5, 2.5]]
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_tour_writes_figures_and_book_values(tmp_path, capsys):
    assert main(["tour", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "additive attention output: [[2.0, 3.0, 4.0, 5.0], [10.0, 11.0, 12." in out
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == [
        "nw_nonparametric.png",
        "nw_nonparametric_attention.png",
        "nw_parametric.png",
        "nw_parametric_attention.png",
        "positional_encoding.png",
        "positional_encoding_heatmap.png",
        "scoring_additive.png",
        "scoring_dot_product.png",
    ]
    assert all((tmp_path / p).stat().st_size > 1000 for p in pngs)
