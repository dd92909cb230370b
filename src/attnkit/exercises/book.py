"""The answer book: ``docs/exercises.md`` (English) and ``docs/exercises.zh.md`` (Chinese),
rendered from one run's record (``docs/exercises.json``: the values, figures and seconds
of every exercise, with the date, command and CPU).

``write_book`` runs every exercise and writes the three files and the figures;
``render_book`` turns a record back into a page, so a test can check that the pages in
``docs/`` are exactly what their record renders to (nothing edited by hand, nothing stale).
"""

from __future__ import annotations

import datetime
import json
import platform
import time
from pathlib import Path
from typing import Any

from attnkit._validate import one_of
from attnkit.exercises.corpora import fra_path, time_machine_path
from attnkit.exercises.registry import KINDS, LANGS, Exercise, exercises, section_title
from attnkit.exercises.run import ExerciseRun, json_ready, run_exercise
from attnkit.i18n import N_, _, use_language
from attnkit.tour.base import TopicResult

__all__ = ["BOOK_COMMAND", "cpu_name", "render_book", "rerender_book", "run_all", "write_book"]

BOOK_COMMAND = "attnkit exercises all --book docs"
_TITLE = N_("# Exercises of chapters 8-10 (d2l 0.17 / zh), answered")
_INTRO = N_(
    "Every end-of-section exercise of the sequence and attention chapters of *Dive into "
    "Deep Learning* (0.17 and the Chinese edition: chapters 8-10; 1.0: chapters 9-11), "
    "with attnkit's answer. Each question is in attnkit's own words. *experiment*: the "
    "answer's numbers were measured by the run below and the claims listed under it are "
    "asserted by a test in `tests/exercises/`, on this run's numbers and again on a small, "
    "fast run (a claim that holds at one size only says so); claims over seeds state their "
    "test (a sign test, a Student-t interval); *derivation*: worked out, "
    "checked by numbers where numbers can check it; *open* and *needs-data*: answered "
    "with reasons (and with an experiment where one decides part of it)."
)
# what the run read: The Time Machine present or not, then Tatoeba's fra.txt present or not
_DATA = {
    "time_machine": {
        True: N_("Data: *The Time Machine* ($ATTNKIT_TIMEMACHINE) "),
        False: N_("Data: *The Time Machine* was not on the machine (the built-in corpus stood "
                  "in) "),
    },
    "fra": {
        True: N_("and Tatoeba's fra.txt ($ATTNKIT_FRA) were on the machine, so the full-size "
                 "runs read them where an exercise reads text or translation data; each answer "
                 "names the data it used."),
        False: N_("and fra.txt was not (generated pairs stood in); each answer names its data."),
    },
}  # fmt: skip


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_all(
    chosen: list[Exercise], *, small: bool = False, seed: int = 0, out: Path | None = None
) -> tuple[list[ExerciseRun], dict[str, list[str]]]:
    """Run ``chosen`` (each experiment once); write figures to ``out`` when given.
    Returns the runs and, per experiment, the figure files written (names in ``out``)."""
    cache: dict[tuple, TopicResult] = {}
    figures: dict[str, list[str]] = {}
    runs = []
    for e in chosen:
        fresh = e.experiment is not None and (e.experiment, small, seed) not in cache
        run = run_exercise(e, small=small, seed=seed, cache=cache)
        if fresh and run.result is not None:
            figures[e.experiment] = [p.name for p in run.result.save(out)] if out else []
            run.result.close()
        runs.append(run)
    return runs, figures


def write_book(folder: str | Path, *, seed: int = 0, small: bool = False) -> list[Path]:
    """Run every exercise, write ``folder/exercises.json``, ``exercises.md``,
    ``exercises.zh.md`` and the figures under ``folder/exercises/``; return the paths."""
    folder = Path(folder)
    figure_dir = folder / "exercises"
    figure_dir.mkdir(parents=True, exist_ok=True)
    for old in figure_dir.glob("*.png"):
        old.unlink()
    t0 = time.perf_counter()
    every = exercises("0.17") + [e for e in exercises("1.0") if e.id is None]
    # the record is the run's, not a language's: values (seed summaries) and figures in English
    with use_language("en"):
        runs, figures = run_all(every, small=small, seed=seed, out=figure_dir)
    record = {
        "date": datetime.date.today().isoformat(),
        "command": BOOK_COMMAND
        + (" --small" if small else "")
        + (f" --seed {seed}" if seed else ""),
        "cpu": cpu_name(),
        "seconds": round(time.perf_counter() - t0, 1),
        "data": {"time_machine": time_machine_path() is not None, "fra": fra_path() is not None},
        "exercises": {
            r.exercise.key: {
                "values": json_ready(r.values),
                "seconds": round(r.result.seconds, 2) if r.result else 0.0,
                "figures": figures.get(r.exercise.experiment or "", []),
            }
            for r in runs
        },
    }
    paths = [folder / "exercises.json"]
    paths[0].write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for lang, name in (("en", "exercises.md"), ("zh", "exercises.zh.md")):
        paths.append(folder / name)
        paths[-1].write_text(render_book(record, lang), encoding="utf-8")
    return paths


def rerender_book(folder: str | Path) -> list[Path]:
    """Render ``folder/exercises.md`` and ``exercises.zh.md`` again from the run recorded
    in ``folder/exercises.json`` (after an answer's wording changed, not its values)."""
    folder = Path(folder)
    record = json.loads((folder / "exercises.json").read_text(encoding="utf-8"))
    paths = []
    for lang, name in (("en", "exercises.md"), ("zh", "exercises.zh.md")):
        paths.append(folder / name)
        paths[-1].write_text(render_book(record, lang), encoding="utf-8")
    return paths


def render_book(record: dict[str, Any], lang: str = "en") -> str:
    """The answer book page in ``lang`` for a run's ``record`` (``write_book``'s JSON)."""
    one_of("lang", lang, LANGS)
    with use_language(lang):
        return _render(record, lang)


def _render(record: dict[str, Any], lang: str) -> str:
    every = exercises("0.17") + [e for e in exercises("1.0") if e.id is None]
    saved = record["exercises"]
    counts = {k.replace("-", "_"): sum(e.kind == k for e in every) for k in KINDS}
    lines = [_(_TITLE), "", _(_INTRO), ""]
    kinds = _("{experiment} experiment, {derivation} derivation, {open} open, "
              "{needs_data} needs-data").format(**counts)  # fmt: skip
    lines += [
        _("Run: {date}, `{command}`, {cpu}, {seconds:.0f} s; {count} exercises ({kinds}).").format(
            date=record["date"], command=record["command"], cpu=record["cpu"],
            seconds=record["seconds"], count=len(every), kinds=kinds,
        ),
        "",
    ]  # fmt: skip
    data = record.get("data", {})
    lines += [_(_DATA["time_machine"][bool(data.get("time_machine"))])
              + _(_DATA["fra"][bool(data.get("fra"))]), ""]  # fmt: skip
    current = None
    for e in every:
        heading = section_title(e, lang)
        if heading != current:
            current = heading
            lines += [f"## {heading}", ""]
        entry = saved.get(e.key, {})
        result = TopicResult(e.key, "", entry.get("values", {})) if e.experiment else None
        figures = [f"exercises/{name}" for name in entry.get("figures", [])]
        lines += [ExerciseRun(e, result).markdown(lang, figures)]
    return "\n".join(lines).rstrip() + "\n"
