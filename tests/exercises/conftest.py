"""The ``values`` fixture: every test that asserts an exercise's claims runs twice, on the
experiment run at the small size here (``tests.shared_runs``, seed 0) and on the full-size
run recorded in ``docs/exercises.json`` (the answer book's own numbers). A claim the book
states must hold at the size it is stated for; a check that holds at one size only says so
with ``values.size``.

Both sizes are read the way the record stores them (``json_ready``: tuples and tensors as
lists, dict keys as strings, non-finite floats as strings), so one check reads both alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests import shared_runs

from attnkit.exercises.run import json_ready

RECORD = Path(__file__).resolve().parents[2] / "docs" / "exercises.json"
SIZES = ("small", "full")


@functools.cache
def full_record() -> dict:
    """The answer book's run: ``{exercise key: values}``."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    return {key: entry["values"] for key, entry in record["exercises"].items()}


@functools.cache
def _small(key: str) -> dict:
    return json.loads(json.dumps(json_ready(shared_runs.values(key))))


class SizedValues:
    """``values("8.5.4")``: that exercise's measured values at ``size`` ("small": run here;
    "full": the answer book's record). ``read`` (when given) sees every (key, values) read,
    and ``change`` may replace the values a test sees (the registry's perturbation check)."""

    def __init__(self, size: str, change: Callable[[str, dict], dict] | None = None) -> None:
        self.size = size
        self.small = size == "small"
        self.change = change
        self.read: list[str] = []

    def __call__(self, key: str) -> dict:
        if self.size == "small":
            found = _small(key)
        else:
            record = full_record()
            if key not in record:
                raise KeyError(f"{key} is not in {RECORD.name}: run tools/exercise_record.py {key}")
            found = record[key]
        self.read.append(key)
        return self.change(key, found) if self.change else found


@pytest.fixture(params=SIZES)
def values(request) -> SizedValues:
    return SizedValues(request.param)
