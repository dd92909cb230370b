"""Multi-process language-model training (Gloo, 2 CPU processes): parity with one process."""

from __future__ import annotations

import os

import pytest
import torch
import torch.multiprocessing as mp

from attnkit import distributed

pytestmark = pytest.mark.slow

# 5 rows per global batch: rank 0 trains on 3 of them, rank 1 on 2, so the loss must be
# weighted by tokens for the update to equal the one-process update
BATCH, STEPS = 5, 8


def _model(arch: str, vocab_size: int):
    """The GRU LM, or a Transformer LM without dropout (its masks would differ by rank)."""
    from attnkit.models.decoder_lm import DecoderLMConfig
    from attnkit.models.rnn import build_lm

    torch.manual_seed(0)
    if arch == "rnn":
        return build_lm("gru", vocab_size, 16, 1, False, False)
    config = DecoderLMConfig(
        d_model=16, num_heads=4, num_kv_heads=2, num_layers=2, ffn_hidden=32, dropout=0.0,
        context_length=STEPS, positions="alibi",
    )  # fmt: skip
    return config.build(vocab_size)


def _train(rank: int, world: int, use_random_iter: bool, arch: str) -> dict[str, torch.Tensor]:
    from attnkit.data.lm import load_lm_data
    from attnkit.training.lm import train_lm

    loader, vocab = load_lm_data(
        BATCH, STEPS, "builtin", max_tokens=1500, use_random_iter=use_random_iter, seed=1,
        rank=rank, world_size=world,
    )  # fmt: skip
    model = _model(arch, len(vocab))
    # SGD: Adam's normalized steps would magnify the rounding of a sum over ranks
    train_lm(
        model, loader, num_epochs=2, lr=1.0 if arch == "rnn" else 0.3, optimizer="sgd",
        clip=1.0, use_random_iter=use_random_iter, progress=False,
    )  # fmt: skip
    return model.state_dict()


def _untrained_state(arch: str) -> dict[str, torch.Tensor]:
    from attnkit.data.lm import load_lm_data

    _, vocab = load_lm_data(BATCH, STEPS, "builtin", max_tokens=1500, seed=1)
    return _model(arch, len(vocab)).state_dict()


def _worker(
    rank: int, world: int, port: int, result_dir: str, use_random_iter: bool, arch: str
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world)
    )
    torch.set_num_threads(1)
    assert distributed.init_from_env("cpu", timeout_s=60) == (rank, world)
    try:
        state = _train(rank, world, use_random_iter, arch)
        torch.save(state, os.path.join(result_dir, f"rank{rank}.pt"))
    finally:
        distributed.cleanup()


@pytest.mark.parametrize(
    ("use_random_iter", "arch"),
    [(False, "rnn"), (True, "rnn"), (True, "transformer")],
    ids=["sequential", "random", "transformer"],
)
def test_two_processes_match_one_over_the_same_global_batches(
    free_port, tmp_path, use_random_iter, arch
):
    mp.spawn(_worker, args=(2, free_port(), str(tmp_path), use_random_iter, arch), nprocs=2)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    torch.set_num_threads(1)
    single = _train(0, 1, use_random_iter, arch)
    untrained = _untrained_state(arch)
    for name, value in single.items():
        assert not torch.allclose(value, untrained[name]), f"{name} did not train"
        assert torch.equal(r0[name], r1[name]), f"ranks differ in {name}"
        torch.testing.assert_close(r0[name], value, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize(
    "model",
    [["--cell", "lstm", "--hiddens", "16"],
     ["--arch", "transformer", "--d-model", "16", "--layers", "1", "--context", "10"]],
    ids=["lstm", "transformer"],
)  # fmt: skip
def test_cli_nproc_trains_and_rank0_alone_writes(tmp_path, capfd, model):
    from attnkit.cli import main

    out = tmp_path / "lm"
    args = ["lm", "train", *model, "--epochs", "2", "--val-fraction", "0.2"]
    args += ["--batch-size", "6", "--num-steps", "10", "--max-tokens", "2000", "--sample-tokens"]
    args += ["10", "--threads", "1", "--no-progress", "--out", str(out), "--nproc", "2"]
    assert main(args) == 0
    text = "".join(capfd.readouterr())
    assert "distributed: 2 processes; --batch-size 6 is global" in text
    # rank 0 alone prints: one line per epoch, one summary, one "wrote"
    assert text.count("epoch 1/2: perplexity ") == 1 and text.count("epoch 2/2: perplexity ") == 1
    assert text.count(", validation ") == 3  # each epoch's line and the summary
    assert text.count("tokens/sec on cpu") == 1 and text.count("wrote ") == 1
    for name in ("config.json", "perplexity.png", "samples.txt"):
        assert (out / name).stat().st_size > 0, name
    assert _checkpoint(out)["config"]["processes"] == 2


def test_cli_nproc_larger_than_the_batch_is_a_clear_error(tmp_path, capsys):
    from attnkit.cli import main

    assert main(["lm", "train", "--batch-size", "2", "--nproc", "3", "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "--batch-size 2 is the global batch, split by rows over 3 processes" in err
    assert "at least 3" in err


# --------------------------------------------------------------------------- resume
RESUME_ARGS = ["lm", "train", "--cell", "lstm", "--hiddens", "16", "--batch-size", str(BATCH)]
RESUME_ARGS += ["--num-steps", str(STEPS), "--max-tokens", "1500", "--seed", "1", "--threads"]
RESUME_ARGS += ["1", "--no-progress", "--sample-tokens", "5", "--epochs", "2"]


def _interrupted_worker(rank: int, world: int, port: int, out: str, stop_step: int) -> None:
    """`attnkit lm train` as one of ``world`` ranks; rank 0 gets SIGINT after a step."""
    import signal

    import attnkit.cli
    from attnkit.training.engine import Engine

    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world)
    )
    attnkit.cli.VERBS = ["lm"]
    original, calls = Engine.train_step, []

    def train_step(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(1)
        if rank == 0 and len(calls) == stop_step:
            os.kill(os.getpid(), signal.SIGINT)
        return result

    Engine.train_step = train_step
    code = attnkit.cli.main([*RESUME_ARGS, "--out", out])
    assert code == 130, f"rank {rank} returned {code}"


def test_two_processes_interrupted_mid_epoch_resume_in_one(free_port, tmp_path, monkeypatch):
    """Saved by 2 ranks (5 rows: 3 + 2) in the middle of epoch 2, with the carried LSTM
    state gathered over ranks; resumed by 1 process: the same as 1 process throughout."""
    import attnkit.cli
    from attnkit.data.lm import LMDataLoader

    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])
    per_epoch = len(list(LMDataLoader(list(range(1500)), BATCH, STEPS, seed=1)))
    run = tmp_path / "run"
    mp.spawn(_interrupted_worker, args=(2, free_port(), str(run), per_epoch + 4), nprocs=2)
    state = _checkpoint(run)
    # the stop asked after step per_epoch + 4 is agreed in the next step's all-reduce
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 5)
    assert state["carry"][0].shape == (1, BATCH, 16) and state["config"]["processes"] == 2
    torch.set_num_threads(1)
    assert attnkit.cli.main([*RESUME_ARGS, "--out", str(run), "--resume"]) == 0
    assert attnkit.cli.main([*RESUME_ARGS, "--out", str(tmp_path / "straight")]) == 0
    resumed, straight = _checkpoint(run), _checkpoint(tmp_path / "straight")
    assert resumed["epoch"] == straight["epoch"] == 2
    for name, value in straight["model"].items():
        torch.testing.assert_close(resumed["model"][name], value, atol=1e-5, rtol=1e-5, msg=name)
    assert resumed["config"]["history"]["train_loss"] == pytest.approx(
        straight["config"]["history"]["train_loss"], rel=1e-5
    )


def _checkpoint(directory) -> dict:
    """Trainer state of an LM checkpoint, with its weights and config.json added."""
    from attnkit.checkpoint import load_checkpoint

    ck = load_checkpoint(directory, task="lm")
    return {**ck.trainer_state, "model": ck.model_state, "config": ck.config}
