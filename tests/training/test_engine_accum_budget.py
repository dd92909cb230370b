"""The engine's gradient accumulation, bf16 autocast, time budget and snapshots."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from attnkit.checkpoint import load_checkpoint
from attnkit.training.engine import Engine, EngineConfig, StepLoss, Task, TrainingInterrupted
from attnkit.training.optim import sgd_update


class RegressionTask(Task):
    """A squared loss summed over rows; ``denominator``: None (the token mean: rows),
    "tensor" (the row count as a tensor) or a number. Batches: fixed, or drawn per epoch."""

    name = "regression"

    def __init__(self, batches=None, denominator=None, per_epoch=0, sizes=(3, 5)):
        self._batches, self.denominator = batches, denominator
        self.per_epoch, self.sizes = per_epoch, sizes

    def batches(self, epoch, rank, world_size):
        if self._batches is not None:
            return self._batches
        g = torch.Generator().manual_seed(100 + epoch)
        out = []
        for i in range(self.per_epoch):
            x = torch.randn(self.sizes[i % len(self.sizes)], 3, generator=g)
            out.append((x, x.sum(1, keepdim=True).tanh()))
        return out

    def loss(self, ctx, batch, carry):
        x, y = batch
        x, y = x.to(ctx.device), y.to(ctx.device)
        loss_sum = ((ctx.net(x) - y) ** 2).sum()
        rows = torch.tensor(x.shape[0])
        if self.denominator == "tensor":
            return StepLoss(loss_sum, rows, denominator=rows.double())
        return StepLoss(loss_sum, rows, denominator=self.denominator)

    def evaluate(self, ctx):  # draws from the global RNG, as a sampling evaluation would
        return {"draw": float(torch.rand(()))}


def _batch(rows, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 3, generator=g, dtype=torch.float64)
    return x, (x * torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)).sum(1, keepdim=True)


def _cat(*batches):
    return tuple(torch.cat(parts) for parts in zip(*batches, strict=True))


def _mlp(seed=0, dtype=torch.float64, dropout=0.0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Dropout(dropout), nn.Linear(6, 1)).to(dtype)


def _same_weights(a, b, exact=False):
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        if exact:
            assert torch.equal(x, y), name
        else:
            torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14, msg=name)


@pytest.mark.parametrize("denominator", [None, "tensor", 1])
@pytest.mark.parametrize("flat", [False, True])
def test_accumulated_groups_are_steps_on_the_concatenated_batches(denominator, flat):
    """accum=2 over A,B | C,D | E (a leftover group) = accum=1 over A+B, C+D, E, for two
    epochs: the same global token mean (or sum), clipping, schedule and Adam steps."""
    a, b, c, d, e = (_batch(rows, seed) for seed, rows in enumerate((2, 5, 3, 4, 6)))
    common = dict(
        epochs=2, lr=0.05, clip=0.5, seed=None, log_every=0, schedule="inverse_sqrt",
        warmup_steps=2, flat_params=flat,
    )  # fmt: skip
    models = []
    for accum, batches in ((2, [a, b, c, d, e]), (1, [_cat(a, b), _cat(c, d), e])):
        model = _mlp()
        engine = Engine(
            model, RegressionTask(batches, denominator), EngineConfig(**common, accum_steps=accum)
        )
        history = engine.fit()
        assert engine.step == 6 and engine.epoch == 2 and engine.batch_in_epoch == 0
        models.append((model, history))
    _same_weights(models[0][0], models[1][0])
    # the reported loss is the same token mean of the epoch
    assert models[0][1]["train_loss"] == pytest.approx(models[1][1]["train_loss"], rel=1e-12)


class _Unsized(RegressionTask):
    def batches(self, epoch, rank, world_size):
        return (b for b in super().batches(epoch, rank, world_size))  # no len()


def test_batches_without_a_length_find_the_last_group():
    batches = [_batch(rows, seed) for seed, rows in enumerate((2, 5, 3, 4, 6))]
    runs = []
    for task in (RegressionTask(batches), _Unsized(batches)):
        model = _mlp()
        config = EngineConfig(epochs=2, lr=0.05, seed=None, log_every=0, accum_steps=2)
        engine = Engine(model, task, config)
        engine.fit()
        assert engine.step == 6
        runs.append(model)
    _same_weights(*runs, exact=True)


def test_accumulation_with_a_callable_updater_and_sgd():
    a, b, c = _batch(3, 1), _batch(7, 2), _batch(2, 3)
    for make in (
        lambda m: sgd_update(m.parameters(), 0.1),
        lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
    ):
        models = []
        for accum, batches in ((3, [a, b, c]), (1, [_cat(a, b, c)])):
            model = _mlp()
            config = EngineConfig(epochs=1, clip=None, seed=None, log_every=0, accum_steps=accum)
            Engine(model, RegressionTask(batches), config, optimizer=make(model)).fit()
            models.append(model)
        _same_weights(*models)


def test_accum_one_is_the_one_batch_step_exactly():
    batches = [_batch(3, 1), _batch(5, 2), _batch(4, 3)]
    runs = []
    for accum in (1, None):
        model = _mlp()
        extra = {} if accum is None else {"accum_steps": accum}
        config = EngineConfig(epochs=2, lr=0.01, seed=None, log_every=0, **extra)
        Engine(model, RegressionTask(batches), config).fit()
        runs.append(model)
    _same_weights(*runs, exact=True)


def _engine(out_dir, accum=2, epochs=2, **extra):
    model = _mlp(dtype=torch.float32, dropout=0.2)
    config = EngineConfig(
        epochs=epochs, lr=0.01, seed=4, out_dir=str(out_dir), progress=False, log_every=0,
        accum_steps=accum, **extra,
    )  # fmt: skip
    return Engine(model, RegressionTask(per_epoch=7, sizes=(3, 5, 2)), config)


def _stop_after_batch(engine, batch):
    """Ask to stop (as Ctrl-C does) after the engine's ``batch``-th micro-batch."""
    original, calls = engine.train_step, []

    def train_step(*args):
        out = original(*args)
        calls.append(1)
        if len(calls) == batch:
            engine._stop.requested = True
        return out

    engine.train_step = train_step


def test_a_stop_waits_for_the_group_and_resume_is_exact(tmp_path):
    straight = _engine(tmp_path / "straight")
    straight.fit()
    assert straight.step == 8  # 7 batches an epoch: groups of 2, 2, 2, 1
    first = _engine(tmp_path / "run")
    _stop_after_batch(first, 7 + 3)  # in the middle of the second group of epoch 2
    with pytest.raises(TrainingInterrupted, match="epoch 2, batch 4/7"):
        first.fit()
    assert (first.epoch, first.batch_in_epoch, first.step) == (1, 4, 6)
    resumed = _engine(tmp_path / "run")
    assert resumed.resume() and (resumed.epoch, resumed.batch_in_epoch) == (1, 4)
    resumed.fit()
    _same_weights(straight.model, resumed.model, exact=True)
    assert resumed.step == straight.step == 8
    assert resumed.history["train_loss"] == straight.history["train_loss"]


def test_a_time_budget_stops_mid_epoch_saves_evaluates_and_resumes_exactly(tmp_path, capsys):
    straight = _engine(tmp_path / "straight")
    straight.fit()
    out = tmp_path / "run"
    first = _engine(out, time_budget_s=1e-9)  # used up by the first optimizer step
    history = first.fit()  # returns, no exception
    assert first.stopped_by_budget
    assert (first.epoch, first.batch_in_epoch, first.step) == (0, 2, 1)
    assert history["epoch"] == [round(2 / 7, 3)] and len(history["train_loss"]) == 1
    assert math.isfinite(history["train_loss"][0])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("time budget of 1e-09 s used up after 0 s: epoch 1, batch 2/7, ")
    assert line.endswith(f"step 1; checkpoint saved in {out}")
    ck = load_checkpoint(out, task=None)
    assert ck.config["history"]["epoch"] == history["epoch"]
    assert ck.trainer_state["batch_in_epoch"] == 2 and ck.trainer_state["train_seconds"] > 0
    resumed = _engine(out)  # no budget this time
    assert resumed.resume()
    resumed.fit()
    assert not resumed.stopped_by_budget
    _same_weights(straight.model, resumed.model, exact=True)
    assert resumed.history["epoch"] == [round(2 / 7, 3), 1, 2]


def test_a_budget_used_up_in_an_epochs_last_step_stops_at_its_end(tmp_path):
    first = _engine(tmp_path / "a", accum=7, epochs=3, eval_every=2, time_budget_s=1e-9)
    history = first.fit()
    assert first.stopped_by_budget and (first.epoch, first.batch_in_epoch) == (1, 0)
    assert history["epoch"] == [1]  # evaluated although eval_every=2: the stop's row
    resumed = _engine(tmp_path / "a", accum=7, epochs=3, eval_every=2)
    assert resumed.resume() and resumed.epoch == 1
    assert resumed.fit()["epoch"] == [1, 2, 3]
    # the last epoch's end is the end of the run, budget or not
    last = _engine(tmp_path / "b", accum=7, epochs=1, time_budget_s=1e-9)
    last.fit()
    assert not last.stopped_by_budget and last.history["epoch"] == [1]


def test_a_budget_larger_than_needed_changes_nothing(tmp_path):
    runs = []
    for budget in (None, 1e6):
        engine = _engine(tmp_path / str(budget), time_budget_s=budget)
        engine.fit()
        assert not engine.stopped_by_budget
        runs.append(engine)
    _same_weights(runs[0].model, runs[1].model, exact=True)
    assert runs[0].history["train_loss"] == runs[1].history["train_loss"]


def test_linear_to_budget_warms_up_then_decays_with_the_budget_clock(tmp_path):
    engine = _engine(
        tmp_path, accum=1, epochs=1, time_budget_s=1e6, schedule="linear_to_budget",
        warmup_steps=2,
    )  # fmt: skip
    progress = iter([0.1, 0.2, 0.5, 0.75, 0.9, 1.0, 1.0])  # the fraction used at each step
    engine._budget_progress = lambda: next(progress)
    lrs, step = [], engine.optimizer.step
    engine.optimizer.step = lambda: (lrs.append(engine.optimizer.param_groups[0]["lr"]), step())
    engine.fit()
    expected = [0.01 * 0.5 * 0.9, 0.01 * 0.8, 0.01 * 0.5, 0.01 * 0.25, 0.01 * 0.1, 0.0, 0.0]
    assert lrs == pytest.approx(expected, abs=1e-15)


def test_linear_to_budget_needs_a_budget_and_a_progress():
    from attnkit.training.optim import lr_at

    with pytest.raises(ValueError, match=r"linear_to_budget.*needs time_budget_s"):
        EngineConfig(schedule="linear_to_budget", warmup_steps=10)
    with pytest.raises(ValueError, match="needs progress"):
        lr_at("linear_to_budget", 1e-3, 10, 5)
    assert lr_at("linear_to_budget", 1e-3, 10, 5, progress=0.5) == pytest.approx(2.5e-4)
    assert lr_at("linear_to_budget", 1e-3, 10, 50, progress=1.7) == 0.0  # clamped
    assert lr_at("linear_to_budget", 1e-3, 0, 1, progress=0.0) == pytest.approx(1e-3)


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1, ValueError), (0.0, ValueError), (float("nan"), ValueError),
     (float("inf"), ValueError), ("60", TypeError), (True, TypeError)],
)  # fmt: skip
def test_bad_time_budgets_are_named(value, error):
    with pytest.raises(error, match=r"EngineConfig\.time_budget_s must be a positive") as e:
        EngineConfig(time_budget_s=value)
    assert repr(value) in str(e.value)


def test_more_argument_checks():
    for bad, error in ((0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                       ("2", TypeError)):  # fmt: skip
        with pytest.raises(error, match=rf"accum_steps must be a positive int, got {bad!r}"):
            EngineConfig(accum_steps=bad)
    with pytest.raises(ValueError, match="precision must be one of 'fp32', 'bf16', got 'fp16'"):
        EngineConfig(precision="fp16")
    with pytest.raises(ValueError, match="snapshot_every_s must be a finite number >= 0, got -1"):
        EngineConfig(snapshot_every_s=-1, out_dir="x")
    with pytest.raises(TypeError, match="snapshot_every_s must be a finite number >= 0, got '5'"):
        EngineConfig(snapshot_every_s="5", out_dir="x")
    with pytest.raises(ValueError, match="keep_snapshots must be a non-negative int"):
        EngineConfig(keep_snapshots=-1)
    with pytest.raises(ValueError, match="set out_dir"):
        EngineConfig(snapshot_every_steps=5)


def test_bf16_runs_the_steps_matmuls_in_bf16_and_learns():
    from attnkit.data.translation import load_translation_data
    from attnkit.models.registry import build_model
    from attnkit.training.translation import TrainConfig, Trainer

    data = load_translation_data(None, num_pairs=80, seed=0)
    config = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.0}
    torch.manual_seed(0)
    model = build_model("transformer", config, len(data.src_vocab), len(data.tgt_vocab))
    train = TrainConfig(
        epochs=4, lr=0.01, batch_tokens=400, progress=False, log_every=0, bleu_sentences=2,
        precision="bf16",
    )  # fmt: skip
    trainer = Trainer(model, data, train, arch="transformer", model_config=config)
    seen = {True: set(), False: set()}  # training mode -> output dtypes of nn.Linear
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.register_forward_hook(lambda m, i, o: seen[m.training].add(o.dtype))
    history = trainer.fit()
    assert seen[True] == {torch.bfloat16}  # the training steps' matmuls
    assert seen[False] == {torch.float32}  # evaluation is untouched
    losses = history["train_loss"]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(s["exp_avg"].dtype == torch.float32 for s in trainer.optimizer.state.values())


def test_snapshots_by_steps_keep_the_newest_and_the_clock_goes_on(tmp_path):
    engine = _engine(tmp_path, snapshot_every_steps=3, keep_snapshots=2)
    engine.fit()  # steps 1..8: snapshots at 3, 6, the newest 2 kept
    folder = tmp_path / "snapshots"
    index = json.loads((folder / "index.json").read_text())["snapshots"]
    assert [e["step"] for e in index] == [3, 6]
    assert sorted(p.name for p in folder.glob("*.pt")) == ["step-00000003.pt", "step-00000006.pt"]
    assert (index[1]["epoch"], index[1]["batch_in_epoch"]) == (2, 4)
    assert 0 < index[0]["train_seconds"] <= index[1]["train_seconds"]
    seconds = load_checkpoint(tmp_path, task=None).trainer_state["train_seconds"]
    assert seconds >= index[1]["train_seconds"]
    longer = _engine(tmp_path, epochs=4, snapshot_every_steps=3, keep_snapshots=2)
    assert longer.resume() and longer.train_seconds() == seconds  # resumed: the clock goes on
    longer.fit()  # steps 9..16: snapshots at 9, 12, 15
    index = json.loads((folder / "index.json").read_text())["snapshots"]
    assert [e["step"] for e in index] == [12, 15] and index[0]["train_seconds"] > seconds
    state = torch.load(folder / "step-00000015.pt", weights_only=True)
    assert state.keys() == longer.model.state_dict().keys()


def test_snapshots_by_seconds_and_a_fresh_run_drops_the_old_ones(tmp_path):
    engine = _engine(tmp_path, epochs=1, snapshot_every_s=1e-7)  # after every step
    engine.fit()
    folder = tmp_path / "snapshots"
    steps = [e["step"] for e in json.loads((folder / "index.json").read_text())["snapshots"]]
    assert steps == [1, 2, 3, 4]
    (tmp_path / "config.json").unlink()
    again = _engine(tmp_path, epochs=1, snapshot_every_steps=4)
    again.fit()
    index = json.loads((folder / "index.json").read_text())["snapshots"]
    assert [e["step"] for e in index] == [4] and len(list(folder.glob("*.pt"))) == 1


# ----------------------------------------------------------------------------- DDP


def _ddp_worker(rank, world, port, root):
    from attnkit import distributed

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world)
    )
    torch.set_num_threads(1)
    distributed.init_from_env("cpu", timeout_s=60)
    try:
        batches = [_batch(rows, 10 * rank + i) for i, rows in enumerate((2 + rank, 4, 3 + rank))]

        def engine(**extra):
            config = EngineConfig(
                epochs=1, lr=0.05, clip=0.5, seed=None, log_every=0, accum_steps=2, **extra
            )
            return Engine(_mlp(), RegressionTask(batches), config)

        straight = engine()
        straight.fit()
        # rank 0's clock decides; both ranks stop after the first group and save
        out = os.path.join(root, "run")
        stopped = engine(out_dir=out, time_budget_s=1e-9)
        stopped.fit()
        where = (stopped.stopped_by_budget, stopped.step, stopped.batch_in_epoch)
        resumed = engine(out_dir=out)
        assert resumed.resume()
        resumed.fit()
        result = {"straight": straight.model.state_dict(), "where": where}
        result["resumed"] = resumed.model.state_dict()
        torch.save(result, os.path.join(root, f"rank{rank}.pt"))
    finally:
        distributed.cleanup()


@pytest.mark.slow
def test_two_processes_accumulate_the_global_token_mean_and_stop_together(free_port, tmp_path):
    """2 ranks x groups (A, B) | (C): the steps on A0+A1+B0+B1, then C0+C1, in one process;
    a time budget stops both ranks after the same group, and resume is exact."""
    mp.spawn(_ddp_worker, args=(2, free_port(), str(tmp_path)), nprocs=2)
    per_rank = [[_batch(rows, 10 * r + i) for i, rows in enumerate((2 + r, 4, 3 + r))] for r in (0, 1)]  # fmt: skip
    (a0, b0, c0), (a1, b1, c1) = per_rank
    model = _mlp()
    config = EngineConfig(epochs=1, lr=0.05, clip=0.5, seed=None, log_every=0)
    Engine(model, RegressionTask([_cat(a0, a1, b0, b1), _cat(c0, c1)]), config).fit()
    for rank in (0, 1):
        result = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert result["where"] == (True, 1, 2), rank
        for name, value in model.state_dict().items():
            got = result["straight"][name]
            torch.testing.assert_close(got, value, rtol=1e-12, atol=1e-14, msg=name)
            assert torch.equal(result["resumed"][name], got), (rank, name)
