"""The task adapter interface of the training engine: ``Task``, the ``StepLoss`` it returns
and the ``TaskContext`` it is given.

A task says what a batch is and what its loss is (``batches``, ``loss``); the rest is
optional: evaluation metrics, the epoch line, plots, the fields a checkpoint records and
checks on resume, the data loader's RNG state and a state carried between batches. Every
hook receives a ``TaskContext``: the model to call, the device, the rank and world size,
the configuration, the progress and a sum over ranks; not the engine itself. The engine
is named by its protocol (``attnkit.training.engine_view.EngineView``): this module never
imports ``attnkit.training.engine``, which imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from attnkit.i18n import _

if TYPE_CHECKING:
    from attnkit.training.config import EngineConfig
    from attnkit.training.engine_view import EngineView

__all__ = ["StepLoss", "Task", "TaskContext"]


class TaskContext:
    """What a task sees of the engine that runs it (read-only, always current).

    ``net``: the module to call (DDP-wrapped under DDP); ``model``: the bare model (for
    its attributes, evaluation, saving); ``device``; ``rank`` and ``world_size``;
    ``config`` (the ``EngineConfig``); ``epoch`` (epochs done) and ``history`` (the rows
    so far); ``all_reduce(t)`` sums a tensor over ranks in place (nothing on one process).
    """

    __slots__ = ("_engine",)

    def __init__(self, engine: EngineView) -> None:
        self._engine = engine

    @property
    def net(self) -> nn.Module:
        return self._engine.net

    @property
    def model(self) -> nn.Module:
        return self._engine.model

    @property
    def device(self) -> torch.device:
        return self._engine.device

    @property
    def rank(self) -> int:
        return self._engine.rank

    @property
    def world_size(self) -> int:
        return self._engine.world_size

    @property
    def config(self) -> EngineConfig:
        return self._engine.config

    @property
    def epoch(self) -> int:
        return self._engine.epoch

    @property
    def history(self) -> dict[str, list[float]]:
        return self._engine.history

    def all_reduce(self, tensor: Tensor) -> None:
        self._engine.all_reduce(tensor)


@dataclass
class StepLoss:
    """What a task's ``loss`` returns for one batch (this rank's share of it).

    ``loss_sum``: () the summed loss, reported as ``sum / tokens`` over the epoch.
    ``tokens``: () or int, the count the report divides by.
    ``denominator``: the objective is ``loss_sum / denominator``; None = ``tokens`` (the
    token mean). Under DDP a tensor is this rank's count (summed over ranks, so the update
    is the global batch's mean) and a number is the global batch's (1: a sum).
    ``carry``: state handed to the next batch's ``loss`` (an RNN's hidden state), or None.
    """

    loss_sum: Tensor
    tokens: Tensor | int
    denominator: Tensor | float | None = None
    carry: Any = None


class Task:
    """A task adapter: the batches and the loss; optional evaluation, lines, checkpoint fields."""

    name = "task"

    def batches(self, epoch: int, rank: int, world_size: int):
        """The batches of 0-based ``epoch`` for ``rank`` (a function of the epoch and seed,
        or of the loader state that ``loader_state`` returns)."""
        raise NotImplementedError

    def loss(self, ctx: TaskContext, batch, carry) -> StepLoss:
        raise NotImplementedError

    def evaluate(self, ctx: TaskContext) -> dict[str, float]:
        """Metrics for the history row (collectives allowed: every rank calls it)."""
        return {}

    def epoch_line(self, ctx: TaskContext, row: dict[str, float]) -> str | None:
        line = _("epoch {epoch}/{epochs}: train loss {loss:.3f}, {speed:,.0f} tokens/s")
        return line.format(
            epoch=row["epoch"], epochs=ctx.config.epochs, loss=row["train_loss"],
            speed=row["tokens_per_s"],
        )  # fmt: skip

    def end_epoch(self, ctx: TaskContext, last: bool) -> None:
        """After the epoch's checkpoint (rank 0 only): plots and the like."""

    def checkpoint_config(self, ctx: TaskContext) -> dict[str, Any]:
        """JSON fields this task records in config.json (what rebuilds and resumes it)."""
        return {}

    def check_resume(self, config: dict[str, Any], directory: Path) -> None:
        """Raise ValueError when a checkpoint's config.json does not fit this run."""

    def loader_state(self) -> Any:
        """The data loader's RNG state (weights_only-loadable), or None."""
        return None

    def set_loader_state(self, state: Any) -> None:
        pass

    def save_carry(self, carry, ctx: TaskContext) -> Any:
        """The carried state to save mid-epoch (every rank calls it: may gather), or None."""
        return None

    def load_carry(self, saved, ctx: TaskContext) -> Any:
        return None
