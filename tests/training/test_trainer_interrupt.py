"""Ctrl-C / SIGTERM during training: the step finishes, a checkpoint is saved mid-epoch,
and --resume continues bit-exactly (nothing lost)."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model
from attnkit.training.translation import TrainConfig, Trainer, TrainingInterrupted

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.1}


def _trainer(out_dir, epochs=2, eval_every=1):
    data = load_translation_data(None, num_pairs=300, seed=0)
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    config = TrainConfig(
        epochs=epochs, batch_tokens=400, out_dir=str(out_dir), progress=False, seed=1,
        bleu_sentences=5, eval_every=eval_every,
    )  # fmt: skip
    return Trainer(model, data, config, arch="transformer", model_config=MODEL)


def _signal_at(trainer, step, sig):
    """Send ``sig`` to this process right after global step ``step``."""
    original = trainer.train_step

    def train_step(*args):
        out = original(*args)
        if trainer.step == step:
            os.kill(os.getpid(), sig)
        return out

    trainer.train_step = train_step


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_epoch_saves_and_resume_loses_nothing(tmp_path, sig, capsys):
    straight = _trainer(tmp_path / "straight")
    straight.fit()
    n_batches = len(straight.data.batches("train", 400, shuffle=True, seed=1, epoch=1))
    stop_step = n_batches + 3  # 3 batches into the second epoch

    first = _trainer(tmp_path / "run")
    _signal_at(first, stop_step, sig)
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingInterrupted, match=f"epoch 2, batch 3/{n_batches}"):
        first.fit()
    assert "checkpoint saved in" in capsys.readouterr().out
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before

    resumed = _trainer(tmp_path / "run")
    assert resumed.resume()
    assert (resumed.epoch, resumed.batch_in_epoch, resumed.step) == (1, 3, stop_step)
    resumed.fit()
    for (name, a), b in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().values()
    ):
        assert torch.equal(a, b), name
    assert resumed.history["train_loss"] == pytest.approx(straight.history["train_loss"], rel=1e-9)
    assert resumed.step == straight.step


def test_every_epoch_is_saved_even_between_evaluations(tmp_path):
    trainer = _trainer(tmp_path / "ck", epochs=3, eval_every=2)
    _signal_at(trainer, 1, signal.SIGINT)  # stop early in epoch 1 ...
    with pytest.raises(TrainingInterrupted):
        trainer.fit()
    trainer = _trainer(tmp_path / "ck", epochs=3, eval_every=2)
    assert trainer.resume() and trainer.batch_in_epoch == 1
    trainer.train_epoch()  # ... finish epoch 1 by hand, then let fit run epoch 2 and stop
    n = len(trainer.data.batches("train", 400, shuffle=True, seed=1, epoch=1))
    _signal_at(trainer, trainer.step + n, signal.SIGINT)  # during the last batch of epoch 2
    with pytest.raises(TrainingInterrupted, match="the end of epoch 2"):
        trainer.fit()
    again = _trainer(tmp_path / "ck", epochs=3, eval_every=2)
    assert again.resume() and (again.epoch, again.batch_in_epoch) == (2, 0)
