"""``attnkit translate`` with subwords on a small real-format file the tests write:
train (bf16, time budget, snapshots), average, eval, run (--input, normalization,
heatmaps over pieces or words) and the errors of bad input."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.cli import main
from attnkit.training.averaging import list_snapshots

TRAIN = [
    "translate", "train", "--arch", "transformer", "--tokenizer", "sentencepiece",
    "--vocab-size", "400", "--d-model", "32", "--num-layers", "1", "--d-ff", "64",
    "--num-heads", "2", "--batch-tokens", "1024", "--bleu-sentences", "8",
    "--no-progress", "--threads", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def corpus(real_format_file) -> Path:
    return real_format_file(300, seed=1)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> Path:
    """A tiny subword Transformer trained 4 epochs in bf16, with a snapshot every 3 steps."""
    out = tmp_path_factory.mktemp("runs") / "sp"
    argv = [*TRAIN, "--data", str(corpus), "--epochs", "4", "--out", str(out)]
    assert main([*argv, "--precision", "bf16", "--snapshot-every-steps", "3"]) == 0
    return out


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.is_file()}  # fmt: skip


def test_train_records_the_tokenizer_and_bf16(trained):
    cfg = json.loads((trained / "config.json").read_text())
    record = cfg["data"]["tokenizer"]
    assert (
        record["kind"] == "sentencepiece"
        and record["joint"]
        and record["vocab_sizes"] == [400, 400]
    )
    assert (trained / record["files"][0]).is_file()
    assert cfg["train_config"]["precision"] == "bf16"
    assert cfg["data_args"]["tokenizer"] == "sentencepiece"
    history = cfg["history"]
    assert all(torch.isfinite(torch.tensor(history["train_loss"])))
    assert history["train_loss"][-1] < history["train_loss"][0]


def test_eval_scores_detokenized_text_with_the_signature(trained, capsys):
    assert main(["translate", "eval", "--checkpoint", str(trained), "--examples", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert " => " in out[0] and "(reference: " in out[0]
    reference = out[0].split("(reference: ")[1].rstrip(")")
    assert reference[0].isupper() and "\u202f" not in reference  # French as written
    assert out[-2].startswith("test BLEU ") and ", chrF " in out[-2]
    assert out[-1].startswith("sacreBLEU signature: nrefs:1|") and "|tok:13a|" in out[-1]
    assert out[-2].endswith(", greedy)")
    argv = ["translate", "eval", "--checkpoint", str(trained), "--beam", "3", "--limit", "20"]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip().splitlines()[-2].endswith(", beam 3)")
    assert main([*argv[:-4], "--beam", "0"]) == 1
    assert "--beam must be at least 1, got 0" in capsys.readouterr().err


def test_normalization_gives_the_same_translation(trained, capsys):
    forms = ["I'm hungry.", "i'm hungry .", "I\u2019m  hungry\u00a0.", "The cat is happy!",
             "the cat is happy !"]  # fmt: skip
    assert main(["translate", "run", "--checkpoint", str(trained), *forms]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[0] == lines[1] == lines[2] and lines[3] == lines[4]
    # no unknown-word refusal with subwords, whatever the words
    assert main(["translate", "run", "--checkpoint", str(trained), "Zyzzyva loves 😀."]) == 0


def test_input_file_keeps_order_and_blank_lines(trained, tmp_path, capsys):
    sentences = ["The cat is happy.", "I lost.", "", "He has grey chairs.", "Go!"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    argv = ["translate", "run", "--checkpoint", str(trained)]
    assert main([*argv, "--input", str(src), "--batch-size", "2"]) == 0
    batch = capsys.readouterr().out.splitlines()
    assert len(batch) == len(sentences) and batch[2] == ""
    for sentence, line in zip(sentences, batch):
        if sentence:  # each line equals the sentence translated on its own
            assert main([*argv, sentence]) == 0
            assert capsys.readouterr().out.strip() == line
    assert main([*argv, "Go!", "--input", str(src)]) == 1  # sentences and --input together
    assert "either as arguments or with --input" in capsys.readouterr().err


def test_input_errors_name_the_line(trained, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("Go.\n" + "word " * 200 + "\n", encoding="utf-8")
    argv = ["translate", "run", "--checkpoint", str(trained), "--input", str(src)]
    assert main(argv) == 1
    assert f"--input {src} line 2: sentence 'word word" in capsys.readouterr().err
    src.write_bytes(b"Go.\n\xff\n")
    assert main(argv) == 1
    assert f"--input {src} is not UTF-8 text (byte 4)" in capsys.readouterr().err


def test_heatmaps_over_pieces_and_words(trained, tmp_path, drawn):
    png = tmp_path / "map.png"
    argv = ["translate", "run", "--checkpoint", str(trained), "The cats sleep.", "--heatmap"]
    assert main([*argv, str(png)]) == 0
    pieces = drawn[-1][0]
    assert pieces.source[-1] == "<eos>" and any(p.startswith("\u2581") for p in pieces.source)
    assert main([*argv, str(png), "--merge-pieces"]) == 0
    words = drawn[-1][0]
    assert words.source == ["the", "cats", "sleep.", "<eos>"]
    # columns summed over a word's pieces, rows averaged: rows stay distributions
    for maps in (words.encoder_self, words.cross):
        torch.testing.assert_close(maps.sum(-1), torch.ones(maps.shape[:-1]))


def test_average_equals_the_mean_of_the_snapshots(trained, tmp_path, capsys):
    out = tmp_path / "avg"
    assert main(["translate", "average", "--checkpoint", str(trained), "--last", "3",
                 "--out", str(out)]) == 0  # fmt: skip
    assert "averaged the last 3 snapshots" in capsys.readouterr().out
    snaps = list_snapshots(trained)[-3:]
    states = [torch.load(s["path"], weights_only=True) for s in snaps]
    averaged = load_checkpoint(out, trainer=False).model_state
    for key, value in averaged.items():
        if value.is_floating_point():
            mean = sum(s[key].double() for s in states) / 3
            torch.testing.assert_close(value.double(), mean, rtol=1e-6, atol=1e-7)
    # the averaged folder carries the tokenizer: it translates on its own
    assert main(["translate", "run", "--checkpoint", str(out), "I lost."]) == 0
    argv = ["translate", "average", "--checkpoint", str(trained), "--out"]
    assert main([*argv, str(tmp_path / "x"), "--last", "999"]) == 1
    assert "needs 999, but" in capsys.readouterr().err
    assert main([*argv, str(out), "--last", "1"]) == 1  # never over a folder with files
    assert "exists and is not an empty folder" in capsys.readouterr().err


def test_time_budget_stops_saves_and_resumes(corpus, tmp_path, capsys):
    out = tmp_path / "budget"
    argv = [*TRAIN, "--data", str(corpus), "--epochs", "500", "--out", str(out)]
    assert main([*argv, "--time-budget", "3"]) == 0
    text = capsys.readouterr().out
    assert "time budget of 3 s used up after" in text and "stopped by --time-budget" in text
    cfg = json.loads((out / "config.json").read_text())
    assert 0 < cfg["step"] and cfg["epoch"] < 500  # stopped long before the epochs
    assert main([*argv, "--resume", "--time-budget", "2"]) == 0
    assert json.loads((out / "config.json").read_text())["step"] > cfg["step"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--time-budget", "0"], "--time-budget must be a positive number of seconds, got 0"),
        (["--time-budget", "-5"], "--time-budget must be a positive number of seconds, got -5"),
        (["--vocab-size", "60000"], "--vocab-size 60000 is too large for the training split"),
        (["--max-len", "3"], "the training split of .* is empty: all its"),
    ],
)
def test_bad_training_input_keeps_what_was_saved(trained, corpus, capsys, extra, message):
    before = _digest(trained)
    argv = [*TRAIN, "--data", str(corpus), "--out", str(trained), "--overwrite", *extra]
    assert main(argv) == 1  # (a second --vocab-size wins over TRAIN's)
    assert re.search(message, capsys.readouterr().err)
    assert _digest(trained) == before  # nothing already saved is lost


def test_overwrite_keeps_only_the_new_tokenizer(trained, corpus, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    (old,) = json.loads((copy / "config.json").read_text())["data"]["tokenizer"]["files"]
    argv = [*TRAIN, "--data", str(corpus), "--out", str(copy), "--overwrite", "--epochs", "1"]
    assert main([*argv, "--vocab-size", "350"]) == 0  # a different tokenizer
    (new,) = json.loads((copy / "config.json").read_text())["data"]["tokenizer"]["files"]
    assert new != old and (copy / new).is_file()
    assert sorted(p.name for p in copy.glob("tokenizer-*")) == [new]
    word = [a for a in argv if a not in ("--tokenizer", "sentencepiece", "--vocab-size", "400")]
    assert main(word) == 0  # the word pipeline (the default): no tokenizer file
    assert list(copy.glob("tokenizer-*")) == []


def test_bad_data_files(tmp_path, capsys):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Go.\tVa !\nWait.\tAttendez, s'il vous pla\u00eet.\n".encode("latin-1"))
    assert main([*TRAIN, "--data", str(latin1), "--out", str(tmp_path / "x")]) == 1
    assert "latin1.txt is not UTF-8 text: line 2" in capsys.readouterr().err
    csv = tmp_path / "pairs.csv"
    csv.write_text("english,french\nGo.,Va !\n", encoding="utf-8")
    assert main([*TRAIN, "--data", str(csv), "--out", str(tmp_path / "y")]) == 1
    assert "line 1 reads 'english,french'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_damaged_or_missing_tokenizer_file(trained, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    (name,) = json.loads((copy / "config.json").read_text())["data"]["tokenizer"]["files"]
    (copy / name).write_bytes(b"garbage")
    assert main(["translate", "run", "--checkpoint", str(copy), "Go."]) == 1
    assert f"tokenizer file {copy / name} is damaged" in capsys.readouterr().err
    (copy / name).unlink()
    assert main(["translate", "eval", "--checkpoint", str(copy)]) == 1
    assert f"its tokenizer file {name} is missing" in capsys.readouterr().err
