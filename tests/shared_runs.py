"""Experiment results shared by the tour's and the exercises' tests: each tour topic and
each exercise experiment runs once per test session at the small size (seed 0), whichever
test asks first. Imported as ``tests.shared_runs`` (the repository root is on sys.path,
see conftest.py), so every test module sees the same dictionaries."""

from __future__ import annotations

from attnkit.exercises import ExerciseRun, find_exercise, run_exercise
from attnkit.tour import TopicResult, run_topic

TOPICS: dict[str, TopicResult] = {}
EXPERIMENTS: dict[tuple, TopicResult] = {}


def tour_result(name: str) -> TopicResult:
    """The tour topic ``name`` at small size, seed 0."""
    if name not in TOPICS:
        TOPICS[name] = run_topic(name, small=True, seed=0)
    return TOPICS[name]


def exercise_run(exercise_id: str, edition: str = "0.17") -> ExerciseRun:
    """Exercise ``exercise_id`` (``"1.0/11.2.4"`` or, with edition "1.0", ``"11.2.4"``
    for the 1.0-only ones) at small size, seed 0; its experiment runs once a session."""
    exercise = find_exercise(exercise_id, "1.0" if exercise_id.startswith("1.0/") else edition)
    ref = exercise.experiment
    if ref and ref.startswith("tour:"):
        EXPERIMENTS.setdefault((ref, True, 0), tour_result(ref.removeprefix("tour:")))
    return run_exercise(exercise, small=True, seed=0, cache=EXPERIMENTS)


def values(exercise_id: str) -> dict:
    """The measured values of exercise ``exercise_id``'s experiment (small, seed 0)."""
    return exercise_run(exercise_id).values
