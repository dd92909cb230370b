"""``attnkit translate train | run | eval`` end to end on a tiny generated corpus."""

from __future__ import annotations

import json

import pytest

from attnkit.cli import main

TINY = ["--num-pairs", "200", "--embed-size", "8", "--num-hiddens", "8", "--no-progress"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "bahdanau"
    argv = ["translate", "train", "--arch", "bahdanau", "--epochs", "1", "--out", str(out)]
    assert main([*argv, *TINY, "--model-config", "num_layers=1", "--batch-tokens", "600"]) == 0
    return out


def test_train_writes_a_checkpoint_and_resume_continues(trained, capsys):
    config = json.loads((trained / "config.json").read_text())
    assert config["arch"] == "bahdanau" and config["epoch"] == 1
    assert config["model_config"] == {
        "embed_size": 8,
        "num_hiddens": 8,
        "num_layers": 1,
        "dropout": 0.1,
    }
    assert config["train_config"]["batch_tokens"] == 600
    assert config["data_args"]["num_pairs"] == 200
    capsys.readouterr()
    assert main(["translate", "train", "--out", str(trained), "--resume", "--epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "resumed" in out and "at epoch 1" in out
    assert json.loads((trained / "config.json").read_text())["epoch"] == 2
    # changing the model of a checkpoint is refused
    argv = ["translate", "train", "--out", str(trained), "--resume", "--num-hiddens", "16"]
    assert main(argv) == 1
    assert "cannot change the model config" in capsys.readouterr().err
    argv = ["translate", "train", "--arch", "seq2seq", "--out", str(trained), "--resume"]
    assert main(argv) == 1
    assert "trained with arch 'bahdanau', not 'seq2seq'" in capsys.readouterr().err


def test_run_prints_translations_and_heatmap(trained, tmp_path, capsys):
    png = tmp_path / "align.png"
    argv = ["translate", "run", "--checkpoint", str(trained), "they are sad .", "--heatmap"]
    assert main([*argv, str(png)]) == 0
    out = capsys.readouterr()
    assert len(out.out.strip().splitlines()) == 1
    assert png.stat().st_size > 1000
    assert main(["translate", "run", "--checkpoint", str(trained), "zyzzyva are sad ."]) == 0
    assert "unknown words mapped to <unk>: zyzzyva" in capsys.readouterr().err


def test_eval_reports_bleu_and_chrf(trained, capsys):
    assert main(["translate", "eval", "--checkpoint", str(trained), "--examples", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and " => " in out[0]
    assert out[-1].startswith("test BLEU ") and ", chrF " in out[-1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--checkpoint", "{ck}", ""], "cannot translate an empty sentence"),
        (["run", "--checkpoint", "{ck}", "a " * 30], "more than max_len=12"),
        (["run", "--checkpoint", "{missing}", "hi ."], "no checkpoint at"),
        (["eval", "--checkpoint", "{missing}"], "no checkpoint at"),
        (["train", "--arch", "bahdanau", "--model-config", "heads=2"], "unknown config key"),
        (["train", "--arch", "seq2seq", "--num-layers", "0"], "num_layers must be a positive"),
        (["train", "--arch", "seq2seq", "--epochs", "0"], "epochs must be a positive int"),
        (["train"], "--arch is required"),
    ],
)
def test_bad_input_gives_a_message_and_exit_code_1(trained, tmp_path, capsys, argv, message):
    argv = [a.format(ck=trained, missing=tmp_path / "nope") for a in argv]
    if argv[0] == "train":
        argv += ["--out", str(tmp_path / "out"), *TINY]
    assert main(["translate", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit translate: error:") and message in err


def test_heatmap_needs_attention(tmp_path, capsys):
    out = tmp_path / "plain"
    argv = ["translate", "train", "--arch", "seq2seq", "--epochs", "1", "--out", str(out), *TINY]
    assert main(argv) == 0
    png = str(tmp_path / "x.png")
    assert main(["translate", "run", "--checkpoint", str(out), "hi .", "--heatmap", png]) == 1
    assert "has no attention for --heatmap" in capsys.readouterr().err
