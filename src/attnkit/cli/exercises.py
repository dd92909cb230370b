"""``attnkit exercises``: the chapters' exercises, answered (``attnkit.exercises``).

``--list`` prints one line per exercise (``ID  KIND  STATUS  question``), in the 0.17 /
Chinese numbering or, with ``--edition 1.0``, in 1.0's (with the exercises only 1.0
asks); ``attnkit exercises 10.2.1`` runs one (question, measured values, answer);
``all`` runs every one; ``--json``, ``--lang zh``, ``--out DIR`` (figures), ``--small``;
``all --book docs`` writes the answer book.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from attnkit.i18n import _

__all__ = ["register"]


def register(sub) -> None:
    p = sub.add_parser(
        "exercises",
        help=_("the chapters' exercises, answered (attnkit exercises --list)"),
        description=_("Every end-of-section exercise of d2l chapters 8-10 (0.17 / zh; 1.0: "
                      "9-11): the question, the measured values and the answer."),
    )  # fmt: skip
    p.add_argument("exercise", nargs="?", default=None, help=_("an ID from --list, or 'all'"))
    p.add_argument("--list", action="store_true", help=_("one line per exercise"))
    p.add_argument("--edition", default="0.17", help=_("numbering: 0.17 (default, = zh) or 1.0"))
    p.add_argument("--json", action="store_true", help=_("print JSON instead of text"))
    p.add_argument("--out", default=None,
                   help=_("folder for the figures (default: none written)"))  # fmt: skip
    p.add_argument("--small", action="store_true", help=_("small, fast sizes (as the tests)"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--book", default=None,
                   help=_("with 'all': write the answer book into DIR"))  # fmt: skip
    p.add_argument(
        "--render-book",
        default=None,
        metavar="DIR",
        help=_("render DIR/exercises*.md again from DIR/exercises.json (no experiment runs)"),
    )
    p.set_defaults(func=_main)


def _main(a) -> int:
    from attnkit._validate import one_of
    from attnkit.exercises import EDITIONS, LANGS, exercises, find_exercise
    from attnkit.exercises.book import rerender_book, run_all, write_book
    from attnkit.i18n import get_language

    one_of("--edition", a.edition, EDITIONS)
    # --lang (every command's) chose the language; the answer book has English and Chinese
    a.lang = get_language() if get_language() in LANGS else "en"
    if a.list:
        rows = exercises(a.edition)
        width = max(len(e.label(a.edition)) for e in rows)
        kind_width = max(_display_width(e.kind_in(a.lang)) for e in rows)
        status_width = max(_display_width(e.status_in(a.lang)) for e in rows)
        for e in rows:
            kind, status = e.kind_in(a.lang), e.status_in(a.lang)
            print(f"{e.label(a.edition):<{width}}  {_pad(kind, max(kind_width, 10))}  "
                  f"{_pad(status, max(status_width, 8))}  {e.short(a.lang)}")  # fmt: skip
        return 0
    if a.render_book is not None:
        for path in rerender_book(a.render_book):
            print(path)
        return 0
    if a.exercise is None:
        raise ValueError(_("name an exercise (attnkit exercises --list), 'all', or pass --list"))
    if a.book is not None:
        if a.exercise != "all":
            raise ValueError(_("--book writes every exercise: use 'all', got {exercise}")
                             .format(exercise=repr(a.exercise)))  # fmt: skip
        for path in write_book(a.book, seed=a.seed, small=a.small):
            print(path)
        return 0
    chosen = exercises(a.edition) if a.exercise == "all" else [find_exercise(a.exercise, a.edition)]
    t0 = time.perf_counter()
    out = Path(a.out) if a.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    runs, figures = run_all(chosen, small=a.small, seed=a.seed, out=out)
    if a.json:
        data = [r.to_json(a.lang) for r in runs]
        json.dump(data if len(data) > 1 else data[0], sys.stdout, ensure_ascii=False, indent=1)
        print()
        return 0
    for run in runs:
        print(run.report(a.lang, a.edition))
        for name in figures.get(run.exercise.experiment or "", []):
            print(f"  {out / name}")
        print()
    if len(runs) > 1:
        print(_("{n} exercises in {seconds:.1f} s").format(n=len(runs),
                                                          seconds=time.perf_counter() - t0))  # fmt: skip
    return 0


def _display_width(text: str) -> int:
    """Terminal columns of ``text``: a Chinese character takes two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _display_width(text))
