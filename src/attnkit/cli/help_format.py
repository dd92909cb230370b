"""Help text that wraps Chinese as well as English.

argparse wraps help at spaces (``textwrap``) and counts characters: a Chinese help line
has no spaces and each character takes two columns, so it runs past the terminal and an
English word inside it is cut anywhere. :func:`wide_text` gives a formatter class that
wraps text holding wide characters by display width, between any two Chinese characters
or at a space, never before closing punctuation (，。：） ...), and ends a Chinese section
heading with "：" (argparse writes ":"); text without wide characters is formatted by
argparse's own code, byte for byte as before.
"""

from __future__ import annotations

import argparse
import functools
import re
import unicodedata

__all__ = ["display_width", "wide_text", "wrap"]

# one wide character, a run of other non-space characters, or a run of spaces
_TOKENS = re.compile(r"[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f"
                     r"\uff00-\uff60\uffe0-\uffe6]|[^\s\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3"
                     r"\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]+|\s+")  # fmt: skip
# a section's heading ends in argparse's ":" (a Chinese one takes "：")
_WIDE_HEADING_END = re.compile(r"(?m)(?<=[\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\uff00-\uff60]):$")
# what a line may not start with (it stays at the end of the line before)
_NO_LINE_START = set("，。、；：？！）》」』】”’…—%,.;:?!)]}")


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: two for a wide (CJK) character, one otherwise."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _has_wide(text: str) -> bool:
    return any(unicodedata.east_asian_width(c) in "WF" for c in text)


def wrap(text: str, width: int) -> list[str]:
    """``text`` (its spaces collapsed) in lines of at most ``width`` columns (a word longer
    than that keeps a line to itself); closing punctuation that does not fit takes the
    character before it to the next line."""
    lines: list[str] = []
    line: list[str] = []  # the tokens of the line being filled
    for token in _TOKENS.findall(text.strip()):
        if token.isspace():
            if line and not line[-1].isspace():
                line.append(" ")
            continue
        if line and display_width("".join(line) + token) > width:
            carried = []
            if token in _NO_LINE_START and len(line) > 1 and not line[-1].isspace():
                carried = [line.pop()]
            lines.append("".join(line).rstrip())
            line = carried
        line.append(token)
    if line:
        lines.append("".join(line).rstrip())
    return [x for x in lines if x]


class _WideText(argparse.HelpFormatter):
    def format_help(self) -> str:
        return _WIDE_HEADING_END.sub("：", super().format_help())

    def _split_lines(self, text: str, width: int) -> list[str]:
        if not _has_wide(text) or isinstance(self, argparse.RawTextHelpFormatter):
            return super()._split_lines(text, width)
        return wrap(self._whitespace_matcher.sub(" ", text), width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if not _has_wide(text) or isinstance(self, argparse.RawDescriptionHelpFormatter):
            return super()._fill_text(text, width, indent)
        lines = wrap(self._whitespace_matcher.sub(" ", text), width - len(indent))
        return "\n".join(indent + line for line in lines)


@functools.cache
def wide_text(formatter: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """``formatter`` that wraps Chinese help by display width (``formatter`` itself when it
    already does)."""
    if issubclass(formatter, _WideText):
        return formatter
    return type(f"WideText{formatter.__name__}", (_WideText, formatter), {})
