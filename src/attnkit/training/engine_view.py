"""``EngineView``: what a task's ``TaskContext`` reads of the engine that runs it.

A ``typing.Protocol``, so ``attnkit.training.task`` names the engine's shape without
importing the engine (which imports the task): the two modules do not import each other,
not even for annotations. ``Engine`` satisfies it structurally.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

    from attnkit.training.config import EngineConfig

__all__ = ["EngineView"]


class EngineView(Protocol):
    """The attributes and the one method of a running engine that a task may see."""

    net: nn.Module
    model: nn.Module
    device: torch.device
    rank: int
    world_size: int
    config: EngineConfig
    epoch: int
    history: dict[str, list[float]]

    def all_reduce(self, t: Tensor) -> None: ...
