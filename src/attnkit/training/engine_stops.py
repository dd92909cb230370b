"""When a run stops, saves or checks itself (a part of ``Engine``): the clock, the time
budget, periodic checkpoints, snapshots and the loss guard's stops.

Periodic checkpoints (``save_every_steps``, ``save_every_minutes``): after the optimizer step
that makes one due (``save_every_steps`` steps, or ``save_every_minutes`` of wall time,
since the last checkpoint of any kind), the next batch of the epoch starts with a
mid-epoch checkpoint: the state a Ctrl-C writes (batch index, partial totals over all
ranks, the carried state gathered over ranks, loader and RNG states), then training goes
on unchanged (a save draws no random number and changes no tensor). Under DDP rank 0's
clock decides, on the step's all-reduce, so every rank saves after the same step.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from attnkit.checkpoint import (
    CONFIG_NAME,
    CheckpointWriteError,
    check_writable,
    get_rng_state,
    set_rng_state,
)
from attnkit.i18n import _
from attnkit.training.guard import TrainingDivergedError, hints

__all__ = ["RunStops"]


class RunStops:
    """The stop/save methods of ``Engine`` (uses its attributes: config, history...)."""

    def _budget_used(self) -> bool:
        budget = self.config.time_budget_s
        start = self._fit_start
        return budget is not None and start is not None and time.perf_counter() - start >= budget

    def _budget_progress(self) -> float:
        """The fraction of the time budget this fit() has used (0 without a budget)."""
        budget, start = self.config.time_budget_s, self._fit_start
        if budget is None or start is None:
            return 0.0
        return min((time.perf_counter() - start) / budget, 1.0)

    def _should_stop(self) -> str | None:
        """ "signal", "budget" or None: one process: as soon as asked or used up; several:
        when the last step's all-reduce said so (rank 0's clock)."""
        if self.world_size == 1:
            asked, budget = self._stop.requested, self._budget_used()
        else:
            asked, budget = self._stop_now, self._budget_now
        return "signal" if asked else "budget" if budget else None

    def train_seconds(self) -> float:
        """Training wall seconds of this run's fit() calls and of the runs it resumes."""
        running = time.perf_counter() - self._fit_start if self._fit_start is not None else 0.0
        return self._seconds_before + running

    def _check_out_dir(self) -> None:
        """Rank 0 writes a probe into ``out_dir``; every rank raises when it could not."""
        error = None
        if self.is_main:
            try:
                check_writable(self.config.out_dir)
            except CheckpointWriteError as e:
                error = e
        if self.world_size > 1:
            failed = torch.tensor([float(error is not None)], device=self.device)
            dist.all_reduce(failed)
            if failed.item() and error is None:
                message = _("rank 0 cannot write in {out}")
                raise CheckpointWriteError(message.format(out=self.config.out_dir))
        if error is not None:
            raise error

    # ------------------------------------------------------------ periodic checkpoints
    def _save_due_by_time(self) -> bool:
        """This process's clock: ``save_every_minutes`` since the last checkpoint."""
        every = 60.0 * self.config.save_every_minutes
        return bool(every) and time.perf_counter() - self._last_save_time >= every

    def _save_due(self) -> bool:
        """After an optimizer step: is a periodic checkpoint due (every rank agrees)?"""
        if self.config.out_dir is None:
            return False
        every = self.config.save_every_steps
        by_steps = bool(every) and self.step - self._last_save_step >= every
        by_time = self._save_due_by_time() if self.world_size == 1 else self._save_now
        return by_steps or by_time

    def _saved_now(self) -> None:
        """A checkpoint was written: the periodic clock starts again."""
        self._last_save_time, self._last_save_step = time.perf_counter(), self.step

    def _mid_epoch_state(self, carry, totals: Tensor, seconds: float) -> None:
        """What a checkpoint mid-epoch adds (every rank calls it): the carried state and
        ``partial``, the totals summed over ranks (``totals`` stay this rank's)."""
        self._saved_carry = self.task.save_carry(carry, self.context)
        reduced = totals.clone()
        self.all_reduce(reduced)
        self.partial = (float(reduced[0]), float(reduced[1]), seconds)

    # ------------------------------------------------------------------ budget stops
    def _stop_on_budget(self, where: str) -> dict[str, list[float]]:
        """Mid-epoch: evaluate once (RNG states put back: resume stays exact), one history
        row and line, the checkpoint; then the log line. Epoch ends did theirs in _fit."""
        cfg = self.config
        elapsed = time.perf_counter() - self._fit_start
        if self.batch_in_epoch:
            loss, tokens, seconds = self.partial
            total, done = self._epoch_batches, self.batch_in_epoch
            epoch = round(self.epoch + done / total, 3) if total else self.epoch + 1
            row = {"epoch": epoch, "train_loss": loss / max(tokens, 1)}
            row["tokens_per_s"], row["seconds"] = tokens / max(seconds, 1e-9), seconds
            rng = get_rng_state()
            self._add_row(row, force=True)
            set_rng_state(rng)
            if cfg.out_dir is not None:
                self._save_checked()
        self.stopped_by_budget = True
        if cfg.out_dir:
            saved = _("checkpoint saved in {out}").format(out=cfg.out_dir)
        else:
            saved = _("no out_dir, not saved")
        line = _(
            "time budget of {budget:g} s used up after {elapsed:.0f} s: {where}, step {step}; "
            "{saved}"
        )
        fields = dict(budget=cfg.time_budget_s, elapsed=elapsed, where=where, step=self.step)
        self.log(line.format(**fields, saved=saved))
        return self.history

    def _snapshot(self) -> None:
        """After an optimizer step: a snapshot when one is due (rank 0 writes)."""
        snap, seconds = self._snapshots, self.train_seconds()
        if snap is not None and self.is_main and snap.due(self.step, seconds):
            snap.write(
                self.model.state_dict(), self.step, self.epoch + 1, self.batch_in_epoch, seconds
            )

    # ------------------------------------------------------------------ the guard
    def _save_checked(self) -> None:
        """An automatic checkpoint: the loss guard's look at the weights to save (their loss
        on the last batch in evaluation mode and fp32, summed over the ranks: nothing drawn,
        nothing changed), then ``save``."""
        if self._guard.active and self._probe is not None:
            batch, carry = self._probe
            model, rng = self.model, get_rng_state()
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():  # fp32 (bf16 runs too): one forward
                    out = self.task.loss(self.context, batch, carry)
            finally:
                model.train(was_training)
                set_rng_state(rng)
            f64 = dict(device=self.device, dtype=torch.float64)
            numbers = torch.stack([out.loss_sum.to(**f64), torch.as_tensor(out.tokens).to(**f64)])
            self.all_reduce(numbers)
            where = _("step {step} (epoch {epoch})").format(
                step=self.step, epoch=self.epoch + int(self.batch_in_epoch > 0)
            )
            try:
                self._guard.saving(*numbers.tolist(), where)
            except TrainingDivergedError as e:
                raise self._diverged(e) from None
        self.save()

    def _where(self) -> str:
        of = f"/{self._epoch_batches}" if self._epoch_batches else ""
        where = _("step {step} (epoch {epoch}, batch {batch}{of})")
        return where.format(
            step=self.step + 1, epoch=self.epoch + 1, batch=self.batch_in_epoch + 1, of=of
        )

    def _diverged(self, error: TrainingDivergedError) -> TrainingDivergedError:
        """The guard's error with what the folder holds and what to try."""
        cfg = self.config
        out = cfg.out_dir
        if out is None:
            kept = _("No out_dir: nothing is saved")
        elif (Path(out) / CONFIG_NAME).is_file():
            kept = _(
                "{out} keeps its last good checkpoint (nothing after it was saved: "
                "eval, run, serve and --resume read that one)"
            ).format(out=out)
        else:
            kept = _("Nothing was saved in {out}").format(out=out)
        message = _("training stopped: {error}. {kept}. {hints}")
        return TrainingDivergedError(message.format(error=error, kept=kept, hints=hints(cfg)))
