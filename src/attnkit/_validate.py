"""Argument checks shared by the public constructors: clear TypeError/ValueError messages."""

from __future__ import annotations

import numbers

__all__ = ["positive_int", "probability"]


def positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is a positive integer (numpy ints too, never bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def probability(name: str, value: object) -> float:
    """``value`` as a float if it is a dropout probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float in [0, 1), got {value!r} ({type(value).__name__})")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)
