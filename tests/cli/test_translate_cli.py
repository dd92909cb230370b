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


def test_a_preset_does_not_combine_with_resume(trained, capsys):
    argv = ["translate", "train", "--out", str(trained), "--resume", "--preset", "book"]
    assert main(argv) == 1
    assert "--preset cannot be combined with --resume" in capsys.readouterr().err
    # a resumed run says where its settings came from
    assert main(["translate", "train", "--out", str(trained), "--resume", "--epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert "settings: flags: epochs=1; the rest: the checkpoint's" in out
    assert "nothing to do" in out


def test_run_prints_translations_and_heatmap(trained, tmp_path, capsys):
    png = tmp_path / "align.png"
    argv = ["translate", "run", "--checkpoint", str(trained), "they are sad .", "--heatmap"]
    assert main([*argv, str(png)]) == 0
    out = capsys.readouterr()
    assert len(out.out.strip().splitlines()) == 1
    assert png.stat().st_size > 1000


def test_run_refuses_unknown_words_unless_allowed(trained, tmp_path, capsys):
    argv = ["translate", "run", "--checkpoint", str(trained), "zyzzyva are sad .", "qux ."]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "unknown words" in err and "zyzzyva, qux" in err and "--allow-unknown" in err
    png = tmp_path / "unk.png"
    assert main([*argv, "--allow-unknown", "--heatmap", str(png)]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 2
    assert "unknown words translated as <unk>: zyzzyva, qux" in out.err
    assert (tmp_path / "unk-0.png").is_file() and (tmp_path / "unk-1.png").is_file()


def test_bahdanau_heatmap_draws_its_alignment_with_unk_labels(trained, tmp_path, drawn):
    png = tmp_path / "align.svg"
    for extra in ([], ["--beam", "2"], ["--all-heads"]):
        argv = ["translate", "run", "--checkpoint", str(trained), "zyzzyva are sad ."]
        assert main([*argv, "--allow-unknown", "--heatmap", str(png), *extra]) == 0
        maps, panels = drawn[-1]
        assert panels == ["encoder-decoder attention"]
        assert maps.encoder_self is None and maps.decoder_self is None
        assert maps.source == ["<unk>", "are", "sad", ".", "<eos>"]
        assert png.is_file()


def test_eval_reports_bleu_and_chrf(trained, capsys):
    assert main(["translate", "eval", "--checkpoint", str(trained), "--examples", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 4 and " => " in out[0]
    assert out[-2].startswith("test BLEU ") and ", chrF " in out[-2]
    # word-level models are scored on the book's tokens, and the signature says so
    assert out[-1].startswith("sacreBLEU signature: nrefs:1|") and "|tok:none|" in out[-1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--checkpoint", "{ck}", ""], "cannot translate an empty sentence"),
        (["run", "--checkpoint", "{ck}", "a " * 30], "more than max_len=12"),
        (["run", "--checkpoint", "{ck}", "abc " * 25], ("abc " * 15).strip() + "…' has 25 words"),
        (["run", "--checkpoint", "{ck}", "hi .", "--heatmap", "{tmp}/no/x.png"], "does not exist"),
        (["run", "--checkpoint", "{ck}", "hi .", "--heatmap", "{tmp}/x.docx"], "'.docx'; use an"),
        (["run", "--checkpoint", "{ck}", "hi .", "--heatmap", "{tmp}/x"], "no extension"),
        (["run", "--checkpoint", "{ck}", "hi .", "--all-heads"], "--all-heads needs --heatmap"),
        (["run", "--checkpoint", "{ck}", "hi .", "--beam", "0"], "--beam must be at least 1"),
        (["run", "--checkpoint", "{ck}", "hi .", "--device", "gpu"], "'gpu' is not a device"),
        (["eval", "--checkpoint", "{ck}", "--limit", "0"], "--limit must be at least 1"),
        (["run", "--checkpoint", "{missing}", "hi ."], "no checkpoint at"),
        (["eval", "--checkpoint", "{missing}"], "no checkpoint at"),
        (["train", "--arch", "bahdanau", "--model-config", "heads=2"], "unknown config key"),
        (["train", "--arch", "seq2seq", "--num-layers", "0"], "num_layers must be a positive"),
        (["train", "--arch", "seq2seq", "--epochs", "0"], "epochs must be a positive int"),
        (["train", "--arch", "seq2seq", "--beta2", "1.0"], "beta2 must be in [0, 1), got 1.0"),
        (["train"], "--arch is required"),
    ],
)
def test_bad_input_gives_a_message_and_exit_code_1(trained, tmp_path, capsys, argv, message):
    argv = [a.format(ck=trained, missing=tmp_path / "nope", tmp=tmp_path) for a in argv]
    if argv[0] == "train":
        argv += ["--out", str(tmp_path / "out"), *TINY]
    assert main(["translate", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit translate: error:") and message in err
    assert "abc " * 16 not in err  # a long sentence is not echoed whole


@pytest.mark.parametrize("verb", [["run", "hi ."], ["eval"]])
def test_cuda_without_cuda_says_so_before_loading(trained, monkeypatch, capsys, verb):
    import torch

    import attnkit.inference.loading as loading

    def no_load(*args, **kwargs):
        raise AssertionError("the checkpoint must not be loaded")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(loading, "load_model", no_load)
    argv = ["translate", verb[0], "--checkpoint", str(trained), *verb[1:], "--device", "cuda"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "CUDA is not available" in err and "checkpoint" not in err


def test_heatmap_needs_attention(tmp_path, capsys):
    out = tmp_path / "plain"
    argv = ["translate", "train", "--arch", "seq2seq", "--epochs", "1", "--out", str(out), *TINY]
    assert main(argv) == 0
    png = str(tmp_path / "x.png")
    assert main(["translate", "run", "--checkpoint", str(out), "hi .", "--heatmap", png]) == 1
    assert "has no attention for --heatmap" in capsys.readouterr().err


def test_training_into_a_used_folder_needs_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "ck"
    base = ["translate", "train", "--epochs", "1", "--out", str(out), *TINY]
    assert main([*base, "--arch", "seq2seq"]) == 0
    weights = sorted(p.name for p in out.glob("model-*.pt"))
    capsys.readouterr()
    assert main([*base, "--arch", "bahdanau"]) == 1
    err = capsys.readouterr().err
    assert f"{out} already holds a checkpoint (arch 'seq2seq', epoch 1)" in err
    assert "--resume" in err and "--overwrite" in err
    assert sorted(p.name for p in out.glob("model-*.pt")) == weights  # nothing lost
    assert json.loads((out / "config.json").read_text())["arch"] == "seq2seq"
    assert main([*base, "--arch", "bahdanau", "--overwrite"]) == 0
    assert json.loads((out / "config.json").read_text())["arch"] == "bahdanau"
    assert len(list(out.glob("model-*.pt"))) == 1


def test_training_without_a_validation_split_says_so(tmp_path, capsys):
    out = tmp_path / "noval"
    argv = ["translate", "train", "--arch", "seq2seq", "--epochs", "1", "--out", str(out)]
    assert main([*argv, *TINY, "--val-fraction", "0"]) == 0
    text = capsys.readouterr().out
    assert "no validation split" in text and "nan" not in text


def test_adam_betas_flags_reach_the_optimizer_and_the_checkpoint(tmp_path, monkeypatch):
    """--beta1/--beta2 (the book's Adam keeps PyTorch's 0.999): recorded and used."""
    from attnkit.training import engine

    seen = []
    real = engine.make_optimizer
    monkeypatch.setattr(
        engine, "make_optimizer", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1]
    )
    out = tmp_path / "betas"
    argv = ["translate", "train", "--arch", "seq2seq", "--epochs", "1", "--out", str(out)]
    assert main([*argv, *TINY, "--beta1", "0.8", "--beta2", "0.999"]) == 0
    assert seen[0].param_groups[0]["betas"] == (0.8, 0.999)
    train_config = json.loads((out / "config.json").read_text())["train_config"]
    assert (train_config["beta1"], train_config["beta2"]) == (0.8, 0.999)
