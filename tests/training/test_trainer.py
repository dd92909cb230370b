"""The shared trainer: config validation, schedule, learning, exact resume, safe checkpoints."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attnkit import checkpoint as ckpt
from attnkit.checkpoint import load_checkpoint, read_checkpoint_config
from attnkit.data.translation import TranslationData
from attnkit.inference.loading import load_model
from attnkit.training.optim import lr_at
from attnkit.training.translation import TrainConfig, Trainer

CFG = {"embed_size": 16, "num_hiddens": 16, "num_layers": 2, "dropout": 0.1}


def _trainer(tiny_data, tiny_model, tmp_path=None, arch="bahdanau", **train):
    cfg = TrainConfig(
        **{
            "epochs": 2,
            "lr": 0.01,
            "batch_tokens": 512,
            "progress": False,
            "bleu_sentences": 8,
            "out_dir": None if tmp_path is None else str(tmp_path),
            **train,
        }
    )
    return Trainer(tiny_model(arch), tiny_data, cfg, arch=arch, model_config=CFG)


def test_config_validation():
    with pytest.raises(ValueError, match=r"TrainConfig\.epochs must be a positive int, got 0"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match=r"TrainConfig\.schedule must be one of"):
        TrainConfig(schedule="cosine")
    with pytest.raises(ValueError, match="warmup_steps must be >= 1"):
        TrainConfig(schedule="inverse_sqrt")
    with pytest.raises(ValueError, match=r"TrainConfig\.lr must be a positive number"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="unknown TrainConfig keys"):
        TrainConfig.from_dict({"epochs": 1, "momentum": 0.9})
    cfg = TrainConfig(epochs=3, clip=None)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"batch_tokens": 0}, ValueError, r"TrainConfig\.batch_tokens must be a positive int, got 0$"),
        ({"batch_tokens": 512.0}, TypeError,
         r"TrainConfig\.batch_tokens must be a positive int, got 512\.0 \(float\)"),
        ({"batch_tokens": True}, TypeError,
         r"TrainConfig\.batch_tokens must be a positive int, got True \(bool\)"),
        ({"label_smoothing": 1.0}, ValueError,
         r"TrainConfig\.label_smoothing must be in \[0, 1\), got 1\.0"),
        ({"label_smoothing": "0.1"}, TypeError,
         r"TrainConfig\.label_smoothing must be a float in \[0, 1\), got '0\.1' \(str\)"),
        ({"bleu_sentences": -1}, ValueError,
         r"TrainConfig\.bleu_sentences must be a non-negative int, got -1$"),
        ({"bleu_sentences": "all"}, TypeError,
         r"TrainConfig\.bleu_sentences must be a non-negative int, got 'all' \(str\)"),
        ({"max_decode_len": 0}, ValueError,
         r"TrainConfig\.max_decode_len must be a positive int, got 0$"),
        ({"max_decode_len": 5.0}, TypeError,
         r"TrainConfig\.max_decode_len must be a positive int, got 5\.0 \(float\)"),
    ],
)  # fmt: skip
def test_translation_fields_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        TrainConfig(**kwargs)


def test_translation_counts_accept_none_and_numpy_ints():
    import numpy as np

    cfg = TrainConfig(bleu_sentences=None, max_decode_len=None, batch_tokens=np.int64(256))
    assert cfg.bleu_sentences is None and cfg.max_decode_len is None
    assert type(cfg.batch_tokens) is int and cfg.batch_tokens == 256  # JSON-safe
    assert json.dumps(cfg.to_dict())


def test_inverse_sqrt_schedule_peaks_at_lr():
    at = lambda step: lr_at("inverse_sqrt", 1e-3, 100, step)  # noqa: E731
    assert at(100) == pytest.approx(1e-3)
    assert at(1) == pytest.approx(1e-3 / 100)  # linear warm-up
    assert at(400) == pytest.approx(1e-3 / 2)  # then 1/sqrt decay
    assert max(at(s) for s in range(1, 1000)) == pytest.approx(1e-3)
    assert lr_at("constant", 0.5, 0, 7) == 0.5
    with pytest.raises(ValueError, match="schedule must be one of"):
        lr_at("cosine", 0.5, 0, 7)


def test_training_lowers_the_loss_and_writes_a_checkpoint(tiny_data, tiny_model, tmp_path):
    trainer = _trainer(tiny_data, tiny_model, tmp_path, epochs=3)
    before = trainer.evaluate("val")["loss"]
    history = trainer.fit()
    assert history["epoch"] == [1, 2, 3]
    assert history["val_loss"][-1] < before - 1.0
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert all(math.isfinite(x) for x in history["val_bleu"])
    config = read_checkpoint_config(tmp_path)
    assert config["arch"] == "bahdanau" and config["epoch"] == 3 and config["model_config"] == CFG
    assert config["data"]["max_len"] == tiny_data.max_len
    assert (tmp_path / "curves.png").stat().st_size > 1000
    # the files load with weights_only=True (no arbitrary unpickling)
    ck = load_checkpoint(tmp_path)
    assert ck.trainer_state["step"] == trainer.step and ck.trainer_state["epoch"] == 3
    model, _ = load_model(tmp_path)
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(model.state_dict()[k], v)
    assert len(list(tmp_path.glob("model-*.pt"))) == 1  # old files cleaned up


def test_no_validation_split_skips_validation(tiny_data, tiny_model, tmp_path, capsys, monkeypatch):
    # val_fraction=0: the trainer must not score an empty split (that printed "val loss nan")
    data = TranslationData(
        tiny_data.src_vocab, tiny_data.tgt_vocab, tiny_data.train[:60], [], [], tiny_data.max_len
    )
    trainer = Trainer(
        tiny_model("bahdanau"),
        data,
        TrainConfig(epochs=2, lr=0.01, batch_tokens=512, progress=False, out_dir=str(tmp_path)),
        arch="bahdanau",
        model_config=CFG,
    )

    def no_evaluate(*args, **kwargs):
        raise AssertionError("evaluate() called without a validation split")

    monkeypatch.setattr(trainer, "evaluate", no_evaluate)
    history = trainer.fit()
    out = capsys.readouterr().out
    assert "epoch 2/2: train loss " in out and "no validation split" in out
    assert "nan" not in out
    assert history["epoch"] == [1, 2] and all(math.isfinite(x) for x in history["train_loss"])
    # one entry per epoch in every column (plots and the CLI index them), NaN for val
    assert all(math.isnan(x) for x in history["val_loss"] + history["val_bleu"])
    assert read_checkpoint_config(tmp_path)["epoch"] == 2
    assert (tmp_path / "curves.png").exists()


def test_resume_is_exact(tiny_data, tiny_model, tmp_path):
    straight = _trainer(tiny_data, tiny_model, tmp_path / "a", epochs=2)
    straight.fit()
    first = _trainer(tiny_data, tiny_model, tmp_path / "b", epochs=1)
    first.fit()
    torch.manual_seed(123)  # a killed run restarts in a fresh process: other RNG state
    resumed = _trainer(tiny_data, tiny_model, tmp_path / "b", epochs=2)
    assert resumed.resume() and resumed.epoch == 1
    resumed.fit()
    assert resumed.step == straight.step
    for (name, a), b in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().values()
    ):
        assert torch.equal(a, b), name
    timings = {k: resumed.history[k] for k in ("tokens_per_s", "seconds")}
    assert resumed.history == straight.history | timings


def test_failed_save_keeps_the_previous_checkpoint(tiny_data, tiny_model, tmp_path, monkeypatch):
    trainer = _trainer(tiny_data, tiny_model, tmp_path, epochs=1)
    trainer.fit()
    saved = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(1.0)
    trainer.step += 1
    real = ckpt._atomic_write_bytes

    def failing(path, data):
        if path.name == "config.json":
            raise OSError("disk full")  # crash at the commit point
        return real(path, data)

    monkeypatch.setattr(ckpt, "_atomic_write_bytes", failing)
    with pytest.raises(OSError, match="disk full"):
        trainer.save()
    model, config = load_model(tmp_path)
    assert config["step"] == trainer.step - 1
    for k, v in model.state_dict().items():
        assert torch.equal(v, saved[k])
    monkeypatch.setattr(ckpt, "_atomic_write_bytes", real)
    trainer.save()  # the next good save commits and removes the orphans
    assert len(list(tmp_path.glob("model-*.pt"))) == 1
    assert not list(tmp_path.glob(".*.tmp"))


def test_checkpoint_errors(tiny_data, tiny_model, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_model(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"config\.json is missing"):
        load_model(tmp_path)
    trainer = _trainer(tiny_data, tiny_model, tmp_path, epochs=1, arch="seq2seq")
    trainer.save()
    # another arch
    other = _trainer(tiny_data, tiny_model, tmp_path, epochs=2, arch="bahdanau")
    with pytest.raises(ValueError, match="trained with arch 'seq2seq', not 'bahdanau'"):
        other.resume()
    # weights that do not fit the recorded config
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    config["model_config"]["num_hiddens"] = 8
    config_path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="do not fit this model"):
        load_model(tmp_path)
    # a corrupted weights file
    config["model_config"]["num_hiddens"] = 16
    config_path.write_text(json.dumps(config))
    weights = tmp_path / config["files"]["model"]
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupted"):
        load_model(tmp_path)
    weights.unlink()
    with pytest.raises(FileNotFoundError, match="is incomplete"):
        load_model(tmp_path)
    config_path.write_text("{ not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_model(tmp_path)
    config_path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not an attnkit checkpoint"):
        load_model(tmp_path)


def test_resume_rejects_other_data(tiny_data, tiny_model, tmp_path):
    from attnkit.data.translation import load_translation_data

    _trainer(tiny_data, tiny_model, tmp_path, epochs=1).save()
    other = load_translation_data(None, num_pairs=120, seed=1)
    trainer = Trainer(
        tiny_model("bahdanau"),
        other,
        TrainConfig(epochs=2, out_dir=str(tmp_path), progress=False),
        arch="bahdanau",
        model_config=CFG,
    )
    with pytest.raises(ValueError, match="different data/vocabularies"):
        trainer.resume()
    assert _trainer(tiny_data, tiny_model, tmp_path / "empty").resume() is False


def test_trainer_argument_errors(tiny_data, tiny_model):
    with pytest.raises(TypeError, match="model must be an EncoderDecoder"):
        Trainer(torch.nn.Linear(2, 2), tiny_data, TrainConfig())
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        Trainer(tiny_model(), tiny_data, {"epochs": 1})
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 1\)"):
        Trainer(tiny_model(), tiny_data, TrainConfig(), rank=1)
    with pytest.raises(RuntimeError, match=r"torch\.distributed to be initialized"):
        Trainer(tiny_model(), tiny_data, TrainConfig(), rank=0, world_size=2)
    with pytest.raises(ValueError, match="no checkpoint directory"):
        Trainer(tiny_model(), tiny_data, TrainConfig()).save()


def test_validation_bleu_decodes_sentences_spread_over_the_split(
    tiny_data, tiny_model, monkeypatch
):
    """Tatoeba's file is in length order: the first N pairs would all be the shortest."""
    import attnkit.training.translation as tr
    from attnkit.inference.evaluation import split_texts

    assert tr.evenly_spaced(10, 3) == [0, 3, 6]
    assert tr.evenly_spaced(4, 9) == [0, 1, 2, 3]
    assert tr.evenly_spaced(5, 0) == []
    decoded = []
    real = tr.translate_and_score
    monkeypatch.setattr(
        tr,
        "translate_and_score",
        lambda m, d, s, r, **kw: decoded.append(s) or real(m, d, s, r, **kw),
    )
    trainer = _trainer(tiny_data, tiny_model)  # bleu_sentences=8
    trainer.task.evaluate(trainer)  # the evaluation after each epoch
    sources, _ = split_texts(tiny_data, "val")
    assert len(sources) > 8
    assert decoded == [[sources[i] for i in tr.evenly_spaced(len(sources), 8)]]
