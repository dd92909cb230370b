"""Checkpoint averaging over the engine's snapshots."""

from __future__ import annotations

import json

import pytest
import torch

from attnkit.checkpoint import load_checkpoint
from attnkit.inference.loading import load_model
from attnkit.training.averaging import average_checkpoint, average_state_dicts, list_snapshots

MODEL = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32, "dropout": 0.0}


def test_the_average_is_the_float64_mean_and_counters_are_the_last():
    g = torch.Generator().manual_seed(0)
    dicts = [
        {
            "w": torch.randn(3, 4, generator=g),
            "h": torch.randn(5, generator=g, dtype=torch.float64),
            "b": torch.randn(2, generator=g).to(torch.bfloat16),
            "count": torch.tensor(i + 7),
        }
        for i in range(3)
    ]
    avg = average_state_dicts(dicts)
    for key in ("w", "h", "b"):
        reference = torch.stack([d[key].double() for d in dicts]).mean(0)
        assert avg[key].dtype == dicts[0][key].dtype
        assert torch.equal(avg[key], reference.to(dicts[0][key].dtype)), key
    assert avg["count"].item() == 9 and avg["count"].dtype == torch.int64
    assert torch.equal(average_state_dicts(dicts[:1])["w"], dicts[0]["w"])


def test_mismatched_state_dicts_are_named():
    a = {"w": torch.zeros(2), "v": torch.zeros(3)}
    with pytest.raises(ValueError, match="key 'v' is in one only"):
        average_state_dicts([a, {"w": torch.zeros(2)}])
    with pytest.raises(ValueError, match=r"key 'v' has shape \(4,\) in state dict 1"):
        average_state_dicts([a, {"w": torch.zeros(2), "v": torch.zeros(4)}])
    with pytest.raises(ValueError, match="at least one"):
        average_state_dicts([])


def _run(out_dir, epochs=2):
    from attnkit.data.translation import load_translation_data
    from attnkit.models.registry import build_model
    from attnkit.training.translation import TrainConfig, Trainer

    data = load_translation_data(None, num_pairs=80, seed=0)
    torch.manual_seed(0)
    model = build_model("transformer", MODEL, len(data.src_vocab), len(data.tgt_vocab))
    config = TrainConfig(
        epochs=epochs, batch_tokens=300, out_dir=str(out_dir), progress=False, log_every=0,
        bleu_sentences=2, snapshot_every_steps=2,
    )  # fmt: skip
    return Trainer(model, data, config, arch="transformer", model_config=MODEL)


def test_average_checkpoint_writes_a_loadable_folder_that_cannot_be_resumed(tmp_path):
    run = _run(tmp_path / "run")
    run.fit()
    snapshots = list_snapshots(tmp_path / "run")
    assert len(snapshots) >= 3 and [s["step"] for s in snapshots] == list(range(2, run.step + 1, 2))
    assert list_snapshots(tmp_path / "run" / "snapshots") == snapshots
    out = average_checkpoint(tmp_path / "run", 3, tmp_path / "avg")
    model, config = load_model(out)
    states = [torch.load(s["path"], weights_only=True) for s in snapshots[-3:]]
    for name, value in model.state_dict().items():
        reference = torch.stack([s[name].double() for s in states]).mean(0).to(value.dtype)
        assert torch.equal(value, reference), name
    source = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["averaged"] == {
        "snapshots": [s["step"] for s in snapshots[-3:]], "source": str(tmp_path / "run")
    }  # fmt: skip
    for key in ("arch", "model_config", "data", "train_config", "history", "step", "task"):
        assert config[key] == source[key], key
    assert load_checkpoint(out).trainer_state is None
    with pytest.raises(ValueError, match=r"\(an average of snapshots\) has no trainer state"):
        _run(out).resume()
    with pytest.raises(FileExistsError, match="not an empty folder"):
        average_checkpoint(tmp_path / "run", 3, out)
    with pytest.raises(ValueError, match=f"needs 99, but .* has {len(snapshots)}"):
        average_checkpoint(tmp_path / "run", 99, tmp_path / "other")
    with pytest.raises(ValueError, match="last must be a positive int, got 0"):
        average_checkpoint(tmp_path / "run", 0, tmp_path / "other")
    with pytest.raises(TypeError, match=r"last must be a positive int, got '3' \(str\)"):
        average_checkpoint(tmp_path / "run", "3", tmp_path / "other")


def test_damaged_or_missing_snapshots_are_named(tmp_path):
    run = _run(tmp_path, epochs=1)
    run.fit()
    folder = tmp_path / "snapshots"
    *_, first, second = (folder / s["file"] for s in list_snapshots(tmp_path))
    data = bytearray(second.read_bytes())
    data[len(data) // 2] ^= 0xFF
    second.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"snapshot {second} is damaged"):
        average_checkpoint(tmp_path, 1, tmp_path / "avg")
    with pytest.raises(ValueError, match=f"snapshot {second} is damaged"):
        list_snapshots(tmp_path)
    assert list_snapshots(tmp_path, check=False)[-1]["path"] == second
    first.unlink()
    with pytest.raises(FileNotFoundError, match=f"snapshot {first} is missing"):
        list_snapshots(tmp_path)
    (folder / "index.json").write_text("{")
    with pytest.raises(ValueError, match=r"index\.json is damaged"):
        list_snapshots(tmp_path)
    with pytest.raises(FileNotFoundError, match="no snapshots in"):
        list_snapshots(tmp_path / "elsewhere")
