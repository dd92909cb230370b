"""``--preset`` on the command line: unknown names, no preset with --resume, the line that
says where the settings came from."""

from __future__ import annotations

import json

import pytest

import attnkit.cli
from attnkit.cli import main

SMALL_LM = ["--hiddens", "8", "--batch-size", "4", "--num-steps", "8", "--max-tokens", "1500",
            "--sample-tokens", "5", "--no-progress", "--threads", "1", "--epochs", "1"]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["translate", "train", "--arch", "transformer"], "['base', 'book', 'demo', 'small']"),
        (["lm", "train"], "['book', 'transformer']"),
    ],
)
def test_an_unknown_preset_is_an_error_naming_the_known_ones(tmp_path, capsys, argv, names):
    assert main([*argv, "--preset", "huge", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert f"error: unknown preset 'huge'; expected one of {names}" in err
    assert not (tmp_path / "run").exists()


def test_an_lm_preset_does_not_combine_with_resume(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    config = {"cell": "gru", "format": 1, "files": {"model": "m", "trainer": "t"}}
    (run / "config.json").write_text(json.dumps(config))
    assert main(["lm", "train", "--preset", "book", "--resume", "--out", str(run)]) == 1
    assert "--preset cannot be combined with --resume" in capsys.readouterr().err


def test_lm_train_says_where_its_settings_came_from(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])
    out = tmp_path / "run"
    assert main(["lm", "train", "--preset", "book", *SMALL_LM, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "settings: flags: num_hiddens=8, epochs=1, max_tokens=1500, batch_size=4" in printed
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["cell"], cfg["num_hiddens"], cfg["lr"], cfg["epochs"]) == ("gru", 8, 1.0, 1)
    assert main(["lm", "train", "--resume", "--out", str(out), "--epochs", "2", "--lr", "0.5"]) == 0
    printed = capsys.readouterr().out
    assert "settings: flags: epochs=2, lr=0.5; the rest: the checkpoint's" in printed
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["num_hiddens"], cfg["lr"], cfg["epochs"], cfg["epochs_done"]) == (8, 0.5, 2, 2)
