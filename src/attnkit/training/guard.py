"""The loss guard of a training run: non-finite steps are skipped, explosions stop the run.

Two rules, both on by default (``EngineConfig.max_nonfinite_steps`` and
``divergence_factor``; 0 turns each off):

- **non-finite steps**: an optimizer step whose loss (summed over its micro-batches and,
  under DDP, over the ranks) or gradient norm (of the all-reduced gradients) is NaN or
  infinite is not applied: no update, the step count and the schedule do not move, its
  loss is left out of the epoch's mean, a carried state starts afresh. Each is logged and
  counted in the history (``skipped_steps``); ``max_nonfinite_steps`` of them in a row
  stop the run (``TrainingDivergedError``).
- **explosions that stay finite**: the training loss per token, smoothed over about ten
  steps (an exponential mean, weight 0.1), or a validation loss, over ``divergence_factor``
  times its best so far *and* above its first value (where the run started: a loss that
  converges towards 0 and wobbles is not an explosion) stops the run.

A stop raises before anything more is saved, so the checkpoint folder keeps the last state
saved before it (the rule of ``docs/checkpoints.md``: a diverged state is never written).
The last update before a checkpoint has no loss of its own yet, so every checkpoint the
engine writes is checked first (``saving``): the loss of the weights to save on the last
batch (evaluation mode, RNG states put back) must be finite and not exploded.
Every rank computes the same numbers (the all-reduced loss and gradients), so all agree.
"""

from __future__ import annotations

import math
from typing import Any

from attnkit.i18n import _

__all__ = ["EMA_WEIGHT", "LossGuard", "TrainingDivergedError"]

EMA_WEIGHT = 0.1  # the newest step's share of the smoothed training loss


class TrainingDivergedError(RuntimeError):
    """The run stopped on non-finite steps or an exploding loss; nothing more was saved."""


class LossGuard:
    """The state of the two rules (see the module docstring); ``hints``: what to try."""

    def __init__(self, max_nonfinite: int, factor: float) -> None:
        self.max_nonfinite, self.factor = int(max_nonfinite), float(factor)
        self.in_a_row = 0  # non-finite steps in a row
        self.skipped = 0  # skipped steps since the last history row
        self.ema: float | None = None  # smoothed training loss per token
        self.best: float | None = None
        self.first: float | None = None

    @property
    def active(self) -> bool:
        """Whether a step's numbers need to be read (one host sync a step)."""
        return self.max_nonfinite > 0 or self.factor > 0

    def step(self, loss: float, tokens: float, grad_norm: float, where: str) -> str | None:
        """Judge one optimizer step; returns None to apply it, else the log line of its
        skip. Raises ``TrainingDivergedError`` (without hints: ``stop`` adds them)."""
        if math.isfinite(loss) and math.isfinite(grad_norm):
            self.in_a_row = 0
            self._train_loss(loss / max(tokens, 1.0), where)
            return None
        if self.max_nonfinite == 0:  # the check is off: applied as before
            return None
        self.in_a_row += 1
        self.skipped += 1
        what = _("loss {loss:g}, gradient norm {norm:g}").format(loss=loss, norm=grad_norm)
        if self.in_a_row >= self.max_nonfinite:
            message = _(
                "{count} steps in a row had a non-finite loss or gradient norm, up to "
                "{where} ({what}); none of them was applied"
            )
            raise TrainingDivergedError(message.format(count=self.in_a_row, where=where, what=what))
        message = _("{where}: non-finite {what}: the step is skipped ({count} in a row)")
        return message.format(where=where, what=what, count=self.in_a_row)

    def _train_loss(self, value: float, where: str) -> None:
        if self.factor == 0:
            return
        ema = value if self.ema is None else (1 - EMA_WEIGHT) * self.ema + EMA_WEIGHT * value
        self.ema = ema
        self.first = ema if self.first is None else self.first
        if self.best is not None and ema > self.factor * self.best and ema > self.first:
            message = _(
                "the training loss exploded at {where}: {loss:,.4g} per token (smoothed over "
                "~10 steps), over {factor:g} times its best so far ({best:.4g}) and "
                "above its start ({first:.4g})"
            )
            raise TrainingDivergedError(
                message.format(
                    where=where, loss=ema, factor=self.factor, best=self.best, first=self.first
                )
            )
        self.best = ema if self.best is None else min(self.best, ema)

    def saving(self, loss: float, tokens: float, where: str) -> None:
        """Before a checkpoint: raise when the weights about to be saved give a non-finite
        or exploded loss on the last batch (evaluation mode, nothing drawn or changed)."""
        value = loss / max(tokens, 1.0)
        if not math.isfinite(value) and self.max_nonfinite > 0:
            message = _(
                "the weights to save at {where} give a non-finite loss ({loss:g}) on the "
                "last batch; they were not saved"
            )
            raise TrainingDivergedError(message.format(where=where, loss=value))
        best, first = self.best, self.first
        if self.factor and best is not None and value > self.factor * best and value > first:
            message = _(
                "the weights to save at {where} give a loss of {loss:,.4g} per token on the "
                "last batch, over {factor:g} times the best so far ({best:.4g}) and above "
                "the start ({first:.4g}); they were not saved"
            )
            raise TrainingDivergedError(
                message.format(where=where, loss=value, factor=self.factor, best=best, first=first)
            )

    def validation(self, value: float | None, earlier: list[float], where: str) -> None:
        """Raise when the validation loss ``value`` exploded against the ``earlier`` ones."""
        if self.factor == 0 or value is None or math.isnan(value):
            return
        seen = [v for v in earlier if not math.isnan(v)]
        if not math.isfinite(value) and seen:
            message = _("the validation loss is {loss:g} at {where}")
            raise TrainingDivergedError(message.format(loss=value, where=where))
        if seen and value > self.factor * min(seen) and value > seen[0]:
            message = _(
                "the validation loss exploded at {where}: {loss:,.4g}, over {factor:g} "
                "times its best so far ({best:.4g}) and above the first ({first:.4g})"
            )
            raise TrainingDivergedError(
                message.format(
                    where=where, loss=value, factor=self.factor, best=min(seen), first=seen[0]
                )
            )

    def take_skipped(self) -> int:
        """The skipped steps since the last call (a history row's count)."""
        n, self.skipped = self.skipped, 0
        return n

    def state_dict(self) -> dict[str, Any]:
        return {"in_a_row": self.in_a_row, "skipped": self.skipped, "ema": self.ema,
                "best": self.best, "first": self.first}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        state = state or {}  # older checkpoints: a fresh guard
        self.in_a_row, self.skipped = int(state.get("in_a_row", 0)), int(state.get("skipped", 0))
        self.ema, self.best, self.first = (state.get(k) for k in ("ema", "best", "first"))


def hints(config: Any) -> str:
    """What to try after a stop, for this run's settings (an ``EngineConfig``)."""
    clip, warmup = config.clip, config.warmup_steps
    tips = [_("a lower --lr (this run: {lr:g})").format(lr=config.lr)]
    if clip is None:
        tips.append(_("clipping (--clip 1)"))
    else:
        tips.append(_("a smaller --clip (this run: {clip:g})").format(clip=clip))
    if config.schedule == "constant":
        tips.append(_("a warm-up (--schedule inverse_sqrt --warmup-steps 300)"))
    else:
        tips.append(_("a longer warm-up (this run: --warmup-steps {warmup})").format(warmup=warmup))
    if config.precision != "fp32":
        tips.append("--precision fp32")
    listed = tips[0]
    for tip in tips[1:]:
        listed = _("{first}, {second}").format(first=listed, second=tip)
    return _("Try {tips}; --resume goes on from the checkpoint kept").format(tips=listed)
