"""d2l-zh's terms and style in every Chinese string attnkit shows.

    python -m tools.zh_style            # every problem, with where it is
    python -m tools.zh_style FILE ...   # only these files
    python -m tools.zh_style --fix FILE ...  # mend spacing and , ; : ? ! (then review the diff)

What is checked (tests/i18n/test_zh_style.py asserts none is found):
- terms: no variant that src/attnkit/i18n/glossary.toml lists under ``avoid`` (教师强制 where
  the book says 强制教学, 隐藏状态 for 隐状态, ...);
- spacing: no space between a Chinese character and Latin text, a digit or a placeholder
  (d2l-zh writes "使用PyTorch训练10个迭代周期");
- punctuation: Chinese text takes Chinese punctuation: no ASCII , ; : ? ! or ( ) next to a
  Chinese character, no straight quotes (“” and ‘’ instead).
Code (``` blocks, `inline`), math ($...$) and URLs are left out of the check, as are a
Markdown table's separators and list markers.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "attnkit"
GLOSSARY = SRC / "i18n" / "glossary.toml"

HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_HAN = re.compile(f"[{HAN}]")
# a Chinese character, then a space, then Latin/digit/placeholder (or the reverse)
_SPACE = re.compile(f"[{HAN}] +[A-Za-z0-9{{%<$]|[A-Za-z0-9}}>)$] +[{HAN}]")
_ASCII_PUNCT = re.compile(
    f"[{HAN}][,;:?!]|[{HAN}]\\.(?=\\s|$)|[{HAN}]\\(|\\([^()]*[{HAN}][^()]*\\)"
)
_STRAIGHT_QUOTE = re.compile(r"\"|(?<![A-Za-z])'|'(?![A-Za-z])")
# left out of the check: fenced code, inline code, math, URLs, format fields' specs
_CODE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]+\$|https?://\S+", re.S)


def glossary() -> list[dict]:
    return tomllib.loads(GLOSSARY.read_text(encoding="utf-8"))["term"]


def _avoided() -> list[tuple[str, str]]:
    return [(bad, term["zh"]) for term in glossary() for bad in term.get("avoid", [])]


def problems(text: str) -> list[str]:
    """What breaks d2l-zh's terms or style in ``text`` (empty when nothing does, and
    always for text with no Chinese)."""
    if not _HAS_HAN.search(text):
        return []
    found = []
    prose = _CODE.sub(" ", text)
    for bad, good in _avoided():
        if bad in prose.replace(" ", "") if " " not in bad else bad in prose:
            found.append(f"term: {bad!r} (d2l-zh writes {good!r})")
    for line in prose.splitlines():
        if not _HAS_HAN.search(line):
            continue
        for m in _SPACE.finditer(line):
            found.append(f"space between Chinese and Latin/digits: {m.group()!r}")
        for m in _ASCII_PUNCT.finditer(line):
            found.append(f"ASCII punctuation in Chinese text: {m.group()!r}")
        if _STRAIGHT_QUOTE.search(line):
            found.append(f"straight quote in Chinese text (use “” or ‘’): {line.strip()[:60]!r}")
    return found


_FIX_SPACE = re.compile(
    f"(?<=[{HAN}])( +| *\\\\\n *)(?=[A-Za-z0-9{{%<$])|(?<=[A-Za-z0-9}}>)$])( +| *\\\\\n *)(?=[{HAN}])"
)
_FULL_WIDTH = {",": "，", ";": "；", ":": "：", "?": "？", "!": "！"}


def fix(text: str) -> str:
    """``text`` with the mechanical breaks mended, code and math left as they are: the
    spaces between Chinese and Latin/digits removed (a TOML line continuation ``\\``
    between them too) and ASCII , ; : ? ! after a Chinese character made full-width.
    Quotes and parentheses need a reader: they are only reported."""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_fix_prose(text[last : m.start()]))
        out.append(m.group())
        last = m.end()
    out.append(_fix_prose(text[last:]))
    return "".join(out)


def _fix_prose(text: str) -> str:
    text = _FIX_SPACE.sub("", text)
    text = re.sub("(?<=[，。：；！？）、])[ ]+|[ ]+(?=[，。：；！？（）、])", "", text)
    return re.sub(f"(?<=[{HAN}])[,;:?!]", lambda m: _FULL_WIDTH[m.group()], text)


def _po_strings(path: Path) -> Iterator[tuple[str, str]]:
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        catalog = read_po(f)
    for message in catalog:
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for s in strings:
            if message.id and s:
                yield f"{path.relative_to(ROOT)}: {str(message.id)[:50]!r}", s


def _toml_strings(path: Path, value, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _toml_strings(path, item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _toml_strings(path, item, f"{where}[{i}]")
    elif isinstance(value, str):
        yield f"{path.relative_to(ROOT)}: {where}", value


def chinese_texts(paths: list[Path] | None = None) -> Iterator[tuple[str, str]]:
    """(where, text) for every Chinese text attnkit shows: the zh catalog, the exercise
    answers, the Chinese docs and README, the Chinese notebooks' markdown."""
    if paths is None:
        paths = [
            *sorted((SRC / "i18n" / "locale" / "zh").rglob("*.po")),
            *sorted((SRC / "exercises" / "text").glob("*.toml")),
            *sorted(ROOT.glob("*.zh.md")),
            *sorted((ROOT / "docs").rglob("*.zh.md")),
            *sorted((ROOT / "notebooks").glob("*.zh.ipynb")),
        ]
    for path in paths:
        if path.suffix == ".po":
            yield from _po_strings(path)
        elif path.suffix == ".toml":
            yield from _toml_strings(path, tomllib.loads(path.read_text(encoding="utf-8")))
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            for i, cell in enumerate(cells):
                if cell["cell_type"] == "markdown":
                    yield f"{path.relative_to(ROOT)}: cell {i}", "".join(cell["source"])
        else:
            text = path.read_text(encoding="utf-8")
            for i, block in enumerate(re.split(r"\n\s*\n", _CODE.sub(" ", text))):
                yield f"{path.relative_to(ROOT)}: paragraph {i + 1}", block


def main(argv: list[str]) -> int:
    if argv[:1] == ["--fix"]:  # mend files in place (review the diff)
        for name in argv[1:]:
            path = Path(name)
            path.write_text(fix(path.read_text(encoding="utf-8")), encoding="utf-8")
        argv = argv[1:]
    paths = [Path(p).resolve() for p in argv] or None
    count = 0
    for where, text in chinese_texts(paths):
        for problem in problems(text):
            count += 1
            print(f"{where}: {problem}")
    print(f"{count} problems")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
