"""``LMConfig``: what a language model is built from, validated, rebuilt from a checkpoint."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnkit.models.registry import LMConfig
from attnkit.models.rnn import RNNLM, build_lm


def test_build_is_build_lm_of_its_fields():
    config = LMConfig(cell="gru", num_hiddens=8, num_layers=2, scratch=True, reset_after=True)
    torch.manual_seed(0)
    model = config.build(11)
    torch.manual_seed(0)
    twin = build_lm("gru", 11, 8, 2, False, True, reset_after=True)
    assert isinstance(model, RNNLM) and model.vocab_size == 11
    for (name, a), (_, b) in zip(
        model.state_dict().items(), twin.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_from_dict_reads_a_checkpoint_config():
    run = {"cell": "lstm", "num_hiddens": 16, "num_layers": 1, "bidirectional": True,
           "scratch": False, "reset_after": False, "epochs": 3, "lr": 0.5, "data": "x.txt"}  # fmt: skip
    config = LMConfig.from_dict(run)
    assert config == LMConfig(cell="lstm", num_hiddens=16, bidirectional=True)
    assert dataclasses.asdict(config).items() <= run.items()
    assert LMConfig.from_dict({"cell": "rnn"}) == LMConfig(cell="rnn")  # missing: defaults


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"cell": "tcn"}, ValueError, "LMConfig.cell must be one of 'rnn', 'gru', 'lstm'"),
        ({"num_hiddens": 0}, ValueError, "LMConfig.num_hiddens must be a positive int, got 0"),
        ({"num_layers": "2"}, TypeError, "LMConfig.num_layers must be a positive int"),
        ({"scratch": 1}, TypeError, "LMConfig.scratch must be a bool"),
        ({"bidirectional": None}, TypeError, "LMConfig.bidirectional must be a bool"),
        ({"reset_after": True}, ValueError, "LMConfig.reset_after is for the scratch GRU only"),
        ({"reset_after": True, "scratch": True, "cell": "lstm"}, ValueError, "reset_after"),
    ],
)
def test_invalid_configs_name_the_field(kwargs, error, match):
    with pytest.raises(error, match=match):
        LMConfig(**kwargs)
    with pytest.raises(dataclasses.FrozenInstanceError):
        LMConfig().cell = "rnn"
