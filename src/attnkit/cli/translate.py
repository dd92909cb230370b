"""``attnkit translate``: placeholder until its issue lands (owned by its issue's work)."""

from __future__ import annotations

__all__ = ["register"]


def register(sub) -> None:
    sub.add_parser("translate", help="(not yet available)")
