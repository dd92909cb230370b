"""Optimizers, learning-rate schedules and gradient clipping: one of each for every task.

``make_optimizer`` is the one factory (fused Adam where the device has the kernel,
foreach otherwise; foreach SGD); ``lr_at`` the one schedule; ``clip_gradients`` the one
global-norm clipping (foreach, no host sync unless the norm is asked for).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn

from attnkit._validate import one_of, positive_number, real
from attnkit.i18n import N_, _

__all__ = [
    "OPTIMIZERS",
    "SCHEDULES",
    "clip_gradients",
    "flatten_parameters",
    "learning_rate",
    "lr_at",
    "make_optimizer",
    "model_parameters",
    "sgd_update",
]

OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "inverse_sqrt", "linear_to_budget")


def model_parameters(model) -> list[Tensor]:
    """``model.parameters()`` for modules (DDP too), ``model.params`` for the book's scratch glue."""
    if isinstance(model, nn.Module):
        return list(model.parameters())
    params = getattr(model, "params", None)
    if params is None:
        message = _("expected an nn.Module or an object with .params, got {type}")
        raise TypeError(message.format(type=type(model)))
    return list(params)


def learning_rate(name: str, value: object) -> float:
    """``value`` as a float if it is a learning rate: a finite number > 0 (int or float)."""
    return real(name, value, above=0.0, expected=N_("a positive number"))


def make_optimizer(
    model_or_params,
    name: str = "adam",
    lr: float = 0.001,
    *,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
) -> torch.optim.Optimizer:
    """``'adam'`` (fused kernel where available, else foreach) or ``'sgd'`` (foreach).

    ``model_or_params``: a module, the book's scratch glue (``.params``) or an iterable
    of tensors.
    """
    one_of("optimizer", name, OPTIMIZERS)
    learning_rate("lr", lr)
    if isinstance(model_or_params, nn.Module) or hasattr(model_or_params, "params"):
        params = model_parameters(model_or_params)
    else:
        params = list(model_or_params)
    params = [p for p in params if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay, foreach=True)
    try:
        return torch.optim.Adam(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):  # no fused kernel for this device/dtype
        return torch.optim.Adam(params, lr=lr, betas=betas, weight_decay=weight_decay, foreach=True)


def lr_at(
    schedule: str, lr: float, warmup_steps: int, step: int, progress: float | None = None
) -> float:
    """Learning rate of optimizer step ``step`` (1-based).

    ``constant``: ``lr``. ``inverse_sqrt``: ``lr * sqrt(w) * min(step^-0.5, step * w^-1.5)``,
    the Transformer schedule scaled so that its peak, at ``step == warmup_steps``, is ``lr``.
    ``linear_to_budget``: ``lr * min(1, step / w) * (1 - progress)``, a linear warm-up then a
    linear decay that reaches 0 when the time budget runs out; ``progress`` is the fraction
    of the budget used, in [0, 1] (clamped).
    """
    if schedule == "constant":
        return lr
    one_of("schedule", schedule, SCHEDULES)
    step = max(step, 1)
    w = warmup_steps
    if schedule == "inverse_sqrt":
        return lr * math.sqrt(w) * min(step**-0.5, step * w**-1.5)
    if progress is None:
        raise ValueError(_("schedule 'linear_to_budget' needs progress (the budget fraction used)"))
    return lr * min(1.0, step / max(w, 1)) * (1.0 - min(max(progress, 0.0), 1.0))


def clip_gradients(model_or_params, max_norm: float) -> float:
    """Scale all gradients so their global L2 norm is at most ``max_norm``; return the norm
    before clipping (``torch.nn.utils.clip_grad_norm_`` with foreach kernels)."""
    positive_number("max_norm", max_norm)
    if isinstance(model_or_params, nn.Module) or hasattr(model_or_params, "params"):
        params = model_parameters(model_or_params)
    else:
        params = list(model_or_params)
    params = [p for p in params if p.grad is not None]
    if not params:
        return 0.0
    return float(nn.utils.clip_grad_norm_(params, max_norm, foreach=True))


def sgd_update(params: Iterable[Tensor], lr: float) -> Callable[[int], None]:
    """The book's ``sgd`` as an updater: ``p -= lr * p.grad / batch_size``, then zero grads."""
    learning_rate("lr", lr)
    params = list(params)

    @torch.no_grad()
    def update(batch_size: int) -> None:
        for p in params:
            if p.grad is not None:
                p -= lr * p.grad / batch_size
                p.grad.zero_()

    return update


def flatten_parameters(params: list[Tensor]) -> nn.Parameter:
    """Make ``params`` (one device and dtype) views of one flat parameter, and their
    gradients views of its ``.grad``; return the flat parameter.

    The optimizer, the clipping and the zeroing then touch one tensor instead of one per
    parameter (for small models a step's Python overhead is mostly that). Gradients stay
    allocated: zero them with ``flat.grad.zero_()``, not ``p.grad = None`` (autograd then
    accumulates into the views in place). An unused parameter gets a zero gradient, not
    None (Adam decays its moments instead of skipping it).
    """
    if not params:
        raise ValueError("flatten_parameters needs at least one parameter")
    devices, dtypes = {p.device for p in params}, {p.dtype for p in params}
    if len(devices) > 1 or len(dtypes) > 1:
        raise ValueError(
            f"flatten_parameters needs one device and dtype, got {sorted(map(str, devices))} "
            f"and {sorted(map(str, dtypes))}"
        )
    with torch.no_grad():
        flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
    flat.grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat.data[offset : offset + n].view_as(p)
        p.grad = flat.grad[offset : offset + n].view_as(p)
        offset += n
    return flat
