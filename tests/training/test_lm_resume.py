"""`attnkit lm train`: a checkpoint after every epoch and on Ctrl-C/SIGTERM, and --resume
continues it exactly as an uninterrupted run would have gone on."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

import attnkit.cli
from attnkit.cli import main
from attnkit.data.lm import LMDataLoader
from attnkit.training.engine import Engine, EngineConfig
from attnkit.training.lm import LMTask

# ~46 batches per epoch: fast, and long enough to stop in the middle of one
SMALL = ["--hiddens", "16", "--batch-size", "4", "--num-steps", "8", "--max-tokens", "1500"]
SMALL += ["--sample-tokens", "5", "--no-progress", "--threads", "1", "--seed", "3"]


@pytest.fixture(autouse=True)
def _only_the_lm_verb(monkeypatch):
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])


def _train(out, epochs, *extra):
    return main(["lm", "train", *SMALL, "--epochs", str(epochs), "--out", str(out), *extra])


def _signal_at(monkeypatch, step, sig):
    """Send ``sig`` to this process right after the ``step``-th training step (1-based)."""
    original, calls = Engine.train_step, []

    def train_step(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(1)
        if len(calls) == step:
            os.kill(os.getpid(), sig)
        return out

    monkeypatch.setattr(Engine, "train_step", train_step)


@pytest.mark.parametrize(
    "extra",
    [["--cell", "gru"], ["--cell", "lstm", "--random-iter", "--optimizer", "adam"]],
    ids=["sequential-sgd", "random-adam"],
)
def test_epochs_then_resume_equal_a_straight_run(tmp_path, extra, capsys, lm_runs):
    assert _train(tmp_path / "straight", 3, *extra) == 0
    assert _train(tmp_path / "run", 1, *extra) == 0
    state = lm_runs.state(tmp_path / "run")
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 0)
    assert len(state["history"]["train_loss"]) == 1 and state["optimizer"] is not None
    assert _train(tmp_path / "run", 3, "--resume") == 0  # options come from the checkpoint
    assert "resuming" in capsys.readouterr().out
    lm_runs.assert_same(tmp_path / "straight", tmp_path / "run")
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (cfg["epochs"], cfg["epochs_done"]) == (3, 3)
    assert len(cfg["history"]["train_loss"]) == 3


@pytest.mark.parametrize(
    ("sig", "extra"),
    [(signal.SIGINT, ["--cell", "lstm"]), (signal.SIGTERM, ["--cell", "gru", "--random-iter"])],
    ids=["SIGINT-sequential-lstm", "SIGTERM-random-gru"],
)
def test_a_signal_mid_epoch_saves_and_resume_equals_a_straight_run(
    tmp_path, monkeypatch, capsys, sig, extra, lm_runs
):
    assert _train(tmp_path / "straight", 2, *extra) == 0
    per_epoch = len(list(LMDataLoader(list(range(1500)), 4, 8, "--random-iter" in extra, seed=3)))
    _signal_at(monkeypatch, per_epoch + 5, sig)  # a few batches into epoch 2
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert _train(tmp_path / "run", 2, *extra) == 130
    out = capsys.readouterr().out
    assert "stopping after this step" in out
    assert "stopped at epoch 2, batch " in out and "--resume continues from there" in out
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    state = lm_runs.state(tmp_path / "run")
    assert state["epoch"] == 1 and 0 < state["batch_in_epoch"] < per_epoch
    if "--random-iter" in extra:
        assert state["carry"] is None
    else:  # the carried LSTM state (H, C), all batch rows
        assert isinstance(state["carry"], tuple) and state["carry"][0].shape == (1, 4, 16)
    monkeypatch.undo()
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])
    assert _train(tmp_path / "run", 2, "--resume") == 0
    assert "batch" in capsys.readouterr().out
    lm_runs.assert_same(tmp_path / "straight", tmp_path / "run")


def test_a_signal_during_the_last_batch_stops_at_the_epoch_end(
    tmp_path, monkeypatch, capsys, lm_runs
):
    per_epoch = len(list(LMDataLoader(list(range(1500)), 4, 8, seed=3)))
    _signal_at(monkeypatch, per_epoch, signal.SIGINT)
    assert _train(tmp_path / "run", 3) == 130
    assert "stopped at the end of epoch 1" in capsys.readouterr().out
    state = lm_runs.state(tmp_path / "run")
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 0)


def test_resume_refuses_other_model_or_data_options(tmp_path, capsys, lm_runs):
    run = tmp_path / "run"
    assert _train(run, 1) == 0
    capsys.readouterr()
    for change, said in [
        (["--hiddens", "32"], "--hiddens 32 (checkpoint: 16)"),
        (["--num-steps", "10"], "--num-steps 10 (checkpoint: 8)"),
        (["--random-iter"], "--random-iter True (checkpoint: False)"),
        (["--cell", "lstm"], "--cell 'lstm' (checkpoint: 'gru')"),
        (["--dataset", "time_machine"], "--data/--dataset 'time_machine' (checkpoint: 'builtin')"),
        (["--optimizer", "adam"], "--optimizer 'adam' (checkpoint: 'sgd')"),
    ]:
        argv = ["lm", "train", "--resume", "--out", str(run), "--epochs", "2", *change]
        assert main(argv) == 1, change
        err = capsys.readouterr().err
        assert f"cannot resume {run} with other model/data options: {said}" in err, err
    # the same values, given again, are fine; --lr and --clip may change
    assert _train(run, 2, "--resume", "--lr", "0.5") == 0
    assert lm_runs.state(run)["optimizer"]["param_groups"][0]["lr"] == 0.5
    assert main(["lm", "train", "--resume", "--overwrite", "--out", str(run)]) == 1
    assert "--resume and --overwrite exclude each other" in capsys.readouterr().err
    assert _train(run, 2, "--resume") == 0  # nothing left to do
    assert "nothing to train" in capsys.readouterr().out


def test_a_used_folder_needs_resume_or_overwrite(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(run, 1) == 0
    capsys.readouterr()
    assert _train(run, 1) == 1
    err = capsys.readouterr().err
    assert (
        f"{run} already holds a checkpoint (gru language model, epoch 1 of 1); pass --resume "
        "to continue it, --overwrite to replace it, or --out for a new folder"
    ) in err
    assert _train(run, 1, "--overwrite", "--cell", "rnn") == 0
    assert json.loads((run / "config.json").read_text())["cell"] == "rnn"
    # a folder of the layout before the one format is refused, with what to do, by
    # `lm train --resume` and `lm generate` alike
    for name in list(run.iterdir()):
        name.unlink()
    (run / "model.pt").write_bytes(b"weights")
    (run / "vocab.json").write_text("{}")
    old = {"cell": "rnn", "num_hiddens": 8, "num_layers": 1, "bidirectional": False}
    (run / "config.json").write_text(json.dumps({**old, "scratch": False, "epochs": 1}))
    assert _train(run, 2, "--resume") == 1
    assert "train the model again with `attnkit lm train --out DIR`" in capsys.readouterr().err
    assert main(["lm", "generate", "--checkpoint", str(run), "--prompt", "the"]) == 1
    assert "train the model again with `attnkit lm train --out DIR`" in capsys.readouterr().err
    # --resume into an empty folder starts a new run
    assert _train(tmp_path / "new", 1, "--resume") == 0
    assert "no checkpoint in" in capsys.readouterr().err


def test_engine_state_dict_resumes_an_lm_run_in_memory():
    """Library level: the engine's state_dict/load_state_dict with an LMTask (no CLI, no files)."""
    from attnkit.models.rnn import build_lm

    corpus = [i % 7 + 1 for i in range(400)]

    def engine(epochs, model=None):
        loader = LMDataLoader(corpus, 3, 5, seed=0)
        torch.manual_seed(0)
        model = model or build_lm("rnn", 8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        config = EngineConfig(epochs=epochs, seed=None, progress=False, log_every=0)
        return Engine(model, LMTask(loader), config, optimizer=opt)

    straight = engine(3)
    straight.fit()
    first = engine(1)
    first.fit()
    state, history = first.state_dict(), first.history
    assert state["epoch"] == 1 and state["loader"] is not None and state["carry"] is None
    resumed = engine(3, model=first.model)
    resumed.load_state_dict(state, history)
    resumed.fit()
    assert resumed.history["epoch"] == [1, 2, 3]
    assert resumed.history["train_loss"] == straight.history["train_loss"]
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)
