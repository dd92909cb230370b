"""The tour's page in another language, rendered from the catalog: ``docs/tour.zh.md``.

``render_docs(language)`` writes the page from ``TOPICS`` and the catalog (what the tour
is, how to run it, then every topic's description and the claims its test asserts), so
the page says exactly what ``attnkit tour --list --lang LANG`` says; nothing is run. A
test checks that ``docs/tour.zh.md`` equals a fresh render. Regenerate it with

    python -m attnkit.tour.docs zh docs/tour.zh.md

The measured findings at full size stay in the English page, ``docs/tour.md``: they are
a dated measurement, not a translation.
"""

from __future__ import annotations

import sys
from pathlib import Path

from attnkit._validate import one_of
from attnkit.i18n import LANGUAGES, N_, _, use_language

__all__ = ["DOCS_COMMAND", "docs_command", "render_docs"]

DOCS_COMMAND = "python -m attnkit.tour.docs zh docs/tour.zh.md"


def docs_command(language: str) -> str:
    """The command that writes ``language``'s page (``DOCS_COMMAND`` for Chinese)."""
    return f"python -m attnkit.tour.docs {language} docs/tour.{language}.md"


_TITLE = N_("The chapter's arguments: `attnkit tour`")
_GENERATED = N_(
    "This page is generated from attnkit's message catalog by `{command}`; a test checks "
    "that it equals a fresh render. The English page, [tour.md](tour.md), adds the findings "
    "measured at full size, how each claim is asserted and the mutation check."
)
_INTRO = N_(
    "Every claim, comparison and exercise of the attention chapter (d2l 0.17, chapters 8-10) "
    "is an experiment in `attnkit.tour`: it prints its measured finding, draws its figures, "
    "and a test asserts the finding at small sizes (`tests/tour/`). Run them from the "
    "command line, from Python, or in a notebook. The findings, the claims and the figures' "
    "titles, axis labels and legends are in the language chosen with `--lang` (or the "
    "`ATTNKIT_LANG` environment variable, or the locale)."
)
_RUNNING = N_("Running the topics")
# (command, what it does); ``{lang}`` is the page's language
_COMMANDS = (
    ("attnkit tour --list --lang {lang}",
     N_("each topic, what it shows, and the claims its test asserts")),
    ("attnkit tour positions --lang {lang} --out runs/tour",
     N_("one topic: prints the finding, writes runs/tour/positions_*.png")),
    ("attnkit tour all --lang {lang} --out runs/tour", N_("every topic")),
    ("attnkit tour scoring --small --lang {lang}",
     N_("the fast sizes the tests and the notebook use")),
    ("ATTNKIT_LANG={lang} attnkit tour cues", N_("the language from the environment")),
)  # fmt: skip
_PYTHON = N_(
    'From Python, `attnkit.tour.run_topic("positions", small=True)` returns a '
    "`TopicResult(name, finding, values, figures, seconds)`; inside "
    '`attnkit.i18n.use_language("{lang}")` (or after `attnkit.i18n.set_language("{lang}")`) '
    "its finding and its figures are in this page's language, and "
    "`attnkit.tour.TOPICS[name].localized()` gives a topic's description and claims in it."
)
_TOPICS = N_("The topics")
_TOPICS_INTRO = N_(
    "{count} topics in the chapter's order, each with what it shows and the claims its test "
    "asserts (in parentheses, the key of the topic's `values` that carries each claim)."
)
_ASSERTED = N_("Asserted:")
_CLAIM = N_("{claim} (`{key}`)")


def render_docs(language: str = "zh") -> str:
    """The tour's page in ``language`` (Markdown), from ``TOPICS`` and the catalog."""
    from attnkit.tour import TOPICS

    one_of("language", language, LANGUAGES)
    with use_language(language):
        width = max(len(command.format(lang=language)) for command, _what in _COMMANDS)
        commands = [
            f"{command.format(lang=language):<{width}}  # {_(what)}" for command, what in _COMMANDS
        ]
        lines = [
            f"# {_(_TITLE)}",
            "",
            _(_GENERATED).format(command=docs_command(language)),
            "",
            _(_INTRO),
            "",
            f"## {_(_RUNNING)}",
            "",
            "```bash",
            *commands,
            "```",
            "",
            _(_PYTHON).format(lang=language),
            "",
            f"## {_(_TOPICS)}",
            "",
            _(_TOPICS_INTRO).format(count=len(TOPICS)),
        ]
        for name, topic in TOPICS.items():
            shown = topic.localized()
            lines += ["", f"### `{name}`", "", shown.description, "", _(_ASSERTED), ""]
            lines += [f"- {_(_CLAIM).format(claim=c, key=k)}" for k, c in shown.claims]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m attnkit.tour.docs LANGUAGE [PATH]``: the page to PATH (or stdout)."""
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m attnkit.tour.docs LANGUAGE [PATH]", file=sys.stderr)
        return 2
    page = render_docs(args[0])
    if len(args) == 2:
        Path(args[1]).write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
