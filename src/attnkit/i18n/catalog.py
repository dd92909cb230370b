"""The compiled catalog: every area's ``.mo`` of one language, chained into one lookup.

The catalog is one set of messages split into files by area of the package (``AREAS``:
which source files each area's messages come from), so that a change to the tour never
touches the command line's file; a lookup searches them all. ``tools/i18n.py`` writes the
files; this module only reads them.
"""

from __future__ import annotations

import functools
import gettext as _gettext
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "AREAS",
    "COVERAGE",
    "LOCALE_DIR",
    "PARTIAL",
    "english_of",
    "messages",
    "translations",
]

LOCALE_DIR = Path(__file__).with_name("locale")

# area -> the package's source files whose messages it holds (globs relative to
# src/attnkit); ``argparse`` holds the standard library's own argparse text ("usage:").
# Every source file is in exactly one area (tests/i18n checks it).
AREAS: dict[str, tuple[str, ...]] = {
    "core": (
        "_validate.py", "checkpoint.py", "cpu_memory.py", "metrics.py", "distributed.py", "__init__.py", "__main__.py", "i18n/**/*.py", "attention/**/*.py",
        "data/**/*.py", "models/**/*.py", "convert/**/*.py", "inference/**/*.py",
        "training/**/*.py",
    ),
    "viz": ("viz.py",),
    "cli": ("cli/**/*.py",),
    "tour": ("tour/**/*.py",),
    "exercises": ("exercises/**/*.py",),
    "views": ("views/**/*.py", "serve/**/*.py"),
    "d2l": ("d2l/**/*.py",),
    "argparse": (),
}  # fmt: skip

# the areas each language covers (tests/i18n): Portuguese proves the mechanism is not
# two-language and covers the command line and the tour, and of the other areas what the
# command line's help shows (PARTIAL: the config fields' documentation, the models' names)
COVERAGE: dict[str, tuple[str, ...]] = {
    "zh": tuple(AREAS),
    "pt": ("cli", "tour", "argparse", "core"),
}
PARTIAL: dict[tuple[str, str], str] = {("pt", "core"): "cli-help"}


@functools.cache
def translations(language: str) -> _gettext.NullTranslations:
    """Every area's compiled messages for ``language``, as one lookup (English, the
    source, where an area has none)."""
    chain: _gettext.NullTranslations = _gettext.NullTranslations()
    folder = LOCALE_DIR / language / "LC_MESSAGES"
    for area in AREAS:
        path = folder / f"{area}.mo"
        if path.exists():
            with path.open("rb") as f:
                found = _gettext.GNUTranslations(f)
            found.add_fallback(chain)
            chain = found
    return chain


@functools.cache
def _sources(language: str) -> dict[str, str]:
    """``{translation: English source}`` over every area of ``language`` (gettext has no
    public way to list a catalog: its compiled tables are read)."""
    found: dict[str, str] = {}
    lookup: _gettext.NullTranslations | None = translations(language)
    while lookup is not None:
        for source, text in getattr(lookup, "_catalog", {}).items():
            if isinstance(source, str) and source and isinstance(text, str):
                found.setdefault(text, source)
        lookup = getattr(lookup, "_fallback", None)
    return found


def english_of(language: str, text: str) -> str:
    """The English source of ``text`` when it is one of ``language``'s translations, else
    ``text`` (a figure with no font for Chinese draws the source instead)."""
    return _sources(language).get(text, text) if language != "en" else text


def messages(language: str, sources: Iterable[str]) -> dict[str, str]:
    """``{English source: its text in language}`` for ``sources``: what a page's script
    gets (the explorer, the notebook views), built from the same catalog."""
    lookup = translations(language) if language != "en" else _gettext.NullTranslations()
    return {source: lookup.gettext(source) for source in sources}
