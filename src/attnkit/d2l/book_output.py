"""The lines the book's own code prints, per edition: ``BOOK_OUTPUT[language][what]``.

These are not attnkit's messages but the book's output, byte for byte, so they are not in
the catalog (``i18n/locale``): English is d2l-en 0.17's ``d2l/torch.py``, Chinese is
d2l-zh's (《动手学深度学习》, ``d2l/torch.py`` of d2l-ai/d2l-zh). A reader comparing a run
with the book sees the book's line, with its spacing ("困惑度 {ppl:.1f}, ..." keeps the
spaces d2l-zh prints; the catalog's Chinese follows tools/zh_style.py, these do not) and
its wording (d2l-zh's ``train_ch8`` line has no "on"; its ``train_seq2seq`` line is
English, as d2l-zh prints it).

A language with no table of its own (pt) gets English. A line that only one edition's
table holds is printed in that language only: d2l-zh announces a download and names an
unknown token type in its own words, while attnkit's English layer has always downloaded
quietly and raised its own ``ValueError`` (unchanged).
"""

from __future__ import annotations

from attnkit.i18n import get_language

__all__ = ["BOOK_OUTPUT", "book_line"]

BOOK_OUTPUT: dict[str, dict[str, str]] = {
    "en": {  # d2l-en 0.17.6
        "train_ch8": "perplexity {ppl:.1f}, {speed:.1f} tokens/sec on {device}",
        "train_seq2seq": "loss {loss:.3f}, {speed:.1f} tokens/sec on {device}",
    },
    "zh": {  # d2l-zh 2.0 (d2l-ai/d2l-zh, d2l/torch.py)
        # train_ch8: print(f'困惑度 {ppl:.1f}, {speed:.1f} 词元/秒 {str(device)}')
        "train_ch8": "困惑度 {ppl:.1f}, {speed:.1f} 词元/秒 {device}",
        # train_seq2seq: print(f'loss {...:.3f}, {...:.1f} tokens/sec on {str(device)}')
        "train_seq2seq": "loss {loss:.3f}, {speed:.1f} tokens/sec on {device}",
        # download: print(f'正在从{url}下载{fname}...')
        "download": "正在从{url}下载{fname}...",
        # tokenize: print('错误：未知词元类型：' + token)
        "tokenize": "错误：未知词元类型：{token}",
    },
}


def book_line(what: str, **fields: object) -> str | None:
    """The book's line ``what`` in the language in force, filled with ``fields``
    (``device`` given as ``str(device)``, as the book prints it); ``None`` when that
    edition prints no such line."""
    table = BOOK_OUTPUT.get(get_language(), BOOK_OUTPUT["en"])
    template = table.get(what)
    return None if template is None else template.format(**fields)
