"""The language in force: the locale, ATTNKIT_LANG, set_language, use_language, --lang;
and the catalog's lookup (tests/i18n/test_catalog.py checks the catalog's contents)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attnkit import i18n
from attnkit.cli import language_argument, main


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    for var in ("ATTNKIT_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    i18n.set_language(None)
    yield
    i18n.set_language(None)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "zh_TW.UTF-8"}, "zh"),
        ({"LANG": "pt_BR.UTF-8"}, "pt"),
        ({"LANG": "C"}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "de_DE.UTF-8"}, "en"),  # a language we lack: English, no error
        ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL wins over LANG
        ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "C"}, "zh"),
        ({"LANGUAGE": "de:zh_CN:en", "LANG": "C"}, "zh"),  # the first one we have
        ({"LANGUAGE": "zh", "LC_ALL": "en_US.UTF-8"}, "zh"),  # LANGUAGE first, as gettext
        ({"ATTNKIT_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),  # ATTNKIT_LANG over the locale
        ({"ATTNKIT_LANG": "zh", "LANG": "C"}, "zh"),
        ({"ATTNKIT_LANG": "xx", "LANG": "zh_CN.UTF-8"}, "zh"),  # unknown: ignored
    ],
)
def test_the_environment_decides(environ, expected):
    assert i18n.language_from_environment(environ) == expected


def test_set_language_overrides_the_environment_and_use_language_overrides_both(monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert i18n.get_language() == "zh"
    assert i18n.set_language("en") == "en"
    assert i18n._("options") == "options"
    with i18n.use_language("zh"):
        assert i18n._("options") == "选项"
        with i18n.use_language("pt"):
            assert i18n._("options") == "opções"
        assert i18n.get_language() == "zh"
    assert i18n.get_language() == "en"
    assert i18n.set_language("xx_YY") == "en"  # a language we lack: English, no error
    assert i18n.set_language(None) == "zh"
    with pytest.raises(TypeError, match="language must be a str or None, got int"):
        i18n.set_language(3)
    with (
        pytest.raises(TypeError, match="language must be a str or None, got list"),
        i18n.use_language(["zh"]),
    ):
        pass
    with pytest.raises(TypeError, match="header must be a str or None, got bytes"):
        i18n.language_from_accept(b"zh-CN")


def test_missing_messages_fall_back_to_english():
    with i18n.use_language("zh"):
        assert i18n._("a message nobody translated") == "a message nobody translated"
        assert i18n.ngettext("one {n}", "many {n}", 2) == "many {n}"
    with i18n.use_language("pt"):  # Portuguese covers the command line and the tour only
        assert i18n.pick({"en": "English", "zh": "中文"}) == "English"
    with i18n.use_language("zh"):
        assert i18n.pick({"en": "English", "zh": "中文"}) == "中文"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("de-DE,de;q=0.9", "en"),
        ("de-DE,pt-BR;q=0.7,zh;q=0.5", "pt"),
        ("en;q=0.1, zh;q=0.5", "zh"),
        ("zh;q=0", "en"),
        ("", "en"),
        (None, "en"),
        ("zh-Hans-CN", "zh"),
        ("garbage;q=x,zh", "zh"),
    ],
)
def test_accept_language(header, expected):
    assert i18n.language_from_accept(header) == expected


def test_lang_is_read_before_the_parser_is_built():
    assert language_argument(["tour", "--lang", "zh"]) == "zh"
    assert language_argument(["--lang=pt", "tour"]) == "pt"
    assert language_argument(["tour", "--lang", "xx"]) is None
    assert language_argument(["tour", "--", "--lang", "zh"]) is None


def test_every_command_takes_lang(capsys):
    from attnkit.cli import build_parser

    parser = build_parser()
    seen = 0
    stack = [parser]
    while stack:
        p = stack.pop()
        assert any("--lang" in a.option_strings for a in p._actions), p.prog
        seen += 1
        for action in p._actions:
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                stack.extend(x for x in action.choices.values() if hasattr(x, "_actions"))
    assert seen > 10


def test_bad_lang_lists_the_languages(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tour", "--lang", "xx"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'xx' (choose from 'en', 'zh', 'pt')" in err


def _cli(args, **env):
    import os

    environ = {k: v for k, v in os.environ.items() if k not in ("ATTNKIT_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")}  # fmt: skip
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "attnkit", *args], capture_output=True,
                          text=True, env=environ, timeout=120)  # fmt: skip


def test_the_locale_alone_gives_chinese_help_and_errors_and_c_gives_english():
    zh = _cli(["--help"], LANG="zh_CN.UTF-8")
    assert zh.returncode == 0
    assert zh.stdout.startswith("用法：attnkit")
    assert "显示此帮助信息并退出" in zh.stdout
    bad = _cli(["tour", "--lang", "xx"], LANG="zh_CN.UTF-8")
    assert bad.returncode == 2
    assert "无效的选择：'xx'（可选：'en', 'zh', 'pt'）" in bad.stderr
    en = _cli(["--help"], LANG="C")
    assert en.stdout.startswith("usage: attnkit")
    assert "show this help message and exit" in en.stdout
    pt = _cli(["--help"], LANG="C", ATTNKIT_LANG="pt")
    assert pt.stdout.startswith("uso: attnkit")
    forced = _cli(["--lang", "en", "--help"], LANG="zh_CN.UTF-8")
    assert forced.stdout.startswith("usage: attnkit")


def test_lang_holds_for_one_command_only(capsys):
    """``main([... "--lang", "zh"])`` in a notebook or a test leaves the caller's language."""
    i18n.set_language("en")
    assert main(["exercises", "--list", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "实验" in out and "已断言" in out  # kind and status columns in Chinese
    assert i18n.get_language() == "en"
    assert i18n.chosen_language() == "en"


def test_english_of_goes_back_from_a_translation_to_its_source():
    from attnkit.i18n.catalog import english_of

    assert english_of("zh", "选项") == "options"  # argparse's area
    assert english_of("zh", "not a translation") == "not a translation"
    assert english_of("en", "选项") == "选项"
