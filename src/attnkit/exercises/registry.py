"""The exercises as data: each one's question, kind, answer and experiment, read from
``text/*.toml`` (one file per group of sections, in the chapters' order).

IDs are the 0.17 / Chinese edition's (``"10.2.1"``: section 10.2, exercise 1); an
exercise that only the 1.0 edition asks (new, or changed enough to be another question)
is keyed ``"1.0/11.2.4"`` and has no 0.17 ID. ``ids_1_0`` lists the 1.0 exercises that
ask the same question.
"""

from __future__ import annotations

import difflib
import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

from attnkit._validate import one_of

__all__ = [
    "EDITIONS",
    "GROUPS",
    "KINDS",
    "LANGS",
    "STATUS",
    "Exercise",
    "exercises",
    "find_exercise",
    "section_title",
]

EDITIONS = ("0.17", "1.0")
LANGS = ("en", "zh")
# how an exercise is settled: an experiment's findings are asserted by a test, a
# derivation is written out (and checked by numbers where it can be), an open question
# or one whose data we lack is answered with reasons (and an experiment where one decides part)
KINDS = ("experiment", "derivation", "open", "needs-data")
STATUS = {"experiment": "asserted", "derivation": "derived", "open": "answered",
          "needs-data": "answered"}  # fmt: skip
# the kinds and statuses as the Chinese answer book and report name them (parallel text:
# the English words are the codes themselves, too short to be catalog messages of their own)
KIND_ZH = {"experiment": "实验", "derivation": "推导", "open": "开放问题", "needs-data": "缺数据"}
STATUS_ZH = {
    "asserted": "已断言",
    "derived": "已推导",
    "answered": "已解答",
    "unanswered": "未解答",
}
# the text files, in the chapters' order
GROUPS = ("sequence", "rnn", "gated", "seq2seq", "attention", "transformer")
_FIELDS = {"ids_1_0", "kind", "experiment", "question", "question_zh", "answer",
           "answer_zh", "claims", "see"}  # fmt: skip


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``key`` is its ID (``"9.7.4"``, or ``"1.0/11.2.4"`` when only 1.0
    asks it); ``experiment`` names the function whose values the answers are formatted
    with (``"module:function"`` in ``attnkit.exercises``, or ``"tour:TOPIC"``), ``claims``
    the (value key, claim) pairs its test asserts (``claims_zh`` the claims in Chinese, in
    the same order); ``see`` other exercises whose answers bear on this one."""

    key: str
    group: str
    ids_1_0: tuple[str, ...]
    kind: str
    question: str
    question_zh: str
    answer: str
    answer_zh: str
    experiment: str | None = None
    claims: tuple[tuple[str, str], ...] = ()
    claims_zh: tuple[str, ...] = ()
    see: tuple[str, ...] = ()

    @property
    def id(self) -> str | None:
        """The 0.17 / Chinese edition's ID; None for an exercise only 1.0 asks."""
        return None if self.key.startswith("1.0/") else self.key

    @property
    def section(self) -> str:
        """Its section: ``"10.2"`` (0.17), or the 1.0 section for a 1.0-only exercise."""
        return self.key.removeprefix("1.0/").rsplit(".", 1)[0]

    @property
    def status(self) -> str:
        return STATUS.get(self.kind, "unanswered")

    def kind_in(self, lang: str = "en") -> str:
        """Its kind in ``lang`` ("experiment", or "实验" in Chinese)."""
        return KIND_ZH.get(self.kind, self.kind) if lang == "zh" else self.kind

    def status_in(self, lang: str = "en") -> str:
        """Its status in ``lang`` ("asserted", or "已断言" in Chinese)."""
        return STATUS_ZH.get(self.status, self.status) if lang == "zh" else self.status

    def claims_in(self, lang: str = "en") -> tuple[tuple[str, str], ...]:
        """The (value key, claim) pairs its test asserts, the claims in ``lang``."""
        if lang != "zh":
            return self.claims
        return tuple((key, zh) for (key, _), zh in zip(self.claims, self.claims_zh, strict=True))

    def label(self, edition: str = "0.17") -> str | None:
        """Its ID in ``edition``'s numbering ("9.2.1"), or None where that edition lacks it."""
        if edition == "0.17":
            return self.id
        if self.id is None:
            return self.key.removeprefix("1.0/")
        return ", ".join(self.ids_1_0) or None

    def question_in(self, lang: str = "en") -> str:
        return self.question_zh if lang == "zh" else self.question

    def answer_template(self, lang: str = "en") -> str:
        return self.answer_zh if lang == "zh" else self.answer

    def short(self, lang: str = "en", width: int = 72) -> str:
        """The question's first line, cut to ``width`` characters."""
        text = " ".join(self.question_in(lang).split())
        return text if len(text) <= width else text[: width - 1] + "…"


def _sort_key(key: str) -> tuple:
    edition, _, number = key.rpartition("/")
    return (edition != "", *map(int, number.split(".")))


@functools.cache
def _load() -> tuple[dict[str, Exercise], dict[str, dict]]:
    """Every exercise (in the 0.17 order, then the 1.0-only ones) and the section titles."""
    found: dict[str, Exercise] = {}
    sections: dict[str, dict] = {}
    for group in GROUPS:
        text = (
            resources.files("attnkit.exercises")
            .joinpath(f"text/{group}.toml")
            .read_text(encoding="utf-8")
        )
        data = tomllib.loads(text)
        sections.update({k: {**v, "edition": "0.17"} for k, v in data.get("sections", {}).items()})
        sections.update(
            {f"1.0/{k}": {**v, "edition": "1.0"} for k, v in data.get("sections_1_0", {}).items()}
        )
        for key, entry in data.get("exercises", {}).items():
            unknown = set(entry) - _FIELDS
            if unknown:
                raise ValueError(f"exercise {key} in text/{group}.toml: unknown fields {unknown}")
            claims = entry.get("claims", ())
            if any(len(c) != 3 or not all(isinstance(s, str) and s for s in c) for c in claims):
                raise ValueError(
                    f"exercise {key} in text/{group}.toml: each claim is [value key, English, "
                    "Chinese]"
                )
            found[key] = Exercise(
                key=key,
                group=group,
                ids_1_0=tuple(entry.get("ids_1_0", ())),
                kind=entry.get("kind", ""),
                question=entry.get("question", "").strip(),
                question_zh=entry.get("question_zh", "").strip(),
                answer=entry.get("answer", "").strip(),
                answer_zh=entry.get("answer_zh", "").strip(),
                experiment=entry.get("experiment"),
                claims=tuple((k, en) for k, en, _ in claims),
                claims_zh=tuple(zh for _, _, zh in claims),
                see=tuple(entry.get("see", ())),
            )
    ordered = dict(sorted(found.items(), key=lambda kv: _sort_key(kv[0])))
    return ordered, sections


def exercises(edition: str = "0.17") -> list[Exercise]:
    """The exercises that ``edition`` asks, in its order (1.0 reorders LSTM before GRU)."""
    one_of("edition", edition, EDITIONS)
    every = list(_load()[0].values())
    if edition == "0.17":
        return [e for e in every if e.id is not None]
    chosen = [e for e in every if e.label("1.0")]
    return sorted(chosen, key=lambda e: _sort_key(e.label("1.0").split(",")[0]))


def section_title(exercise: Exercise, lang: str = "en") -> str:
    """``"10.2 Attention Pooling: ..."``: its section as the 0.17 edition (or, for a
    1.0-only exercise, 1.0) names it; in Chinese ``"10.2. 注意力汇聚：..."``, numbered as
    d2l-zh's pages number their sections."""
    sections = _load()[1]
    entry = sections.get(exercise.section if exercise.id else f"1.0/{exercise.section}", {})
    if lang == "zh":
        edition = "" if exercise.id else "（d2l 1.0）"
        return f"{exercise.section}. {entry.get('title_zh') or entry.get('title', '')}" + edition
    edition = "" if exercise.id else " (d2l 1.0)"
    return f"{exercise.section} {entry.get('title') or ''}".strip() + edition


def find_exercise(exercise_id: str, edition: str = "0.17") -> Exercise:
    """The exercise with ID ``exercise_id`` in ``edition``'s numbering; a ValueError naming
    the nearest IDs when there is none."""
    if not isinstance(exercise_id, str):
        raise TypeError(f"exercise_id must be a str, got {type(exercise_id).__name__}")
    one_of("edition", edition, EDITIONS)
    if exercise_id.strip() in _load()[0] and exercise_id.startswith("1.0/"):
        return _load()[0][exercise_id.strip()]  # a 1.0-only exercise's key, in any numbering
    wanted = exercise_id.strip().removeprefix("1.0/")
    labels: dict[str, Exercise] = {}
    for e in exercises(edition):
        for label in (e.label(edition) or "").split(", "):
            labels[label] = e
    if wanted in labels:
        return labels[wanted]
    section = wanted.rsplit(".", 1)[0]
    near = [k for k in labels if k.rsplit(".", 1)[0] == section]
    near = near or difflib.get_close_matches(wanted, list(labels), n=5, cutoff=0.5)
    other = EDITIONS[1 - EDITIONS.index(edition)]
    hint = ""
    if any(wanted in (e.label(other) or "").split(", ") for e in exercises(other)):
        hint = f" ({wanted} is an exercise of the {other} edition: add --edition {other})"
    raise ValueError(
        f"exercise_id {exercise_id!r} is not an exercise of the d2l {edition} edition{hint}; "
        f"nearest: {', '.join(near) if near else 'none'} (attnkit exercises --list)"
    )
