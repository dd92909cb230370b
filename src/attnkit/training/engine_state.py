"""What an engine checkpoint holds, and saving and resuming it (a part of ``Engine``).

The trainer state (``state_dict``): optimizer, step, epoch and position in it, the partial
totals and carried state of an interrupted epoch, the loader's RNG state at the epoch's
start, every rank's torch/Python/NumPy RNG states and the training seconds so far. With the
model's weights and ``checkpoint_config`` (the task's fields, position, history) it is one
checkpoint folder (``attnkit.checkpoint``); ``resume`` continues from it exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from attnkit.checkpoint import (
    CONFIG_NAME,
    CheckpointWriteError,
    get_rng_state,
    load_checkpoint,
    load_model_state,
    save_checkpoint,
    set_rng_state,
)
from attnkit.i18n import _

__all__ = ["EngineState"]


class EngineState:
    """Checkpoint methods of ``Engine`` (uses its attributes: model, task, optimizer...)."""

    def state_dict(self) -> dict[str, Any]:
        """The trainer state of a checkpoint (weights_only-loadable)."""
        mid_epoch = self.batch_in_epoch > 0
        optimizer = self.optimizer
        return {
            "optimizer": optimizer.state_dict()
            if isinstance(optimizer, torch.optim.Optimizer)
            else None,
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "partial": list(self.partial) if mid_epoch else [0.0, 0.0, 0.0],
            "carry": self._saved_carry if mid_epoch else None,
            # the batches of an interrupted epoch are replayed from its start
            "loader": self._epoch_loader_state if mid_epoch else self.task.loader_state(),
            "rng": get_rng_state(),  # this rank's (save adds every rank's)
            "train_seconds": self.train_seconds(),  # over resumed runs too (snapshot clock)
            "guard": self._guard.state_dict(),  # the loss guard's smoothed loss and counts
        }

    def load_state_dict(self, state: dict[str, Any], history: dict[str, list] | None) -> None:
        if isinstance(self.optimizer, torch.optim.Optimizer) and state.get("optimizer"):
            self.optimizer.load_state_dict(state["optimizer"])  # its lr too: the saved one
            if self._own_optimizer:  # the config's lr (a resumed run's --lr) wins; a
                for group in self.optimizer.param_groups:  # schedule sets it every step
                    group["lr"] = self.config.lr
        self.step, self.epoch = int(state["step"]), int(state["epoch"])
        self.batch_in_epoch = int(state.get("batch_in_epoch", 0))
        self._seconds_before = float(state.get("train_seconds", 0.0))  # 0: older checkpoints
        partial = [float(x) for x in state.get("partial", (0.0, 0.0, 0.0))]
        self.partial = (*partial, 0.0, 0.0, 0.0)[:3]
        if history is not None:
            self.history = {k: list(v) for k, v in history.items()}
            rows = len(self.history.get("epoch", []))  # older checkpoints: none skipped
            self.history.setdefault("skipped_steps", [0] * rows)
        self._guard.load_state_dict(state.get("guard"))
        per_rank = state.get("rng_per_rank")
        # each rank its own RNG when the process count is the same; rank 0's otherwise
        same_world = isinstance(per_rank, list | tuple) and len(per_rank) == self.world_size
        set_rng_state(per_rank[self.rank] if same_world else state["rng"])
        if state.get("loader") is not None:
            self.task.set_loader_state(state["loader"])
        saved = state.get("carry")
        self.carry = self.task.load_carry(saved, self.context) if saved is not None else None
        self._saved_carry = saved

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            "task": self.task.name,
            **self.task.checkpoint_config(self.context),
            "epoch": self.epoch,
            "step": self.step,
            "batch_in_epoch": self.batch_in_epoch,
            "history": self.history,
        }

    def save(self, directory: str | Path | None = None) -> Path:
        """Write a checkpoint (rank 0 writes; every rank calls it and waits for it).

        A failed write (``CheckpointWriteError``: a full disk, a folder that is not
        writable) leaves the previous checkpoint as it was; under DDP every rank raises.
        """
        directory = Path(directory or self.config.out_dir or "")
        if not str(directory) or directory == Path():
            raise ValueError(_("no checkpoint directory: pass one or set the config's out_dir"))
        if not isinstance(self.model, nn.Module):
            raise TypeError(_("only nn.Module models can be saved in a checkpoint"))
        rng_per_rank = None
        if self.world_size > 1:  # ranks draw different amounts (their batches differ)
            rng_per_rank = [None] * self.world_size
            dist.all_gather_object(rng_per_rank, get_rng_state())
        error = None
        if self.is_main:
            state = self.state_dict()
            state["rng_per_rank"] = rng_per_rank
            try:
                save_checkpoint(directory, self.checkpoint_config(), self.model.state_dict(), state)
            except (OSError, ValueError, TypeError) as e:
                error = e
        if self.world_size > 1:  # no rank goes on (and reads it) before it is written,
            failed = torch.tensor([float(error is not None)], device=self.device)
            dist.all_reduce(failed)  # and every rank learns whether it was
            if failed.item() and error is None:
                message = _(
                    "rank 0 could not save the checkpoint in {directory} (its error says why)"
                )
                raise CheckpointWriteError(message.format(directory=directory))
        if error is not None:
            raise error
        self._saved_now()
        return directory

    def resume(self, directory: str | Path | None = None) -> bool:
        """Load weights, optimizer, RNG and loader states, position and history.

        Returns False when ``directory`` (default ``out_dir``) holds no checkpoint yet.
        Raises ValueError when the checkpoint does not fit this task (``check_resume``).
        """
        directory = Path(directory or self.config.out_dir or "")
        if not str(directory) or directory == Path():
            raise ValueError(_("no checkpoint directory: pass one or set the config's out_dir"))
        if not (directory / CONFIG_NAME).exists():
            return False
        ck = load_checkpoint(directory, map_location=self.device, task=self.task.name)
        self.task.check_resume(ck.config, directory)
        if ck.trainer_state is None:
            if "averaged" in ck.config:
                message = _(
                    "checkpoint {directory} (an average of snapshots) has no trainer state "
                    "to resume from"
                )
            else:
                message = _("checkpoint {directory} has no trainer state to resume from")
            raise ValueError(message.format(directory=directory))
        load_model_state(self.model, ck.model_state, directory)
        self.load_state_dict(ck.trainer_state, ck.config.get("history"))
        return True
