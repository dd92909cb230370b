"""The static picture every view carries: an SVG a page shows without running a script
(an exported notebook, GitHub, a notebook opened without a kernel, an untrusted notebook).
Inside the HTML output it travels as an ``<img>`` whose source is the SVG as a ``data:``
URI (:func:`image_tag`): the sanitizers of untrusted output (JupyterLab's, Notebook 7's)
keep an ``<img>`` and its ``src`` but strip inline ``<svg>`` (leaving its text).

For each panel, one heatmap: a layer's map, one head or the mean of heads, with the tokens
on the axes. Maps longer than ``MAX_SIDE`` tokens on a side are drawn as block means
(said in the caption). The colours are the views' (white -> orange -> dark red, from 0 to
the map's largest weight); each cell carries ``data-row``, ``data-col`` and
``data-weight``. Tokens longer than :data:`~attnkit.views.text.LABEL_CHARS` are cut
with "…", their full text in a ``<title>`` (the tooltip where the SVG is inline).
"""

from __future__ import annotations

import base64
import html
import math
import re
import unicodedata
from xml.sax.saxutils import escape, quoteattr

import torch
from torch import Tensor

from attnkit.i18n import _
from attnkit.views.inputs import Panel
from attnkit.views.text import short, shown

__all__ = ["MAX_SIDE", "image_tag", "picture", "static_svg"]

MAX_SIDE = 64  # cells a side of the static picture; longer maps are drawn as block means
STOPS = ((255, 255, 255), (252, 141, 89), (127, 0, 0))  # the same stops as heatmap.js
# characters XML 1.0 cannot hold (and C1 controls): written as \uXXXX text
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _color(t: float) -> str:
    t = min(1.0, max(0.0, t)) * (len(STOPS) - 1)
    i = min(int(t), len(STOPS) - 2)
    f = t - i
    c = [round(a + f * (b - a)) for a, b in zip(STOPS[i], STOPS[i + 1])]
    return f"rgb({c[0]},{c[1]},{c[2]})"


def _text(s: str) -> str:
    return escape(_NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", s))


def _width(text: str, char: float = 6.5) -> float:
    """About how wide ``text`` is drawn at 11 px: ``char`` a character, 11 px a wide (CJK)
    one."""
    return sum(11.0 if unicodedata.east_asian_width(c) in "WF" else char for c in text)


def _label(token: str) -> str:
    """A token as an SVG text's content: cut when long, the full token in a <title>."""
    label = short(token)
    return _text(label) + ("" if label == token else f"<title>{_text(token)}</title>")


def _block_means(m: Tensor, f: int) -> Tensor:
    """(Q, K) -> (ceil(Q / f), ceil(K / f)): the mean of each f x f block."""
    Q, K = m.shape
    pad = torch.zeros(math.ceil(Q / f) * f, math.ceil(K / f) * f, dtype=m.dtype)
    ones = torch.zeros_like(pad)
    pad[:Q, :K], ones[:Q, :K] = m, 1.0
    sums = pad.reshape(pad.shape[0] // f, f, -1, f).sum((1, 3))
    return sums / ones.reshape(ones.shape[0] // f, f, -1, f).sum((1, 3))


def picture(panel: Panel, layer: int, head: int | str) -> tuple[Tensor, int, str]:
    """The map drawn for ``panel``: (rows, cols) after block means, the block side f and a
    caption (in the language in force). ``layer`` is clamped to the panel's layers; ``head``
    an int or "mean"/"all"."""
    L, H = panel.weights.shape[:2]
    layer = min(layer, L - 1)
    if isinstance(head, int) and head < H:
        m, which = panel.weights[layer, head], _("head {n}").format(n=head + 1)
    else:
        m, which = panel.weights[layer].mean(0), _("mean of heads") if H > 1 else ""
    f = max(1, math.ceil(max(m.shape) / MAX_SIDE))
    if L > 1:
        where = _("layer {layer}, {head}").format(layer=layer + 1, head=which) if which else (
            _("layer {n}").format(n=layer + 1))  # fmt: skip
    else:
        where = which
    caption = shown(panel.title) + (f" · {where}" if where else "")
    if f > 1:
        caption += " · " + _("{rows} x {cols} shown as means of {f} x {f} blocks").format(
            rows=m.shape[0], cols=m.shape[1], f=f
        )
    return (_block_means(m, f) if f > 1 else m), f, caption


def _panel_svg(panel: Panel, layer: int, head: int | str, x0: float, y0: float):
    m, f, caption = picture(panel, layer, head)
    R, C = m.shape
    cell = max(4, min(22, 560 // max(R, C)))
    every = max(1, math.ceil(11 / cell))
    rows = [panel.queries[i * f] for i in range(R)]
    cols = [panel.keys[i * f] for i in range(C)]
    width = lambda labels: max((_width(short(s)) for s in labels[::every]), default=6.5) + 10  # noqa: E731
    left, top = x0 + width(rows), y0 + 18 + width(cols)
    vmax = float(m.max()) or 1.0
    parts = [f'<g class="panel" data-kind={quoteattr(panel.key)} data-rows="{R}" '
             f'data-cols="{C}" data-block="{f}" data-vmax="{vmax:.6f}">',
             f'<text x="{x0:.1f}" y="{y0 + 12:.1f}" font-weight="600">{_text(caption)}</text>']  # fmt: skip
    for r in range(0, R, every):
        parts.append(f'<text class="row-label" x="{left - 4:.1f}" y="{top + (r + 0.5) * cell:.1f}" '
                     f'text-anchor="end" dominant-baseline="middle">{_label(rows[r])}</text>')  # fmt: skip
    for c in range(0, C, every):
        x, y = left + (c + 0.5) * cell, top - 4
        parts.append(f'<text class="col-label" x="{x:.1f}" y="{y:.1f}" dominant-baseline="middle" '
                     f'transform="rotate(-90 {x:.1f} {y:.1f})">{_label(cols[c])}</text>')  # fmt: skip
    for r, row in enumerate(m.tolist()):
        for c, w in enumerate(row):
            parts.append(f'<rect class="cell" x="{left + c * cell:.1f}" y="{top + r * cell:.1f}" '
                         f'width="{cell}" height="{cell}" fill="{_color(w / vmax)}" data-row="{r}" '
                         f'data-col="{c}" data-weight="{w:.6f}"/>')  # fmt: skip
    parts.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{C * cell}" height="{R * cell}" '
                 'fill="none" stroke="#bbb"/></g>')  # fmt: skip
    right = max(left + C * cell, x0 + _width(caption, 6.8))
    return parts, right, top + R * cell


def static_svg(panels: list[Panel], layer: int, head: int | str, title: str = "") -> str:
    """The static picture of ``panels`` side by side, as an SVG document."""
    x, y0, bottom, parts = 8.0, 26.0 if title else 4.0, 0.0, []
    for panel in panels:
        body, right, low = _panel_svg(panel, layer, head, x, y0)
        parts += body
        x, bottom = right + 28, max(bottom, low)
    W, H = math.ceil(max(x - 20, 16 + _width(title, 6.8))), math.ceil(bottom + 8)
    head_line = f'<text x="8" y="16" font-weight="600">{_text(title)}</text>' if title else ""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="attnkit-static" width="{W}" '
        f'height="{H}" viewBox="0 0 {W} {H}" font-family="system-ui, sans-serif" '
        f'font-size="11" fill="#1d2330"><rect width="{W}" height="{H}" fill="#fff"/>'
        + head_line
        + "".join(parts)
        + "</svg>"
    )


_SIZE = re.compile(r'<svg [^>]*?width="(\d+)" height="(\d+)"')


def image_tag(svg: str, alt: str) -> str:
    """``svg`` (a :func:`static_svg` document) as an ``<img>`` whose source is a base64
    ``data:`` URI, at its own size and never wider than the output: what survives the
    sanitizers of untrusted notebook output (no inline SVG, no script, no stylesheet)."""
    found = _SIZE.match(svg)
    size = f' width="{found[1]}" height="{found[2]}"' if found else ""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (f'<img class="attnkit-picture" src="data:image/svg+xml;base64,{data}"{size} '
            f'alt="{html.escape(alt)}" style="max-width: 100%; height: auto">')  # fmt: skip
