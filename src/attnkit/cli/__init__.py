"""The ``attnkit`` command line: one module per verb, each with ``register(subparsers)``.

Each verb module defines ``register(sub)`` that adds its parser and sets
``func`` (a typed function taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["build_parser", "main"]

# verb modules, in the order `attnkit --help` lists them
VERBS = ["demo", "tour", "exercises", "lm", "translate", "serve"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnkit",
        description="Attention mechanisms and Transformers from Dive into Deep Learning.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb in VERBS:
        importlib.import_module(f"attnkit.cli.{verb}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv  # the raw arguments, for verbs that relaunch themselves (--nproc)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, RuntimeError) as e:  # OSError: files, folders
        if getattr(args, "debug", False):
            raise
        print(f"attnkit {args.command}: error: {e}", file=sys.stderr)
        return 1
