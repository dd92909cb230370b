"""The ``attnkit`` command line: one module per verb, each with ``register(subparsers)``.

Each verb module defines ``register(sub)`` that adds its parser and sets
``func`` (a typed function taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from attnkit.cli.help_format import wide_text
from attnkit.i18n import LANGUAGE_NAMES, LANGUAGES, _, chosen_language, ngettext, set_language

__all__ = ["build_parser", "language_argument", "main"]

# verb modules, in the order `attnkit --help` lists them
VERBS = ["demo", "tour", "exercises", "lm", "translate", "serve"]


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, its text in the language in force (build it after
    choosing the language: help strings are translated when they are added)."""
    # argparse's own words ("usage:", "options", its errors) come from our catalog too
    argparse._ = _  # type: ignore[attr-defined]
    argparse.ngettext = ngettext  # type: ignore[attr-defined]
    parser = argparse.ArgumentParser(
        prog="attnkit",
        description=_("Attention mechanisms and Transformers from Dive into Deep Learning."),
    )
    sub = parser.add_subparsers(dest="command", metavar=_("COMMAND"))
    for verb in VERBS:
        importlib.import_module(f"attnkit.cli.{verb}").register(sub)
    _add_language_option(parser, top=True)
    return parser


def _add_language_option(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """``--lang`` on the command and every subcommand (a subcommand's keeps the value
    given before it: ``attnkit --lang zh tour`` and ``attnkit tour --lang zh`` agree); and
    help that wraps Chinese by display width (``attnkit.cli.help_format``)."""
    parser.formatter_class = wide_text(parser.formatter_class)
    choices = ", ".join(f"{code} ({LANGUAGE_NAMES[code]})" for code in LANGUAGES)
    parser.add_argument(
        "--lang",
        choices=LANGUAGES,
        default=None if top else argparse.SUPPRESS,
        help=_("language of the output: {choices}; default: ATTNKIT_LANG, else the locale "
               "(LANGUAGE, LC_ALL, LC_MESSAGES, LANG), else English").format(choices=choices),
    )  # fmt: skip
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _add_language_option(child)


def language_argument(argv: list[str]) -> str | None:
    """The value of ``--lang`` in ``argv`` when it names a language we have (read before
    the parser is built, so that its help is in that language); None otherwise (argparse
    then reports a bad value, listing the languages)."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        value = argv[i + 1] if arg == "--lang" and i + 1 < len(argv) else None
        if arg.startswith("--lang="):
            value = arg.partition("=")[2]
        if value in LANGUAGES:
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv``; ``--lang`` holds for this call only (a caller in the same
    process, a notebook or a test, keeps its language afterwards)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = chosen_language()
    chosen = language_argument(argv)
    if chosen:
        set_language(chosen)
    try:
        return _run(argv)
    finally:
        set_language(previous)


def _run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv  # the raw arguments, for verbs that relaunch themselves (--nproc)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(_("interrupted"), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`attnkit ... | head`): nothing to say
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (Python flushes it at exit)
        return 141
    except (ValueError, TypeError, OSError, RuntimeError) as e:  # OSError: files, folders
        if getattr(args, "debug", False):
            raise
        print(_("attnkit {command}: error: {error}").format(command=args.command, error=e),
              file=sys.stderr)  # fmt: skip
        return 1
