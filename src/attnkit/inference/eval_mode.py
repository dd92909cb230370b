"""``evaluating(model)``: a model in eval mode for the duration of a ``with`` block.

Decoding needs every module in eval mode (no dropout). Switching a model that is already
there would not change its results, but ``train()``/``eval()`` is also the signal on which
``PrepackedLinear`` drops its oneDNN layout of the weight: calling ``model.eval()`` on
every decoding call made it lay the weights out again each time (~0.1 s a ``translate``
call for the base recipe's model). So the switch happens only when a module is
in training mode, and the model's mode (every module's, as ``model.train(mode)`` sets it)
is restored on the way out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from attnkit.i18n import _

__all__ = ["evaluating"]


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """Run the block with ``model`` in eval mode; afterwards ``model.train(was_training)``
    when it had to be switched, nothing when every module already was in eval mode.

    Raises:
        TypeError: ``model`` is not a ``torch.nn.Module``.
    """
    if not isinstance(model, nn.Module):
        message = _("model must be a torch.nn.Module, got {type}")
        raise TypeError(message.format(type=type(model).__name__))
    if not any(m.training for m in model.modules()):
        yield model
        return
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
