"""The end-of-section exercises of the chapters attnkit covers, answered.

77 exercises of d2l 0.17 (and the Chinese edition), chapters 8-10, and the 23 that only
d2l 1.0 (chapters 9-11) asks. Each has a kind (``experiment``, ``derivation``, ``open``,
``needs-data``), a question in attnkit's own words (English and Chinese), and an answer;
where an experiment decides it, the answer is formatted with the values the experiment
measured and a test asserts them. Experiments are the tour's mechanism (``@topic``
functions returning a ``TopicResult``): an exercise the tour already answers points at
the tour topic (``"tour:kernels"``). ``attnkit exercises`` is the command line,
``docs/exercises.md`` / ``docs/exercises.zh.md`` the answer book.
"""

from __future__ import annotations

from attnkit.exercises.registry import (
    EDITIONS,
    GROUPS,
    KINDS,
    LANGS,
    STATUS,
    Exercise,
    exercises,
    find_exercise,
    section_title,
)
from attnkit.exercises.run import ExerciseRun, experiment_function, json_ready, run_exercise

__all__ = [
    "EDITIONS",
    "GROUPS",
    "KINDS",
    "LANGS",
    "STATUS",
    "Exercise",
    "ExerciseRun",
    "exercises",
    "experiment_function",
    "find_exercise",
    "json_ready",
    "run_exercise",
    "section_title",
]
