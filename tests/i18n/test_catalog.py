"""The catalog is complete and current: every message of the code has its translation in
every language that covers its area, none is fuzzy (its English changed since it was
translated) or obsolete, the placeholders agree, and the shipped .mo is the .po compiled.
A failure lists the messages: ``python -m tools.i18n todo zh`` prints them too."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnkit.i18n.catalog import AREAS, COVERAGE

i18n_tool = pytest.importorskip("tools.i18n", reason="needs babel (the dev extra)")

CASES = [(language, area) for language, areas in COVERAGE.items() for area in areas]


@pytest.mark.parametrize(("language", "area"), CASES, ids=[f"{lang}-{a}" for lang, a in CASES])
def test_nothing_missing_fuzzy_or_obsolete(language, area):
    found = i18n_tool.problems(language, area)
    assert {k: v for k, v in found.items() if v} == {}


def test_every_source_file_is_in_exactly_one_area():
    src = i18n_tool.SRC
    owner: dict[Path, list[str]] = {}
    for area in AREAS:
        if area == "argparse":
            continue
        for path in i18n_tool.area_files(area):
            owner.setdefault(path, []).append(area)
    every = set(src.rglob("*.py"))
    assert sorted(str(p.relative_to(src)) for p in every - set(owner)) == []
    assert {str(p.relative_to(src)): a for p, a in owner.items() if len(a) > 1} == {}


def test_the_checks_find_what_they_look_for(tmp_path, monkeypatch):
    """A message added to the code is missing; a translation whose English changed is
    fuzzy; one whose English left the code is obsolete; a wrong placeholder is caught."""
    from babel.messages.catalog import Catalog

    template = Catalog()
    for source in ("kept {n}", "changed {x}", "a brand new message", "bad {field}"):
        template.add(source)
    catalog = Catalog(locale="zh")
    catalog.add("kept {n}", "保留{n}")
    catalog.add("changed {y}", "改了{y}")
    catalog.add("removed from the code entirely", "不在了")
    catalog.add("bad {field}", "坏{feld}")
    catalog.update(template)
    monkeypatch.setattr(i18n_tool, "extract", lambda area: template)
    monkeypatch.setattr(i18n_tool, "read", lambda language, area: catalog)
    monkeypatch.setattr(i18n_tool, "po_path", lambda language, area: tmp_path / "x.po")
    found = i18n_tool.problems("zh", "core")
    assert found["missing"] == ["a brand new message"]
    assert found["fuzzy"] == ["changed {x}"]
    assert "removed from the code entirely" in found["obsolete"]
    assert found["placeholders"] == ["bad {field}"]
    assert found["stale_mo"]


def test_fields():
    assert i18n_tool.fields("{a} and {b:.2f} and %(c)s") == {"{a}", "{b}", "%(c)"}
    assert i18n_tool.fields("no fields, {{literal}}") == set()
