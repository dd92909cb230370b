"""``attnkit translate import``: a Hugging Face MarianMT model as an attnkit checkpoint folder.

    attnkit translate import --from hf Helsinki-NLP/opus-mt-en-fr runs/opus-en-fr
    attnkit translate import --from hf ./opus-mt-en-fr runs/opus-en-fr     # a local folder

SRC is a folder (config.json, model.safetensors or pytorch_model.bin, source.spm,
target.spm, vocab.json) or a hub name, fetched with ``huggingface_hub`` when it is installed
and the network answers; offline the error says where to put the files. OUT is then an
attnkit checkpoint (the one format) that every ``--checkpoint`` takes; the MarianMT folder
itself is accepted by ``--checkpoint`` too. What does not map is refused with the reason
(``attnkit.convert.marian``; docs/real-models.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnkit.i18n import _

__all__ = ["SOURCES", "register_import", "run_import"]

SOURCES = ("hf",)


def register_import(verbs) -> None:
    """Add the ``import`` verb to ``attnkit translate``'s sub-parsers ``verbs``."""
    i = verbs.add_parser(
        "import", help=_("write a Hugging Face MarianMT model as an attnkit checkpoint folder")
    )
    i.add_argument("--from", dest="source_format", required=True, choices=SOURCES,
                   help=_("the format of SRC: hf (a MarianMT folder or hub name)"))  # fmt: skip
    i.add_argument("src", metavar="SRC",
                   help=_("a MarianMT folder or a hub name (owner/name)"))  # fmt: skip
    i.add_argument("out", metavar="OUT", help=_("the checkpoint folder to create"))
    i.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    i.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    """Import ``args.src`` into ``args.out``; print what was written."""
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.convert.marian import import_marian

    if args.source_format not in SOURCES:
        raise ValueError(_("--from {source}: the formats are {formats}")
                         .format(source=repr(args.source_format), formats=", ".join(SOURCES)))  # fmt: skip
    out = Path(args.out)
    if (out / "config.json").exists():
        raise ValueError(_("{out} already holds a checkpoint: import into a new folder")
                         .format(out=out))  # fmt: skip
    import_marian(args.src, out)
    cfg = read_checkpoint_config(out)
    mc = cfg["model_config"]
    print(
        _('imported {src} into {out}: Transformer {layers}+{layers} layers, d_model {d_model}, '
          '{heads} heads, ffn {ffn}, {activation}, vocabulary {vocab}; try: attnkit translate '
          'run --checkpoint {out} "Hello world."')
        .format(src=args.src, out=out, layers=mc["num_layers"], d_model=mc["d_model"],
                heads=mc["num_heads"], ffn=mc["d_ff"], activation=mc["activation"],
                vocab=cfg["data"]["tokenizer"]["vocab_sizes"][0])
    )  # fmt: skip
    return 0
