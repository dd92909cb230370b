"""Attention views inline in notebooks: :func:`show_attention` draws attention maps as an
interactive, self-contained HTML output (head view, model view, matrix view), with a static
SVG picture for pages that run no script, and saves them as SVG, PNG or HTML.

The drawing code (``static/*.js``) is the explorer's too (``attnkit serve``): one copy.
"""

from attnkit.views.inputs import LMMaps, Panel
from attnkit.views.lm import lm_maps
from attnkit.views.view import MAX_TOKENS, MAX_WEIGHTS, AttentionView, show_attention

__all__ = ["MAX_TOKENS", "MAX_WEIGHTS", "AttentionView", "LMMaps", "Panel", "lm_maps",
           "show_attention"]  # fmt: skip
