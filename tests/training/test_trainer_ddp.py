"""The trainer under torch.distributed (gloo, 2 CPU processes): shards, sync, rank-0 writes."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank: int, world_size: int, port: int, out_dir: str, result_dir: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        from attnkit.data.translation import load_translation_data
        from attnkit.models.registry import build_model
        from attnkit.training.translation import TrainConfig, Trainer

        data = load_translation_data(None, num_pairs=300, seed=0)
        torch.manual_seed(0)
        cfg = {"embed_size": 8, "num_hiddens": 8, "num_layers": 1, "dropout": 0.0}
        model = build_model("bahdanau", cfg, len(data.src_vocab), len(data.tgt_vocab))
        config = TrainConfig(
            epochs=1, batch_tokens=400, out_dir=out_dir, progress=False, bleu_sentences=6
        )
        trainer = Trainer(model, data, config, arch="bahdanau", model_config=cfg)
        assert (trainer.rank, trainer.world_size) == (rank, world_size)  # from torch.distributed
        trainer.fit()
        torch.save(
            {"state": model.state_dict(), "history": trainer.history, "step": trainer.step},
            os.path.join(result_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_process_training(free_port, tmp_path):
    out_dir, result_dir = tmp_path / "ck", tmp_path / "res"
    result_dir.mkdir()
    mp.spawn(_worker, args=(2, free_port(), str(out_dir), str(result_dir)), nprocs=2)
    r0 = torch.load(result_dir / "rank0.pt", weights_only=True)
    r1 = torch.load(result_dir / "rank1.pt", weights_only=True)
    for k, v in r0["state"].items():  # DDP keeps the replicas identical
        assert torch.equal(v, r1["state"][k]), k
    timings = {k: r0["history"][k] for k in ("tokens_per_s", "seconds")}
    assert r0["history"] == r1["history"] | timings
    assert r0["step"] == r1["step"] > 0
    assert (out_dir / "config.json").exists()  # written by rank 0 only, once
    assert len(list(out_dir.glob("model-*.pt"))) == 1
