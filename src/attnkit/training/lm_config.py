"""``LMTrainConfig``: the training settings of ``attnkit lm train``, recorded in its
checkpoints (``attnkit.training.lm`` re-exports it). Validated.

Its fields make the command's training flags (``attnkit.cli.config_flags``); the periodic
checkpoints and the loss guard are ``EngineConfig``'s fields, with their documentation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from attnkit._validate import (
    integer,
    non_negative_int,
    non_negative_number,
    one_of,
    optional,
    positive_int,
    positive_number,
)
from attnkit.i18n import N_, _
from attnkit.training.config import PRECISIONS, EngineConfig, check_run_guards, setting
from attnkit.training.optim import SCHEDULES

__all__ = ["LM_OPTIMIZERS", "LMTrainConfig"]

# fields shared with EngineConfig, with their defaults and documentation (flags alike)
_ENGINE = {
    f.name: dataclasses.field(default=f.default, metadata=f.metadata)
    for f in dataclasses.fields(EngineConfig)
    if f.name in ("save_every_minutes", "save_every_steps", "max_nonfinite_steps",
                  "divergence_factor")
}  # fmt: skip
LM_OPTIMIZERS = ("sgd", "adam")
_DEFAULT_LR = {"sgd": 1.0, "adam": 0.01}


@dataclass(frozen=True)
class LMTrainConfig:
    """The training settings of ``attnkit lm train``, recorded in its checkpoints. Validated.

    ``lr=None`` takes the optimizer's rate: 1 for SGD (the book's), 0.01 for Adam. Fields
    marked ``resume="fixed"`` cannot change when a run is resumed.
    """

    epochs: int = setting(500, N_("total epochs (with --resume: including those done)"))
    lr: float | None = setting(None, N_("learning rate (default: 1 for sgd, 0.01 for adam)"))
    optimizer: str = setting("sgd", N_("the optimizer"), choices=LM_OPTIMIZERS, resume="fixed")
    clip: float = setting(1.0, N_("gradient-norm bound (0: no clipping)"))
    seed: int = setting(
        0, N_("seed of the model init, the batches and the samples"), resume="fixed"
    )
    schedule: str = setting(
        "constant",
        N_(
            "constant, inverse_sqrt (warm-up to lr, then 1/sqrt(step)), or linear_to_budget "
            "(warm-up, then linear decay to 0 when --time-budget runs out)"
        ),
        choices=SCHEDULES,
    )
    warmup_steps: int = setting(0, N_("warm-up steps of inverse_sqrt/linear_to_budget"))
    precision: str = setting(
        "fp32", N_("fp32 or bf16 (autocast of each step's forward and loss)"), choices=PRECISIONS
    )
    time_budget_s: float | None = setting(
        None, N_("stop cleanly after SECONDS of training: save, evaluate, report (resumable)"),
        flag="--time-budget", metavar="SECONDS",
    )  # fmt: skip
    # the engine's: periodic checkpoints and the loss guard (EngineConfig's documentation)
    save_every_minutes: float = _ENGINE["save_every_minutes"]
    save_every_steps: int = _ENGINE["save_every_steps"]
    max_nonfinite_steps: int = _ENGINE["max_nonfinite_steps"]
    divergence_factor: float = _ENGINE["divergence_factor"]

    def __post_init__(self) -> None:
        name = "LMTrainConfig"
        positive_int(f"{name}.epochs", self.epochs)
        one_of(f"{name}.optimizer", self.optimizer, LM_OPTIMIZERS)
        if self.lr is None:
            object.__setattr__(self, "lr", _DEFAULT_LR[self.optimizer])
        positive_number(f"{name}.lr", self.lr)
        non_negative_number(f"{name}.clip", self.clip)
        integer(f"{name}.seed", self.seed)
        one_of(f"{name}.schedule", self.schedule, SCHEDULES)
        non_negative_int(f"{name}.warmup_steps", self.warmup_steps)
        one_of(f"{name}.precision", self.precision, PRECISIONS)
        optional(positive_number, f"{name}.time_budget_s", self.time_budget_s)
        if self.schedule != "constant" and self.warmup_steps < 1:
            message = _("{name}.warmup_steps must be >= 1 with schedule={schedule!r}")
            raise ValueError(message.format(name=name, schedule=self.schedule))
        check_run_guards(self, name)
        if self.schedule == "linear_to_budget" and self.time_budget_s is None:
            message = _(
                "{name}.schedule='linear_to_budget' decays to 0 when the time budget "
                "runs out: it needs time_budget_s (--time-budget SECONDS)"
            )
            raise ValueError(message.format(name=name))

    def engine_config(self, **runtime: Any) -> EngineConfig:
        """The engine's config of this run (``runtime``: out_dir, device, progress ...);
        the seed is left to the caller, who seeds before building model and data."""
        return EngineConfig(
            epochs=self.epochs, lr=self.lr, clip=self.clip if self.clip > 0 else None,
            optimizer=self.optimizer, beta2=0.999, seed=None, schedule=self.schedule,
            warmup_steps=self.warmup_steps, precision=self.precision,
            time_budget_s=self.time_budget_s, log_every=max(1, self.epochs // 20),
            **{name: getattr(self, name) for name in _ENGINE}, **runtime,
        )  # fmt: skip
