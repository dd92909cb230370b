"""``attnkit lm import`` and ``attnkit lm export``: GPT-2 models in and out.

    attnkit lm import --from hf gpt2-folder runs/gpt2        # or a hub name: openai-community/gpt2
    attnkit lm generate --checkpoint runs/gpt2 --prompt "The animal"
    attnkit lm export --to hf --checkpoint runs/lm out/gpt2   # GPT2LMHeadModel.from_pretrained

``import`` reads a Hugging Face GPT-2 folder (config.json, model.safetensors or
pytorch_model.bin, and its tokenizer: tokenizer.json or vocab.json + merges.txt) without
transformers and writes an attnkit language-model checkpoint (``attnkit.convert.gpt2``);
what does not map onto attnkit's ``DecoderLM`` is refused with the reason. ``export`` writes
a decoder-only LM checkpoint (``lm train --arch transformer`` or ``lm import``) as a GPT-2
folder (``attnkit.convert.gpt2_export``): learned (or sinusoidal) positions, no grouped-
query attention; RoPE and ALiBi are refused. A GPT-2 tokenizer is written with it when the
checkpoint has one.
"""

from __future__ import annotations

import argparse

from attnkit.i18n import _

__all__ = ["register_transfer", "run_export", "run_import"]


def register_transfer(verbs) -> None:
    i = verbs.add_parser("import",
                         help=_("a Hugging Face GPT-2 folder as an attnkit LM checkpoint"))  # fmt: skip
    i.add_argument("--from", dest="source_format", choices=["hf"], required=True,
                   help=_("the source's format: hf (a Hugging Face GPT-2 folder)"))  # fmt: skip
    i.add_argument("source", metavar="SRC",
                   help=_("a GPT-2 folder, or a hub name (fetched online)"))  # fmt: skip
    i.add_argument("out", metavar="OUT", help=_("the checkpoint folder to write"))
    i.add_argument("--overwrite", action="store_true", help=_("replace a checkpoint in OUT"))
    i.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    i.set_defaults(func=run_import)
    e = verbs.add_parser(
        "export", help=_("a decoder-only LM checkpoint as a Hugging Face GPT-2 folder")
    )
    e.add_argument("--to", dest="target_format", choices=["hf"], required=True,
                   help=_("the target's format: hf (a GPT-2 folder for GPT2LMHeadModel)"))  # fmt: skip
    e.add_argument("--checkpoint", required=True, metavar="DIR",
                   help=_("an LM checkpoint (lm train --arch transformer, lm import) or GPT-2 "
                          "folder"))  # fmt: skip
    e.add_argument("out", metavar="OUT", help=_("the folder to write"))
    e.add_argument("--overwrite", action="store_true", help=_("write into a non-empty OUT"))
    e.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    e.set_defaults(func=run_export)


def run_import(a: argparse.Namespace) -> int:
    from attnkit.convert.gpt2 import import_gpt2

    out = import_gpt2(a.source, a.out, overwrite=a.overwrite, say=print)
    print(_("wrote {out} (attnkit lm generate --checkpoint {out} --prompt ...)").format(out=out))
    return 0


def run_export(a: argparse.Namespace) -> int:
    from attnkit.convert.gpt2_export import export_gpt2
    from attnkit.convert.gpt2_tokenizer import GPT2BPETokenizer
    from attnkit.inference.loading import load_lm_checkpoint, load_lm_tokenizer
    from attnkit.models.decoder_lm import DecoderLM

    model, _vocab, config = load_lm_checkpoint(a.checkpoint, prepack=False)
    if not isinstance(model, DecoderLM):
        raise ValueError(
            _("{checkpoint} holds a recurrent language model ({cell}): only the decoder-only "
              "Transformer (lm train --arch transformer) maps onto GPT-2")
            .format(checkpoint=a.checkpoint, cell=config.get("cell", "rnn"))
        )  # fmt: skip
    tokenizer = load_lm_tokenizer(a.checkpoint, config)
    if tokenizer is not None and not isinstance(tokenizer, GPT2BPETokenizer):
        print(_("note: the checkpoint's {tokenizer} tokenizer is not GPT-2's byte-level BPE: the "
                "folder gets the model only").format(tokenizer=config.get("tokenizer")))  # fmt: skip
        tokenizer = None
    elif tokenizer is None:
        print(_("note: a character/word model: the folder gets the model only (no GPT-2 "
                "tokenizer)"))  # fmt: skip
    out = export_gpt2(model, a.out, tokenizer=tokenizer, overwrite=a.overwrite)
    files = ", ".join(sorted(p.name for p in out.iterdir()))
    print(_("wrote {out}: {files} (transformers: GPT2LMHeadModel.from_pretrained({path}))")
          .format(out=out, files=files, path=repr(str(out))))  # fmt: skip
    return 0
