"""What every tour topic returns, the shared argument checks and figure helpers."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from attnkit._validate import boolean, non_negative_int, positive_int
from attnkit.tour.stats import describe_seeds, seed_summary

__all__ = [
    "TopicResult",
    "check_args",
    "check_tensor",
    "close_figures",
    "describe_seeds",
    "seed_summary",
    "timed",
    "topic",
]


@dataclass
class TopicResult:
    """One argument of the chapter, run: its finding (printed), the measured values
    (asserted by the tests) and its figures (name -> Figure, written by ``save``)."""

    name: str
    finding: str
    values: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    seconds: float = 0.0

    def save(self, out: str | Path) -> list[Path]:
        """Write every figure as ``out/<topic>_<figure>.png``; return the paths."""
        from attnkit.viz import save_figure

        out = Path(out)
        written = []
        for key, fig in self.figures.items():
            written.append(save_figure(fig, out / f"{self.name}_{key}.png"))
        return written

    def close(self) -> None:
        """Close the figures (a long run must not keep them all open)."""
        close_figures(self.figures)


def close_figures(figures: dict[str, Figure]) -> None:
    import matplotlib.pyplot as plt

    for fig in figures.values():
        plt.close(fig)


def check_tensor(name: str, t: object, dims: int | tuple[int, ...] | None = None) -> None:
    """TypeError unless ``t`` is a floating-point tensor; ValueError unless it has ``dims``."""
    import torch

    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, got {getattr(t, 'dtype', type(t))}"
        )
    allowed = (dims,) if isinstance(dims, int) else dims
    if allowed is not None and t.dim() not in allowed:
        raise ValueError(
            f"{name} must have {' or '.join(map(str, allowed))} dims, got shape {tuple(t.shape)}"
        )


def check_args(small: object, seed: object) -> None:
    """Every topic takes ``small`` (a bool: fast sizes) and ``seed`` (an int >= 0)."""
    boolean("small", small)
    non_negative_int("seed", seed)


def timed(fn: Callable[[], Any], repeat: int = 3, min_seconds: float = 0.005) -> float:
    """Seconds per call of ``fn()``: the best of ``repeat`` measurements, each averaging
    enough calls to last ``min_seconds`` (after one warm-up). The best is the least
    disturbed by other work on a shared machine."""
    positive_int("repeat", repeat)
    t0 = time.perf_counter()
    fn()
    calls = max(1, int(min_seconds / max(time.perf_counter() - t0, 1e-7)))
    best = float("inf")
    for _round in range(repeat):
        t0 = time.perf_counter()
        for _call in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def topic(fn: Callable[..., TopicResult]) -> Callable[..., TopicResult]:
    """Make ``fn(*, small, seed)`` a topic: arguments checked, one intra-op thread while it
    runs (small ops on a shared 2-core machine run up to 10x faster than with spinning
    threads; the previous count is restored), ``seconds`` set to its wall-clock time."""
    import torch

    @functools.wraps(fn)
    def run(*, small: bool = False, seed: int = 0) -> TopicResult:
        check_args(small, seed)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        t0 = time.perf_counter()
        try:
            result = fn(small=small, seed=seed)
        finally:
            torch.set_num_threads(threads)
        result.seconds = time.perf_counter() - t0
        return result

    return run
