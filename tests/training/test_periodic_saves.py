"""Resumable checkpoints during an epoch, by steps and by minutes: the state a Ctrl-C save
writes, training unchanged by them, and a run resumed from one equal to a straight run."""

from __future__ import annotations

import pytest
import torch

import attnkit.training.engine_stops as engine_stops
from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model
from attnkit.training.translation import TrainConfig, Trainer

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.1}
DATA = load_translation_data(None, num_pairs=200, seed=0)
BATCHES = len(DATA.batches("train", 400, shuffle=True, seed=1, epoch=0))


def _trainer(out_dir=None, **overrides):
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(DATA.src_vocab), len(DATA.tgt_vocab))
    settings = dict(epochs=2, batch_tokens=400, progress=False, seed=1, bleu_sentences=2)
    out = None if out_dir is None else str(out_dir)
    config = TrainConfig(out_dir=out, **settings | overrides)
    return Trainer(model, DATA, config, arch="transformer", model_config=MODEL)


class CrashError(Exception):
    """Stands for a process killed right after a save."""


def _record_saves(trainer, crash_after=None):
    saves, save = [], trainer.save

    def recording(directory=None):
        out = save(directory)
        saves.append((trainer.epoch, trainer.batch_in_epoch, trainer.step))
        if len(saves) == crash_after:
            raise CrashError
        return out

    trainer.save = recording
    return saves


def _assert_same_run(a, b):
    for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(x, y), name
    assert a.step == b.step
    assert a.history["train_loss"] == b.history["train_loss"]
    assert a.history["val_loss"] == b.history["val_loss"]


@pytest.fixture(scope="module")
def straight():
    trainer = _trainer(save_every_minutes=0)  # no folder, no saves
    trainer.fit()
    return trainer


def test_saves_every_n_steps_mid_epoch_change_nothing_and_resume_exactly(tmp_path, straight):
    assert BATCHES == 8
    run = _trainer(tmp_path / "ck", save_every_steps=3)
    saves = _record_saves(run, crash_after=4)  # "killed" after its 4th checkpoint
    with pytest.raises(CrashError):
        run.fit()
    # (epochs done, batches of the current one, steps) at each save: every 3 steps since
    # the last checkpoint of any kind, the epoch's end included
    assert saves == [(0, 3, 3), (0, 6, 6), (1, 0, 8), (1, 3, 11)]
    resumed = _trainer(tmp_path / "ck", save_every_steps=3)
    assert resumed.resume() and (resumed.epoch, resumed.batch_in_epoch) == (1, 3)
    assert resumed.partial[1] > 0  # the partial totals of the epoch (all ranks)
    later = _record_saves(resumed)
    resumed.fit()
    assert later == [(1, 6, 14), (2, 0, 16)]
    _assert_same_run(straight, resumed)


def test_saves_every_m_minutes_by_the_clock(tmp_path, monkeypatch, straight):
    now = [1000.0]  # a clock that moves 25 s a step: every minute is every 3 steps

    class Clock:
        @staticmethod
        def perf_counter():
            return now[0]

    monkeypatch.setattr(engine_stops, "time", Clock)

    def timed(trainer):
        step = trainer.train_step

        def timed_step(*args):
            now[0] += 25.0
            return step(*args)

        trainer.train_step = timed_step
        return _record_saves(trainer)

    run = _trainer(tmp_path / "ck", save_every_minutes=1)
    saves = timed(run)
    run.fit()
    assert saves == [(0, 3, 3), (0, 6, 6), (1, 0, 8), (1, 3, 11), (1, 6, 14), (2, 0, 16)]
    _assert_same_run(straight, run)  # saves draw nothing and change nothing
    off = _trainer(tmp_path / "off", epochs=1, save_every_minutes=0)
    saves = timed(off)
    off.fit()
    assert saves == [(1, 0, 8)]  # the epoch's end only


def test_save_flags_are_checked():
    with pytest.raises(ValueError, match=r"TrainConfig\.save_every_minutes must be a finite"):
        _trainer(save_every_minutes=-1)
    with pytest.raises(TypeError, match=r"TrainConfig\.save_every_steps must be a non-negative"):
        _trainer(save_every_steps=2.5)
    with pytest.raises(ValueError, match=r"divergence_factor must be 0 \(off\) or above 1"):
        _trainer(divergence_factor=0.5)
    assert TrainConfig().save_every_minutes == 10.0 and TrainConfig().save_every_steps == 0
