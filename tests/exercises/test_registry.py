"""Every exercise is there, answered in both languages, and every experiment's claims are
values that a test in this folder asserts. The experiments run once a session at the small
size (``tests.shared_runs``), shared with the per-group tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.shared_runs import exercise_run

from attnkit.exercises import (
    KINDS,
    LANGS,
    ExerciseRun,
    exercises,
    find_exercise,
    registry,
    section_title,
)
from attnkit.exercises.book import render_book
from attnkit.tour.base import TopicResult

REPO = Path(__file__).resolve().parents[2]
# exercises per section, as published (../shared/reference/exercises)
SECTIONS_0_17 = {"8.1": 4, "8.2": 2, "8.3": 6, "8.4": 4, "8.5": 6, "8.6": 3, "8.7": 2,
                 "9.1": 4, "9.2": 5, "9.3": 4, "9.4": 3, "9.5": 2, "9.6": 2, "9.7": 6,
                 "9.8": 3, "10.1": 2, "10.2": 4, "10.3": 3, "10.4": 2, "10.5": 2, "10.6": 2,
                 "10.7": 6}  # fmt: skip
SECTIONS_1_0 = {"9.1": 4, "9.2": 3, "9.3": 5, "9.4": 4, "9.5": 10, "9.6": 2, "9.7": 2,
                "10.1": 5, "10.2": 4, "10.3": 3, "10.4": 3, "10.5": 2, "10.6": 2, "10.7": 6,
                "10.8": 3, "11.1": 4, "11.2": 4, "11.3": 3, "11.4": 2, "11.5": 2, "11.6": 3,
                "11.7": 5, "11.8": 3, "11.9": 4}  # fmt: skip
ONLY_1_0 = {"9.2.3", "9.5.1", "9.5.2", "9.5.6", "9.5.7", "11.1.1", "11.1.2", "11.1.3", "11.1.4",
            "11.2.1", "11.2.2", "11.2.3", "11.2.4", "11.3.1", "11.3.3", "11.6.3", "11.8.1",
            "11.8.2", "11.8.3", "11.9.1", "11.9.2", "11.9.3", "11.9.4"}  # fmt: skip
EVERY = exercises("0.17") + [e for e in exercises("1.0") if e.id is None]
_CJK = re.compile("[\u4e00-\u9fff]")


def _ids(sections: dict[str, int]) -> list[str]:
    return [f"{s}.{i}" for s, n in sections.items() for i in range(1, n + 1)]


def test_all_77_of_0_17_and_every_1_0_exercise_are_there():
    assert [e.id for e in exercises("0.17")] == _ids(SECTIONS_0_17)
    assert len(exercises("0.17")) == 77
    labels = [lab for e in exercises("1.0") for lab in e.label("1.0").split(", ")]
    assert sorted(labels) == sorted(_ids(SECTIONS_1_0)) and len(labels) == 88
    assert {e.key.removeprefix("1.0/") for e in EVERY if e.id is None} == ONLY_1_0


@pytest.mark.parametrize("e", EVERY, ids=lambda e: e.key)
def test_every_exercise_is_answered_in_both_languages(e):
    assert e.kind in KINDS, f"{e.key}: kind {e.kind!r}"
    assert len(e.question) > 20 and len(e.answer) > 80, e.key
    assert _CJK.search(e.question_zh) and _CJK.search(e.answer_zh), e.key
    if e.kind == "experiment":
        assert e.experiment and e.claims, f"{e.key}: an experiment needs claims a test asserts"
    if e.claims:
        assert e.experiment, f"{e.key}: claims without an experiment"
    for other in e.see:
        find_exercise(other, "1.0" if other.startswith("1.0/") else "0.17")


@pytest.mark.parametrize("e", EVERY, ids=lambda e: e.key)
def test_every_claim_and_section_title_is_in_chinese_too(e):
    assert len(e.claims_zh) == len(e.claims)
    assert [k for k, _ in e.claims_in("zh")] == [k for k, _ in e.claims]
    for _, claim in e.claims_in("zh"):
        assert _CJK.search(claim), (e.key, claim)
    assert e.kind_in("zh") != e.kind and e.status_in("zh") != e.status


def test_every_section_has_a_chinese_title():
    sections = registry._load()[1]
    assert len(sections) == 30 and all(s.get("title_zh") for s in sections.values())
    # d2l-zh keeps "Transformer"; every other title is Chinese
    assert sum(bool(_CJK.search(s["title_zh"])) for s in sections.values()) == 29


def test_the_chinese_book_entry_is_chinese_throughout():
    e = find_exercise("11.2.4", "1.0")
    run = ExerciseRun(e, TopicResult(e.key, "", {}))
    page = ExerciseRun(find_exercise("8.4.4"), None).markdown("zh")
    assert page.startswith("### 8.4.4（1.0：9.4.4） · 开放问题 · 已解答\n")
    assert "**问题**：" in page and "**解答**：" in page and "*另见*：" in page
    assert section_title(e, "zh") == "11.2. 基于相似度的注意力汇聚（d2l 1.0）"
    assert section_title(e) == "11.2 Attention Pooling by Similarity (d2l 1.0)"
    with pytest.raises(ValueError, match="its answer reads the value"):
        run.markdown("zh")  # the values are missing: the entry is not written half-filled
    zh_book = (REPO / "docs" / "exercises.zh.md").read_text(encoding="utf-8")
    assert "以英文写成" not in zh_book and "*由测试断言*：" in zh_book
    for claim in ("pooling without a query", "every row of the softmax sums to 1"):
        assert claim not in zh_book


def test_the_chinese_text_keeps_d2l_zh_terms_and_style():
    zh_style = pytest.importorskip("tools.zh_style", reason="needs babel (the dev extra)")
    paths = [REPO / "docs" / "exercises.zh.md",
             REPO / "src" / "attnkit" / "i18n" / "locale" / "zh" / "LC_MESSAGES" / "exercises.po",
             *sorted((REPO / "src" / "attnkit" / "exercises" / "text").glob("*.toml"))]  # fmt: skip
    found = [f"{where}: {p}" for where, text in zh_style.chinese_texts(paths)
             for p in zh_style.problems(text)]  # fmt: skip
    assert found == [], "\n".join(found[:40])


@pytest.mark.parametrize("e", [e for e in EVERY if e.experiment], ids=lambda e: e.key)
def test_every_claim_is_a_measured_value(e):
    """(That a test reads each claim, and that its assertion can fail: test_claims.py.)"""
    run = exercise_run(e.key)
    for key, claim in e.claims:
        assert len(claim) > 10
        assert key in run.values, f"{e.key}: claim key {key!r} is not in the values"
    for lang in LANGS:  # every value the answer reads is measured
        text = run.answer(lang)
        assert len(text) > 40


def test_the_answer_books_are_what_their_record_renders():
    record_path = REPO / "docs" / "exercises.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    assert set(record["exercises"]) == {e.key for e in EVERY}
    for lang, name in (("en", "exercises.md"), ("zh", "exercises.zh.md")):
        page = (REPO / "docs" / name).read_text(encoding="utf-8")
        assert page == render_book(record, lang), f"docs/{name} is stale: {record['command']}"
    for saved in record["exercises"].values():
        for figure in saved["figures"]:
            assert (REPO / "docs" / "exercises" / figure).is_file(), figure


def test_seed_summaries_written_in_english_read_in_chinese():
    """The record keeps an experiment's seed summaries in English; the Chinese book
    turns each of describe_seeds' three forms into Chinese."""
    from attnkit.exercises.glossary import to_zh
    from attnkit.tour.stats import describe_seeds, seed_summary

    forms = [describe_seeds(seed_summary(d), " nats") for d in ([1.0, 2.0, 4.0], [0.5] * 5)]
    text = to_zh(" and ".join(forms))
    assert text == (
        "3/3个种子（差值均值2.33奈特，标准差1.5，最小1；均值的95%区间为-1.46到6.13（t分布）；"
        "符号检验p = 0.12；新种子方向相反的概率为0.16（t预测分布）） and "
        "5/5个种子（每个差值都是0.5奈特，没有离散；符号检验p = 0.031）"
    )
