"""``EngineConfig``: what the training loop needs besides the model and the task. Validated."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from attnkit.training.optim import OPTIMIZERS, SCHEDULES

__all__ = ["PRECISIONS", "EngineConfig"]

PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class EngineConfig:
    """What the loop needs besides the model and the task. Validated."""

    epochs: int = 10
    lr: float = 0.005
    clip: float | None = 1.0  # max global grad norm; None = no clipping
    optimizer: str = "adam"  # or "sgd" (ignored when an optimizer object is given)
    beta1: float = 0.9
    beta2: float = 0.98
    weight_decay: float = 0.0
    # or "inverse_sqrt" (Vaswani et al., peak = lr at warmup), or "linear_to_budget" (warm-up,
    # then linear decay to 0 when time_budget_s runs out)
    schedule: str = "constant"
    warmup_steps: int = 0
    seed: int | None = 0  # torch.manual_seed at the start of a fresh run; None = leave it
    out_dir: str | None = None  # checkpoint directory; None = no checkpoints
    eval_every: int = 1  # evaluate (one history row, one line) every N epochs and after the last
    log_every: int = 1  # print every N-th history row (and the last); 0 = no epoch lines
    # one flat tensor for optimizer, clipping and zeroing; ignored under DDP and when an
    # optimizer object is given (it holds the parameters already)
    flat_params: bool = False
    device: str = "cpu"
    progress: bool = True  # tqdm bar during epochs (rank 0, terminals only)
    # gradient accumulation: one optimizer step per N batches, on the global token mean of
    # the N (an epoch's leftover batches make a shorter last group); ``step`` counts
    # optimizer steps, and a stop (signal, time budget) waits for the end of a group
    accum_steps: int = 1
    # "bf16": each step's forward and loss under torch.autocast(bfloat16); the parameters,
    # gradients and optimizer stay fp32, evaluation is untouched. "fp32": no autocast
    precision: str = "fp32"
    # stop after the optimizer step that uses up this many seconds of fit()'s wall time:
    # checkpoint (mid-epoch if need be, resumable exactly), one evaluated history row,
    # a log line, and fit() returns normally (engine.stopped_by_budget). None = no limit
    time_budget_s: float | None = None
    # weights-only snapshots for checkpoint averaging (attnkit.training.averaging), in
    # out_dir/snapshots/step-<step>.pt with an index.json: every N optimizer steps and/or
    # every N seconds of training (counted over resumed runs too); 0 = off
    snapshot_every_steps: int = 0
    snapshot_every_s: float = 0
    keep_snapshots: int = 0  # keep the newest N snapshots; 0 = keep all

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field, allow_zero in (
            ("epochs", False),
            ("eval_every", False),
            ("log_every", True),
            ("warmup_steps", True),
            ("accum_steps", False),
            ("snapshot_every_steps", True),
            ("keep_snapshots", True),
        ):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if allow_zero else 1):
                want = "a non-negative" if allow_zero else "a positive"
                raise ValueError(f"{name}.{field} must be {want} int, got {v!r}")
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int)
        ):
            raise ValueError(f"{name}.seed must be an int or None, got {self.seed!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, int | float) or not self.lr > 0:
            raise ValueError(f"{name}.lr must be a positive number, got {self.lr!r}")
        if math.isinf(self.lr):
            raise ValueError(f"{name}.lr must be a positive number, got {self.lr!r}")
        for field in ("clip", "beta1", "beta2", "weight_decay"):
            v = getattr(self, field)
            if v is None and field == "clip":
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"{name}.{field} must be a finite number, got {v!r}")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"{name}.clip must be positive or None, got {self.clip!r}")
        for field in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, field) < 1.0:
                raise ValueError(f"{name}.{field} must be in [0, 1), got {getattr(self, field)}")
        if self.weight_decay < 0:
            raise ValueError(f"{name}.weight_decay must be >= 0, got {self.weight_decay}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"{name}.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"{name}.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.schedule == "inverse_sqrt" and self.warmup_steps < 1:
            raise ValueError(f"{name}.warmup_steps must be >= 1 with schedule='inverse_sqrt'")
        if self.schedule == "linear_to_budget" and self.time_budget_s is None:
            raise ValueError(
                f"{name}.schedule='linear_to_budget' decays to 0 when the time budget runs "
                "out: it needs time_budget_s (--time-budget SECONDS)"
            )
        torch.device(self.device)  # raises on a malformed device string
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"{name}.precision must be one of {PRECISIONS}, got {self.precision!r}"
            )
        budget = self.time_budget_s
        if budget is not None and (
            isinstance(budget, bool)
            or not isinstance(budget, int | float)
            or not math.isfinite(budget)
            or budget <= 0
        ):
            raise ValueError(
                f"{name}.time_budget_s must be a positive finite number of seconds or None, "
                f"got {budget!r}"
            )
        every = self.snapshot_every_s
        if isinstance(every, bool) or not isinstance(every, int | float):
            raise ValueError(f"{name}.snapshot_every_s must be a number >= 0, got {every!r}")
        if not (math.isfinite(every) and every >= 0):
            raise ValueError(f"{name}.snapshot_every_s must be a number >= 0, got {every!r}")
        if (self.snapshot_every_steps or every) and self.out_dir is None:
            raise ValueError(
                f"{name}.snapshot_every_steps/snapshot_every_s write into out_dir/snapshots: "
                "set out_dir"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - fields)
        if unknown:
            raise ValueError(
                f"unknown {cls.__name__} keys {unknown}; expected some of {sorted(fields)}"
            )
        return cls(**d)
