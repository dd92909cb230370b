"""Figures: attention heatmaps and training curves. Headless-safe (Agg).

Every function returns the matplotlib ``Figure`` (for notebooks) and, given
``path``, also writes it (PNG, SVG or PDF by suffix).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

if not os.environ.get("DISPLAY") and "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from attnkit._validate import boolean

__all__ = ["attention_panels", "plot_curves", "save_figure", "show_heatmaps"]


def save_figure(fig: Figure, path: str | os.PathLike | None) -> Path | None:
    """Write ``fig`` to ``path`` (parents created), return the path or None."""
    if path is None:
        return None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight", dpi=120)
    return path


def show_heatmaps(
    matrices,  # (rows, cols, Q, K), or anything that reshapes to it: (Q, K), (cols, Q, K)
    xlabel: str,
    ylabel: str,
    titles: Sequence[str] | None = None,
    figsize: tuple[float, float] = (2.5, 2.5),
    cmap: str = "Reds",
    *,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    row_titles: Sequence[str] | None = None,
    path: str | os.PathLike | None = None,
    shared_colorbar: bool = True,
    per_panel: bool = False,
) -> Figure:
    """A grid of heatmaps with one shared colorbar, as the book's ``show_heatmaps``.

    ``figsize`` is the size of one panel. Token lists label the axes of every panel.
    Colour scales: by default every panel shares one scale and one colour bar (the
    book's); ``shared_colorbar=False`` keeps the shared scale without the bar;
    ``per_panel=True`` gives each panel its own scale and its own colour bar, so that
    panels of very different ranges stay readable.
    """
    boolean("shared_colorbar", shared_colorbar)
    boolean("per_panel", per_panel)
    m = torch.as_tensor(matrices).detach().float().cpu()
    if m.dim() < 2 or m.dim() > 4:
        raise ValueError(f"matrices must have 2 to 4 dims (rows, cols, Q, K), got {tuple(m.shape)}")
    while m.dim() < 4:
        m = m.unsqueeze(0)
    rows, cols = m.shape[:2]
    Q, K = m.shape[2:]
    if xticklabels is not None and len(xticklabels) != K:
        raise ValueError(f"xticklabels has {len(xticklabels)} labels for {K} columns")
    if yticklabels is not None and len(yticklabels) != Q:
        raise ValueError(f"yticklabels has {len(yticklabels)} labels for {Q} rows")
    if titles is not None and len(titles) not in (cols, rows * cols):
        raise ValueError(
            f"titles has {len(titles)} entries; expected {cols} (one per column) or "
            f"{rows * cols} (one per panel) for a {rows} x {cols} grid"
        )
    if row_titles is not None and len(row_titles) != rows:
        raise ValueError(f"row_titles has {len(row_titles)} entries for {rows} rows")
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(figsize[0] * cols, figsize[1] * rows),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    # weights start at 0 as in the book; other matrices (e.g. positional encodings) keep
    # their negative part
    vmin = min(float(m.min()), 0.0) if m.numel() else 0.0
    vmax = float(m.max()) if m.numel() else 1.0
    pcm = None
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            if per_panel:
                vmin = min(float(m[i, j].min()), 0.0) if m[i, j].numel() else 0.0
                vmax = float(m[i, j].max()) if m[i, j].numel() else 1.0
            pcm = ax.imshow(m[i, j].numpy(), cmap=cmap, vmin=vmin, vmax=max(vmax, vmin + 1e-12))
            if per_panel:
                fig.colorbar(pcm, ax=ax, shrink=0.8)
            if i == rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel if row_titles is None else f"{row_titles[i]}\n{ylabel}")
            if titles is not None:
                ax.set_title(titles[j] if len(titles) == cols else titles[i * cols + j])
            if xticklabels is not None:
                ax.set_xticks(range(K), list(xticklabels), rotation=90)
            if yticklabels is not None:
                ax.set_yticks(range(Q), list(yticklabels))
    if shared_colorbar and not per_panel:
        fig.colorbar(pcm, ax=axes, shrink=0.6)
    save_figure(fig, path)
    return fig


def plot_curves(
    curves: Mapping[str, Sequence[float]],
    xlabel: str = "epoch",
    ylabel: str = "",
    *,
    x: Sequence[float] | None = None,
    logy: bool = False,
    title: str | None = None,
    path: str | os.PathLike | None = None,
    figsize: tuple[float, float] = (5.0, 3.5),
) -> Figure:
    """One line per named curve (e.g. {"train loss": [...], "val loss": [...]})."""
    fig, ax = plt.subplots(figsize=figsize)
    for name, ys in curves.items():
        ys = list(ys)
        xs = list(x) if x is not None else list(range(1, len(ys) + 1))
        ax.plot(xs[: len(ys)], ys, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if curves:
        ax.legend()
    save_figure(fig, path)
    return fig


def attention_panels(
    panels: Sequence[tuple[str, torch.Tensor, Sequence[str], Sequence[str]]],
    *,
    title: str = "",
    path: str | os.PathLike | None = None,
    cmap: str = "Reds",
) -> Figure:
    """Heatmaps side by side, one per ``(caption, matrix (Q, K), row tokens (Q), column
    tokens (K))``, each coloured from 0 to its own largest weight with the tokens on the
    axes (every n-th token beyond 40). The static picture of ``attnkit.show_attention``."""
    if not panels:
        raise ValueError("panels must hold at least one (caption, matrix, rows, cols)")
    sizes = []
    for i, (_, m, rows, cols) in enumerate(panels):
        if m.dim() != 2 or tuple(m.shape) != (len(rows), len(cols)):
            raise ValueError(
                f"panels[{i}]: the matrix {tuple(m.shape)} must be (len(rows), len(cols)) = "
                f"({len(rows)}, {len(cols)})"
            )
        sizes.append((max(2.5, 0.22 * min(len(cols), 60) + 1.5),
                      max(2.5, 0.22 * min(len(rows), 60) + 1.5)))  # fmt: skip
    fig, axes = plt.subplots(
        1, len(panels), figsize=(sum(w for w, _ in sizes), max(h for _, h in sizes) + 0.4),
        squeeze=False, gridspec_kw={"width_ratios": [w for w, _ in sizes]},
    )  # fmt: skip
    for ax, (caption, m, rows, cols) in zip(axes[0], panels):
        m = m.detach().float().cpu()
        ax.imshow(m.numpy(), cmap=cmap, vmin=0.0, vmax=float(m.max()) or 1.0, aspect="auto")
        for ticks, labels, rotation in ((ax.set_xticks, cols, 90), (ax.set_yticks, rows, 0)):
            every = max(1, -(-len(labels) // 40))
            ticks(range(0, len(labels), every), list(labels)[::every], rotation=rotation,
                  fontsize=8)  # fmt: skip
        ax.set_title(caption, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig
