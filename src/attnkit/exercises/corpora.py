"""The text an exercise runs on, and what it is called in the answer.

The tests run every exercise at ``small`` size on data the project ships or generates,
so they never need a download. At full size an exercise reads the book's own data when
it is on this machine without a network: The Time Machine from ``$ATTNKIT_TIMEMACHINE``
or attnkit's download cache, the Tatoeba ``fra.txt`` from ``$ATTNKIT_FRA`` or the cache;
otherwise the same built-in corpus as the tests. The name comes back with the data, so
an answer always says which text it measured.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fra_path", "text_lines", "time_machine_path"]


def time_machine_path() -> Path | None:
    """A local *The Time Machine* (``$ATTNKIT_TIMEMACHINE``, else the cache), or None."""
    from attnkit.data.hub import cache_dir

    for candidate in (os.environ.get("ATTNKIT_TIMEMACHINE"), cache_dir() / "timemachine.txt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def fra_path() -> Path | None:
    """A local Tatoeba ``fra.txt`` (``$ATTNKIT_FRA``, else the cache), or None."""
    from attnkit.data.hub import cache_dir

    for candidate in (os.environ.get("ATTNKIT_FRA"), cache_dir() / "fra-eng" / "fra.txt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def text_lines(small: bool) -> tuple[str, list[str]]:
    """(name, normalized lines): *The Time Machine* at full size when it is here, else
    the built-in English corpus (``attnkit.data.lm.builtin_corpus_lines``; always at
    ``small`` size, so tests never depend on a download)."""
    from attnkit.data.lm import builtin_corpus_lines, read_text_lines

    path = None if small else time_machine_path()
    if path is not None:
        return "The Time Machine", read_text_lines(path)
    return "the built-in corpus (Python's reference topics)", builtin_corpus_lines()
