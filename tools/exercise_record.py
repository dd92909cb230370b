"""Run some exercises at full size and put their values into the answer book's record.

    python tools/exercise_record.py 8.5.4 1.0/11.2.2 ...

For work on a few experiments between two full runs: each named exercise's experiment runs
at full size (seed 0, on ../shared/data's Time Machine and fra.txt when they are there, as
the full run reads them), its entry in ``docs/exercises.json`` (values, seconds, figures)
is replaced, and both answer books are rendered again. The record's date and command stay
the full run's: the book is only current after ``attnkit exercises all --book docs``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("keys", nargs="+", help="exercise keys ('8.5.4', '1.0/11.2.2')")
    args = parser.parse_args()
    for env, path in (("ATTNKIT_TIMEMACHINE", SHARED / "timemachine" / "timemachine.txt"),
                      ("ATTNKIT_FRA", SHARED / "fra-eng" / "fra.txt")):  # fmt: skip
        if path.is_file():
            os.environ.setdefault(env, str(path))
    from attnkit.exercises import exercises, find_exercise
    from attnkit.exercises.book import rerender_book, run_all
    from attnkit.exercises.run import json_ready
    from attnkit.i18n import use_language

    docs = REPO / "docs"
    record_path = docs / "exercises.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    chosen = [find_exercise(k, "1.0" if k.startswith("1.0/") else "0.17") for k in args.keys]
    # every exercise sharing a chosen one's experiment is refreshed with it
    chosen_refs = {e.experiment for e in chosen}
    every = exercises("0.17") + [e for e in exercises("1.0") if e.id is None]
    chosen = [e for e in every if e.experiment in chosen_refs or e in chosen]
    with use_language("en"):
        runs, figures = run_all(chosen, out=docs / "exercises")
    # read again just before writing: another run may have written its entries meanwhile
    record = json.loads(record_path.read_text(encoding="utf-8"))
    for run in runs:
        record["exercises"][run.exercise.key] = {
            "values": json_ready(run.values),
            "seconds": round(run.result.seconds, 2) if run.result else 0.0,
            "figures": figures.get(run.exercise.experiment or "", [])
            or record["exercises"].get(run.exercise.key, {}).get("figures", []),
        }
        print(run.exercise.key, f"{run.result.seconds if run.result else 0:.1f} s")
    record_path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", "utf-8")
    rerender_book(docs)


if __name__ == "__main__":
    main()
