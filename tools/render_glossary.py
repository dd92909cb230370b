"""docs/glossary.md, rendered from src/attnkit/i18n/glossary.toml (the one source of d2l-zh's
terms that tools/zh_style.py checks every Chinese string against).

    python -m tools.render_glossary           # write docs/glossary.md
    python -m tools.render_glossary --check   # exit 1 if docs/glossary.md is not a fresh render

tests/i18n/test_docs_zh.py asserts the page is fresh: edit the TOML, then rerun this.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "src" / "attnkit" / "i18n" / "glossary.toml"
PAGE = ROOT / "docs" / "glossary.md"

# d2l-zh's chapter titles (the PyTorch edition that goes with d2l 0.17)
CHAPTERS = {
    "3": "线性神经网络 (linear neural networks)",
    "4": "多层感知机 (multilayer perceptrons)",
    "6": "卷积神经网络 (convolutional neural networks)",
    "7": "现代卷积神经网络 (modern convolutional neural networks)",
    "8": "循环神经网络 (recurrent neural networks)",
    "9": "现代循环神经网络 (modern recurrent neural networks)",
    "10": "注意力机制 (attention mechanisms)",
}

HEADER = """\
# Glossary: the book's words in Chinese and Portuguese

<!-- rendered by `python -m tools.render_glossary` from src/attnkit/i18n/glossary.toml: edit
the TOML, not this page (tests/i18n/test_docs_zh.py fails on a stale render) -->

Every Chinese string attnkit shows (the command line, the explorer, the tour, the exercise
answers, [README.zh.md](../README.zh.md), the `docs/*.zh.md` pages and the Chinese notebooks)
uses the terms of 《动手学深度学习》 (d2l-zh), the Chinese edition of *Dive into Deep Learning*
that most of attnkit's readers learned from, as its PyTorch edition for d2l 0.17 writes them.
The section is where d2l-zh introduces the term; the Portuguese term is d2l-pt's (the same
chapters, in the same order). The last column lists the variants other translations use and
attnkit never writes: `tests/i18n/test_zh_style.py` fails on any of them (`python -m
tools.zh_style` lists every problem). A note says where the book itself writes a variant in
passing (numbered after the English term).

Each term was checked against d2l-zh's and d2l-pt's chapter files. d2l-zh's first 2.0.0
printing (v2.0.0-alpha2, July 2021) still wrote 隐藏状态, 词汇表, 遮蔽softmax操作, 注意力打分函数,
批量归一化, 层归一化, 编码器-解码器结构 and 记忆单元; the book since v2.0.0-beta0 writes the terms
below.
"""


def terms(path: Path = GLOSSARY) -> list[dict]:
    return tomllib.loads(path.read_text(encoding="utf-8"))["term"]


def _section_key(section: str) -> tuple[int, ...]:
    return tuple(int(part) for part in section.split("."))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(entries: list[dict] | None = None) -> str:
    """The page's Markdown: one table per chapter, the terms in the book's order."""
    entries = terms() if entries is None else entries
    ordered = sorted(entries, key=lambda t: (_section_key(t["section"]), t["en"].lower()))
    lines = [HEADER]
    notes: list[str] = []
    chapter = None
    for term in ordered:
        number = term["section"].split(".")[0]
        if number != chapter:
            chapter = number
            title = CHAPTERS.get(number, "")
            lines += ["", f"## {number} {title}".rstrip(), ""]
            lines += ["| English | d2l-zh | section | d2l-pt | not written |"]
            lines += ["| --- | --- | --- | --- | --- |"]
        en = term["en"]
        if term.get("note"):
            notes.append(term["note"])
            en += f" [{len(notes)}]"
        avoid = ", ".join(term.get("avoid", []))
        row = [en, term["zh"], term["section"], term.get("pt", ""), avoid]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"{i}. {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if argv[:1] == ["--check"]:
        fresh = PAGE.exists() and PAGE.read_text(encoding="utf-8") == page
        print("docs/glossary.md is fresh" if fresh else "docs/glossary.md is stale: rerun")
        return 0 if fresh else 1
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(terms())} terms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
