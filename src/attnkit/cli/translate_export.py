"""``attnkit translate export``: a trained Transformer translator as a CTranslate2 model folder.

    attnkit translate export --checkpoint runs/base --to ctranslate2 runs/base-ct2
    attnkit translate export --checkpoint runs/base --to ctranslate2 runs/base-int8 \\
        --quantization int8

The folder (weights, vocabularies, the SentencePiece model, a README of how to load it)
is written by :func:`attnkit.inference.export_ctranslate2.export_ctranslate2`; greedy
decoding in CTranslate2 then gives attnkit's token ids. ``ctranslate2`` comes with the
``peers`` extra (``pip install 'attnkit[peers]'``).
"""

from __future__ import annotations

import argparse

__all__ = ["FORMATS", "register_export", "run_export"]

FORMATS = ("ctranslate2",)


def register_export(verbs) -> None:
    """Add the ``export`` verb to ``attnkit translate``'s sub-parsers ``verbs``."""
    from attnkit.inference.export_ctranslate2 import QUANTIZATIONS

    x = verbs.add_parser(
        "export", help="write a trained Transformer translator as a CTranslate2 model folder"
    )
    x.add_argument("--checkpoint", required=True, metavar="DIR", help="a Transformer trained "
                   "with --tokenizer sentencepiece (attnkit translate train)")  # fmt: skip
    x.add_argument("--to", required=True, choices=FORMATS, help="the format to write")
    x.add_argument("out", metavar="OUT", help="the folder to create (it must not exist)")
    x.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=None,
        help="CTranslate2 weight type (default float32, what equals attnkit's outputs)",
    )
    x.add_argument("--debug", action="store_true", help="show tracebacks")
    x.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    """Export ``args.checkpoint`` to ``args.out``; print where it went and how to load it."""
    from attnkit.inference.export_ctranslate2 import export_ctranslate2

    if args.to not in FORMATS:
        raise ValueError(f"--to {args.to!r}: the formats are {', '.join(FORMATS)}")
    try:
        out = export_ctranslate2(args.checkpoint, args.out, quantization=args.quantization)
    except ModuleNotFoundError as e:  # ctranslate2 missing: a plain error, not a traceback
        raise RuntimeError(str(e)) from None
    print(f"exported {args.checkpoint} to {out} (CTranslate2): how to load it is in "
          f"{out / 'README.md'}")  # fmt: skip
    return 0
