"""The public API: every exported name exists, and the CLI lists its verbs."""

from __future__ import annotations

import subprocess
import sys

import attnkit


def test_all_names_resolve():
    missing = [n for n in attnkit.__all__ if not hasattr(attnkit, n)]
    assert missing == []
    assert attnkit.available_archs() == ["bahdanau", "seq2seq", "transformer"]


def test_python_dash_m_runs_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "attnkit", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for verb in ("demo", "tour", "lm", "translate"):
        assert verb in out


def test_cli_errors_are_messages_not_tracebacks(capsys):
    from attnkit.cli import main

    assert main(["translate", "run", "--checkpoint", "/nonexistent/dir", "hello ."]) == 1
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


def test_import_attnkit_stays_light():
    """matplotlib, sacrebleu, fastapi and the Hugging Face readers (transformers, safetensors,
    tokenizers, huggingface_hub) load on first use, not with ``import attnkit``."""
    code = (
        "import sys, attnkit; heavy = ('matplotlib', 'sacrebleu', 'fastapi', 'uvicorn',"
        " 'transformers', 'safetensors', 'tokenizers', 'huggingface_hub');"
        "print(sorted(m for m in heavy if m in sys.modules)); attnkit.show_heatmaps;"
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["[]", "True"]


def test_the_language_functions_are_public():
    from attnkit import i18n

    for name in ("set_language", "get_language", "use_language"):
        assert name in attnkit.__all__
        assert getattr(attnkit, name) is getattr(i18n, name)
    with attnkit.use_language("zh"):
        assert attnkit.get_language() == "zh"
