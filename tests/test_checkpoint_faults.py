"""Saving can fail: a full disk at each write of a save, an --out that is not writable, a
file removed under a running job. One clear error; the previous checkpoint stays
loadable; no temporary file is left behind."""

from __future__ import annotations

import errno
import os
import pathlib
import tempfile

import pytest
import torch

from attnkit.checkpoint import CheckpointWriteError, load_checkpoint, save_checkpoint
from attnkit.data.translation import load_translation_data
from attnkit.models.registry import build_model
from attnkit.training.translation import TrainConfig, Trainer

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.0}


class Disk:
    """Counts a save's disk operations (temp file, write, fsync, rename); with ``fail_at``
    the operation of that number fails with ``error`` (a write after half its bytes)."""

    def __init__(self, monkeypatch, fail_at=None, error=errno.ENOSPC):
        self.ops, self.fail_at, self.error = [], fail_at, error
        mkstemp, write_bytes = tempfile.mkstemp, pathlib.Path.write_bytes
        fsync, replace = os.fsync, os.replace

        def op(kind, path, real, *args):
            self.ops.append((kind, pathlib.Path(str(path)).name))
            if len(self.ops) - 1 == self.fail_at:
                if kind == "write":  # half of it reached the disk
                    write_bytes(pathlib.Path(path), args[1][: len(args[1]) // 2])
                raise OSError(self.error, os.strerror(self.error), str(path))
            return real(*args)

        monkeypatch.setattr(
            tempfile, "mkstemp", lambda **kw: op("mkstemp", kw["prefix"], lambda: mkstemp(**kw))
        )
        monkeypatch.setattr(
            pathlib.Path, "write_bytes", lambda p, data: op("write", p, write_bytes, p, data)
        )
        monkeypatch.setattr(os, "fsync", lambda fd: op("fsync", f"fd{fd}", fsync, fd))
        monkeypatch.setattr(os, "replace", lambda a, b: op("replace", b, replace, a, b))


def _trainer(out_dir, **overrides):
    data = load_translation_data(None, num_pairs=120, seed=0)
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    settings = dict(epochs=1, batch_tokens=400, progress=False, seed=1, bleu_sentences=2)
    config = TrainConfig(out_dir=str(out_dir), **settings | overrides)
    return Trainer(model, data, config, arch="transformer", model_config=MODEL)


def _listing(directory):
    return sorted(p.name for p in directory.iterdir())


def test_a_full_disk_at_each_write_of_a_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    out = tmp_path / "ck"
    trainer = _trainer(out)
    trainer.save()
    before, record = _listing(out), (out / "config.json").read_bytes()
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train_step(next(iter(trainer.task.batches(0, 0, 1))))  # new weights, step 1
    with monkeypatch.context() as m:
        counting = Disk(m)
        trainer.save(tmp_path / "count")
    commit = counting.ops.index(("replace", "config.json"))
    # temp file, write, fsync, rename for the model, the trainer state and config.json,
    # the folder's fsync before the commit and after it
    assert [kind for kind, _ in counting.ops] == [
        *["mkstemp", "write", "fsync", "replace"] * 2, "fsync",
        "mkstemp", "write", "fsync", "replace", "fsync",
    ]  # fmt: skip
    for k in range(len(counting.ops)):
        with monkeypatch.context() as m:
            disk = Disk(m, fail_at=k)
            if k > commit:  # the folder's fsync after the commit: the save is done
                trainer.save()
                assert load_checkpoint(out).config["step"] == 1
                continue
            with pytest.raises(CheckpointWriteError) as error:
                trainer.save()
        assert [kind for kind, _ in disk.ops] == [kind for kind, _ in counting.ops[: k + 1]]
        assert f"could not save the checkpoint in {out}: No space left on device" in str(
            error.value
        )
        assert "the previous checkpoint there is kept" in str(error.value)
        assert error.value.errno == errno.ENOSPC
        assert _listing(out) == before  # no temporary file, no file of the failed save
        assert (out / "config.json").read_bytes() == record
        ck = load_checkpoint(out)
        assert ck.config["step"] == 0
        assert all(torch.equal(ck.model_state[k], weights[k]) for k in weights)


def test_a_periodic_save_that_fails_stops_the_run_with_one_error(tmp_path, monkeypatch):
    out = tmp_path / "ck"
    trainer = _trainer(out, save_every_steps=2)
    saves, save = [], trainer.save

    def failing_second_save(directory=None):
        saves.append(trainer.step)
        if len(saves) == 2:
            with monkeypatch.context() as m:
                Disk(m, fail_at=1)  # the model file's write
                return save(directory)
        return save(directory)

    trainer.save = failing_second_save
    with pytest.raises(CheckpointWriteError, match="No space left on device"):
        trainer.fit()
    assert saves == [2, 4]
    ck = load_checkpoint(out)
    assert (ck.config["step"], ck.config["batch_in_epoch"]) == (2, 2)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_an_out_that_is_not_writable_fails_before_training(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    trainer = _trainer(tmp_path / "file" / "ck")
    with pytest.raises(CheckpointWriteError, match=r"cannot write checkpoints in .*file/ck: "):
        trainer.fit()
    assert trainer.step == 0
    trainer = _trainer(tmp_path / "ck")
    with monkeypatch.context() as m:
        Disk(m, fail_at=0, error=errno.EACCES)  # as a folder without write permission
        with pytest.raises(CheckpointWriteError, match="Permission denied; choose a writable"):
            trainer.fit()
    assert trainer.step == 0 and _listing(tmp_path / "ck") == []


def test_a_file_removed_under_a_running_job(tmp_path, monkeypatch):
    state = {"w": torch.ones(2)}
    config = {"step": 1, "data": {"tokenizer": {"files": ["tokenizer-a.model"]}}}
    (tmp_path / "tokenizer-a.model").write_bytes(b"sp")
    save_checkpoint(tmp_path, config, state)
    before = _listing(tmp_path)
    (tmp_path / "tokenizer-a.model").unlink()  # removed while the run goes on
    with pytest.raises(CheckpointWriteError, match=r"tokenizer-a\.model was removed under"):
        save_checkpoint(tmp_path, {**config, "step": 2}, {"w": torch.zeros(2)})
    assert _listing(tmp_path) == [n for n in before if n != "tokenizer-a.model"]
    assert load_checkpoint(tmp_path, task=None).config["step"] == 1
    # a temporary file removed between its write and its fsync (a cleaner in the folder)
    (tmp_path / "tokenizer-a.model").write_bytes(b"sp")
    write_bytes = pathlib.Path.write_bytes

    def write_then_vanish(path, data):
        write_bytes(path, data)
        path.unlink()

    monkeypatch.setattr(pathlib.Path, "write_bytes", write_then_vanish)
    with pytest.raises(CheckpointWriteError, match=r"No such file or directory \(\.model-"):
        save_checkpoint(tmp_path, {**config, "step": 2}, {"w": torch.zeros(2)})
    assert _listing(tmp_path) == before
    assert load_checkpoint(tmp_path, task=None).config["step"] == 1


def test_a_save_killed_mid_write_leaves_files_the_next_save_sweeps(tmp_path):
    save_checkpoint(tmp_path, {"step": 1}, {"w": torch.ones(2)})
    for name in (".model-00000002-abcdef.pt.x1.tmp", ".config.json.x2.tmp", "model-00000002-ab.pt"):
        (tmp_path / name).write_bytes(b"half")  # what a kill -9 mid-save leaves
    assert load_checkpoint(tmp_path, task=None).config["step"] == 1
    save_checkpoint(tmp_path, {"step": 2}, {"w": torch.zeros(2)})
    ck = load_checkpoint(tmp_path, task=None)
    assert _listing(tmp_path) == sorted(["config.json", ck.config["files"]["model"]])
