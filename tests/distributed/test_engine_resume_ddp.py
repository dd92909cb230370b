"""Exact resume in 2 processes (Gloo, CPU), for both tasks on the one engine.

Each worker trains straight through, then again with a SIGINT on rank 0 in the middle of
an epoch (the stop is agreed on the next step's all-reduce, both ranks save and stop),
then resumes that checkpoint in the same 2 processes: the weights and the loss history
must equal the straight run's bit for bit.

Then periodic checkpoints and the loss guard, in the same processes: rank 1 alone gets a
NaN loss at one batch, and both ranks skip that step; rank 0 alone has a clock that makes
a checkpoint due every 3 batches (rank 1's real clock never does), and both ranks save
after the same steps, training unchanged by it (the partial totals are summed over the
ranks for the checkpoint, not in place). A run "killed" after its second periodic
checkpoint and resumed equals the straight run bit for bit.
"""

from __future__ import annotations

import contextlib
import os
import signal

import pytest
import torch
import torch.multiprocessing as mp

from attnkit import distributed

pytestmark = pytest.mark.slow

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.1}


def _translation(out_dir: str, **overrides):
    from attnkit.data.translation import load_translation_data
    from attnkit.models.registry import build_model
    from attnkit.training.translation import TrainConfig, Trainer

    data = load_translation_data(None, num_pairs=300, seed=0)
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    config = TrainConfig(
        epochs=2, batch_tokens=400, out_dir=out_dir, progress=False, seed=3,
        bleu_sentences=4, log_every=0, **overrides,
    )  # fmt: skip
    return Trainer(model, data, config, arch="transformer", model_config=MODEL)


def _language_model(out_dir: str, rank: int, world: int):
    from attnkit.data.lm import load_lm_data
    from attnkit.models.rnn import build_lm
    from attnkit.training.engine import Engine, EngineConfig
    from attnkit.training.lm import LMTask

    loader, vocab = load_lm_data(
        5, 8, "builtin", max_tokens=1200, seed=1, rank=rank, world_size=world
    )
    torch.manual_seed(0)
    model = build_lm("lstm", len(vocab), 16)
    config = EngineConfig(
        epochs=2, lr=1.0, optimizer="sgd", seed=None, out_dir=out_dir, progress=False,
        log_every=0,
    )  # fmt: skip
    run = {"cell": "lstm", "num_hiddens": 16}
    return Engine(model, LMTask(loader, vocab=vocab, run_config=run), config)


class CrashError(Exception):
    """Stands for the processes killed right after a checkpoint."""


def _guarded(out_dir: str, rank: int, minutes: float = 0, crash_after: int | None = None):
    """The translator with rank 1's NaN at the third batch, rank 0's clock of 25 s a
    batch (with ``minutes``), its saves recorded (a crash after the ``crash_after``-th)."""
    import attnkit.training.engine_stops as engine_stops

    trainer = _translation(out_dir, save_every_minutes=minutes)
    loss, step, save, now = trainer.task.loss, trainer.train_step, trainer.save, [0.0]

    class Clock:
        @staticmethod
        def perf_counter():
            return now[0]

    if rank == 0 and minutes:
        engine_stops.time = Clock

    def poisoned(ctx, batch, carry):
        out = loss(ctx, batch, carry)
        if rank == 1 and (trainer.epoch, trainer.batch_in_epoch) == (0, 2):
            out.loss_sum = out.loss_sum * float("nan")
        return out

    def timed_step(*args):
        now[0] += 25.0
        return step(*args)

    def recorded_save(directory=None):
        out = save(directory)
        trainer.saves.append((trainer.epoch, trainer.batch_in_epoch, trainer.step))
        if len(trainer.saves) == crash_after:
            raise CrashError
        return out

    trainer.saves = []
    trainer.task.loss, trainer.train_step, trainer.save = poisoned, timed_step, recorded_save
    return trainer


def _guard_and_saves(root: str, rank: int) -> dict:
    import time

    import attnkit.training.engine_stops as engine_stops

    straight = _guarded(os.path.join(root, "straight"), rank)
    straight.fit()
    first = _guarded(os.path.join(root, "run"), rank, minutes=1, crash_after=2)
    with contextlib.suppress(CrashError):
        first.fit()
    engine_stops.time = time
    resumed = _guarded(os.path.join(root, "run"), rank)
    assert resumed.resume()
    at = (resumed.epoch, resumed.batch_in_epoch, resumed.step)
    resumed.fit()
    return {
        "saves": (straight.saves, first.saves), "resumed_at": at,
        "straight": straight.model.state_dict(), "resumed": resumed.model.state_dict(),
        "history": (straight.history, resumed.history), "steps": (straight.step, resumed.step),
    }  # fmt: skip


def _interrupt_after(engine, step: int, rank: int) -> None:
    original = engine.train_step

    def train_step(*args):
        out = original(*args)
        if rank == 0 and engine.step == step:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    engine.train_step = train_step


def _worker(rank: int, world: int, port: int, root: str) -> None:
    from attnkit.training.engine import TrainingInterrupted

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world)
    )
    torch.set_num_threads(1)
    distributed.init_from_env("cpu", timeout_s=60)
    try:
        results = {}
        for task, make in (
            ("translation", lambda out: _translation(out)),
            ("lm", lambda out: _language_model(out, rank, world)),
        ):
            straight = make(os.path.join(root, task, "straight"))
            straight.fit()
            steps_per_epoch = straight.step // 2
            run = os.path.join(root, task, "run")
            first = make(run)
            _interrupt_after(first, steps_per_epoch + 2, rank)
            try:
                first.fit()
                stopped = None
            except TrainingInterrupted:
                stopped = (first.epoch, first.batch_in_epoch)
            resumed = make(run)
            assert resumed.resume()
            at = (resumed.epoch, resumed.batch_in_epoch)
            resumed.fit()
            results[task] = {
                "stopped": stopped,
                "resumed_at": at,
                "straight": straight.model.state_dict(),
                "resumed": resumed.model.state_dict(),
                "loss": (straight.history["train_loss"], resumed.history["train_loss"]),
                "steps": (straight.step, resumed.step),
            }
        guard = _guard_and_saves(os.path.join(root, "guard"), rank)
        torch.save({"tasks": results, "guard": guard}, os.path.join(root, f"rank{rank}.pt"))
    finally:
        distributed.cleanup()


def test_two_processes_stopped_mid_epoch_resume_bit_exactly(free_port, tmp_path):
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path)), nprocs=2)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    for rank, results in enumerate(ranks):
        g = results["guard"]
        # 11 batches an epoch, the third one's step skipped on both ranks: 21 steps
        assert g["steps"] == (21, 21), rank
        # (epochs done, batches of the epoch, steps) at each save: the epochs' ends only,
        # then every 3 batches by rank 0's clock
        assert g["saves"] == ([(1, 0, 10), (2, 0, 21)], [(0, 3, 2), (0, 6, 5)]), rank
        assert g["resumed_at"] == (0, 6, 5), rank
        straight, resumed = g["history"]
        assert straight["skipped_steps"] == [1, 0], rank
        for key in ("train_loss", "val_loss", "val_bleu", "skipped_steps"):
            assert straight[key] == resumed[key], (rank, key)
        for name, value in g["straight"].items():
            assert torch.equal(value, g["resumed"][name]), (rank, name)
            assert torch.equal(value, ranks[0]["guard"]["straight"][name]), (rank, name)
        for task, r in results["tasks"].items():
            # asked after step n + 2 of epoch 2, agreed on step n + 3: both ranks stop there
            assert r["stopped"] == (1, 3) == r["resumed_at"], (task, rank)
            assert r["steps"][0] == r["steps"][1], (task, rank)
            for name, value in r["straight"].items():
                assert torch.equal(value, r["resumed"][name]), (task, rank, name)
            assert r["loss"][0] == r["loss"][1], (task, rank)
