"""config.json of a checkpoint: damaged entries and foreign checkpoints give clear errors."""

from __future__ import annotations

import json

import pytest
import torch

from attnkit.checkpoint import load_checkpoint, read_checkpoint_config, save_checkpoint
from attnkit.models.transformer import TransformerConfig


@pytest.fixture
def ckpt(tmp_path):
    return save_checkpoint(tmp_path / "ck", {"step": 3}, {"w": torch.arange(4.0)})


def _edit(ckpt, change):
    path = ckpt / "config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def test_a_good_checkpoint_loads(ckpt):
    loaded = load_checkpoint(ckpt)
    assert torch.equal(loaded.model_state["w"], torch.arange(4.0))
    assert read_checkpoint_config(ckpt)["step"] == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.pop("files"), r"corrupted \(no 'files'/'sha256' entries\)"),
        (lambda c: c.pop("sha256"), r"corrupted \(no 'files'/'sha256' entries\)"),
        (lambda c: c["files"].update(model="../../etc/passwd"), r"bad file name '\.\./\.\./etc"),
        (lambda c: c["files"].update(model="/etc/passwd"), r"bad file name '/etc/passwd'"),
        (lambda c: c["files"].update(model=".."), r"bad file name '\.\.'"),
        (lambda c: c["sha256"].pop("model"), r"no sha256 for 'model'"),
    ],
)
def test_damaged_config_is_refused_before_any_file_is_read(ckpt, change, message):
    _edit(ckpt, change)
    with pytest.raises(ValueError, match=message):
        load_checkpoint(ckpt)


@pytest.mark.parametrize("task", ["translation", "lm", None])
def test_a_folder_of_the_layout_before_the_format_is_named_and_not_read(tmp_path, task):
    """model.pt + vocab.json + a config.json with a "cell" and no "format": never released,
    never read; one error says what it is and what to do, whatever the caller wants."""
    (tmp_path / "config.json").write_text(json.dumps({"cell": "gru", "num_hiddens": 8}))
    torch.save({"w": torch.zeros(1)}, tmp_path / "model.pt")
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(ValueError) as info:
        read_checkpoint_config(tmp_path, task)
    assert str(info.value) == (
        f"{tmp_path} is a language-model checkpoint of the layout before attnkit's checkpoint "
        'format (model.pt, vocab.json, a config.json without "format"), which attnkit does '
        "not read: train the model again with `attnkit lm train --out DIR`"
    )


def test_version_1_is_a_translator_checkpoint(ckpt):
    """Version 1 only lacks the "task" field: it defaults to "translation"."""
    _edit(ckpt, lambda c: (c.update(version=1), c.pop("task", None)))
    assert read_checkpoint_config(ckpt)["version"] == 1
    assert torch.equal(load_checkpoint(ckpt).model_state["w"], torch.arange(4.0))
    with pytest.raises(ValueError, match=r"is a translator checkpoint .*; this needs a language"):
        read_checkpoint_config(ckpt, task="lm")


@pytest.mark.parametrize("field", ["pre_norm", "bias"])
def test_transformer_config_flags_must_be_bools(field):
    with pytest.raises(TypeError, match=f"{field} must be a bool, got 'no'"):
        TransformerConfig(**{field: "no"})
