"""``EngineConfig``: what the training loop needs besides the model and the task. Validated."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from attnkit._validate import (
    boolean,
    integer,
    non_negative_int,
    non_negative_number,
    one_of,
    optional,
    positive_int,
    positive_number,
    probability,
)
from attnkit.i18n import N_, _
from attnkit.training.optim import OPTIMIZERS, SCHEDULES, learning_rate

__all__ = ["PRECISIONS", "EngineConfig", "check_run_guards", "minutes", "setting"]

PRECISIONS = ("fp32", "bf16")


def setting(default: Any, help: str, **cli: Any) -> Any:
    """A config field with its documentation: ``help`` (the ``--help`` of its generated
    flag) and CLI hints in ``cli``: ``flag`` (the flag's spelling; None: no flag),
    ``parse`` (text -> value), ``metavar``, ``choices``, ``resume`` ("fixed": a resumed
    run must keep the checkpoint's value)."""
    return dataclasses.field(default=default, metadata={"help": help, **cli})


def minutes(text: str) -> float:
    """Minutes on the command line -> seconds in the config."""
    return 60.0 * float(text)


@dataclass(frozen=True)
class EngineConfig:
    """What the loop needs besides the model and the task. Validated.

    Each field's ``help`` (its metadata) documents it; the CLI's training flags are made
    from the fields and that text (``attnkit.cli.config_flags``).
    """

    epochs: int = setting(10, N_("total epochs (with --resume: including those done)"))
    lr: float = setting(0.005, N_("learning rate (the peak with a warm-up schedule)"))
    clip: float | None = setting(1.0, N_("max global gradient norm (None: no clipping)"))
    # ignored when an optimizer object is given
    optimizer: str = setting("adam", N_("adam or sgd"))
    beta1: float = setting(0.9, N_("Adam beta1"))
    beta2: float = setting(0.98, N_("Adam beta2 (0.98: Vaswani et al.; the book: 0.999)"))
    weight_decay: float = setting(0.0, N_("weight decay of the optimizer"))
    schedule: str = setting(
        "constant",
        N_(
            "constant, inverse_sqrt (Vaswani et al.: warm-up to lr, then 1/sqrt(step)), or "
            "linear_to_budget (warm-up, then linear decay to 0 when --time-budget runs out)"
        ),
    )
    warmup_steps: int = setting(0, N_("warm-up steps of inverse_sqrt/linear_to_budget"))
    seed: int | None = setting(
        0, N_("seed of the model init, batches and data split (None: leave torch's RNG as it is)")
    )
    out_dir: str | None = setting(
        None, N_("checkpoint directory (None: no checkpoints)"), flag=None
    )
    eval_every: int = setting(1, N_("validate + checkpoint every N epochs (and after the last)"))
    log_every: int = setting(1, N_("print every N-th epoch's line (and the last); 0: none"))
    # ignored under DDP and when an optimizer object is given (it holds the parameters)
    flat_params: bool = setting(
        False, N_("one flat parameter tensor for the optimizer, clipping and zeroing")
    )
    device: str = setting("cpu", N_("cpu, cuda, cuda:0 ..."))
    progress: bool = setting(True, N_("progress bar (rank 0, terminals only)"), flag=None)
    # one optimizer step per N batches, on the global token mean of the N (an epoch's
    # leftover batches make a shorter last group); ``step`` counts optimizer steps, and a
    # stop (signal, time budget) waits for the end of a group
    accum_steps: int = setting(
        1, N_("batches per optimizer step (gradient accumulation)"), flag="--accum"
    )
    # the parameters, gradients and optimizer stay fp32, evaluation is untouched
    precision: str = setting("fp32", N_("fp32 or bf16 (autocast of each step's forward and loss)"))
    # stop after the optimizer step that uses up this many seconds of fit()'s wall time:
    # checkpoint (mid-epoch if need be, resumable exactly), one evaluated history row,
    # a log line, and fit() returns normally (engine.stopped_by_budget)
    time_budget_s: float | None = setting(
        None,
        N_("stop cleanly after SECONDS of training: save, evaluate, report (resumable)"),
        flag="--time-budget",
        metavar="SECONDS",
    )
    # weights-only snapshots for checkpoint averaging (attnkit.training.averaging), in
    # out_dir/snapshots/step-<step>.pt with an index.json; the time counts over resumed
    # runs too
    snapshot_every_steps: int = setting(
        0, N_("also save the weights every N steps in OUT/snapshots (for averaging); 0: off")
    )
    snapshot_every_s: float = setting(
        0,
        N_("also save the weights every M minutes of training in OUT/snapshots; 0: off"),
        flag="--snapshot-every-minutes",
        parse=minutes,
        metavar="M",
    )
    keep_snapshots: int = setting(0, N_("keep only the newest N snapshots (0: all)"))
    # resumable checkpoints during an epoch (the Ctrl-C state), into out_dir: a crash
    # loses at most this much (attnkit.training.engine_stops; docs/checkpoints.md)
    save_every_minutes: float = setting(
        10.0, N_("also save a resumable checkpoint every M minutes during an epoch; 0: off"),
        metavar="M",
    )  # fmt: skip
    save_every_steps: int = setting(
        0, N_("also save a resumable checkpoint every N optimizer steps; 0: off"), metavar="N"
    )
    # the loss guard (attnkit.training.guard): a non-finite step is skipped, N in a row or
    # an explosion stop the run before anything more is saved
    max_nonfinite_steps: int = setting(
        5,
        N_("skip a step whose loss or gradient norm is NaN/inf; stop after N in a row; 0: off"),
        metavar="N",
    )
    divergence_factor: float = setting(
        10.0,
        N_(
            "stop when the (smoothed) training or the validation loss exceeds FACTOR times its "
            "best so far and its first value; 0: off"
        ),
        metavar="FACTOR",
    )

    def __post_init__(self) -> None:
        name = type(self).__name__
        _check_counts(self, name)
        _check_numbers(self, name)
        check_run_guards(self, name)
        _check_choices(self, name)
        _check_combinations(self, name)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - fields)
        if unknown:
            message = _("unknown {cls} keys {unknown}; expected some of {fields}")
            raise ValueError(
                message.format(cls=cls.__name__, unknown=unknown, fields=sorted(fields))
            )
        return cls(**d)


def _check_counts(config: EngineConfig, name: str) -> None:
    for field in ("epochs", "eval_every", "accum_steps"):
        positive_int(f"{name}.{field}", getattr(config, field))
    for field in ("log_every", "warmup_steps", "snapshot_every_steps", "keep_snapshots"):
        non_negative_int(f"{name}.{field}", getattr(config, field))
    optional(integer, f"{name}.seed", config.seed)


def _check_numbers(config: EngineConfig, name: str) -> None:
    learning_rate(f"{name}.lr", config.lr)
    optional(positive_number, f"{name}.clip", config.clip)
    for field in ("beta1", "beta2"):
        probability(f"{name}.{field}", getattr(config, field))
    non_negative_number(f"{name}.weight_decay", config.weight_decay)
    optional(positive_number, f"{name}.time_budget_s", config.time_budget_s)
    non_negative_number(f"{name}.snapshot_every_s", config.snapshot_every_s)


def check_run_guards(config: Any, name: str) -> None:
    """The periodic checkpoints' and the loss guard's fields of ``config`` (an
    ``EngineConfig`` or an ``LMTrainConfig``): counts >= 0, minutes >= 0, a factor of 0
    (off) or above 1."""
    for field in ("save_every_steps", "max_nonfinite_steps"):
        non_negative_int(f"{name}.{field}", getattr(config, field))
    non_negative_number(f"{name}.save_every_minutes", config.save_every_minutes)
    factor = non_negative_number(f"{name}.divergence_factor", config.divergence_factor)
    if 0 < factor <= 1:
        message = _(
            "{name}.divergence_factor must be 0 (off) or above 1 (a loss FACTOR "
            "times its best), got {factor!r}"
        )
        raise ValueError(message.format(name=name, factor=factor))


def _check_choices(config: EngineConfig, name: str) -> None:
    one_of(f"{name}.optimizer", config.optimizer, OPTIMIZERS)
    one_of(f"{name}.schedule", config.schedule, SCHEDULES)
    one_of(f"{name}.precision", config.precision, PRECISIONS)
    boolean(f"{name}.flat_params", config.flat_params)
    boolean(f"{name}.progress", config.progress)
    torch.device(config.device)  # raises on a malformed device string


def _check_combinations(config: EngineConfig, name: str) -> None:
    if config.schedule == "inverse_sqrt" and config.warmup_steps < 1:
        message = _("{name}.warmup_steps must be >= 1 with schedule='inverse_sqrt'")
        raise ValueError(message.format(name=name))
    if config.schedule == "linear_to_budget" and config.time_budget_s is None:
        message = _(
            "{name}.schedule='linear_to_budget' decays to 0 when the time budget "
            "runs out: it needs time_budget_s (--time-budget SECONDS)"
        )
        raise ValueError(message.format(name=name))
    if (config.snapshot_every_steps or config.snapshot_every_s) and config.out_dir is None:
        message = _(
            "{name}.snapshot_every_steps/snapshot_every_s write into out_dir/snapshots: set out_dir"
        )
        raise ValueError(message.format(name=name))
