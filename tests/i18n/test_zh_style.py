"""Every Chinese string attnkit shows keeps d2l-zh's terms (src/attnkit/i18n/glossary.toml)
and its style: no space between Chinese and Latin or digits, Chinese punctuation and quotes."""

from __future__ import annotations

import pytest

zh_style = pytest.importorskip("tools.zh_style", reason="needs babel (the dev extra)")


def test_no_chinese_string_breaks_the_glossary_or_the_style():
    found = [f"{where}: {p}" for where, text in zh_style.chinese_texts() for p in zh_style.problems(text)]  # fmt: skip
    assert found == [], f"{len(found)} problems:\n" + "\n".join(found[:80])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("训练时使用教师强制", "term: '教师强制'"),
        ("带掩码的 softmax 操作", "term: '带掩码的 softmax'"),
        ("梯度截断可以防止爆炸", "term: '梯度截断'"),
        ("更新隐藏状态", "term: '隐藏状态'"),
        ("使用 PyTorch 训练", "space between Chinese and Latin/digits"),
        ("训练 10 个迭代周期", "space between Chinese and Latin/digits"),
        ("困惑度为 {ppl:.1f}", "space between Chinese and Latin/digits"),
        ("训练完成,开始评估", "ASCII punctuation"),
        ("词元(token)", "ASCII punctuation"),
        ('所谓"注意力"', "straight quote"),
    ],
)
def test_each_rule_catches_its_break(text, problem):
    assert any(p.startswith(problem) for p in zh_style.problems(text)), zh_style.problems(text)


@pytest.mark.parametrize(
    "text",
    [
        "使用PyTorch训练10个迭代周期，困惑度为{ppl:.1f}",
        "强制教学和掩蔽softmax操作",
        "调用`d2l.train_ch8( net , lr )`函数",  # code is not prose
        "公式$f(x) = w x$中",
        "函数f(x)的值",
        "English text, with 'quotes' and (parens).",
    ],
)
def test_the_style_of_d2l_zh_passes(text):
    assert zh_style.problems(text) == []


def test_fix_mends_spacing_and_punctuation_but_not_code():
    assert zh_style.fix("使用 PyTorch 训练 10 个周期,完成") == "使用PyTorch训练10个周期，完成"
    assert zh_style.fix("做 \\\nsoftmax 运算") == "做softmax运算"
    assert zh_style.fix("代码 `a b` 在 $x y$ 中") == "代码 `a b` 在 $x y$ 中"


def test_the_glossary_holds_the_books_terms():
    terms = {t["en"]: t for t in zh_style.glossary()}
    assert terms["teacher forcing"]["zh"] == "强制教学"
    assert terms["masked softmax operation"]["zh"] == "掩蔽softmax操作"
    assert terms["attention pooling"]["pt"] == "pooling de atenção"
    for term in terms.values():
        assert term["zh"] and term["section"], term
        assert term["zh"] not in term.get("avoid", []), term
