"""The drawing code, one copy: the scripts and styles under ``attnkit/views/static``, read
from the installed package. The notebook views embed them in each output; the explorer
page (``attnkit.serve``) serves the same files."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["SCRIPTS", "read_static", "script", "style"]

# in load order: heatmap.js (shared with the explorer), panels.js (the three views),
# views.js (a notebook view mounted from its data)
SCRIPTS = ("heatmap.js", "panels.js", "views.js")
STYLE = "views.css"


@functools.cache
def read_static(name: str) -> bytes:
    """The bytes of one file of ``attnkit/views/static``."""
    if name not in (*SCRIPTS, STYLE):
        raise ValueError(f"name must be one of {', '.join((*SCRIPTS, STYLE))}, got {name!r}")
    return (resources.files("attnkit.views") / "static" / name).read_bytes()


def script() -> str:
    """Every script, concatenated in load order."""
    return "\n".join(read_static(n).decode("utf-8") for n in SCRIPTS)


def style() -> str:
    return read_static(STYLE).decode("utf-8")
