"""``attnkit translate export``: a trained Transformer translator as a CTranslate2 model
folder or a Hugging Face MarianMT folder.

    attnkit translate export --checkpoint runs/base --to ctranslate2 runs/base-ct2
    attnkit translate export --checkpoint runs/base --to ctranslate2 runs/base-int8 \\
        --quantization int8
    attnkit translate export --checkpoint runs/opus-en-fr --to hf runs/opus-en-fr-hf

``--to hf`` writes config.json, generation_config.json, model.safetensors and the tokenizer
where one maps (:func:`attnkit.convert.marian_export.export_marian`; docs/real-models.md);
``MarianMTModel.from_pretrained`` loads it and its greedy ``generate`` gives attnkit's ids.

The folder (weights, vocabularies, the SentencePiece model, a README of how to load it)
is written by :func:`attnkit.inference.export_ctranslate2.export_ctranslate2`; greedy
decoding in CTranslate2 then gives attnkit's token ids. ``ctranslate2`` comes with the
``peers`` extra (``pip install 'attnkit[peers]'``).
"""

from __future__ import annotations

import argparse

from attnkit.i18n import _

__all__ = ["FORMATS", "register_export", "run_export"]

FORMATS = ("ctranslate2", "hf")


def register_export(verbs) -> None:
    """Add the ``export`` verb to ``attnkit translate``'s sub-parsers ``verbs``."""
    from attnkit.inference.export_ctranslate2 import QUANTIZATIONS

    x = verbs.add_parser(
        "export",
        help=_("write a Transformer translator as a CTranslate2 or a Hugging Face MarianMT "
               "folder"),
    )  # fmt: skip
    x.add_argument("--checkpoint", required=True, metavar="DIR",
                   help=_("a Transformer checkpoint (ctranslate2: trained with --tokenizer "
                          "sentencepiece, or imported) or a MarianMT folder"))  # fmt: skip
    x.add_argument("--to", required=True, choices=FORMATS,
                   help=_("ctranslate2, or hf (a MarianMT folder)"))  # fmt: skip
    x.add_argument("out", metavar="OUT", help=_("the folder to create (it must not exist)"))
    x.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=None,
        help=_("CTranslate2 weight type (default float32, what equals attnkit's outputs)"),
    )
    x.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    x.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    """Export ``args.checkpoint`` to ``args.out``; print where it went and how to load it."""
    from attnkit.inference.export_ctranslate2 import export_ctranslate2

    if args.to not in FORMATS:
        raise ValueError(_("--to {to}: the formats are {formats}")
                         .format(to=repr(args.to), formats=", ".join(FORMATS)))  # fmt: skip
    if args.to == "hf":
        return _export_hf(args)
    try:
        out = export_ctranslate2(args.checkpoint, args.out, quantization=args.quantization)
    except ModuleNotFoundError as e:  # ctranslate2 missing: a plain error, not a traceback
        raise RuntimeError(str(e)) from None
    print(_("exported {checkpoint} to {out} (CTranslate2): how to load it is in {readme}")
          .format(checkpoint=args.checkpoint, out=out, readme=out / "README.md"))  # fmt: skip
    return 0


def _export_hf(args: argparse.Namespace) -> int:
    from pathlib import Path

    from attnkit.convert.marian_export import export_marian
    from attnkit.inference.translator import Translator

    if args.quantization is not None:
        raise ValueError(_("--quantization is CTranslate2's; --to hf writes float32 weights"))
    out = Path(args.out)
    if out.exists():
        raise ValueError(_("{out} exists: --to hf writes a new folder").format(out=out))
    translator = Translator.load(args.checkpoint)
    generation = translator.config.get("generation_config")  # the source folder's
    note = export_marian(translator.model, translator.data, out, generation=generation)
    print(_("exported {checkpoint} to {out} (Hugging Face MarianMT): "
            "MarianMTModel.from_pretrained({path}); {note}")
          .format(checkpoint=args.checkpoint, out=out, path=repr(str(out)), note=note))  # fmt: skip
    return 0
