"""Figures: attention heatmaps and training curves. Headless-safe (Agg).

Every function returns the matplotlib ``Figure`` (for notebooks) and, given
``path``, also writes it (PNG, SVG or PDF by suffix).

Figures speak the language in force (:mod:`attnkit.i18n`). Chinese needs a CJK font:
the first of :data:`CJK_FONTS` that matplotlib finds is added after the default family in
``rcParams["font.family"]``, so matplotlib (3.6+) draws each Chinese glyph from it and
everything else as before. With no CJK font, attnkit says so once (:class:`FontWarning`,
naming how to install one) and draws English text instead of empty boxes:
:func:`figure_language` is the language figure text should be in, and :func:`figure_text`
a ``with`` block that builds text in it. A label already translated to Chinese (text
the catalog holds) is drawn as its English source then, wherever it was built.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import matplotlib

if not os.environ.get("DISPLAY") and "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from attnkit._validate import boolean
from attnkit.i18n import _, get_language, use_language

__all__ = [
    "CJK_FONTS",
    "FontWarning",
    "attention_panels",
    "cjk_font",
    "figure_language",
    "figure_text",
    "plot_curves",
    "save_figure",
    "show_heatmaps",
]

# font families that draw Chinese, best first (simplified Chinese sans-serif faces ahead):
# Linux (Noto, Source Han, WenQuanYi, AR PL), Windows (YaHei, SimHei), macOS (PingFang...)
CJK_FONTS: tuple[str, ...] = (
    "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK TC", "Noto Sans SC",
    "Source Han Sans SC", "Source Han Sans CN", "Source Han Sans", "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB",
    "Heiti SC", "STHeiti", "Arial Unicode MS", "Droid Sans Fallback", "Noto Serif CJK SC",
    "Source Han Serif SC", "AR PL UMing CN", "SimSun", "Songti SC",
)  # fmt: skip
# file names of such fonts: registered when matplotlib's font cache predates them
_CJK_FILE = re.compile(
    r"cjk|sourcehan|wqy|wenquanyi|msyh|yahei|simhei|simsun|pingfang|hiragino|heiti|"
    r"droidsansfallback|arialuni|uming|ukai|notosans(sc|tc)",
    re.IGNORECASE,
)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NEEDS_CJK = frozenset({"zh"})  # the languages whose figure text needs a CJK font
_font_state: dict[str, object] = {}  # "font": the family found or None; "warned": True


class FontWarning(UserWarning):
    """No font draws the figure's language: attnkit draws English text instead."""


def _find_cjk_font() -> str | None:
    """The first of :data:`CJK_FONTS` matplotlib knows; the system's CJK font files are
    registered first when its font cache (built before they were installed) has none."""
    from matplotlib import font_manager

    def known() -> str | None:
        names = {entry.name for entry in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in names), None)

    if (found := known()) is not None:
        return found
    for path in font_manager.findSystemFonts():
        if _CJK_FILE.search(Path(path).name):
            with contextlib.suppress(Exception):  # a font matplotlib cannot read
                font_manager.fontManager.addfont(path)
    return known()


def cjk_font() -> str | None:
    """The CJK font family figures draw Chinese with (looked up once), or None."""
    if "font" not in _font_state:
        _font_state["font"] = _find_cjk_font()
    return _font_state["font"]  # type: ignore[return-value]


def _use_font(font: str) -> None:
    """Add ``font`` after the families in ``rcParams["font.family"]`` (glyph fallback)."""
    families = plt.rcParams["font.family"]
    families = [families] if isinstance(families, str) else list(families)
    if font not in families:
        plt.rcParams["font.family"] = [*families, font]


def _warn_no_font() -> None:
    if _font_state.get("warned"):
        return
    _font_state["warned"] = True
    warnings.warn(
        _(
            "no font with Chinese characters was found, so figures are drawn with English "
            "text. Install one, then restart Python: apt-get install fonts-noto-cjk (Debian, "
            "Ubuntu), brew install --cask font-noto-sans-cjk (macOS), or any CJK font (Noto "
            "Sans CJK, Source Han Sans, WenQuanYi Zen Hei, SimHei, Microsoft YaHei, PingFang SC)"
        ),
        FontWarning,
        stacklevel=_caller_level(),
    )


def _caller_level() -> int:
    """The stack level of the first caller outside this module (where a warning points;
    ``with figure_text():`` passes through contextlib)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename in (__file__, contextlib.__file__):
        frame, level = frame.f_back, level + 1
    return level


def figure_language() -> str:
    """The language figure text is drawn in: the language in force, except Chinese with no
    CJK font, which gives English (saying so once). Makes the CJK font matplotlib's
    fallback when Chinese is drawn."""
    language = get_language()
    if language not in _NEEDS_CJK:
        return language
    font = cjk_font()
    if font is None:
        _warn_no_font()
        return "en"
    _use_font(font)
    return language


@contextlib.contextmanager
def figure_text() -> Iterator[str]:
    """Build a figure's text inside this block (``_("...")``, ``.format``): it comes out
    in :func:`figure_language`, English where Chinese has no font."""
    with use_language(figure_language()) as language:
        yield language


def _drawn(text: str | None) -> str | None:
    """``text`` as a figure draws it: Chinese with no font to draw it goes back to its
    English source when the catalog holds it (text built outside :func:`figure_text`)."""
    if not text or not _HAN.search(text):
        return text
    if figure_language() == get_language():
        return text
    from attnkit.i18n.catalog import english_of

    return english_of(get_language(), text)


def _prepare_fonts(*texts: Iterable[object] | None) -> None:
    """Before a figure creates any text (a text keeps the fonts of its creation): the CJK
    font when the language in force is Chinese (or the warning, once), or when some of
    ``texts`` (labels, tokens drawn as they are) is Chinese and a CJK font exists."""
    if get_language() in _NEEDS_CJK:
        figure_language()
    elif _has_chinese(texts) and (font := cjk_font()) is not None:
        _use_font(font)


def _has_chinese(texts: Iterable[Iterable[object] | None]) -> bool:
    return any(_HAN.search(str(t)) for group in texts if group is not None for t in group)


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
        raise ValueError(
            _("matrices must have 2 to 4 dims (rows, cols, Q, K), got {shape}").format(
                shape=tuple(m.shape)
            )
        )
    while m.dim() < 4:
        m = m.unsqueeze(0)
    rows, cols = m.shape[:2]
    Q, K = m.shape[2:]
    if xticklabels is not None and len(xticklabels) != K:
        raise ValueError(
            _("xticklabels has {n} labels for {K} columns").format(n=len(xticklabels), K=K)
        )
    if yticklabels is not None and len(yticklabels) != Q:
        raise ValueError(
            _("yticklabels has {n} labels for {Q} rows").format(n=len(yticklabels), Q=Q)
        )
    if titles is not None and len(titles) not in (cols, rows * cols):
        raise ValueError(
            _(
                "titles has {n} entries; expected {cols} (one per column) or {panels} (one "
                "per panel) for a {rows} x {cols} grid"
            ).format(n=len(titles), cols=cols, panels=rows * cols, rows=rows)
        )
    if row_titles is not None and len(row_titles) != rows:
        raise ValueError(
            _("row_titles has {n} entries for {rows} rows").format(n=len(row_titles), rows=rows)
        )
    _prepare_fonts([xlabel, ylabel], titles, row_titles, xticklabels, yticklabels)
    xlabel, ylabel = _drawn(xlabel), _drawn(ylabel)
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
                ax.set_ylabel(
                    ylabel if row_titles is None else f"{_drawn(row_titles[i])}\n{ylabel}"
                )
            if titles is not None:
                ax.set_title(_drawn(titles[j] if len(titles) == cols else titles[i * cols + j]))
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
    xlabel: str | None = None,
    ylabel: str = "",
    *,
    x: Sequence[float] | None = None,
    logy: bool = False,
    title: str | None = None,
    path: str | os.PathLike | None = None,
    figsize: tuple[float, float] = (5.0, 3.5),
) -> Figure:
    """One line per named curve (e.g. {"train loss": [...], "val loss": [...]});
    ``xlabel`` defaults to "epoch" in the figure's language."""
    _prepare_fonts(curves, [xlabel, ylabel, title])
    fig, ax = plt.subplots(figsize=figsize)
    for name, ys in curves.items():
        ys = list(ys)
        xs = list(x) if x is not None else list(range(1, len(ys) + 1))
        ax.plot(xs[: len(ys)], ys, label=_drawn(name))
    if xlabel is None:
        with figure_text():
            xlabel = _("epoch")
    ax.set_xlabel(_drawn(xlabel))
    ax.set_ylabel(_drawn(ylabel))
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(_drawn(title))
    ax.grid(True, alpha=0.3)
    if curves:
        ax.legend()
    save_figure(fig, path)
    return fig


LABEL_CHARS = 20  # a token drawn on an axis: at most this many characters (attnkit.views.text)


def _short(token: str) -> str:
    return token if len(token) <= LABEL_CHARS else token[: LABEL_CHARS - 1] + "…"


def _wrap(text: str, width: float, measure) -> str:
    """``text`` in lines no wider than ``width`` as ``measure`` (str -> width) draws them,
    broken at spaces where it can be, inside a word (a Chinese run) where it must."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        if not line or measure(f"{line} {word}") <= width:
            line = f"{line} {word}" if line else word
            if measure(line) <= width:
                continue
        else:
            lines.append(line)
            line = word
        piece = ""  # `line` alone is too wide: cut it where it must
        for c in line:
            if piece and measure(piece + c) > width:
                lines.append(piece)
                piece = ""
            piece += c
        line = piece
    lines.append(line)
    return "\n".join(lines)


def _fit(text_artist, width: float, renderer) -> None:
    """Wrap a figure text to ``width`` pixels, measured as the renderer draws it."""
    prop = text_artist.get_fontproperties()
    measure = lambda s: renderer.get_text_width_height_descent(s, prop, ismath=False)[0]  # noqa: E731
    text_artist.set_text(_wrap(text_artist.get_text(), width, measure))


def attention_panels(
    panels: Sequence[tuple[str, torch.Tensor, Sequence[str], Sequence[str]]],
    *,
    title: str = "",
    path: str | os.PathLike | None = None,
    cmap: str = "Reds",
) -> Figure:
    """Heatmaps side by side, one per ``(caption, matrix (Q, K), row tokens (Q), column
    tokens (K))``, each coloured from 0 to its own largest weight with the tokens on the
    axes (every n-th token beyond 40). The static picture of ``attnkit.show_attention``.

    Text is drawn as it is (no mathtext: a ``$`` or ``_`` in a token or a title stays
    itself); tokens longer than 20 characters are cut with "…"; captions wrap to their
    panel's width and the layout (constrained) keeps titles, captions and tick labels
    apart."""
    if not panels:
        raise ValueError(_("panels must hold at least one (caption, matrix, rows, cols)"))
    sizes = []
    for i, (_caption, m, rows, cols) in enumerate(panels):
        if m.dim() != 2 or tuple(m.shape) != (len(rows), len(cols)):
            raise ValueError(
                _(
                    "panels[{i}]: the matrix {shape} must be (len(rows), len(cols)) = "
                    "({rows}, {cols})"
                ).format(i=i, shape=tuple(m.shape), rows=len(rows), cols=len(cols))
            )
        sizes.append((max(2.5, 0.22 * min(len(cols), 60) + 1.5),
                      max(2.5, 0.22 * min(len(rows), 60) + 1.5)))  # fmt: skip
    _prepare_fonts([title], *((caption, *rows, *cols) for caption, _m, rows, cols in panels))
    fig, axes = plt.subplots(
        1, len(panels), figsize=(sum(w for w, _ in sizes), max(h for _, h in sizes) + 0.6),
        squeeze=False, gridspec_kw={"width_ratios": [w for w, _ in sizes]}, layout="constrained",
    )  # fmt: skip
    for ax, (caption, m, rows, cols) in zip(axes[0], panels):
        m = m.detach().float().cpu()
        ax.imshow(m.numpy(), cmap=cmap, vmin=0.0, vmax=float(m.max()) or 1.0, aspect="auto")
        for ticks, labels, rotation in ((ax.set_xticks, cols, 90), (ax.set_yticks, rows, 0)):
            every = max(1, -(-len(labels) // 40))
            ticks(range(0, len(labels), every), [_short(str(t)) for t in list(labels)[::every]],
                  rotation=rotation, fontsize=8, parse_math=False)  # fmt: skip
        ax.set_title(_drawn(caption) or "", fontsize=9, parse_math=False)
    if title:
        fig.suptitle(_drawn(title), fontsize=10, parse_math=False)
    # captions wrapped to their heatmap's width, the title to the figure's, once the layout
    # has placed the heatmaps: no caption reaches into its neighbour's
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax in axes[0]:
        _fit(ax.title, ax.get_window_extent(renderer).width, renderer)
    if title:
        _fit(fig._suptitle, 0.96 * fig.bbox.width, renderer)
    save_figure(fig, path)
    return fig
