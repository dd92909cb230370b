"""The views' words in the reader's language, from attnkit's one catalog.

Python text is translated where it is shown (:func:`shown`), so a view follows
:func:`attnkit.set_language` (or the environment) when it is drawn, not when it was made.
A panel's title and axis names are kept in English (a :class:`Message` when built from a
template) and translated at that moment. The scripts (``static/*.js``) get their words as a
``{English: translation}`` table (:func:`script_table`) embedded in each view, built from
``SCRIPT_MESSAGES``: every string the scripts show, marked here for the catalog. A script
looks a string up with ``t("English {field}", {field: ...})``, and a string the table lacks
stays English.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from attnkit.i18n import N_, _, get_language
from attnkit.i18n.catalog import messages

__all__ = ["LABEL_CHARS", "SCRIPT_MESSAGES", "Message", "html_lang", "json_table", "script_table",
           "short", "shown"]  # fmt: skip

# a token drawn as a label has at most this many characters: a longer one is cut to its first
# LABEL_CHARS - 1 and "…" (the scripts' ns.short, the same rule); its full text shows on hover
LABEL_CHARS = 20
ELLIPSIS = "…"

# the <html lang> (BCP 47) of each language attnkit speaks
HTML_LANG = {"en": "en", "zh": "zh-CN", "pt": "pt"}

SCRIPT_MESSAGES = [
    # heatmap.js: a cell's tooltip
    N_("{qname} “{query}” → {kname} “{key}”: {weight}"),
    # panels.js
    N_("this browser has no DecompressionStream (Chrome 80+, Firefox 113+, Safari 16.4+)"),
    N_("{title}: {n} weights embedded, expected {L} x {H} x {Q} x {K}"),
    N_("head {n}"),
    N_("all heads"),
    N_("mean of heads"),
    N_("layer {n}"),
    N_("layer {layer}, {head}"),
    N_("{qname} “{token}”: its attention over the {kname} tokens"),
    N_(" (numbers: mean of heads; lines: one colour per head)"),
    N_(" · click it again to unpin"),
    N_(" · click to pin"),
    N_("hover or click a {qname} token to see its row"),
    N_("; one colour per head"),
    N_("; lines under 0.01 not drawn"),
    N_(
        "{Q} x {K} x {n} lines are too many to draw at once: hover or click a {qname} token "
        "to see its row"
    ),
    N_("layer {layer}, head {head}: click to enlarge"),
    N_("{L} layers x {H} heads, each map coloured from 0 to its own largest weight"),
    N_("; thumbnails downsampled from {Q} x {K} to {q} x {k} (means of {f} x {f} blocks)"),
    N_("; click a map to enlarge it"),
    N_(
        "colour scale from 0 to {vmax}, the largest weight of this map; hover a cell for its weight"
    ),
    # views.js
    N_("head view"),
    N_("model view"),
    N_("matrix view"),
    N_("attention"),
    N_("layer"),
    N_("all heads (colours)"),
    N_("download this view as {format}"),
    N_('could not draw the PNG here ({error}); download the SVG, or use .save("x.png")'),
    N_("the interactive view could not start ({error}); the static picture stays"),
]


class Message(str):
    """English text that remembers the message it was made from: ``str`` of it is the
    English (``template.format(**fields)``); :func:`shown` gives it in the language in
    force when it is drawn."""

    template: str
    fields: dict

    def __new__(cls, template: str, **fields: object) -> Message:
        text = super().__new__(cls, template.format(**fields))
        text.template, text.fields = template, fields
        return text

    def __reduce__(self):
        return (_message, (self.template, self.fields))


def _message(template: str, fields: dict) -> Message:
    return Message(template, **fields)


def shown(text: str) -> str:
    """``text`` in the language in force: a :class:`Message` or a catalog message
    translated; any other text (a title of the caller's) as it is."""
    if isinstance(text, Message):
        return _(text.template).format(**text.fields)
    return _(text) if text else text


def short(token: str, limit: int = LABEL_CHARS) -> str:
    """``token`` as a label draws it: itself up to ``limit`` characters (code points), else
    its first ``limit - 1`` and "…"."""
    return token if len(token) <= limit else token[: limit - 1] + ELLIPSIS


def html_lang(language: str | None = None) -> str:
    """The ``lang`` attribute of a page in ``language`` (default: the language in force)."""
    return HTML_LANG.get(language or get_language(), "en")


def script_table(extra: Iterable[str] = (), language: str | None = None) -> dict[str, str]:
    """``{English: translation}`` of the scripts' words (and ``extra``) in ``language``
    (default: the language in force); English keeps an empty table (every lookup falls
    back to its key)."""
    language = language or get_language()
    if language == "en":
        return {}
    table = messages(language, [*SCRIPT_MESSAGES, *extra])
    return {k: v for k, v in table.items() if v != k}


def json_table(table: dict) -> str:
    """``table`` as JSON to embed in a ``<script type="application/json">``: no ``<``, so
    no ``</script>`` can end it early."""
    return json.dumps(table, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
