"""One optimizer step of the engine: backward, accumulation, clipping, schedule (a part of
``Engine``).

Accumulation (``accum_steps=N``): ``train_step(batch, carry, first, last)`` is one micro-batch;
it backpropagates the raw ``loss_sum`` (over a number denominator: divided) and sums the
counts on the device; the group's last scales the gradients once by 1/total (foreach): the
update of the global token mean of the N batches. Leftover batches make a shorter last group;
under DDP the others run under ``no_sync``, the total rides on the stop flags' all-reduce.
Stops (signal, budget) wait for the group's end: resume stays exact.

``precision="bf16"``: ``task.loss`` of each step under ``torch.autocast`` (bfloat16); the
parameters, gradients and optimizer stay fp32; evaluation is untouched.

The loss guard (``attnkit.training.guard``): at the end of a group the step's loss (its
micro-batches', under DDP summed over the ranks on the stop flags' all-reduce), tokens and
gradient norm (of the all-reduced gradients: the same on every rank) are read (one host
sync a step while the guard is on); a non-finite one is not applied (``applied`` False).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from attnkit.training.guard import TrainingDivergedError
from attnkit.training.optim import lr_at

__all__ = ["GradientSteps"]


class GradientSteps:
    """The step methods of ``Engine`` (uses its attributes: task, params, optimizer...)."""

    def train_step(
        self, batch, carry=None, first: bool = True, last: bool = True
    ) -> tuple[Tensor, Tensor, Any]:
        """One micro-batch: the optimizer step when ``last`` (both True: one batch a step).

        Returns (summed loss, tokens, carry), detached, no host sync.
        """
        with self._autocast():
            out = self.task.loss(self.context, batch, carry)
        if out.loss_sum.dtype in (torch.bfloat16, torch.float16):
            out.loss_sum = out.loss_sum.float()
        tokens = torch.as_tensor(out.tokens, device=out.loss_sum.device)
        denominator = tokens if out.denominator is None else out.denominator
        if first and self._flat_grad is not None:
            self._flat_grad.zero_()
        elif first:
            for p in self.params:
                p.grad = None
        loss_sum = out.loss_sum.detach()
        if first:
            self._group_loss = (loss_sum, tokens)
        else:
            self._group_loss = (self._group_loss[0] + loss_sum, self._group_loss[1] + tokens)
        if not (first and last):
            self._accumulate(out.loss_sum, denominator, first, last)
        elif self.world_size > 1:
            # DDP averages the ranks' gradients: scale each rank's sum by world / the
            # global denominator (a tensor is this rank's count: summed over ranks; a
            # number is the global batch's). The same all-reduce tells every rank whether
            # any of them was asked to stop, so all stop after the same step (the one
            # host sync of a DDP step).
            counted = isinstance(denominator, Tensor)
            zero = tokens.new_zeros((), dtype=torch.float64)
            packed = self._agree(denominator.to(torch.float64) if counted else zero)
            total = packed[0].clamp(min=1) if counted else float(denominator)
            scale = self.world_size / total
            (out.loss_sum * scale).backward()
        elif out.denominator is None:  # the token mean; a batch without tokens adds nothing
            (out.loss_sum / tokens.clamp(min=1)).backward()
        elif isinstance(denominator, int | float) and denominator == 1:
            out.loss_sum.backward()
        else:
            (out.loss_sum / denominator).backward()
        self.applied = True
        if last:
            self.applied = self._optimizer_step()
        return loss_sum, tokens, out.carry

    def _agree(self, denominator: Tensor) -> Tensor:
        """All-reduce [denominator, stop asked, rank 0's budget used up, rank 0's budget
        fraction used, rank 0's checkpoint due, the group's loss and tokens] (DDP's host
        sync): every rank stops, saves and schedules by rank 0's clock, and judges the
        global loss."""
        main = self.is_main
        flags = [float(self._stop.requested), float(main and self._budget_used())]
        flags.append(self._budget_progress() if main else 0.0)
        flags.append(float(main and self._save_due_by_time()))
        loss, tokens = self._group_loss
        f64 = dict(device=denominator.device, dtype=torch.float64)
        counts = torch.stack([loss.to(**f64), torch.as_tensor(tokens).to(**f64)])
        packed = torch.cat([denominator.reshape(1), denominator.new_tensor(flags), counts])
        dist.all_reduce(packed)
        self._stop_now, self._budget_now = bool(packed[1] > 0), bool(packed[2] > 0)
        self._progress_now, self._save_now = float(packed[3]), bool(packed[4] > 0)
        self._group_loss = (packed[5], packed[6])
        return packed

    def _accumulate(self, loss_sum: Tensor, denominator, first: bool, last: bool) -> None:
        """Backward of one micro-batch of a group; the last one scales the summed gradients
        by (world /) the group's total denominator."""
        total, counted = self._group if not first else (None, False)
        if isinstance(denominator, Tensor):  # a count: summed, divided once at the end
            d = denominator.to(torch.float64).reshape(())
            total, counted, objective = (d if total is None else total + d), True, loss_sum
        else:  # a number: this batch's objective is loss_sum / denominator, summed
            objective = loss_sum if denominator == 1 else loss_sum / denominator
            if total is None:
                total = loss_sum.new_zeros((), dtype=torch.float64)
        self._group = (total, counted) if not last else (None, False)
        if not last:
            sync = self.net.no_sync() if self.world_size > 1 else contextlib.nullcontext()
            with sync:  # under DDP the gradients are all-reduced with the last one
                objective.backward()
            return
        if self.world_size > 1:
            total = self._agree(total)[0]
        objective.backward()
        grads = [p.grad for p in self.params if p.grad is not None]
        if grads and counted:
            torch._foreach_mul_(grads, self.world_size / total.clamp(min=1))
        elif grads and self.world_size > 1:
            torch._foreach_mul_(grads, float(self.world_size))

    def _optimizer_step(self) -> bool:
        """Clip, judge (the loss guard), schedule and step; False: the step was skipped."""
        cfg = self.config
        norm = None
        if cfg.clip is not None and self.params:
            norm = nn.utils.clip_grad_norm_(self.params, cfg.clip, foreach=True)
        if self._guard.active:
            grads = [p.grad for p in self.params if p.grad is not None]
            if norm is None and grads:
                norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            loss, tokens = self._group_loss
            f64 = dict(device=loss.device, dtype=torch.float64)
            norm = loss.new_zeros(()) if norm is None else norm
            numbers = torch.stack(
                [loss.to(**f64), torch.as_tensor(tokens).to(**f64), norm.to(**f64)]
            ).tolist()  # the one host sync of a guarded step
            try:
                line = self._guard.step(*numbers, self._where())
            except TrainingDivergedError as e:
                raise self._diverged(e) from None
            if line is not None:
                self.log(line)
                return False
        self.step += 1
        if cfg.schedule != "constant":
            progress = self._budget_progress() if self.world_size == 1 else self._progress_now
            lr = lr_at(cfg.schedule, cfg.lr, cfg.warmup_steps, self.step, progress)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        if isinstance(self.optimizer, torch.optim.Optimizer):
            self.optimizer.step()
        else:
            self.optimizer(1)
        return True
