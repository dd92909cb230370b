"""English text that experiments return as values (data names, ``describe_seeds``
summaries), put into Chinese when an answer is formatted in Chinese.

An answer template reads measured numbers and, sometimes, a phrase an experiment wrote
(which text it read, how many seeds agreed). The Chinese answer would otherwise carry
those phrases in English; ``to_zh`` translates the known ones: whole names first, the
longest first, then the seed summary's sentence pattern. Unknown text is left as it is
(generated samples, PyTorch's error messages: quoted as they are).
"""

from __future__ import annotations

import re

__all__ = ["PHRASES", "data_label", "to_zh"]

# English phrase -> Chinese, as the experiments write them
PHRASES = {
    "the built-in corpus (Python's reference topics)": "内置语料（Python语言参考的各主题文本）",
    "The Time Machine": "《时间机器》",
    "Tatoeba fra.txt (the book's data)": "Tatoeba的fra.txt（本书的数据）",
    "generated English-French pairs (attnkit.data.synthetic_fr)": "attnkit生成的英法句对",
    "generated English-French pairs": "attnkit生成的英法句对",
    "French side of generated pairs (attnkit.data.synthetic_fr), spaces removed":
        "生成句对的法语一侧（去掉空格）",
    "the Python standard library's docstrings": "Python标准库的文档字符串",
    "docstrings of Python's standard library": "Python标准库的文档字符串",
    "the English side of attnkit's generated corpus, as characters":
        "attnkit生成语料的英语一侧（按字符）",
    "synthetic oriented bars (generated in code; not Fashion-MNIST)":
        "合成的有向条纹图像（由代码生成；不是Fashion-MNIST）",
    "generated English (toy grammar)": "生成的英语（玩具语法）",
    "generated French (toy grammar)": "生成的法语（玩具语法）",
    "Tatoeba English (fra.txt)": "Tatoeba英语（fra.txt）",
    "Tatoeba French (fra.txt)": "Tatoeba法语（fra.txt）",
}  # fmt: skip
_PAIRS = re.compile(r" ?\((\d+) training\)")  # "generated English-French pairs (693 training)"
_SEEDS = re.compile(
    r"(\d+)/(\d+) seeds \(difference mean (\S+?)(?: ([A-Za-z]+))?, sd ([^,]+), min ([^;]+); "
    r"(\d+)% interval for the mean (\S+) to (\S+) \(t\); sign test p = ([^;]+); a new seed "
    r"disagrees with chance (\S+) \(t predictive\)\)"
)
_SEEDS_SAME = re.compile(
    r"(\d+)/(\d+) seeds \(every difference (\S+?)(?: ([A-Za-z]+))?, no spread; sign test "
    r"p = ([^)]+)\)"
)
_UNITS = {"nats": "奈特"}
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# d2l-zh puts no space between a Chinese character and Latin text or a digit
_SPACE = re.compile(f"(?<=[{HAN}]) +(?=[A-Za-z0-9<])|(?<=[A-Za-z0-9>)]) +(?=[{HAN}])")


def _seeds(m: re.Match) -> str:
    agree, n, mean, unit, sd, low, level, lo, hi, p, p_new = m.groups()
    unit = _UNITS.get(unit, f" {unit}") if unit else ""
    return (
        f"{agree}/{n}个种子（差值均值{mean}{unit}，标准差{sd}，最小{low}；均值的{level}%区间"
        f"为{lo}到{hi}（t分布）；符号检验p = {p}；新种子方向相反的概率为{p_new}（t预测分布））"
    )


def _seeds_same(m: re.Match) -> str:
    agree, n, mean, unit, p = m.groups()
    unit = _UNITS.get(unit, f" {unit}") if unit else ""
    return f"{agree}/{n}个种子（每个差值都是{mean}{unit}，没有离散；符号检验p = {p}）"


def to_zh(text: str) -> str:
    """``text`` with every known phrase and seed summary in Chinese, and spaced as d2l-zh
    writes (no space between a Chinese character and Latin text or a digit: a Chinese value
    such as ``data_zh`` that an experiment wrote with spaces reads as the answers do)."""
    for english in sorted(PHRASES, key=len, reverse=True):
        text = text.replace(english, PHRASES[english])
    text = _PAIRS.sub(lambda m: f"（{m.group(1)}对用于训练）", text)
    return _SPACE.sub("", _SEEDS_SAME.sub(_seeds_same, _SEEDS.sub(_seeds, text)))


def data_label(name: str) -> str:
    """A data name for a figure's title: in Chinese when Chinese is in force."""
    from attnkit.i18n import get_language

    return to_zh(name) if get_language() == "zh" else name
