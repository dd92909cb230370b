"""The named recipes and the one resolution: defaults < preset < checkpoint < flags."""

from __future__ import annotations

import dataclasses

import pytest

from attnkit.models.registry import LMConfig
from attnkit.models.transformer import TransformerConfig
from attnkit.training.lm import LMTrainConfig
from attnkit.training.recipes import (
    DEFAULTS,
    LM_DEFAULTS,
    PRESETS,
    RECIPES,
    Recipe,
    get_recipe,
    resolve,
)
from attnkit.training.translation import TrainConfig

TF = "transformer"


def _translate_checkpoint(**train):
    """A translator checkpoint's config.json, as far as resolution reads it."""
    small = dataclasses.asdict(RECIPES["translate"]["small"].model)
    train_config = TrainConfig(**{"epochs": 7, "lr": 0.01, "batch_tokens": 512, **train})
    return {
        "arch": TF,
        "model_config": small,
        "train_config": train_config.to_dict(),
        "data_args": {"num_pairs": 100, "seed": 4},
    }


def _lm_checkpoint():
    """An `attnkit lm train` checkpoint's config.json (its run config)."""
    return {
        "cell": "lstm", "scratch": False, "reset_after": False, "num_hiddens": 16,
        "num_layers": 2, "bidirectional": False, "token": "char",
        "preprocess": "letters-lowercase", "data": "book.txt", "max_tokens": 1500,
        "batch_size": 4, "num_steps": 8, "use_random_iter": False, "epochs": 3,
        "optimizer": "sgd", "lr": 0.5, "clip": 1.0, "seed": 2, "processes": 1,
        "epochs_done": 3, "vocab": {}, "format": 1,
    }  # fmt: skip


def test_every_preset_is_a_validated_recipe_of_its_task():
    assert set(RECIPES["translate"]) == {"book", "small", "base", "demo"}
    assert set(RECIPES["lm"]) == {"book", "transformer"}
    assert DEFAULTS["lm"] is LM_DEFAULTS["rnn"] is RECIPES["lm"]["book"]
    assert LM_DEFAULTS["transformer"] is RECIPES["lm"]["transformer"]
    for task, recipes in RECIPES.items():
        for name, recipe in recipes.items():
            assert isinstance(recipe, Recipe) and (recipe.task, recipe.name) == (task, name)
            assert recipe.doc
    assert "4000 joint SentencePiece pieces" in RECIPES["translate"]["base"].doc
    assert PRESETS["small"] == RECIPES["translate"]["demo"].model
    with pytest.raises(dataclasses.FrozenInstanceError):
        RECIPES["translate"]["base"].name = "huge"
    with pytest.raises(TypeError):
        RECIPES["translate"]["base"].train["lr"] = 1.0  # read-only
    with pytest.raises(TypeError):
        RECIPES["translate"]["huge"] = RECIPES["translate"]["base"]


def test_translate_precedence_each_level_over_the_one_below():
    # defaults: TrainConfig's, under the CLI's; the arch's registered model config
    r = resolve("translate", arch=TF)
    assert (r.train.epochs, r.train.lr, r.train.batch_tokens) == (30, 0.005, 2048)
    assert r.train.label_smoothing == TrainConfig().label_smoothing
    assert r.model == TransformerConfig() and dict(r.data) == {"seed": 0}
    assert r.sources["train.epochs"] == r.sources["model.d_model"] == "default"
    # a preset over the defaults
    r = resolve("translate", arch=TF, preset="demo")
    assert (r.train.epochs, r.train.lr, r.train.batch_tokens) == (16, 0.003, 2000)
    assert r.model == RECIPES["translate"]["small"].model
    assert dict(r.data) == {"num_pairs": 20000, "seed": 0}
    assert r.sources["train.epochs"] == r.sources["model.d_model"] == "preset demo"
    assert r.sources["train.clip"] == r.sources["model.num_layers"] == "default"  # the same
    # flags over the preset
    flags = {"model": {"dropout": 0.2}, "train": {"epochs": 3}, "data": {"num_pairs": 500}}
    r = resolve("translate", arch=TF, preset="demo", flags=flags)
    assert (r.train.epochs, r.train.lr, r.model.dropout) == (3, 0.003, 0.2)
    assert dict(r.data) == {"num_pairs": 500, "seed": 0}
    assert r.sources["train.epochs"] == r.sources["model.dropout"] == "flag"
    assert r.sources["train.lr"] == "preset demo"
    # a flag at its default value is still a flag
    r = resolve("translate", arch=TF, flags={"train": {"epochs": 30, "lr": None}})
    assert r.sources["train.epochs"] == "flag" and r.sources["train.lr"] == "default"
    # a checkpoint over the defaults: its model, data and training settings
    ck = _translate_checkpoint(label_smoothing=0.2)
    r = resolve("translate", arch=TF, checkpoint=ck)
    assert r.model == RECIPES["translate"]["small"].model
    assert (r.train.epochs, r.train.lr, r.train.label_smoothing) == (7, 0.01, 0.2)
    assert dict(r.data) == ck["data_args"]
    assert r.sources["train.epochs"] == r.sources["data.num_pairs"] == "checkpoint"
    # flags over the checkpoint: training settings, and the model/data they keep
    flags = {
        "train": {"epochs": 9, "seed": 5},
        "model": {"d_model": 64},
        "data": {"num_pairs": 100},
    }
    r = resolve("translate", arch=TF, checkpoint=ck, flags=flags)
    assert (r.train.epochs, r.train.seed, r.train.lr) == (9, 5, 0.01)
    assert r.data["seed"] == 4  # the data the checkpoint was trained on
    assert r.sources["train.epochs"] == "flag" and r.sources["train.lr"] == "checkpoint"


def test_a_resumed_translator_keeps_its_model_and_data():
    ck = _translate_checkpoint()
    with pytest.raises(
        ValueError, match=r"cannot change the model config of a checkpoint: \{'d_model': 32\}"
    ):
        resolve("translate", arch=TF, checkpoint=ck, flags={"model": {"d_model": 32}})
    with pytest.raises(ValueError, match=r"checkpoint ck was trained on None, not 'fra\.txt'"):
        resolve(
            "translate", arch=TF, checkpoint=ck, flags={"data": {"data": "fra.txt"}}, where="ck"
        )
    with pytest.raises(
        ValueError, match=r"with other model/data options: --num-pairs 300 \(checkpoint: 100\)"
    ):
        resolve("translate", arch=TF, checkpoint=ck, flags={"data": {"num_pairs": 300}})
    with pytest.raises(ValueError, match=r"--separate-vocab False \(checkpoint: True\)"):
        resolve("translate", arch=TF, checkpoint=ck, flags={"data": {"joint_vocab": False}})


def test_lm_precedence_each_level_over_the_one_below():
    # defaults: the book recipe
    r = resolve("lm")
    assert r.model == LMConfig() and r.train == LMTrainConfig() and r.train.lr == 1.0
    assert r.data["batch_size"] == 32 and r.data["source"] == "builtin"
    assert r.sources["model.num_hiddens"] == "default"
    # a preset over the defaults
    tiny = Recipe(
        "tiny", "lm", model=LMConfig(num_hiddens=16), train={"epochs": 3},
        data={"batch_size": 4, "num_steps": 8},
    )  # fmt: skip
    r = resolve("lm", preset=tiny)
    assert (r.model.num_hiddens, r.train.epochs, r.data["batch_size"]) == (16, 3, 4)
    assert r.data["token"] == "char" and r.model.cell == "gru"
    assert r.sources["model.num_hiddens"] == r.sources["data.batch_size"] == "preset tiny"
    # flags over the preset (the learning rate follows the optimizer where none is set)
    flags = {"model": {"num_hiddens": 8}, "train": {"optimizer": "adam"}, "data": {"num_steps": 5}}
    r = resolve("lm", preset=tiny, flags=flags)
    assert (r.model.num_hiddens, r.data["num_steps"], r.data["batch_size"]) == (8, 5, 4)
    assert (r.train.optimizer, r.train.lr, r.train.epochs) == ("adam", 0.01, 3)
    assert r.sources["model.num_hiddens"] == "flag"
    # a checkpoint over the defaults
    ck = _lm_checkpoint()
    r = resolve("lm", checkpoint=ck)
    assert r.model == LMConfig(cell="lstm", num_hiddens=16, num_layers=2)
    assert (r.train.epochs, r.train.lr, r.train.seed) == (3, 0.5, 2)
    assert (r.data["source"], r.data["max_tokens"], r.data["batch_size"]) == ("book.txt", 1500, 4)
    assert r.sources["train.lr"] == r.sources["data.source"] == "checkpoint"
    # flags over the checkpoint: the free training settings; the kept ones given equal
    flags = {"train": {"epochs": 6, "lr": 0.1, "clip": 0.0, "seed": 2}, "model": {"cell": "lstm"}}
    r = resolve("lm", checkpoint=ck, flags=flags)
    assert (r.train.epochs, r.train.lr, r.train.clip, r.train.seed) == (6, 0.1, 0.0, 2)
    assert r.sources["train.epochs"] == "flag" and r.model.cell == "lstm"


@pytest.mark.parametrize(
    ("section", "given", "said"),
    [
        ("model", {"num_hiddens": 32}, "--hiddens 32 (checkpoint: 16)"),
        ("model", {"bidirectional": True}, "--bidirectional True (checkpoint: False)"),
        ("train", {"optimizer": "adam"}, "--optimizer 'adam' (checkpoint: 'sgd')"),
        ("train", {"seed": 0}, "--seed 0 (checkpoint: 2)"),
        ("data", {"source": "time_machine"}, "--data/--dataset 'time_machine' (checkpoint: 'book.txt')"),
        ("data", {"use_random_iter": True}, "--random-iter True (checkpoint: False)"),
    ],
)  # fmt: skip
def test_a_resumed_lm_keeps_its_model_data_and_fixed_settings(section, given, said):
    with pytest.raises(ValueError) as e:
        resolve("lm", checkpoint=_lm_checkpoint(), flags={section: given}, where="runs/lm")
    assert f"cannot resume runs/lm with other model/data options: {said}" in str(e.value)


@pytest.mark.parametrize("task", ["translate", "lm"])
def test_a_preset_does_not_combine_with_a_checkpoint(task):
    ck = _translate_checkpoint() if task == "translate" else _lm_checkpoint()
    arch = TF if task == "translate" else None
    with pytest.raises(ValueError, match="--preset cannot be combined with --resume"):
        resolve(task, arch=arch, preset="book", checkpoint=ck)


def test_unknown_or_foreign_presets_are_refused():
    with pytest.raises(
        ValueError,
        match=r"unknown preset 'huge'; expected one of \['base', 'book', 'demo', 'small'\]",
    ):
        resolve("translate", arch=TF, preset="huge")
    with pytest.raises(
        ValueError, match=r"unknown preset 'base'; expected one of \['book', 'transformer'\]"
    ):
        resolve("lm", preset="base")
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        get_recipe("translate", "huge")
    with pytest.raises(ValueError, match="--preset is for --arch transformer, not 'bahdanau'"):
        resolve("translate", arch="bahdanau", preset="base")
    with pytest.raises(ValueError, match="is a recipe of 'lm', not 'translate'"):
        resolve("translate", arch=TF, preset=RECIPES["lm"]["book"])


def test_the_base_recipe_decays_to_its_budget_or_falls_back():
    subwords = {"data": {"tokenizer": "sentencepiece"}}
    timed = resolve(
        "translate", arch=TF, preset="base", flags={**subwords, "train": {"time_budget_s": 1800.0}}
    )
    assert timed.model.num_layers == 2 and timed.data["vocab_size"] == 4000
    assert timed.train.schedule == "linear_to_budget" and timed.train.warmup_steps == 300
    untimed = resolve("translate", arch=TF, preset="base", flags=subwords)
    assert untimed.train.schedule == "inverse_sqrt"  # linear_to_budget needs a budget
    assert untimed.sources["train.schedule"] == "preset base"
    same = {"schedule": "constant", "time_budget_s": None}
    assert dataclasses.replace(untimed.train, **same) == dataclasses.replace(timed.train, **same)
    # an explicit schedule is taken as given (and needs its budget)
    with pytest.raises(ValueError, match="linear_to_budget"):
        resolve("translate", arch=TF, flags={"train": {"schedule": "linear_to_budget"}})
    # the recipe's subword settings apply to subwords only; given ones need subwords
    words = resolve("translate", arch=TF, preset="base")
    assert "vocab_size" not in words.data
    with pytest.raises(
        ValueError, match="--vocab-size, --separate-vocab: only with --tokenizer sentencepiece"
    ):
        resolve("translate", arch=TF, flags={"data": {"vocab_size": 100, "joint_vocab": False}})


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"name": 3}, TypeError, "Recipe.name must be a str"),
        ({"name": ""}, ValueError, "Recipe.name must be a non-empty str"),
        ({"task": "vision"}, ValueError, "Recipe.task must be one of 'translate', 'lm'"),
        ({"arch": "rnn"}, ValueError, "recipe 'r': arch must be one of"),
        ({"model": TransformerConfig()}, ValueError, "recipe 'r': arch is required"),
        ({"arch": TF, "model": LMConfig()}, TypeError, "model must be a TransformerConfig, got LMConfig"),
        ({"train": [("lr", 1.0)]}, TypeError, "recipe 'r': train must be a mapping"),
        ({"train": {"learning_rate": 1.0}}, ValueError, r"unknown TrainConfig keys \['learning_rate'\]"),
        ({"train": {"batch_tokens": 0}}, ValueError, "TrainConfig.batch_tokens must be a positive int"),
        ({"train": {"schedule": "linear_to_budget"}}, ValueError, "warmup_steps must be >= 1"),
        ({"data": {"vocab": 3}}, ValueError, r"unknown data setting\(s\) \['vocab'\]"),
        ({"data": {"num_pairs": "many"}}, TypeError, "recipe 'r': data.num_pairs must be a positive int"),
        ({"data": {"tokenizer": "bpe"}}, ValueError, "recipe 'r': data.tokenizer must be one of"),
        ({"task": "lm"}, TypeError, "recipe 'r': model must be a LMConfig, got NoneType"),
        ({"task": "lm", "model": LMConfig(), "train": {"seed": 1.5}}, TypeError, "LMTrainConfig.seed must be an int"),
        ({"task": "lm", "model": LMConfig(), "arch": TF}, TypeError, "model must be a DecoderLMConfig, got LMConfig"),
        ({"task": "lm", "model": LMConfig(), "arch": "seq2seq"}, ValueError, "arch must be one of 'rnn', 'transformer'"),
        ({"task": "lm", "model": LMConfig(), "data": {"batch_size": 0}}, ValueError, "data.batch_size must be a positive int"),
    ],
)  # fmt: skip
def test_recipes_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        Recipe(**{"name": "r", "task": "translate", **kwargs})


def test_resolved_configs_are_validated_naming_the_field():
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        resolve("translate", arch="seq2seq", flags={"model": {"num_layers": 0}})
    with pytest.raises(ValueError, match=r"unknown config key\(s\) \['heads'\]"):
        resolve("translate", arch="bahdanau", flags={"model": {"heads": 2}})
    with pytest.raises(ValueError, match=r"LMConfig\.reset_after is for the scratch GRU only"):
        resolve("lm", flags={"model": {"reset_after": True}})
    with pytest.raises(ValueError, match=r"LMTrainConfig\.epochs must be a positive int, got 0"):
        resolve("lm", flags={"train": {"epochs": 0}})


@pytest.mark.parametrize(
    ("task", "data", "error", "match"),
    [
        ("lm", {"val_fraction": 1.5}, ValueError, r"--val-fraction must be .*got 1.5"),
        ("lm", {"batch_size": 0}, ValueError, "--batch-size must be a positive int, got 0"),
        ("lm", {"max_tokens": -7}, ValueError, "--max-tokens must be an int >= -1, got -7"),
        ("translate", {"num_pairs": "many"}, TypeError, "--num-pairs must be a positive int"),
    ],
)
def test_data_flags_are_checked_when_resolved(task, data, error, match):
    arch = "transformer" if task == "translate" else None
    with pytest.raises(error, match=match):
        resolve(task, arch=arch, flags={"data": data})
