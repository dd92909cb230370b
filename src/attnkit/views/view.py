"""An attention view: what a notebook shows for :func:`show_attention`, and what ``save``
writes.

The HTML output is self-contained: the drawing code and styles (``attnkit/views/static``,
the explorer's own) and the weights (8 bits per weight, see :mod:`attnkit.views.encode`)
travel inside it; nothing is loaded from a network or a server. It also carries the
static picture (:mod:`attnkit.views.svg`) as an ``<img>`` of the SVG (a ``data:`` URI),
shown until the script starts and wherever scripts do not run: an untrusted notebook's
output is sanitized (no script, no ``<style>``, no inline ``<svg>``, no empty ``hidden``
attribute), and what is left is that picture. ``image/svg+xml`` holds the same SVG for
front ends that prefer it. The root carries ``mathjax_ignore`` (MathJax 3, JupyterLab 4)
and ``tex2jax_ignore`` (MathJax 2, the classic Notebook): a ``$`` in a token is no TeX.
"""

from __future__ import annotations

import html
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from attnkit._validate import one_of
from attnkit.i18n import N_, _, get_language
from attnkit.views import assets
from attnkit.views.encode import panel_spec
from attnkit.views.inputs import Panel, panels_from, total_weights
from attnkit.views.svg import image_tag, picture, static_svg
from attnkit.views.text import html_lang, json_table, script_table

__all__ = ["MAX_TOKENS", "MAX_WEIGHTS", "THUMB", "AttentionView", "show_attention"]

MAX_TOKENS = 1024  # tokens on one axis of one map
MAX_WEIGHTS = 1 << 26  # weights in one view (64 Mi: a 512-token 12 x 12 model holds 36 Mi)
THUMB = 64  # the model view's thumbnails: at most this many cells a side (block means)
VIEWS = ("head", "model", "matrix")
# kind= may name a translator's panel by its short name (the coreference topic's words)
KIND_ALIASES = {"encoder": "encoder_self", "decoder": "decoder_self"}
QUANTIZATION = N_(
    "weights embedded with 8 bits each: per map, w = q / 255 x (the map's largest weight), "
    "within 1/510 of that largest weight"
)


class AttentionView:
    """Attention maps, drawn: ``panels`` (one per kind of attention) shown in the
    ``view`` ("head", "model" or "matrix") at ``layer`` and ``head`` ("all", "mean" or
    an index), opened on the panel ``kind`` (a panel's key, or None: the first), all
    changeable in the page. ``save`` writes SVG, PNG or HTML."""

    def __init__(self, panels: list[Panel], *, title: str = "", view: str = "head",
                 layer: int = -1, head: int | str = "all", kind: str | None = None) -> None:  # fmt: skip
        if (
            not isinstance(panels, list)
            or not panels
            or not all(isinstance(p, Panel) for p in panels)
        ):
            raise TypeError(
                _("panels must be a non-empty list of Panel (show_attention builds them)")
            )
        self.panels = panels
        self.title = title
        self.view = one_of("view", view, VIEWS)
        L = max(p.weights.shape[0] for p in panels)
        H = max(p.weights.shape[1] for p in panels)
        if isinstance(layer, bool) or not isinstance(layer, int) or not -L <= layer < L:
            raise ValueError(
                _("layer must be an int in [{low}, {L}) for {L} layers, got {layer}").format(
                    low=-L, L=L, layer=repr(layer)
                )
            )
        self.layer = layer % L
        if isinstance(head, str):
            one_of("head", head, ("all", "mean"))
        elif isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < H:
            raise ValueError(
                _('head must be "all", "mean" or an int in [0, {H}), got {head}').format(
                    H=H, head=repr(head)
                )
            )
        self.head = head
        self.panel = 0 if kind is None else _panel_index(panels, kind)
        self.n_weights = total_weights(panels)
        self._svg: dict[str, str] = {}  # language -> the static picture

    @property
    def too_large(self) -> str | None:
        """Why the interactive view is left out (too many tokens or weights), or None."""
        longest = max(max(p.weights.shape[2:]) for p in self.panels)
        if longest > MAX_TOKENS:
            return _(
                "{n} tokens on one axis: the interactive view draws at most {max}; pass a "
                "slice of the maps (fewer tokens)"
            ).format(n=longest, max=MAX_TOKENS)
        if self.n_weights > MAX_WEIGHTS:
            return _(
                "{n:,} weights: the interactive view embeds at most {max:,} (a 512-token map "
                "of 12 layers x 12 heads holds {example:,}); pass fewer layers or heads, e.g. "
                "weights[-2:] for the last two layers"
            ).format(n=self.n_weights, max=MAX_WEIGHTS, example=512 * 512 * 144)
        return None

    def __repr__(self) -> str:
        kinds = ", ".join(f"{p.key} {tuple(p.weights.shape)}" for p in self.panels)
        kind = self.panels[self.panel].key
        return (f"AttentionView({kinds}; kind={kind!r}, view={self.view!r}, layer={self.layer}, "
                f"head={self.head!r})")  # fmt: skip

    # ------------------------------------------------------------------ outputs

    def to_svg(self) -> str:
        """The static picture (one heatmap per panel) as an SVG document, its words in the
        language in force."""
        language = get_language()
        if language not in self._svg:
            self._svg[language] = static_svg(self.panels, self.layer, self.head, self.title)
        return self._svg[language]

    def alt(self) -> str:
        """The static picture in words (its ``alt``): the title and each panel's caption."""
        captions = [picture(p, self.layer, self.head)[2] for p in self.panels]
        return "; ".join([self.title, *captions] if self.title else captions)

    def spec(self) -> dict:
        """The data the page draws from (JSON-ready): each panel's tokens and weights."""
        return {
            "title": self.title,
            "panels": [panel_spec(p) for p in self.panels],
            "panel": self.panel,
            "view": self.view,
            "layer": self.layer,
            "head": self.head,
            "thumb": THUMB,
            "filename": "attention",
            "quantization": _(QUANTIZATION),
        }

    def to_html(self, standalone: bool = False) -> str:
        """The view as an HTML fragment (a notebook output), or a whole page; its words in
        the language in force (the scripts' own in an embedded table)."""
        root = f"attnkit-view-{uuid.uuid4().hex}"
        lang = html_lang()
        # hidden="hidden", not a bare hidden: sanitize-html drops an empty "hidden" attribute
        parts = [f'<div class="attnkit-view mathjax_ignore tex2jax_ignore" id="{root}" '
                 f'lang="{lang}">', f"<style>{assets.style()}</style>"]  # fmt: skip
        too_large = self.too_large
        message = html.escape(too_large or "")
        hidden = "" if message else ' hidden="hidden"'
        parts.append(f'<div class="attnkit-message"{hidden}>{message}</div>')
        # shown once the script runs; the static picture carries its own title
        title = f'<div class="attnkit-title">{html.escape(self.title)}</div>' if self.title else ""
        foot = f'<div class="attnkit-foot">{html.escape(_(QUANTIZATION))}</div>'
        parts.append(f'<div class="attnkit-live" hidden="hidden">{title}<div class="attnkit-bar">'
                     f'</div><div class="attnkit-note"></div><div class="attnkit-body"></div>{foot}'
                     "</div>")  # fmt: skip
        parts.append(f'<div class="attnkit-fallback">{image_tag(self.to_svg(), self.alt())}</div>')
        if too_large is None:
            data = json.dumps(self.spec(), separators=(",", ":"), ensure_ascii=False)
            data = data.replace("<", "\\u003c")  # no "</script>" can end the data early
            parts.append(f'<script type="application/json" class="attnkit-data">{data}</script>')
            words = json_table(script_table())  # {English: translation}; {} in English
            parts.append(f'<script type="application/json" class="attnkit-i18n">{words}</script>')
            mount = (
                "\n;(function (s) { var root = s && s.closest ? s.closest('.attnkit-view') : null;"
                f" var go = function () {{ window.attnkitViews.mount(root || document.getElementById('{root}')); }};"
                " if (root || document.getElementById"
                f"('{root}')) go(); else setTimeout(go, 0); }})(document.currentScript);"
            )  # fmt: skip
            parts.append(f"<script>{assets.script()}{mount}</script>")
        parts.append("</div>")
        fragment = "\n".join(parts)
        if not standalone:
            return fragment
        title = html.escape(self.title or _("attention"))
        return (f'<!doctype html>\n<html lang="{lang}"><head><meta charset="utf-8"><title>{title}'
                f"</title></head><body>\n{fragment}\n</body></html>\n")  # fmt: skip

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self.to_html(), "image/svg+xml": self.to_svg(),
                "text/plain": repr(self)}  # fmt: skip

    def figure(self):
        """The static picture as a matplotlib ``Figure`` (what ``save("x.png")`` writes)."""
        from attnkit.viz import attention_panels

        panels = []
        for p in self.panels:
            m, f, caption = picture(p, self.layer, self.head)
            panels.append((caption, m, p.queries[::f], p.keys[::f]))
        return attention_panels(panels, title=self.title)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the view: ``.html`` (a page with the interactive view, offline), ``.svg``
        (the static picture) or ``.png`` (the static picture drawn by matplotlib), in the
        language in force."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                _("path must be a str or a path, got {type}").format(type=type(path).__name__)
            )
        path = Path(path)
        suffix = one_of("path's suffix", path.suffix.lower(), (".svg", ".png", ".html"))
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".svg":
            path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + self.to_svg(), "utf-8")
        elif suffix == ".html":
            path.write_text(self.to_html(standalone=True), "utf-8")
        else:
            import matplotlib.pyplot as plt

            from attnkit.viz import save_figure

            fig = self.figure()
            save_figure(fig, path)
            plt.close(fig)
        return path


def show_attention(
    maps,  # AttentionMaps | LMMaps | a generation result | Tensor (Q,K), (H,Q,K), (L,H,Q,K)
    tokens: Sequence[str] | None = None,  # (K,) key tokens (and query tokens when Q == K)
    query_tokens: Sequence[str] | None = None,  # (Q,) query tokens
    *,
    title: str | None = None,
    view: str = "head",
    layer: int = -1,
    head: int | str = "all",
    kind: str | None = None,
) -> AttentionView:
    """Attention maps as an interactive view for a notebook (offline, self-contained):
    the head view (queries and keys in two columns, lines weighted by attention, hover or
    click a token), the model view (every layer x head, click to enlarge) and the matrix
    view (tokens on the axes), with layer and head pickers and download buttons.

    ``maps``: a translator's :class:`~attnkit.inference.attention_maps.AttentionMaps`
    (encoder self, decoder self and cross attention), a language model's
    :class:`~attnkit.views.LMMaps` (:func:`~attnkit.views.lm_maps`), a generation result
    of the explorer (``prompt_tokens``, ``new_tokens``, ``attention``), or a tensor (Q, K),
    (H, Q, K) or (L, H, Q, K) of weights >= 0 with its ``tokens`` (K) and ``query_tokens``
    (Q; default ``tokens`` when Q == K). ``layer`` (negative: from the last) and ``head``
    ("all", "mean" or an index) pick what shows first and what the static picture draws;
    both count from 0 (the page's pickers say "layer 1", "head 1" for index 0). ``kind``
    picks the panel the view opens on: a translator's ``"encoder_self"`` (or
    ``"encoder"``), ``"decoder_self"`` (or ``"decoder"``) or ``"cross"``; None: the first.
    A head named 1-based, as the coreference topic's ``head_accuracy`` (kind, layer,
    head) names it: ``show_attention(maps, kind=kind, layer=layer - 1, head=head - 1)``.
    """
    if title is not None and not isinstance(title, str):
        raise TypeError(_("title must be a str, got {type}").format(type=type(title).__name__))
    panels = panels_from(maps, tokens, query_tokens, title or None)
    if title is None:
        title = _default_title(maps)
    return AttentionView(panels, title=title, view=view, layer=layer, head=head, kind=kind)


def _panel_index(panels: list[Panel], kind: object) -> int:
    """The index of the panel ``kind`` names (its key or a ``KIND_ALIASES`` short name);
    ValueError listing the names these panels answer to."""
    keys = [p.key for p in panels]
    names = keys + [short for short, key in KIND_ALIASES.items() if key in keys]
    kind = one_of("kind", kind, names)
    return keys.index(KIND_ALIASES.get(kind, kind))


def _default_title(maps) -> str:
    translation = getattr(maps, "translation", None)
    if isinstance(translation, str) and hasattr(maps, "source"):
        return f"{' '.join(maps.source)}  →  {translation}"
    return ""
