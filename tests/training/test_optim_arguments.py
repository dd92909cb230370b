"""The argument checks of the optimizer factory, the schedules, clipping and the rank:
TypeError for a wrong type, ValueError for a wrong value, each naming the argument."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnkit.training.engine import distributed_rank
from attnkit.training.optim import (
    clip_gradients,
    learning_rate,
    lr_at,
    make_optimizer,
    sgd_update,
)


def test_learning_rates_are_positive_finite_ints_or_floats():
    assert learning_rate("lr", 1) == 1.0 and learning_rate("lr", 1e-3) == 1e-3
    for bad in (0, -1e-3, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=rf"lr must be a positive number, got {bad!r}"):
            learning_rate("lr", bad)
    for bad in ("0.1", True, None):
        with pytest.raises(TypeError, match=rf"lr must be a positive number, got {bad!r} \("):
            learning_rate("lr", bad)


def test_make_optimizer_names_its_arguments():
    model = nn.Linear(2, 1)
    with pytest.raises(ValueError, match="optimizer must be one of 'adam', 'sgd', got 'adamw'"):
        make_optimizer(model, "adamw")
    with pytest.raises(TypeError, match=r"lr must be a positive number, got '1e-3' \(str\)"):
        make_optimizer(model, "adam", "1e-3")
    assert make_optimizer(model, "sgd", 1).defaults["lr"] == 1  # an int lr is fine


def test_schedules_clipping_and_sgd_name_their_arguments():
    with pytest.raises(ValueError, match=r"schedule must be one of 'constant', .* got 'cosine'"):
        lr_at("cosine", 1e-3, 10, 5)
    p = nn.Parameter(torch.zeros(3))
    p.grad = torch.ones(3)
    with pytest.raises(ValueError, match="max_norm must be a positive finite number, got 0"):
        clip_gradients([p], 0)
    with pytest.raises(TypeError, match=r"max_norm must be a positive finite number, got None"):
        clip_gradients([p], None)
    with pytest.raises(ValueError, match="lr must be a positive number, got 0"):
        sgd_update([p], 0)
    with pytest.raises(TypeError, match=r"lr must be a positive number, got '0\.1' \(str\)"):
        sgd_update([p], "0.1")


def test_ranks_are_ints_below_the_world_size():
    assert distributed_rank(0, 1) == (0, 1)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 1\), got 1"):
        distributed_rank(1, 1)
    with pytest.raises(TypeError, match=r"rank must be an int in \[0, 1\), got 0\.0 \(float\)"):
        distributed_rank(0.0, 1)
    with pytest.raises(ValueError, match="world_size must be a positive int, got 0"):
        distributed_rank(0, 0)
    with pytest.raises(TypeError, match=r"world_size must be a positive int, got True \(bool\)"):
        distributed_rank(0, True)
