"""Every claim an answer lists is asserted, and the assertion depends on the measurement.

The claim tests (every ``test_*`` in the group files, which take the ``values`` fixture)
run here once on the small run with their reads recorded: a claim's value key must be read
by some test. Then, for each claim, those tests run again with that one value perturbed
(numbers negated and scaled, booleans flipped, strings changed, lists reversed or cut, one
entry of a dict at a time): at least one perturbation must make a test fail. A claim whose
tests pass whatever its value is an assertion that could not fail.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.exercises.conftest import SizedValues

from attnkit.exercises import exercises, find_exercise

HERE = Path(__file__).parent
GROUP_FILES = ("test_sequence.py", "test_rnn.py", "test_gated.py", "test_seq2seq.py",
               "test_attention.py", "test_transformer.py")  # fmt: skip
EVERY = exercises("0.17") + [e for e in exercises("1.0") if e.id is None]
CLAIMED = [e for e in EVERY if e.claims]


def experiment_of(key: str) -> str:
    """The experiment behind exercise ``key``: exercises that share one share its values."""
    return find_exercise(key, "1.0" if key.startswith("1.0/") else "0.17").experiment


class _Reads(dict):
    """A values dict that notes which of its keys a test reads."""

    def __init__(self, exercise: str, data: dict, log: set) -> None:
        super().__init__(data)
        self.exercise, self.log = exercise, log

    def __getitem__(self, key):
        self.log.add((experiment_of(self.exercise), key))
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.log.add((experiment_of(self.exercise), key))
        return super().get(key, default)


@functools.cache
def claim_tests() -> dict[str, Callable]:
    """``{"test_rnn.py::test_8_5_4_...": function}`` for every test taking ``values``."""
    found = {}
    for name in GROUP_FILES:
        spec = importlib.util.spec_from_file_location(f"claims_{Path(name).stem}", HERE / name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for attr, fn in vars(module).items():
            if attr.startswith("test_") and list(inspect.signature(fn).parameters) == ["values"]:
                found[f"{name}::{attr}"] = fn
    return found


@functools.cache
def readers() -> dict[tuple[str, str], list[str]]:
    """``{(experiment, value key): [tests that read it]}``, from the small run."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, fn in claim_tests().items():
        log: set = set()
        try:
            fn(SizedValues("small", change=lambda key, v, log=log: _Reads(key, v, log)))
        except Exception:
            continue  # failing already: its own test reports it; it proves nothing here
        for read in log:
            found.setdefault(read, []).append(name)
    return found


def _leaf_changes(value: Any) -> Iterator[Any]:
    """Other values of the same type (a few, each a plausible wrong measurement)."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            yield 1.0
            return
        for changed in (-value, value * 10, value / 10, value + 1, value - 1, 0, -1 - abs(value)):
            yield type(value)(changed) if isinstance(value, int) else float(changed)
    elif isinstance(value, str):
        yield value + " (changed)"
        yield ""
        yield "nan"
    elif value is None:
        yield 1.0
        yield "changed"


def _changes(value: Any, depth: int = 0) -> Iterator[Any]:
    """Perturbed copies of ``value``: its leaves changed one at a time (capped), every
    number scaled at once, lists reversed and cut."""
    if isinstance(value, dict):
        for key in list(value)[:40]:
            for changed in _changes(value[key], depth + 1):
                yield {**value, key: changed}
        if value:
            yield {k: v for i, (k, v) in enumerate(value.items()) if i}  # first entry gone
    elif isinstance(value, list):
        if len(value) > 1:
            yield value[::-1]
            yield value[:-1]
            yield [value[-1], *value[1:]]
        for i in range(min(len(value), 6 if depth else 12)):
            for changed in _changes(value[i], depth + 1):
                yield [*value[:i], changed, *value[i + 1 :]]
        for scale in (-1.0, 10.0, 0.1):
            scaled = _scaled(value, scale)
            if scaled != value:
                yield scaled
    else:
        yield from _leaf_changes(value)


def _scaled(value: Any, scale: float) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return value * scale if math.isfinite(value) else value
    if isinstance(value, list):
        return [_scaled(v, scale) for v in value]
    if isinstance(value, dict):
        return {k: _scaled(v, scale) for k, v in value.items()}
    return value


def _fails(tests: list[str], exercise: str, key: str, changed: Any) -> bool:
    def change(read_key: str, found: dict) -> dict:
        if experiment_of(read_key) != experiment_of(exercise):
            return found
        return {**copy.deepcopy(found), key: changed}

    for name in tests:
        try:
            claim_tests()[name](SizedValues("small", change=change))
        except AssertionError:
            return True
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, AttributeError):
            continue  # a perturbation the test cannot read is no evidence either way
    return False


@pytest.mark.parametrize("e", CLAIMED, ids=lambda e: e.key)
def test_every_claim_is_read_by_a_test_and_its_assertion_can_fail(e):
    found = readers()
    for key, claim in e.claims:
        tests = found.get((e.experiment, key), [])
        assert tests, (
            f"{e.key}: no passing test in tests/exercises reads claim value {key!r} ({claim})"
        )
        value = copy.deepcopy(_values_small(e.key)[key])
        assert any(_fails(tests, e.key, key, changed) for changed in _changes(value)), (
            f"{e.key}: claim {key!r} ({claim}): its tests {tests} pass whatever the value is"
        )


def _values_small(key: str) -> dict:
    return SizedValues("small")(key)
