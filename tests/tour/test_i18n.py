"""The tour in Chinese and Portuguese: findings, claims, figure labels and the Chinese page.

A finding in another language is the same measurement in other words: the tests compare
the numbers in it with the English finding's (the topics used here are deterministic
and take about a second each at the small size).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from tests.shared_runs import tour_result

from attnkit.i18n import _, use_language
from attnkit.tour import TOPICS, run_topic
from attnkit.tour.base import describe_seeds, seed_summary
from attnkit.tour.docs import DOCS_COMMAND, render_docs

HAN = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]\d+)?")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "tour.zh.md"


def numbers(text: str) -> Counter:
    return Counter(NUMBER.findall(text))


@pytest.mark.parametrize(
    ("language", "name"),
    [("zh", "positions"), ("zh", "self-attention"), ("zh", "rope"), ("pt", "cues")],
)
def test_a_finding_in_another_language_carries_the_same_numbers(language, name):
    english = tour_result(name)
    with use_language(language):
        other = run_topic(name, small=True, seed=0)
    other.close()
    assert other.values.keys() == english.values.keys()
    assert other.finding != english.finding
    if language == "zh":
        assert len(HAN.findall(other.finding)) > 30
        assert not re.search(r"\b(the|and|with|for)\b", other.finding)
    else:
        assert re.search(r"\b(as|consultas|entradas|saídas)\b", other.finding)
    assert numbers(other.finding) == numbers(english.finding)


def test_the_positions_finding_in_chinese_reads_as_the_book_writes():
    with use_language("zh"):
        r = run_topic("positions", small=True, seed=0)
    fig = r.figures["similarity"]
    title, xlabel = fig.axes[0].get_title(), fig.axes[0].get_xlabel()
    r.close()
    assert "映射为P_(i+δ)" in r.finding and "余弦相似度" in r.finding
    assert title == "d = 32：相似度与偏移量的关系" and xlabel == "偏移量δ"


def test_figures_are_drawn_in_the_language_in_force():
    english = tour_result("cues").figures["weights"]
    assert [ax.get_title() for ax in english.axes[:3]] == [
        "average pooling (no query)", "query 1", "query 2"
    ]  # fmt: skip
    for language, titles, xlabel in (
        ("zh", ["平均汇聚（无查询）", "查询1", "查询2"], "输入（键 = 值）"),
        ("pt", ["pooling médio (sem consulta)", "consulta 1", "consulta 2"],
         "entradas (chaves = valores)"),
    ):  # fmt: skip
        with use_language(language):
            r = run_topic("cues", small=True, seed=0)
        fig = r.figures["weights"]
        assert [ax.get_title() for ax in fig.axes[:3]] == titles
        assert fig.axes[0].get_xlabel() == xlabel
        r.close()


def test_topics_claims_and_descriptions_display_translated():
    for name, topic in TOPICS.items():
        assert topic.localized() == topic  # English: the registry as it is
        with use_language("zh"):
            zh = topic.localized()
        with use_language("pt"):
            pt = topic.localized()
        assert zh.module == topic.module and zh.function == topic.function
        assert [k for k, _c in zh.claims] == [k for k, _c in topic.claims]
        assert HAN.search(zh.description), name
        assert pt.description != topic.description, name
        for (key, en), (_k, zc), (_k2, pc) in zip(topic.claims, zh.claims, pt.claims):
            if en == "Var(q.k) = d":  # a formula: the same in every language
                assert zc == pc == en
                continue
            assert HAN.search(zc) and pc != en, (name, key)
    with use_language("zh"):
        cues = TOPICS["cues"].localized()
    assert cues.claims[0][1].startswith("无论查询是什么，平均汇聚和最大汇聚的输出都相同")


def test_seed_summaries_in_chinese():
    s = seed_summary([1.0, 2.0, 3.0])
    with use_language("zh"):
        text = describe_seeds(s, _(" in log ratio"))
    assert text.startswith("3/3个种子（差值均值2（对数比），标准差1") and "符号检验p = 0.12" in text
    assert numbers(text) == numbers(describe_seeds(s, " in log ratio"))


def test_the_chinese_page_is_a_fresh_render():
    page = render_docs("zh")
    assert PAGE.read_text(encoding="utf-8") == page, (
        f"docs/tour.zh.md is stale: regenerate it with `{DOCS_COMMAND}`"
    )
    assert page.count("\n### `") == len(TOPICS)
    for topic in TOPICS.values():
        with use_language("zh"):
            shown = topic.localized()
        assert shown.description in page
        assert all(f"- {c}（`{k}`）" in page for k, c in shown.claims)
    assert "attnkit tour --list --lang zh" in page
    english = render_docs("en")
    assert "attnkit tour --list --lang en" in english and not HAN.search(english)
    with pytest.raises(ValueError, match="language"):
        render_docs("fr")
