"""The training engine: one loop for every task, single or multi-process.

A task adapter (``Task``) says what a batch is and what its loss is; the engine does the rest:

    engine = Engine(model, task, EngineConfig(epochs=10, lr=1e-3, out_dir="runs/x"))
    engine.resume()              # optional: continue a stopped run from out_dir, exactly
    history = engine.fit()

Per step (``train_step``): ``task.loss`` gives a ``StepLoss`` (summed loss, token count,
optional denominator and carried state); the engine backpropagates
``loss_sum / denominator`` (the token mean by default), clips the global gradient norm
with foreach kernels, sets the scheduled learning rate and steps the optimizer (fused Adam,
foreach SGD, or a callable updater such as the book's scratch ``sgd``). Nothing in a step
waits for the device: totals stay tensors until the epoch ends.

Per epoch: ``task.evaluate`` (every ``eval_every`` epochs and after the last), one history
row and one printed line (``task.epoch_line``), a checkpoint (every epoch, when ``out_dir``
is set) and ``task.end_epoch`` (plots). A tqdm bar runs during the epoch only when stdout
and stderr are terminals; a piped log gets the epoch lines alone.

Distributed (torch.distributed initialized, or rank/world_size given): the model is wrapped
in DDP; each rank's objective is scaled so the update is that of the *global* batch
(``loss_sum * world / sum of denominators``), and the same tiny all-reduce carries the stop
flag, so every rank stops after the same step. Only rank 0 prints and writes.

Ctrl-C/SIGTERM: the current step finishes, a mid-epoch checkpoint is saved (batch index,
partial totals, the carried state gathered over ranks, the loader's RNG state at the
epoch's start, torch/Python/NumPy RNG states) and ``TrainingInterrupted`` is raised;
``resume`` continues bit-exactly, with any number of processes. A second Ctrl-C stops at once.

Accumulation (``accum_steps``) and bf16 autocast (``precision``): see
``attnkit.training.engine_step``; checkpoints: ``attnkit.training.engine_state``.

``time_budget_s`` (seconds from the start of ``fit``; under DDP rank 0's clock, on the same
all-reduce): after the step that uses it up, the run stops as after a Ctrl-C but evaluates
once (RNG states put back), adds a history row and its line, logs ``time budget of 1800 s
used up after 1801 s: epoch 3, batch 120/400, step 4321; checkpoint saved in DIR`` and
returns the history (``stopped_by_budget``). Snapshots (``snapshot_every_steps/_s``,
``keep_snapshots``): weights in ``out_dir/snapshots/`` (``attnkit.training.snapshots``) for
``attnkit.training.averaging``; the seconds go on over resumed runs (``train_seconds``).

Periodic checkpoints (``save_every_minutes``, default 10, ``save_every_steps``): the state
of a Ctrl-C save, written mid-epoch after the step that makes one due, training going on
unchanged (``attnkit.training.engine_stops``): a crash loses at most that much. The loss
guard (``max_nonfinite_steps``, ``divergence_factor``; ``attnkit.training.guard``): a step
with a non-finite loss or gradient norm is skipped (logged, ``skipped_steps`` in the
history), several in a row or an exploding loss stop the run with ``TrainingDivergedError``
before anything more is saved: the folder keeps its last good checkpoint. A save that
fails raises ``CheckpointWriteError`` and leaves the previous checkpoint as it was
(``attnkit.checkpoint``). See docs/checkpoints.md.
"""

from __future__ import annotations

import contextlib
import sys
import time

import torch
import torch.distributed as dist
from torch import Tensor, nn

from attnkit._validate import index, positive_int
from attnkit.checkpoint import CheckpointWriteError
from attnkit.cpu_memory import keep_freed_memory
from attnkit.i18n import _
from attnkit.training.config import EngineConfig
from attnkit.training.engine_state import EngineState
from attnkit.training.engine_step import GradientSteps
from attnkit.training.engine_stops import RunStops
from attnkit.training.guard import LossGuard, TrainingDivergedError
from attnkit.training.optim import (
    flatten_parameters,
    make_optimizer,
    model_parameters,
)
from attnkit.training.snapshots import Snapshots
from attnkit.training.stop import StopSignals
from attnkit.training.task import StepLoss, Task, TaskContext

__all__ = [
    "CheckpointWriteError",
    "Engine",
    "EngineConfig",
    "StepLoss",
    "Task",
    "TaskContext",
    "TrainingDivergedError",
    "TrainingInterrupted",
    "distributed_rank",
]


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by ``Engine.fit`` after Ctrl-C/SIGTERM, once the checkpoint is saved."""


class _BudgetUsedUpError(Exception):
    """Inside ``fit``: the time budget is used up (``fit`` returns normally)."""


def distributed_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size): the given ones, else torch.distributed's, else (0, 1). Checked."""
    initialized = dist.is_available() and dist.is_initialized()
    if rank is None:
        rank = dist.get_rank() if initialized else 0
    if world_size is None:
        world_size = dist.get_world_size() if initialized else 1
    world_size = positive_int("world_size", world_size)
    rank = index("rank", rank, world_size)
    if world_size > 1 and not initialized:
        message = _("world_size={world_size} needs torch.distributed to be initialized")
        raise RuntimeError(message.format(world_size=world_size))
    return rank, world_size


def _mark_last(batches):
    """(batch, is the last one) for each batch of an iterable without a length."""
    it, previous = iter(batches), _NONE
    for batch in it:
        if previous is not _NONE:
            yield previous, False
        previous = batch
    if previous is not _NONE:
        yield previous, True


_NONE = object()


def _show_bars() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


class Engine(GradientSteps, EngineState, RunStops):
    """Train ``model`` on ``task`` (see the module docstring).

    ``optimizer``: an optimizer, a callable ``updater(batch_size)`` (called with 1: the
    objective is already a mean), or None for ``make_optimizer(config...)``.
    """

    def __init__(
        self,
        model,
        task: Task,
        config: EngineConfig,
        *,
        optimizer=None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if not isinstance(task, Task):
            message = _("task must be an attnkit Task, got {type}")
            raise TypeError(message.format(type=type(task).__name__))
        if not isinstance(config, EngineConfig):
            message = _("config must be an EngineConfig, got {type}")
            raise TypeError(message.format(type=type(config).__name__))
        self.config, self.task = config, task
        self.context = TaskContext(self)  # what the task's hooks see
        self.rank, self.world_size = distributed_rank(rank, world_size)
        self.is_main = self.rank == 0
        self.device = torch.device(config.device)
        if self.device.type == "cpu":
            keep_freed_memory()  # no page faults for re-used step memory (attnkit.cpu_memory)
        if isinstance(model, nn.Module):
            model = model.to(self.device)
        self.model = model
        self.net = model
        if self.world_size > 1:
            if not isinstance(model, nn.Module):
                message = _("multi-process training needs an nn.Module, got {type}")
                raise TypeError(message.format(type=type(model).__name__))
            self.net = nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights
        self.params = [p for p in model_parameters(model) if p.requires_grad]
        self._flat_grad = None  # with flat_params: the one gradient buffer
        if config.flat_params and optimizer is None and self.world_size == 1 and self.params:
            flat = flatten_parameters(self.params)
            self.params, self._flat_grad = [flat], flat.grad
        # built from the config: its learning rate is config.lr's, resumed runs included
        self._own_optimizer = optimizer is None
        if optimizer is None:
            optimizer = make_optimizer(
                self.params,
                config.optimizer,
                config.lr,
                betas=(config.beta1, config.beta2),
                weight_decay=config.weight_decay,
            )
        elif not (isinstance(optimizer, torch.optim.Optimizer) or callable(optimizer)):
            message = _("optimizer must be an Optimizer or a callable, got {optimizer!r}")
            raise TypeError(message.format(optimizer=optimizer))
        elif not isinstance(optimizer, torch.optim.Optimizer) and config.schedule != "constant":
            message = _(
                "schedule={schedule!r} sets an optimizer's learning rate; a callable "
                "updater has none: pass an Optimizer, or schedule='constant'"
            )
            raise ValueError(message.format(schedule=config.schedule))
        self.optimizer = optimizer
        self.step = 0  # optimizer steps done
        self.epoch = 0  # epochs done
        self.batch_in_epoch = 0  # batches of the current epoch done (> 0 after an interrupt)
        self.partial = (0.0, 0.0, 0.0)  # loss sum, tokens (all ranks), seconds of those batches
        self.carry = None  # carried state to start the interrupted epoch from (resume)
        self.history: dict[str, list[float]] = {
            "epoch": [], "train_loss": [], "tokens_per_s": [], "seconds": [], "skipped_steps": []
        }  # fmt: skip
        self._saved_carry = None  # gathered at an interrupt, for the checkpoint
        self._epoch_loader_state = None  # loader state at the start of the current epoch
        self._stop = StopSignals(verbose=self.is_main)  # its handlers are on during fit()
        self._stop_now = False  # the same, agreed by every rank at the end of a step
        self._budget_now = False  # rank 0's time budget used up, agreed the same way
        self._progress_now = 0.0  # rank 0's budget fraction used, agreed the same way
        self._bar = None
        self._stopping_at_end = None  # "signal"/"budget" during the last epoch's last step
        self.stopped_by_budget = False  # the last fit() stopped on its time budget
        self._fit_start = None  # perf_counter() at the start of fit()
        self._seconds_before = 0.0  # training seconds of earlier fit() calls and runs
        self._epoch_batches = None  # the current epoch's batch count, when known
        self._group = (None, False)  # accumulation: summed denominators, any counted
        self._snapshots = None  # a Snapshots during fit() when they are asked for
        self._guard = LossGuard(config.max_nonfinite_steps, config.divergence_factor)
        self.applied = True  # the last optimizer step was applied (not skipped by the guard)
        self._group_loss = None  # the current group's (loss sum, tokens), on the device
        self._probe = None  # (the last batch, its carried state in): checked before a save
        self._save_now = False  # rank 0's periodic checkpoint due, agreed by every rank
        self._last_save_time, self._last_save_step = 0.0, 0  # the periodic clock
        bf16 = dict(device_type=self.device.type, dtype=torch.bfloat16)
        self._autocast = contextlib.nullcontext
        if config.precision == "bf16":
            self._autocast = lambda: torch.autocast(**bf16)

    # ------------------------------------------------------------------ training
    def train_epoch(self) -> dict[str, float]:
        """Train one epoch; returns its mean loss, tokens (all ranks), seconds and tokens/s."""
        epoch, skip = self.epoch, self.batch_in_epoch  # skip > 0: resuming this epoch
        self._epoch_loader_state = self.task.loader_state()
        batches = self.task.batches(epoch, self.rank, self.world_size)
        carry, self.carry = (self.carry if skip else None), None
        if isinstance(self.model, nn.Module):
            self.model.train()
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss sum, tokens
        group = torch.zeros_like(totals)  # the current group's (added when its step is applied)
        if skip and self.is_main:  # the all-reduce below counts rank 0's share once
            totals += torch.tensor(self.partial[:2], dtype=torch.float64, device=self.device)
        seconds_before = self.partial[2] if skip else 0.0
        total = len(batches) if hasattr(batches, "__len__") else None
        self._epoch_batches, n = total, self.config.accum_steps
        if n > 1 and total is None:  # a look-ahead finds the last batch (its group's end)
            batches = _mark_last(batches)
        bar = None
        if self.config.progress and self.is_main and _show_bars():
            from tqdm import tqdm

            desc = _("epoch {epoch}/{epochs}").format(epoch=epoch + 1, epochs=self.config.epochs)
            bar = tqdm(
                total=total, initial=skip, desc=desc,
                unit="batch", leave=False, dynamic_ncols=True,
            )  # fmt: skip
        self._bar = bar
        stopping = saving = False
        start = time.perf_counter()
        try:
            for i, batch in enumerate(batches):
                if i < skip:  # the batches of an epoch are a function of its loader state
                    continue
                if stopping or saving:  # asked or due at the previous step, mid-epoch
                    seconds = seconds_before + time.perf_counter() - start
                    self._mid_epoch_state(carry, totals, seconds)
                if stopping:
                    of = f"/{total}" if total is not None else ""
                    stop = TrainingInterrupted if stopping == "signal" else _BudgetUsedUpError
                    where = _("epoch {epoch}, batch {batch}{of}")
                    raise stop(where.format(epoch=epoch + 1, batch=i, of=of))
                if saving:  # a periodic checkpoint: the state a stop writes, then on
                    self._save_checked()
                    saving = False
                j = i - skip  # groups of n from here (a stop comes at a group's end)
                if n == 1:
                    last = True
                elif total is None:
                    batch, at_end = batch
                    last = at_end or j % n == n - 1
                else:
                    last = j % n == n - 1 or i == total - 1
                self._probe = (batch, carry)  # what the guard looks at before a save
                loss_sum, tokens, carry = self.train_step(batch, carry, j % n == 0, last)
                group[0] += loss_sum
                group[1] += tokens
                self.batch_in_epoch = i + 1
                if last:
                    if self.applied:
                        totals += group
                    else:  # skipped (non-finite): left out; a carried state starts afresh
                        carry = None
                    group.zero_()
                    stopping = self._should_stop()
                    saving = self._save_due()
                    if self.applied:  # a skipped step changed no weight
                        self._snapshot()
                if bar is not None:
                    bar.update(1)
                    if i % 10 == 9:  # a host sync (the guard has one a step), terminals only
                        done = float(totals[1])
                        bar.set_postfix(
                            loss=f"{float(totals[0]) / max(done, 1):.3f}",
                            tok_s=f"{done / (time.perf_counter() - start):.0f}",
                            refresh=False,
                        )
        finally:
            if bar is not None:
                bar.close()
            self._bar = None
        self.all_reduce(totals)
        seconds = seconds_before + time.perf_counter() - start
        if float(totals[1]) == 0:
            message = _("epoch {epoch} had no batches with tokens; is the data empty?")
            raise ValueError(message.format(epoch=epoch + 1))
        self.epoch += 1
        self.batch_in_epoch, self.partial = 0, (0.0, 0.0, 0.0)
        self._stopping_at_end = stopping
        tokens = float(totals[1])
        return {
            "loss": float(totals[0]) / tokens,
            "tokens": tokens,
            "seconds": seconds,
            "tokens_per_s": tokens / max(seconds, 1e-9),
        }

    def fit(self) -> dict[str, list[float]]:
        """Train until ``config.epochs`` epochs are done (continuing after ``resume``), or
        until the time budget is used up (``stopped_by_budget``).

        Raises ``CheckpointWriteError`` (an OSError) when ``out_dir`` cannot be written (at
        the start) or a save fails, ``TrainingDivergedError`` when the loss guard stops the run.
        """
        cfg = self.config
        fresh = self.step == 0 and self.epoch == 0 and self.batch_in_epoch == 0
        if fresh and cfg.seed is not None:
            torch.manual_seed(cfg.seed)
        if self.epoch > cfg.epochs or (self.epoch == cfg.epochs and self.batch_in_epoch):
            message = _("the run is at epoch {epoch}, past epochs={epochs}")
            raise ValueError(message.format(epoch=self.epoch, epochs=cfg.epochs))
        if cfg.out_dir is not None:  # an --out that is not writable: now, not at a save
            self._check_out_dir()
        self._fit_start, self.stopped_by_budget = time.perf_counter(), False
        self._saved_now()  # the periodic checkpoints' clock starts
        if cfg.snapshot_every_steps or cfg.snapshot_every_s:
            every, seconds = (cfg.snapshot_every_steps, cfg.snapshot_every_s), self._seconds_before
            self._snapshots = Snapshots(cfg.out_dir, *every, cfg.keep_snapshots, seconds, fresh)
        try:
            with self._stop:
                return self._fit()
        except TrainingInterrupted as e:
            if cfg.out_dir is not None:
                self._save_checked()
                where = _(
                    "stopped at {where}; checkpoint saved in {out}, --resume continues from there"
                ).format(where=e, out=cfg.out_dir)
            else:
                where = _("stopped at {where}").format(where=e)
            self.log(f"\n{where}")
            raise
        except _BudgetUsedUpError as e:
            return self._stop_on_budget(str(e))
        finally:
            self._stop_now = self._budget_now = False
            self._seconds_before, self._fit_start = self.train_seconds(), None
            self._snapshots = None

    def _add_row(self, row: dict[str, float], force: bool = False) -> None:
        """Evaluate, append the history row, print its line (every log_every-th, or forced)."""
        row.update(self.task.evaluate(self.context))
        row["skipped_steps"] = self._guard.take_skipped()
        try:  # an exploded validation loss stops the run before this state is saved
            where = _("epoch {epoch}").format(epoch=row["epoch"])
            self._guard.validation(row.get("val_loss"), self.history.get("val_loss", []), where)
        except TrainingDivergedError as e:
            raise self._diverged(e) from None
        for key, value in row.items():
            self.history.setdefault(key, []).append(value)
        every = self.config.log_every
        if every and (len(self.history["epoch"]) % every == 0 or force):
            line = self.task.epoch_line(self.context, row)
            if line and row["skipped_steps"]:
                line += _(" ({count} non-finite step(s) skipped)").format(
                    count=row["skipped_steps"]
                )
            if line:
                self.log(line)

    def _fit(self) -> dict[str, list[float]]:
        cfg = self.config
        while self.epoch < cfg.epochs:
            stats = self.train_epoch()
            last = self.epoch == cfg.epochs
            budget = self._stopping_at_end == "budget" and not last
            if self.epoch % cfg.eval_every == 0 or last or budget:
                row = {"epoch": self.epoch, "train_loss": stats["loss"]}
                row["tokens_per_s"] = stats["tokens_per_s"]
                row["seconds"] = stats["seconds"]
                self._add_row(row, force=last or budget)
            if cfg.out_dir is not None:
                self._save_checked()  # every epoch, evaluated or not
            if self.is_main:
                self.task.end_epoch(self.context, last)
            if self._stopping_at_end == "signal" and not last:  # asked in the last batch
                raise TrainingInterrupted(_("the end of epoch {epoch}").format(epoch=self.epoch))
            if budget:
                raise _BudgetUsedUpError(_("the end of epoch {epoch}").format(epoch=self.epoch))
        return self.history

    def log(self, line: str) -> None:
        """Print on rank 0 (above the bar when one is shown)."""
        if not self.is_main:
            return
        if self._bar is not None:
            self._bar.write(line)
        else:
            print(line, flush=True)

    def all_reduce(self, t: Tensor) -> None:
        """Sum ``t`` over the ranks in place (nothing on one process)."""
        if self.world_size > 1:
            dist.all_reduce(t)
