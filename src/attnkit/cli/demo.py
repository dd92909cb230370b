"""``attnkit demo``: the main job (``make demo``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["register"]


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job: run the attention tour (until the translator)")
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=lambda a: _demo(Path(a.out), a.seed))


def _demo(out: Path, seed: int) -> int:
    from attnkit.cli.tour import run_tour

    return run_tour(out / "tour", seed)
