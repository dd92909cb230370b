"""Running an exercise: its experiment (a tour topic or an exercise module's function,
the tour's one mechanism: ``@topic`` functions returning a ``TopicResult``), its answer
formatted with the measured values, and the report, plain or JSON.
"""

from __future__ import annotations

import _string
import importlib
import json
import math
import numbers
import re
import string
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnkit._validate import boolean, non_negative_int, one_of
from attnkit.exercises.glossary import to_zh
from attnkit.exercises.registry import EDITIONS, LANGS, Exercise, find_exercise, section_title
from attnkit.i18n import _, get_language, use_language
from attnkit.tour.base import TopicResult

__all__ = ["ExerciseRun", "experiment_function", "json_ready", "run_exercise"]


def experiment_function(ref: str):
    """The ``@topic`` function an exercise's ``experiment`` names: ``"tour:TOPIC"`` (the
    tour's topic) or ``"module:function"`` (in ``attnkit.exercises``)."""
    module, _, function = ref.partition(":")
    if not function:
        raise ValueError(f"experiment must be 'module:function' or 'tour:TOPIC', got {ref!r}")
    if module == "tour":
        from attnkit.tour import get_topic

        return get_topic(function)
    return getattr(importlib.import_module(f"attnkit.exercises.{module}"), function)


def json_ready(value: Any) -> Any:
    """``value`` with tensors and numpy values as lists and numbers, tuples as lists,
    non-finite floats as the strings ``"nan"``/``"inf"``/``"-inf"`` (plain JSON)."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    return str(value)


def _short(value: Any, width: int = 60) -> str:
    """A value as one short line: floats to 4 significant digits, long lists cut."""
    value = json_ready(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    text = json.dumps(value, ensure_ascii=False)
    text = re.sub(r"(\d+\.\d{4})\d+", r"\1", text)
    return text if len(text) <= width else text[: width - 1] + "…"


class _Values(string.Formatter):
    """``str.format`` over a result's values; a missing key names the exercise."""

    def __init__(self, exercise: Exercise, lang: str = "en") -> None:
        self.exercise = exercise
        self.lang = lang

    def get_value(self, key, args, kwargs):
        if isinstance(key, str) and key not in kwargs:
            raise ValueError(
                f"exercise {self.exercise.key}: its answer reads the value {key!r}, which its "
                f"experiment ({self.exercise.experiment}) does not return"
            )
        return super().get_value(key, args, kwargs)

    def get_field(self, field_name, args, kwargs):
        """As ``str.format``, but a value read back from JSON formats as it did live: a
        dict's int key (``{mse[1]}``) also finds the key "1", and "nan"/"inf" are floats."""
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, index in rest:
            if is_attr:
                obj = getattr(obj, index)
                continue
            if isinstance(obj, dict) and index not in obj and str(index) in obj:
                index = str(index)
            obj = obj[index]
        if isinstance(obj, str) and obj in ("nan", "inf", "-inf"):
            obj = float(obj)
        elif isinstance(obj, str) and self.lang == "zh":
            # a data name or seed summary the experiment wrote in English; a Chinese value
            # (``data_zh``) spaced as d2l-zh writes
            obj = to_zh(obj)
        return obj, first


@dataclass
class ExerciseRun:
    """An exercise and, when it has an experiment, the experiment's result."""

    exercise: Exercise
    result: TopicResult | None = None

    @property
    def values(self) -> dict[str, Any]:
        return self.result.values if self.result is not None else {}

    def answer(self, lang: str = "en") -> str:
        """The answer in ``lang`` with the measured values filled in."""
        one_of("lang", lang, LANGS)
        return _Values(self.exercise, lang).vformat(
            self.exercise.answer_template(lang), (), self.values
        )

    def asserted(self, lang: str = "en") -> list[dict[str, Any]]:
        """The claims a test asserts (in ``lang``), each with the value that carries it."""
        return [
            {"key": key, "claim": claim, "value": json_ready(self.values.get(key))}
            for key, claim in self.exercise.claims_in(lang)
        ]

    def to_json(self, lang: str = "en") -> dict[str, Any]:
        """``{id, ids_1_0, kind, status, section, question, answer, values, asserted}``."""
        e = self.exercise
        return {
            "id": e.id,
            "ids_1_0": list(e.ids_1_0) if e.id else [e.key.removeprefix("1.0/")],
            "kind": e.kind,
            "status": e.status,
            "section": section_title(e, lang),
            "question": e.question_in(lang),
            "answer": self.answer(lang),
            "values": json_ready(self.values),
            "asserted": self.asserted(lang),
            "seconds": round(self.result.seconds, 2) if self.result else 0.0,
        }

    def markdown(self, lang: str = "en", figures: list[str] = ()) -> str:
        """The answer book's entry: heading, question, answer, figures (paths as given),
        the claims its test asserts. Notebooks show it (``_repr_markdown_``)."""
        one_of("lang", lang, LANGS)
        e = self.exercise
        name = e.id or e.key.removeprefix("1.0/")
        with use_language(lang):
            if e.id and e.ids_1_0:
                label = _("{label} (1.0: {ids})").format(label=name, ids=", ".join(e.ids_1_0))
            elif e.id is None:
                label = _("{label} (d2l 1.0)").format(label=name)
            else:
                label = name
            lines = [f"### {label} · {e.kind_in(lang)} · {e.status_in(lang)}", ""]
            lines += [_("**Question.** {question}").format(question=e.question_in(lang)), ""]
            lines += [_("**Answer.** {answer}").format(answer=self.answer(lang)), ""]
            lines += [f"![{name} {Path(f).name}]({f})\n" for f in figures]
            if e.claims:
                lines += [_("*Asserted by its test:*"), ""]
                lines += [_("- {claim} (`{key}`)").format(claim=claim, key=key)
                          for key, claim in e.claims_in(lang)] + [""]  # fmt: skip
            if e.see:
                lines += [_("*See also:* {ids}").format(ids=", ".join(e.see)), ""]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.markdown(get_language() if get_language() in LANGS else "en")

    def report(self, lang: str = "en", edition: str = "0.17") -> str:
        """The printed form: ID, section, question, answer, what the test asserts."""
        one_of("lang", lang, LANGS)
        e = self.exercise
        label = e.label(edition) or e.key
        other = e.label("1.0" if edition == "0.17" else "0.17")
        wrap = lambda text: "\n".join(  # noqa: E731
            textwrap.fill(p, 92, break_long_words=False) if lang != "zh" else p
            for p in text.split("\n")
        )
        with use_language(lang):
            head = _("{label} [{kind}, {status}] {section}").format(
                label=label, kind=e.kind_in(lang), status=e.status_in(lang),
                section=section_title(e, lang),
            )  # fmt: skip
            if other:
                head = _("{head} (other edition: {other})").format(head=head, other=other)
            parts = [head, "", _("Question: {question}").format(question=e.question_in(lang))]
            parts += ["", _("Answer:"), wrap(self.answer(lang))]
            if e.claims:
                parts += ["", _("Asserted by its test (measured):")]
                parts += [f"  - {claim} [{key} = {_short(self.values.get(key))}]"
                          for key, claim in e.claims_in(lang)]  # fmt: skip
            if self.result is not None:
                parts += ["", _("({seconds:.1f} s)").format(seconds=self.result.seconds)]
        return "\n".join(parts)


def run_exercise(
    exercise: Exercise | str,
    *,
    edition: str = "0.17",
    small: bool = False,
    seed: int = 0,
    cache: dict | None = None,
) -> ExerciseRun:
    """Run one exercise (an ``Exercise`` or its ID in ``edition``'s numbering): its
    experiment at full or ``small`` size. ``cache`` (a dict) keeps results by
    (experiment, small, seed), so exercises sharing an experiment run it once."""
    one_of("edition", edition, EDITIONS)
    boolean("small", small)
    non_negative_int("seed", seed)
    if not isinstance(exercise, Exercise):
        exercise = find_exercise(exercise, edition)
    if exercise.experiment is None:
        return ExerciseRun(exercise)
    key = (exercise.experiment, small, seed)
    if cache is not None and key in cache:
        return ExerciseRun(exercise, cache[key])
    result = experiment_function(exercise.experiment)(small=small, seed=seed)
    if cache is not None:
        cache[key] = result
    return ExerciseRun(exercise, result)
