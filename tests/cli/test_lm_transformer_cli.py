"""`attnkit lm train --arch transformer` and `attnkit lm generate`: a tiny Transformer LM
trained through the CLI on a generated text, its checkpoint, exact resume, every position
scheme, subwords, seeded and batched generation, the warnings and the errors."""

from __future__ import annotations

import json
import os
import random
import signal

import pytest
import torch

import attnkit.cli
from attnkit.attention.positional import POSITIONS
from attnkit.checkpoint import load_checkpoint
from attnkit.cli import main
from attnkit.inference.generation import generate
from attnkit.inference.loading import load_lm_checkpoint, load_lm_tokenizer
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig
from attnkit.training.engine import Engine

# no 'z', 'q' or 'j' anywhere: a prompt with one is an unknown character
STORY = ("the time traveller was expounding a recondite matter to us his grey eyes shone "
         "and twinkled his usually pale face flushed animated fire burned brightly soft "
         "radiance incandescent lights lilies silver caught bubbles flashed passed glasses "
         "our chairs being patents embraced caressed us rather submitted sat")  # fmt: skip
WORDS = STORY.split()
TINY = ["--arch", "transformer", "--d-model", "16", "--heads", "2", "--layers", "1"]
TINY += ["--ffn-hidden", "32", "--context", "16", "--batch-size", "4", "--no-progress"]
TINY += ["--threads", "1", "--sample-tokens", "5", "--seed", "3"]
TINY += ["--dropout", "0.1"]  # resumed runs must restore its RNG


@pytest.fixture(autouse=True)
def _only_the_lm_verb(monkeypatch):
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """A generated text file: 120 lines of 6 to 12 words (~7,000 characters)."""
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(6, 12))).capitalize() + "."
             for _ in range(120)]  # fmt: skip
    path = tmp_path_factory.mktemp("text") / "story.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(text, tmp_path_factory):
    """A tiny RoPE Transformer LM, 2 epochs (no test changes it)."""
    out = tmp_path_factory.mktemp("run") / "lm"
    argv = ["lm", "train", *TINY, "--data", str(text), "--epochs", "2", "--out", str(out)]
    assert attnkit.cli.main(argv) == 0
    return out


def _train(text, out, epochs, *extra):
    argv = ["lm", "train", *TINY, "--data", str(text), "--epochs", str(epochs)]
    return main([*argv, "--out", str(out), *extra])


def _generate(checkpoint, *args):
    return main(["lm", "generate", "--checkpoint", str(checkpoint), *args])


def test_the_checkpoint_records_the_arch_and_reloads(trained, capsys):
    cfg = json.loads((trained / "config.json").read_text())
    assert (cfg["task"], cfg["arch"], cfg["positions"], cfg["num_steps"]) == (
        "lm", "transformer", "rope", 16,
    )  # fmt: skip
    assert DecoderLMConfig.from_dict(cfg) == DecoderLMConfig(
        vocab_size=len(cfg["vocab"]["idx_to_token"]), d_model=16, num_heads=2, num_layers=1,
        ffn_hidden=32, context_length=16,
    )  # fmt: skip
    assert len(cfg["history"]["val_perplexity"]) == 2 and cfg["val_fraction"] == 0.1
    assert cfg["history"]["val_perplexity"][1] < len(cfg["vocab"]["idx_to_token"])
    model, _, _ = load_lm_checkpoint(trained)
    assert isinstance(model, DecoderLM) and not model.training
    weights = load_checkpoint(trained, task="lm").model_state
    for name, value in model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    samples = (trained / "samples.txt").read_text().splitlines()
    assert [line.split(" | ")[1][:14] for line in samples] == ["time traveller"] * 2 + [
        "traveller" + line.split(" | ")[1][9:14] for line in samples[2:]
    ]
    assert [line.split(" | ")[0].strip() for line in samples] == ["greedy", "temperature 0.8"] * 2


def test_a_seed_repeats_a_sample_exactly(trained, capsys):
    sampled = ["--prompt", "the time", "--max-new-tokens", "40", "--temperature", "1"]
    runs = []
    for seed in ("5", "5", "6"):
        assert _generate(trained, *sampled, "--top-k", "10", "--top-p", "0.95", "--seed", seed) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1] != runs[2]
    assert runs[0].startswith("the time") and len(runs[0]) == len("the time") + 40 + 1
    # streamed or batched: the same text (greedy), one line per prompt of --input
    prompts = trained.parent / "prompts.txt"
    prompts.write_text("the time\n\nHis grey eyes!\nus\n", encoding="utf-8")
    assert _generate(trained, "--input", str(prompts), "--max-new-tokens", "12") == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 3 and lines[1].startswith("his grey eyes")
    assert "1 of 3 prompts normalized like the corpus (letters, lowercase)" in captured.err
    for prompt, line in zip(("the time", "his grey eyes", "us"), lines, strict=True):
        assert _generate(trained, "--prompt", prompt, "--max-new-tokens", "12") == 0
        assert capsys.readouterr().out == line + "\n"


def test_cached_and_uncached_generation_give_the_same_text(trained):
    model, vocab, _ = load_lm_checkpoint(trained)
    prompts = ["the time travel", "us", "grey eyes shone"]  # 15 tokens at most: no cut
    for options in ({}, {"temperature": 1.0, "top_p": 0.9, "seed": 4}):
        kwargs = {"vocab": vocab, "max_new_tokens": 30, **options}  # past the context of 16
        cached = generate(model, prompts, **kwargs)
        assert cached == generate(model, prompts, use_cache=False, **kwargs)


@pytest.mark.parametrize(
    "extra",
    [["--positions", "rope"], ["--positions", "alibi", "--kv-heads", "1", "--precision", "bf16"]],
    ids=["rope", "alibi-mqa-bf16"],
)
def test_epochs_then_resume_equal_a_straight_run(text, tmp_path, capsys, extra, lm_runs):
    assert _train(text, tmp_path / "straight", 3, *extra) == 0
    assert _train(text, tmp_path / "run", 1, *extra) == 0
    assert lm_runs.state(tmp_path / "run")["carry"] is None  # a Transformer carries nothing
    assert _train(text, tmp_path / "run", 3, "--resume") == 0  # the options: the checkpoint's
    assert "resuming" in capsys.readouterr().out
    lm_runs.assert_same(tmp_path / "straight", tmp_path / "run")
    straight, resumed = (lm_runs.state(tmp_path / name)["history"] for name in ("straight", "run"))
    assert resumed["val_perplexity"] == straight["val_perplexity"]


def test_a_signal_mid_epoch_saves_and_resume_equals_a_straight_run(
    text, tmp_path, monkeypatch, capsys, lm_runs
):
    assert _train(text, tmp_path / "straight", 2) == 0
    original, calls = Engine.train_step, []

    def train_step(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(1)
        if len(calls) == 30:  # in epoch 1 (~36 batches an epoch)
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(Engine, "train_step", train_step)
    assert _train(text, tmp_path / "run", 2) == 130
    state = lm_runs.state(tmp_path / "run")
    assert (state["epoch"], state["batch_in_epoch"]) == (0, 30) and state["carry"] is None
    monkeypatch.undo()
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])
    assert _train(text, tmp_path / "run", 2, "--resume") == 0
    assert "resuming" in capsys.readouterr().out
    lm_runs.assert_same(tmp_path / "straight", tmp_path / "run")
    straight, resumed = (lm_runs.state(tmp_path / name)["history"] for name in ("straight", "run"))
    assert resumed["val_perplexity"] == straight["val_perplexity"]


def test_resume_refuses_another_arch_or_model(trained, capsys):
    for change, said in [
        (["--arch", "rnn"], "--arch 'rnn' (checkpoint: 'transformer')"),
        (["--d-model", "32"], "--d-model 32 (checkpoint: 16)"),
        (["--positions", "alibi"], "--positions 'alibi' (checkpoint: 'rope')"),
        (["--kv-heads", "1"], "--kv-heads 1 (checkpoint: None)"),
        (["--num-steps", "8"], "--num-steps 8 (checkpoint: 16)"),
    ]:
        argv = ["lm", "train", "--resume", "--out", str(trained), "--epochs", "3", *change]
        assert main(argv) == 1, change
        err = capsys.readouterr().err
        assert f"cannot resume {trained} with other model/data options: {said}" in err, err
    assert main(["lm", "train", "--out", str(trained), "--epochs", "3"]) == 1
    assert "(transformer language model, epoch 2 of 2); pass --resume" in capsys.readouterr().err


@pytest.mark.parametrize("positions", POSITIONS)
def test_every_position_scheme_trains(text, tmp_path, positions):
    out = tmp_path / "lm"
    argv = ["--positions", positions, "--max-tokens", "1500", "--epochs", "2", "--dropout", "0"]
    assert _train(text, out, 2, *argv, "--optimizer", "adam", "--lr", "0.01") == 0
    cfg = json.loads((out / "config.json").read_text())
    train, val = cfg["history"]["train_loss"], cfg["history"]["val_perplexity"]
    assert cfg["positions"] == positions and train[1] < train[0] and val[1] < 20
    model, _, _ = load_lm_checkpoint(out)
    assert model.positions == positions


def test_subwords_train_generate_and_resume(text, tmp_path, capsys):
    out = tmp_path / "sp"
    argv = ["--tokenizer", "sentencepiece", "--vocab-size", "320", "--batch-size", "2"]
    assert _train(text, out, 1, *argv) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["tokenizer"] == "sentencepiece" and cfg["preprocess"] == "none"
    assert (out / cfg["tokenizer_model"]["file"]).is_file()
    tokenizer = load_lm_tokenizer(out, cfg)
    assert len(tokenizer) == 320 == len(cfg["vocab"]["idx_to_token"])
    assert tokenizer.decode(tokenizer.encode("His grey Eyes.")) == "His grey Eyes."
    capsys.readouterr()
    assert _generate(out, "--prompt", "His grey Eyes", "--max-new-tokens", "5") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("His grey Eyes") and not captured.err  # as it is
    resume = ["lm", "train", "--resume", "--out", str(out), "--epochs", "2", "--no-progress"]
    assert main(resume) == 0  # the tokenizer is read back, the corpus encoded with it
    assert (
        json.loads((out / "config.json").read_text())["tokenizer_model"] == cfg["tokenizer_model"]
    )


def test_a_long_prompt_is_cut_with_a_warning_on_stderr(trained, capsys):
    assert _generate(trained, "--prompt", "the time traveller was expounding") == 0
    captured = capsys.readouterr()
    assert captured.err == (
        "attnkit lm generate: warning: a prompt of 33 tokens is longer than the model's "
        "context_length 16: each prompt is cut to its last 16 tokens (positions='rope')\n"
    )
    assert captured.out.startswith("the time traveller was expounding")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--prompt", ""], "--prompt is empty: a prompt needs at least one token"),
        (["--prompt", "?!"], "--prompt '?!' has no letter: the model reads letters and spaces"),
        (["--prompt", "zebra"], "prompt 'zebra' has tokens outside the vocabulary: ['z']"),
        (["--prompt", "a", "--temperature", "-1"], "--temperature must be >= 0 (0 = greedy)"),
        (["--prompt", "a", "--top-p", "0"], "--top-p must be a number in (0, 1]"),
        (["--prompt", "a", "--top-p", "1.5"], "--top-p must be a number in (0, 1]"),
        (["--prompt", "a", "--top-k", "0"], "--top-k must be a positive int, got 0"),
        (["--prompt", "a", "--max-new-tokens", "-1"], "--max-new-tokens must be a non-negative"),
        (["--input", "/nonexistent/prompts.txt"], "--input '/nonexistent/prompts.txt' does not"),
    ],
)
def test_generate_errors_are_one_line(trained, capsys, args, said):
    assert _generate(trained, *args) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("attnkit lm: error: ") and said in captured.err, captured.err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--hiddens", "8"], "--hiddens: not an option of --arch transformer (only of --arch rnn)"),
        (["--arch", "rnn"], "--d-model, --heads, --ffn-hidden, --dropout, --context: not an option of --arch "
                            "rnn (only of --arch transformer)"),
        (["--positions", "learned", "--num-steps", "32"],
         "--num-steps 32 is longer than --context 16: positions='learned' has no position"),
        (["--vocab-size", "300"], "--vocab-size: only with --tokenizer sentencepiece"),
        (["--kv-heads", "3"], "DecoderLMConfig.num_kv_heads (3) must divide num_heads (2)"),
        (["--preset", "book"], "--preset book is for --arch rnn, not 'transformer'"),
    ],
)  # fmt: skip
def test_train_errors(text, tmp_path, capsys, args, said):
    assert _train(text, tmp_path / "lm", 1, *args) == 1
    assert said in capsys.readouterr().err
    assert not (tmp_path / "lm").exists()


def test_a_checkpoint_written_before_the_activation_and_norm_eps_fields_resumes(
    text, trained, tmp_path
):
    """Checkpoints of before the GPT-2 fields (activation, norm_eps) have neither key: they
    are the fields' defaults, so --resume takes such a folder as the same model."""
    import shutil

    out = tmp_path / "old"
    shutil.copytree(trained, out)
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    assert config.pop("activation") == "gelu" and config.pop("norm_eps") == 1e-5
    config_path.write_text(json.dumps(config))
    model, _, _ = load_lm_checkpoint(out)
    assert model.config.activation == "gelu" and model.config.norm_eps == 1e-5
    argv = ["lm", "train", *TINY, "--data", str(text), "--epochs", "3", "--out", str(out)]
    assert attnkit.cli.main([*argv, "--resume"]) == 0
    history = load_checkpoint(out, trainer=True, task="lm").config["history"]
    assert len(history["train_loss"]) == 3
