"""Multi-process training (Gloo, 2 CPU processes): parity with one process, resume, failures."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from attnkit import distributed

pytestmark = pytest.mark.slow

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.0}


def _trainer(out_dir: str | None, epochs: int = 1, optimizer: str = "sgd"):
    from attnkit.data.translation import load_translation_data
    from attnkit.models.registry import build_model
    from attnkit.training.translation import TrainConfig, Trainer

    data = load_translation_data(None, num_pairs=400, seed=0)
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    config = TrainConfig(
        epochs=epochs,
        batch_tokens=600,
        optimizer=optimizer,
        lr=0.5 if optimizer == "sgd" else 0.001,
        out_dir=out_dir,
        progress=False,
        seed=3,
    )
    return Trainer(model, data, config, arch="transformer", model_config=MODEL)


def _worker(rank: int, world_size: int, port: int, out_dir: str, result_dir: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size)
    )
    torch.set_num_threads(1)
    assert distributed.init_from_env("cpu", timeout_s=60) == (rank, world_size)
    try:
        trainer = _trainer(out_dir)
        trainer.train_epoch()
        trainer.save()
        torch.save(
            {"state": trainer.model.state_dict(), "step": trainer.step},
            os.path.join(result_dir, f"rank{rank}.pt"),
        )
    finally:
        distributed.cleanup()


@pytest.fixture(scope="module")
def two_process_run(free_port, tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    out_dir, result_dir = root / "ck", root / "res"
    result_dir.mkdir()
    mp.spawn(_worker, args=(2, free_port(), str(out_dir), str(result_dir)), nprocs=2)
    r0 = torch.load(result_dir / "rank0.pt", weights_only=True)
    r1 = torch.load(result_dir / "rank1.pt", weights_only=True)
    return r0, r1, out_dir


def test_ranks_end_identical_and_match_one_process_over_the_same_global_batches(two_process_run):
    r0, r1, _ = two_process_run
    for k, v in r0["state"].items():
        assert torch.equal(v, r1["state"][k]), k
    torch.set_num_threads(1)
    single = _trainer(None)
    single.train_epoch()
    assert single.step == r0["step"] > 3  # the same number of optimizer steps
    for k, v in single.model.state_dict().items():
        torch.testing.assert_close(r0["state"][k], v, atol=1e-5, rtol=1e-5, msg=k)


def test_two_process_checkpoint_resumes_in_one_process(two_process_run, tmp_path):
    _, _, out_dir = two_process_run
    torch.set_num_threads(1)
    resumed = _trainer(str(out_dir), epochs=2)
    assert resumed.resume(out_dir) and resumed.epoch == 1
    resumed.train_epoch()
    straight = _trainer(None, epochs=2)
    straight.train_epoch()
    straight.train_epoch()
    assert resumed.step == straight.step
    for k, v in straight.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[k], v, atol=1e-4, rtol=1e-4, msg=k)


def test_a_failing_rank_stops_the_job_with_its_error(tmp_path, capfd):
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch, torch.distributed as dist
            from attnkit import distributed
            rank, world = distributed.init_from_env("cpu", timeout_s=30)
            if rank == 1:
                raise RuntimeError("rank 1 broke on purpose")
            dist.all_reduce(torch.ones(1))  # rank 0 waits here for rank 1, which never comes
            """
        )
    )
    start = time.perf_counter()
    code = distributed.launch(2, [str(script)], module=None)
    assert code == 1
    assert time.perf_counter() - start < 60  # stopped, did not hang
    captured = capfd.readouterr()
    assert "rank 1 broke on purpose" in captured.out + captured.err


def test_cli_nproc_trains_and_writes_one_checkpoint(tmp_path, capfd):
    from attnkit.cli import main

    out = tmp_path / "ck"
    args = ["translate", "train", "--arch", "transformer", "--preset", "book", "--num-pairs"]
    args += ["800", "--epochs", "1", "--batch-tokens", "600", "--out", str(out), "--threads"]
    args += ["1", "--no-progress", "--bleu-sentences", "10", "--nproc", "2"]
    assert main(args) == 0
    text = "".join(capfd.readouterr())
    assert "distributed: 2 processes" in text
    assert text.count("saved ") == 1  # rank 0 reports, once
    assert (out / "config.json").exists() and len(list(out.glob("model-*.pt"))) == 1


def test_world_from_env_validates(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(ValueError, match="RANK=5 and WORLD_SIZE=2 are inconsistent"):
        distributed.world_from_env()
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    assert distributed.world_from_env() == (0, 1, 0)
    assert distributed.init_from_env() == (0, 1) and not dist.is_initialized()
    with pytest.raises(ValueError, match="--nproc must be a positive int, got 0"):
        distributed.launch(0, [])
    with pytest.raises(TypeError, match=r"--nproc must be a positive int, got True \(bool\)"):
        distributed.launch(True, [])
    assert sys.executable  # launch uses the current interpreter
