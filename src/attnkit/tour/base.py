"""What every tour topic returns, the shared argument checks and figure helpers."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from attnkit._validate import boolean, non_negative_int, positive_int
from attnkit.i18n import _

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


def seed_summary(diffs: list[float]) -> dict[str, float]:
    """Paired differences over seeds, each positive when that seed agrees with the claim.

    ``agree``: how many are positive; ``p_no_effect``: the sign test's chance of that many
    or more if the claim had no effect (each sign a coin flip); ``p_fail``: the chance
    that a fresh set of as many seeds has one that disagrees, taking the differences as
    normal with the measured mean and standard deviation (the chance an assertion that
    every seed agrees fails by bad luck).
    """
    if not diffs or not all(isinstance(d, float | int) and math.isfinite(d) for d in diffs):
        raise ValueError(f"diffs must be a non-empty list of finite numbers, got {diffs!r}")
    n = len(diffs)
    agree = sum(d > 0 for d in diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    p_no_effect = sum(math.comb(n, k) for k in range(agree, n + 1)) / 2**n
    one = 0.5 * math.erfc(mean / (sd * math.sqrt(2))) if sd > 0 else float(mean <= 0)
    return {"n": n, "agree": agree, "mean": mean, "sd": sd, "min": min(diffs),
            "p_no_effect": p_no_effect, "p_fail": 1 - (1 - one) ** n}  # fmt: skip


def describe_seeds(s: dict[str, float], unit: str = "") -> str:
    """``seed_summary`` in words: "8/8 seeds (difference mean 0.35, sd 0.1, min 0.2; ...)",
    in the language in force (``unit`` is inserted as given: pass it translated)."""
    p_fail = "< 1e-6" if s["p_fail"] < 1e-6 else f"{s['p_fail']:.1g}"
    return _(
        "{agree}/{n} seeds (difference mean {mean:.3g}{unit}, sd {sd:.2g}, min {min:.3g}; "
        "chance of {agree}/{n} or more with no effect {p_no_effect:.2g}; chance that a new set "
        "of {n} seeds has one the other way {p_fail})"
    ).format(agree=s["agree"], n=s["n"], mean=s["mean"], unit=unit, sd=s["sd"], min=s["min"],
             p_no_effect=s["p_no_effect"], p_fail=p_fail)  # fmt: skip


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
