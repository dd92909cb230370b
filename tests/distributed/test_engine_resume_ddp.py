"""Exact resume in 2 processes (Gloo, CPU), for both tasks on the one engine.

Each worker trains straight through, then again with a SIGINT on rank 0 in the middle of
an epoch (the stop is agreed on the next step's all-reduce, both ranks save and stop),
then resumes that checkpoint in the same 2 processes: the weights and the loss history
must equal the straight run's bit for bit.
"""

from __future__ import annotations

import os
import signal

import pytest
import torch
import torch.multiprocessing as mp

from attnkit import distributed

pytestmark = pytest.mark.slow

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.1}


def _translation(out_dir: str):
    from attnkit.data.translation import load_translation_data
    from attnkit.models.registry import build_model
    from attnkit.training.translation import TrainConfig, Trainer

    data = load_translation_data(None, num_pairs=300, seed=0)
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    config = TrainConfig(
        epochs=2, batch_tokens=400, out_dir=out_dir, progress=False, seed=3,
        bleu_sentences=4, log_every=0,
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
        torch.save(results, os.path.join(root, f"rank{rank}.pt"))
    finally:
        distributed.cleanup()


def test_two_processes_stopped_mid_epoch_resume_bit_exactly(free_port, tmp_path):
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path)), nprocs=2)
    for rank in (0, 1):
        results = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        for task, r in results.items():
            # asked after step n + 2 of epoch 2, agreed on step n + 3: both ranks stop there
            assert r["stopped"] == (1, 3) == r["resumed_at"], (task, rank)
            assert r["steps"][0] == r["steps"][1], (task, rank)
            for name, value in r["straight"].items():
                assert torch.equal(value, r["resumed"][name]), (task, rank, name)
            assert r["loss"][0] == r["loss"][1], (task, rank)
