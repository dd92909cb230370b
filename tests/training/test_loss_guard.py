"""The loss guard: a non-finite step is skipped (translator and language model, fp32 and
bf16), several in a row stop the run, an exploding loss stops it too, and the checkpoint
folder keeps its good checkpoint either way."""

from __future__ import annotations

import math

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.data.lm import LMDataLoader
from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model, lm_config
from attnkit.training.engine import Engine, EngineConfig
from attnkit.training.guard import LossGuard, TrainingDivergedError
from attnkit.training.lm import LMTask
from attnkit.training.translation import TrainConfig, Trainer

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.0}
DATA = load_translation_data(None, num_pairs=120, seed=0)


def _trainer(out_dir=None, **overrides):
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(DATA.src_vocab), len(DATA.tgt_vocab))
    settings = dict(epochs=2, batch_tokens=400, progress=False, seed=1, bleu_sentences=2)
    config = TrainConfig(out_dir=None if out_dir is None else str(out_dir), **settings | overrides)
    return Trainer(model, DATA, config, arch="transformer", model_config=MODEL)


def _poison(engine, steps: set[int]):
    """The loss of the batches given at these optimizer-step counts becomes NaN."""
    loss = engine.task.loss

    def poisoned(ctx, batch, carry):
        out = loss(ctx, batch, carry)
        if engine.batch_seen in steps:
            out.loss_sum = out.loss_sum * float("nan")
        engine.batch_seen += 1
        return out

    engine.batch_seen = 0
    engine.task.loss = poisoned


def _weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_guard_rules_on_numbers():
    guard = LossGuard(max_nonfinite=3, factor=10)
    for loss in (8.0, 6.0, 4.0, 2.0, 1.0):  # a converging run, 100 tokens a step
        assert guard.step(loss * 100, 100, 1.0, "s") is None
    # the exponential mean, 0.1 for the newest: 8, 7.8, 7.42, 6.878, 6.2902
    assert (guard.first, guard.best, guard.ema) == (8.0, pytest.approx(6.2902), guard.best)
    assert guard.step(math.nan, 100, 1.0, "s") == (
        "s: non-finite loss nan, gradient norm 1: the step is skipped (1 in a row)"
    )
    assert guard.step(1.0, 1, math.inf, "s") is not None and guard.in_a_row == 2
    assert guard.step(100.0, 100, 1.0, "s") is None and guard.in_a_row == 0  # a finite one
    guard.step(math.nan, 1, 1.0, "s")
    guard.step(math.nan, 1, 1.0, "s")
    with pytest.raises(TrainingDivergedError, match="3 steps in a row had a non-finite"):
        guard.step(math.nan, 1, 1.0, "step 9")
    assert guard.take_skipped() == 5 and guard.take_skipped() == 0
    state = guard.state_dict()
    again = LossGuard(max_nonfinite=3, factor=10)
    again.load_state_dict(state)
    assert again.state_dict() == state and again.in_a_row == 3


def test_an_exploding_training_loss_stops_but_a_converged_wobble_does_not():
    guard = LossGuard(max_nonfinite=0, factor=10)
    guard.step(5.0, 1, 1.0, "s")
    guard.step(50.0, 1, 1.0, "s")  # the mean 9.5: under 10 x 5
    with pytest.raises(TrainingDivergedError, match=r"exploded at step 3: 58\.55 per token"):
        guard.step(500.0, 1, 1.0, "step 3")  # 0.9 x 9.5 + 50 = 58.55 > 50
    calm = LossGuard(max_nonfinite=0, factor=10)
    for loss in (1.0, 1e-3, 1e-5, 1e-6, 1e-6, 1e-6, 1e-3, 1e-2, 0.5):
        calm.step(loss, 1, 1.0, "s")  # thousands of times its best, but below its start
    assert calm.ema < calm.first < calm.ema * 10**3 * calm.factor
    off = LossGuard(max_nonfinite=0, factor=0)
    assert off.step(math.nan, 1, math.nan, "s") is None and not off.active
    # before a save: the weights' loss on the last batch
    guard = LossGuard(max_nonfinite=1, factor=10)
    guard.step(4.0, 1, 1.0, "s")
    guard.saving(39.0, 1, "step 1")
    with pytest.raises(TrainingDivergedError, match="give a loss of 41 per token"):
        guard.saving(41.0, 1, "step 1")
    with pytest.raises(TrainingDivergedError, match=r"give a non-finite loss \(inf\)"):
        guard.saving(math.inf, 1, "step 1")


def test_an_exploding_validation_loss_stops():
    guard = LossGuard(max_nonfinite=5, factor=10)
    guard.validation(4.0, [], "epoch 1")  # nothing to compare with
    guard.validation(19.0, [4.0, 2.0], "epoch 3")  # under 10 x 2
    with pytest.raises(TrainingDivergedError, match=r"validation loss exploded at epoch 3"):
        guard.validation(21.0, [4.0, 2.0], "epoch 3")
    guard.validation(0.5, [0.6, 0.01], "epoch 3")  # 50 x the best, below the first
    guard.validation(math.nan, [4.0, 2.0], "epoch 3")  # no validation split
    with pytest.raises(TrainingDivergedError, match="validation loss is inf"):
        guard.validation(math.inf, [4.0], "epoch 2")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_nan_step_of_a_translator_is_skipped_and_counted(tmp_path, precision, capsys):
    trainer = _trainer(tmp_path / "ck", precision=precision)
    n = len(DATA.batches("train", 400, shuffle=True, seed=1, epoch=0))
    _poison(trainer, {2})
    seen = []
    step = trainer._optimizer_step

    def spy():
        before = _weights(trainer.model)
        applied = step()
        seen.append(applied)
        after = trainer.model.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before) != applied
        return applied

    trainer._optimizer_step = spy
    history = trainer.fit()
    assert seen[:4] == [True, True, False, True] and seen.count(False) == 1
    assert trainer.step == 2 * n - 1  # the skipped step is not counted
    assert history["skipped_steps"] == [1, 0]
    assert all(math.isfinite(x) for x in history["train_loss"] + history["val_loss"])
    out = capsys.readouterr().out
    assert "step 3 (epoch 1, batch 3/" in out and "non-finite loss nan" in out
    assert "(1 non-finite step(s) skipped)" in out
    ck = load_checkpoint(tmp_path / "ck")
    assert ck.config["history"]["skipped_steps"] == [1, 0]


def test_nan_steps_in_a_row_stop_and_the_folder_keeps_its_checkpoint(tmp_path):
    first = _trainer(tmp_path / "ck", epochs=1)
    first.fit()
    saved = (tmp_path / "ck" / "config.json").read_bytes()
    weights = _weights(first.model)
    resumed = _trainer(tmp_path / "ck", epochs=2, max_nonfinite_steps=3, precision="bf16")
    assert resumed.resume()
    _poison(resumed, {1, 2, 3})
    with pytest.raises(TrainingDivergedError) as error:
        resumed.fit()
    message = str(error.value)
    assert "3 steps in a row had a non-finite loss or gradient norm" in message
    assert "keeps its last good checkpoint" in message and "--precision fp32" in message
    assert "a lower --lr (this run: 0.005)" in message
    assert (tmp_path / "ck" / "config.json").read_bytes() == saved
    ck = load_checkpoint(tmp_path / "ck")
    assert all(torch.equal(ck.model_state[k], weights[k]) for k in weights)


@pytest.mark.parametrize(
    ("every", "caught"),
    [(0, "the training loss exploded at step [0-9]+ "),  # by the smoothed training loss
     (1, "the weights to save at step 6 .* give a loss of [0-9,.]+ per token")],  # before a save
)  # fmt: skip
def test_a_resumed_run_that_explodes_never_replaces_the_good_checkpoint(tmp_path, every, caught):
    good = _trainer(tmp_path / "ck", epochs=1)
    good.fit()
    saved = (tmp_path / "ck" / "config.json").read_bytes()
    weights = _weights(good.model)
    wild = _trainer(tmp_path / "ck", epochs=3, lr=50.0, clip=None, save_every_steps=every)
    assert wild.resume() and wild.step == 5
    with pytest.raises(TrainingDivergedError, match=caught) as error:
        wild.fit()
    message = str(error.value)
    assert "keeps its last good checkpoint" in message and "(this run: 50)" in message
    assert "clipping (--clip 1)" in message
    assert (tmp_path / "ck" / "config.json").read_bytes() == saved
    ck = load_checkpoint(tmp_path / "ck")
    assert all(torch.equal(ck.model_state[k], weights[k]) for k in weights)
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == sorted(
        [*ck.config["files"].values(), "config.json", "curves.png"]
    )  # nothing else: no temporary file, no file of a refused save


def test_a_nan_step_of_a_language_model_is_skipped_and_its_state_starts_afresh(capsys):
    g = torch.Generator().manual_seed(0)
    corpus = torch.randint(0, 12, (400,), generator=g).tolist()
    loader = LMDataLoader(corpus, batch_size=4, num_steps=8, seed=0)
    torch.manual_seed(0)
    model = lm_config("rnn", {"cell": "gru", "num_hiddens": 8}).build(12)
    config = EngineConfig(epochs=2, lr=1.0, optimizer="sgd", seed=None, progress=False)
    engine = Engine(model, LMTask(loader), config)
    _poison(engine, {3})
    carried = []
    loss = engine.task.loss

    def spy(ctx, batch, carry):  # the state each batch starts from
        carried.append(None if carry is None else carry.clone())
        return loss(ctx, batch, carry)

    engine.task.loss = spy
    history = engine.fit()
    n = len(carried) // 2  # batches an epoch
    assert engine.step == 2 * n - 1 and history["skipped_steps"] == [1, 0]
    assert all(math.isfinite(x) for x in history["train_loss"])
    assert carried[3] is not None and carried[4] is None  # after the skip: a fresh state
    assert all(c is None or torch.isfinite(c).all() for c in carried)
    assert "step 4 (epoch 1, batch 4): non-finite loss nan" in capsys.readouterr().out
