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
from attnkit.exercises.registry import LANGS, Exercise, exercises, section_title
from attnkit.exercises.run import ExerciseRun, json_ready, run_exercise
from attnkit.tour.base import TopicResult

__all__ = ["BOOK_COMMAND", "cpu_name", "render_book", "rerender_book", "run_all", "write_book"]

BOOK_COMMAND = "attnkit exercises all --book docs"
_HEAD = {
    "en": (
        "# Exercises of chapters 8-10 (d2l 0.17 / zh), answered",
        "Every end-of-section exercise of the sequence and attention chapters of *Dive into "
        "Deep Learning* (0.17 and the Chinese edition: chapters 8-10; 1.0: chapters 9-11), "
        "with attnkit's answer. Each question is in attnkit's own words. *experiment*: the "
        "answer's numbers were measured by the run below and the claims listed under it are "
        "asserted by a test in `tests/exercises/` at a small size; *derivation*: worked out, "
        "checked by numbers where numbers can check it; *open* and *needs-data*: answered "
        "with reasons (and with an experiment where one decides part of it).",
    ),
    "zh": (
        "# 第8-10章练习解答（d2l 0.17 / 中文版）",
        "《动手学深度学习》序列与注意力各章（0.17 与中文版：第8-10章；1.0：第9-11章）每节末尾的练习，"
        "以及 attnkit 的解答。问题均用 attnkit 自己的话重述。*experiment*（实验）：答案中的数值由下面"
        "这次运行测得，其下所列结论由 `tests/exercises/` 中的测试以小规模断言；*derivation*（推导）："
        "写出推导，凡能用数字检验之处都用数字检验；*open*（开放问题）与 *needs-data*（缺数据）："
        "给出有理由的回答（能用实验判定其中一部分时附实验）。",
    ),
}
_RUN = {"en": "Run", "zh": "运行"}
# what the run read: (The Time Machine present?, Tatoeba fra.txt present?)
_DATA = {
    "en": {
        True: ("Data: *The Time Machine* ($ATTNKIT_TIMEMACHINE) ", "and Tatoeba's fra.txt "
               "($ATTNKIT_FRA) were on the machine, so the full-size runs read them where an "
               "exercise reads text or translation data; each answer names the data it used."),
        False: ("Data: *The Time Machine* was not on the machine (the built-in corpus stood in) ",
                "and fra.txt was not (generated pairs stood in); each answer names its data."),
    },
    "zh": {
        True: ("数据：《时间机器》（$ATTNKIT_TIMEMACHINE）", "和 Tatoeba 的 fra.txt（$ATTNKIT_FRA）都在本机，"
               "凡读取文本或翻译数据的练习在完整规模下都用了它们；每个解答都写明所用的数据。"),
        False: ("数据：《时间机器》不在本机（以内置语料代替），", "fra.txt 也不在（以生成的句对代替）；"
                "每个解答都写明所用的数据。"),
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
    title, intro = _HEAD[lang]
    every = exercises("0.17") + [e for e in exercises("1.0") if e.id is None]
    saved = record["exercises"]
    counts = {k: sum(e.kind == k for e in every) for k in ("experiment", "derivation", "open",
                                                             "needs-data")}  # fmt: skip
    lines = [title, "", intro, ""]
    lines += [
        f"{_RUN[lang]}: {record['date']}, `{record['command']}`, {record['cpu']}, "
        f"{record['seconds']:.0f} s; {len(every)} exercises ("
        + ", ".join(f"{n} {k}" for k, n in counts.items())
        + ").",
        "",
    ]
    data = record.get("data", {})
    lines += [_DATA[lang][bool(data.get("time_machine"))][0]
              + _DATA[lang][bool(data.get("fra"))][1], ""]  # fmt: skip
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
