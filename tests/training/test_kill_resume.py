"""kill -9 at random moments, during a save too, then --resume: the resumed run equals an
uninterrupted one from the last save on (same weights, losses and steps), and the folder
ends up with no file of the killed save.

The training process is a fork of the test process (warm imports: a child starts in
milliseconds), killed with SIGKILL: by the test after a random delay, or by itself in the
middle of one of a save's writes (half a file written, or before a rename).
"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import sys
import time

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model
from attnkit.training.translation import TrainConfig, Trainer

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.1}
DATA = load_translation_data(None, num_pairs=200, seed=0)


def _trainer(out_dir=None, every=0):
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(DATA.src_vocab), len(DATA.tgt_vocab))
    config = TrainConfig(
        epochs=2, batch_tokens=400, progress=False, seed=1, bleu_sentences=2,
        out_dir=None if out_dir is None else str(out_dir), save_every_steps=every,
    )  # fmt: skip
    return Trainer(model, DATA, config, arch="transformer", model_config=MODEL)


def _kill_inside_a_save(op: int) -> None:
    """In the child: SIGKILL at the ``op``-th write or rename of its saves (a write is cut
    after half its bytes)."""
    count, write_bytes, replace = [0], pathlib.Path.write_bytes, os.replace

    def tick():
        count[0] += 1
        return count[0] == op

    def write(path, data):
        if tick():
            write_bytes(path, data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        return write_bytes(path, data)

    def rename(a, b):
        if tick():
            os.kill(os.getpid(), signal.SIGKILL)
        return replace(a, b)

    pathlib.Path.write_bytes, os.replace = write, rename


def _run_child(out_dir, kill_at_op=None) -> int:
    """Fork a training run (a checkpoint after every step); returns its pid."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the child: train, never return into pytest
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            if kill_at_op is not None:
                _kill_inside_a_save(kill_at_op)
            _trainer(out_dir, every=1).fit()
            code = 0
        finally:
            os._exit(code)
    return pid


@pytest.fixture(scope="module")
def straight():
    trainer = _trainer()
    trainer.fit()
    return trainer


def _resume_and_compare(out_dir, straight):
    resumed = _trainer(out_dir, every=1)
    if resumed.resume():
        ck = load_checkpoint(out_dir)
        assert ck.config["step"] == resumed.step  # what the folder holds is loadable
    resumed.fit()
    for (name, a), b in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().values()
    ):
        assert torch.equal(a, b), name
    assert resumed.step == straight.step
    for key in ("epoch", "train_loss", "val_loss", "val_bleu"):
        assert resumed.history[key] == straight.history[key], key
    ck = load_checkpoint(out_dir)
    # the checkpoint's files and none of a killed save (a kill while the last epoch's
    # curves were drawn may leave their temporary file: the run had nothing more to save)
    left = {p.name for p in pathlib.Path(out_dir).iterdir()}
    left = {n for n in left if n != "curves.png" and not n.startswith(".curves.png.")}
    assert left == {*ck.config["files"].values(), "config.json"}


@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume_equals_a_straight_run(tmp_path, straight):
    rng = random.Random(0)  # other seeds: 48 kills of a sweep, docs/checkpoints.md
    # by the test, at a random moment (most of them land in a step, some in a save)
    pid = _run_child(tmp_path / "random")
    time.sleep(rng.uniform(0.05, 0.6))
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0
    _resume_and_compare(tmp_path / "random", straight)
    # by itself, inside a save: a random one of the writes and renames of its saves (each
    # save: 3 writes, 3 renames)
    op = rng.randrange(1, 6 * 10)
    pid = _run_child(tmp_path / "in-save", kill_at_op=op)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    _resume_and_compare(tmp_path / "in-save", straight)
