"""Training flags made from the config dataclasses: their help is the fields' documentation,
and a flag not given is told from one given at its default."""

from __future__ import annotations

import dataclasses

import pytest

from attnkit.cli import build_parser
from attnkit.cli.config_flags import describe, given_flags
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.models.registry import LMConfig
from attnkit.training.lm import LMTrainConfig
from attnkit.training.recipes import DEFAULTS, flag_of, resolve
from attnkit.training.translation import TrainConfig


def _parser(*verbs):
    parser = build_parser()
    for verb in verbs:
        sub = next(a for a in parser._actions if a.dest.endswith("command"))
        parser = sub.choices[verb]
    return parser


def _documented(cls):
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata and flag_of(f)]


@pytest.mark.parametrize(
    ("verb", "cls", "prefix"),
    [
        ("translate", TrainConfig, "train__"),
        ("lm", LMConfig, "model__"),
        ("lm", DecoderLMConfig, "model__"),
        ("lm", LMTrainConfig, "train__"),
    ],
)
def test_every_documented_field_is_a_flag_whose_help_is_its_doc(verb, cls, prefix):
    train = _parser(verb, "train")
    fields = _documented(cls)
    assert len(fields) >= 5
    for f in fields:
        action = train._option_string_actions[flag_of(f)]
        assert action.dest == prefix + f.name and action.default is None
        if cls is DecoderLMConfig and f.name == "num_layers":  # --layers: the RNN's flag too
            assert action.help.startswith("stacked layers (RNN) or blocks (Transformer)")
            continue
        assert action.help.startswith(f.metadata["help"]), f.name
    train.format_help()  # every help text renders (no stray %)


def test_help_shows_the_commands_defaults_and_the_flag_spellings():
    translate = _parser("translate", "train")._option_string_actions
    assert translate["--epochs"].help.endswith("(default 30)")  # the CLI's, not TrainConfig's
    assert (
        translate["--label-smoothing"].help
        == "label smoothing of the cross-entropy, in [0, 1) (default 0.0)"
    )
    assert translate["--accum"].dest == "train__accum_steps"
    assert translate["--time-budget"].dest == "train__time_budget_s"
    assert translate["--snapshot-every-minutes"].type("2") == 120.0  # minutes -> seconds
    assert "--out-dir" not in translate and "--progress" not in translate  # no flag
    lm = _parser("lm", "train")._option_string_actions
    assert lm["--hiddens"].help == "hidden width (default 256)"
    assert lm["--layers"].dest == "model__num_layers"
    assert lm["--cell"].choices == ("rnn", "gru", "lstm")
    assert lm["--epochs"].help.endswith(f"(default {DEFAULTS['lm'].train['epochs']})")
    # the Transformer's flags show its recipe's defaults
    assert lm["--d-model"].help == "model width D (default 128)"
    assert lm["--positions"].choices == ("sinusoidal", "learned", "rope", "alibi", "none")
    assert lm["--kv-heads"].dest == "model__num_kv_heads" and lm["--context"].type is int


def test_flags_not_given_are_none_and_given_ones_are_kept_at_any_value():
    args = _parser("translate", "train").parse_args(["--epochs", "30", "--flat-params"])
    assert given_flags(args, "train__") == {"epochs": 30, "flat_params": True}
    args = _parser("lm", "train").parse_args(["--scratch", "--hiddens", "256"])
    assert given_flags(args, "model__") == {"scratch": True, "num_hiddens": 256}
    assert given_flags(args, "train__") == {}


def test_describe_says_where_the_settings_came_from():
    flags = {"train": {"epochs": 2, "out_dir": "runs/x", "progress": False}}
    line = describe(resolve("translate", arch="transformer", preset="demo", flags=flags))
    # what the preset changes (not its epochs: the flag's), then the flags
    assert line.startswith("preset 'demo': d_model=64, d_ff=128, lr=0.003, schedule=")
    assert "epochs=16" not in line and "num_pairs=20000" in line
    assert line.endswith("; flags: epochs=2; the rest: defaults")  # out_dir: not a flag
    assert describe(resolve("lm")) == "the rest: defaults"
