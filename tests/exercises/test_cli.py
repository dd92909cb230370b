"""``attnkit exercises``: the list in both numberings, one exercise as text and JSON, in
English and Chinese, figures written, and bad input as one clear error."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from attnkit.cli import main
from attnkit.exercises import exercises, find_exercise, run_exercise
from attnkit.exercises.book import render_book
from attnkit.i18n import set_language

_ROW = re.compile(r"^(\S+(?:, \S+)*) +(experiment|derivation|open|needs-data) +"
                  r"(asserted|derived|answered|unanswered) +\S")  # fmt: skip


@pytest.fixture(autouse=True)
def _english_again():
    """``--lang`` sets the language for the rest of the process: back to English after."""
    yield
    set_language(None)


def test_list_prints_one_line_per_exercise_in_either_numbering(capsys):
    assert main(["exercises", "--list"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 77 and rows[0].startswith("8.1.1 ") and rows[-1].startswith("10.7.6 ")
    assert [r.split()[0] for r in rows] == [e.id for e in exercises("0.17")]
    assert main(["exercises", "--list", "--edition", "1.0"]) == 0
    rows_1_0 = capsys.readouterr().out.strip().splitlines()
    labels = [lab for r in rows_1_0 for lab in _ROW.match(r).group(1).split(", ")]
    assert len(labels) == 88 and labels[0] == "9.1.1" and labels[-1] == "11.9.4"
    assert "11.2.4" in labels  # only 1.0 asks it
    assert find_exercise("10.7.6").label("1.0") is None  # 0.17's ViT question: dropped in 1.0
    assert find_exercise("10.7.6", "1.0").id == "9.7.6"  # 1.0's 10.7.6 is 0.17's 9.7.6
    # 1.0 reorders the LSTM (10.1) before the GRU (10.2)
    assert labels.index("10.1.1") < labels.index("10.2.1")
    assert find_exercise("10.1.1", "1.0").id == "9.2.1"  # 1.0's LSTM is 0.17's 9.2
    assert main(["exercises", "--list", "--lang", "zh"]) == 0
    assert re.search("[\u4e00-\u9fff]", capsys.readouterr().out)


def test_list_rows_have_id_kind_status_and_question(capsys):
    assert main(["exercises", "--list"]) == 0
    for row in capsys.readouterr().out.strip().splitlines():
        m = _ROW.match(row)
        assert m, row
        e = find_exercise(m.group(1))
        assert m.group(2) == e.kind and m.group(3) == e.status


def test_one_exercise_prints_question_values_and_answer(tmp_path, capsys):
    assert main(["exercises", "10.1.2", "--small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    run = run_exercise("10.1.2", small=True)
    assert out.startswith("10.1.2 [experiment, asserted] 10.1 Attention Cues")
    assert f"{run.values['max_weight']:.3f}" in out  # the measured value is in the answer
    assert "Asserted by its test (measured):" in out and "[same_order = true]" in out
    assert [p.name for p in tmp_path.glob("*.png")] == ["attention_cues_random_softmax_weights.png"]
    assert main(["exercises", "10.1.2", "--small", "--lang", "zh"]) == 0
    zh = capsys.readouterr().out
    assert "问题：" in zh and "解答：" in zh and "注意力权重" in zh
    # all in Chinese: the kind and status, the section, the claims and their heading
    assert zh.startswith("10.1.2 [实验，已断言] 10.1. 注意力提示\n")
    assert "由测试断言（实测值）：" in zh and "[same_order = true]" in zh
    e = find_exercise("10.1.2")
    for (key, claim), (_, english) in zip(e.claims_in("zh"), e.claims, strict=True):
        assert f"  - {claim} [{key} = " in zh and english not in zh
    assert "Asserted" not in zh and "experiment" not in zh


def test_json_has_the_documented_fields(capsys):
    assert main(["exercises", "10.1.2", "--small", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"id", "ids_1_0", "kind", "question", "answer", "values", "asserted"} <= set(data)
    assert data["id"] == "10.1.2" and data["kind"] == "experiment"
    assert data["values"]["same_order"] is True
    assert [a["key"] for a in data["asserted"]] == [
        "row_sum_error",
        "same_order",
        "max_ratio_in_row",
    ]
    assert data["asserted"][0]["value"] == data["values"]["row_sum_error"]


def test_a_1_0_only_exercise_is_found_by_its_1_0_id():
    e = find_exercise("11.2.4", "1.0")
    assert e.id is None and e.key == "1.0/11.2.4" and e.label("1.0") == "11.2.4"
    assert find_exercise("1.0/11.2.4", "1.0") is e


@pytest.mark.parametrize(
    "argv, words",
    [
        (["exercises", "10.2.9"], ["'10.2.9'", "nearest: 10.2.1, 10.2.2, 10.2.3, 10.2.4"]),
        (["exercises", "11.2.4"], ["'11.2.4'", "--edition 1.0"]),
        (["exercises", "--list", "--edition", "2.0"], ["--edition", "'2.0'", "0.17", "1.0"]),
        (["exercises"], ["--list"]),
        (["exercises", "10.1.2", "--book", "/tmp/unused"], ["--book", "'all'"]),
    ],
)
def test_bad_input_is_one_clear_error(argv, words, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit exercises: error:") and "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def test_a_language_attnkit_lacks_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_:  # --lang is every command's: argparse's choices
        main(["exercises", "--list", "--lang", "fr"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--lang" in err and "'fr'" in err and "'zh'" in err


def test_an_answer_whose_values_are_missing_is_refused():
    record = {"date": "2026-01-01", "command": "c", "cpu": "x", "seconds": 1.0, "exercises": {}}
    with pytest.raises(ValueError, match=r"exercise [0-9.]+: its answer reads the value"):
        render_book(record, "en")  # an experiment's answer without its values is refused


def test_render_book_writes_both_pages_from_the_record(tmp_path, capsys):
    docs = Path(__file__).resolve().parents[2] / "docs"
    shutil.copy(docs / "exercises.json", tmp_path / "exercises.json")
    assert main(["exercises", "--render-book", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "exercises.md"),
        str(tmp_path / "exercises.zh.md"),
    ]
    for name in ("exercises.md", "exercises.zh.md"):
        assert (tmp_path / name).read_text() == (docs / name).read_text()
