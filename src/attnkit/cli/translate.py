"""``attnkit translate``: train, evaluate and run English -> French translators.

    attnkit translate train --arch bahdanau --epochs 30 --out runs/bahdanau
    attnkit translate train --arch bahdanau --out runs/bahdanau --resume --epochs 40
    attnkit translate eval --checkpoint runs/bahdanau              # test BLEU + chrF
    attnkit translate run --checkpoint runs/bahdanau "i lost ." --heatmap align.png
    attnkit translate export --checkpoint runs/base --to ctranslate2 runs/base-ct2
    attnkit translate import --from hf Helsinki-NLP/opus-mt-en-fr runs/opus-en-fr

``eval`` and ``run`` live in :mod:`attnkit.cli.translate_trained`; this module parses all
three verbs and trains.
Architectures come from the model registry (``attnkit.models.registry``): every field
of every registered arch's config dataclass becomes a flag (``--num-hiddens 64``; a name
that clashes with another flag gets a ``--model-`` prefix, e.g. ``--model-max-len``), and
``--model-config KEY=VALUE`` passes any field by name. A flag that the chosen arch's
config does not have is an error. The training flags are ``TrainConfig``'s fields, their
help its fields' documentation (``attnkit.cli.config_flags``). Without ``--data`` the
generated EN-FR corpus is used. Settings resolve in ``attnkit.training.recipes.resolve``:
defaults < ``--preset`` < the checkpoint of ``--resume`` < the flags given.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import typing
from pathlib import Path
from typing import Any

from attnkit.cli.translate_trained import check_device, run_average, run_eval, run_run
from attnkit.i18n import N_, _

__all__ = ["register", "run_train"]


def _arch_fields() -> dict[str, tuple[type, list[str]]]:
    """Union of the config fields of every registered arch -> (type, archs having it)."""
    from attnkit.models.registry import _ARCHS

    fields: dict[str, tuple[type, list[str]]] = {}
    for name, arch in sorted(_ARCHS.items()):
        hints = typing.get_type_hints(type(arch.default_config))
        for f in dataclasses.fields(arch.default_config):
            archs = fields.setdefault(f.name, (hints.get(f.name, str), []))[1]
            archs.append(name)
    return fields


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(
        _("expected true or false, got {text}").format(text=repr(text)))  # fmt: skip


def register(sub) -> None:
    from attnkit.cli.config_flags import add_config_flags
    from attnkit.models.registry import available_archs
    from attnkit.training.recipes import DEFAULTS, RECIPES
    from attnkit.training.translation import TrainConfig

    presets = "; ".join(f"{n} (--arch {r.arch})" for n, r in RECIPES["translate"].items())

    p = sub.add_parser(
        "translate", help=_("English -> French translation: train, eval, run, average, export")
    )
    verbs = p.add_subparsers(dest="translate_command", metavar=_("VERB"))
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    t = verbs.add_parser("train", help=_("train a translator (checkpoint folder in --out)"))
    t.add_argument("--arch", choices=available_archs(), help=_("model architecture (registry)"))
    t.add_argument("--out", default=None,
                   help=_("checkpoint folder (default runs/translate-ARCH)"))  # fmt: skip
    t.add_argument("--resume", action="store_true", help=_("continue the checkpoint in --out"))
    t.add_argument("--overwrite", action="store_true",
                   help=_("replace a checkpoint already in --out"))  # fmt: skip
    t.add_argument(
        "--preset",
        metavar="NAME",
        help=_("a named recipe (attnkit.training.recipes): its model config, training and data "
               "settings; flags override it. {presets}").format(presets=presets),
    )  # fmt: skip
    t.add_argument(
        "--nproc",
        type=int,
        default=None,
        help=_("train with N processes (DistributedDataParallel, as torchrun does); "
               "--batch-tokens stays the global batch"),
    )  # fmt: skip
    _data_flags(t.add_argument_group(_("data")))
    opt = t.add_argument_group(_("training (fields of TrainConfig)"))
    add_config_flags(opt, TrainConfig, prefix="train__", defaults=DEFAULTS["translate"].train)
    opt.add_argument("--threads", type=int, default=None, help=_("torch.set_num_threads"))
    opt.add_argument("--no-progress", action="store_true", help=_("no progress bar"))
    model = t.add_argument_group(_("model (fields of the arch's config; see the registry)"))
    for name, (typ, archs) in _arch_fields().items():
        kind = _bool if typ is bool else typ if typ in (int, float, str) else str
        flag = "--" + name.replace("_", "-")
        if flag in t._option_string_actions:  # e.g. the data's --max-len
            flag = "--model-" + name.replace("_", "-")
        model.add_argument(
            flag,
            dest=f"model__{name}",
            type=kind,
            default=None,
            metavar=getattr(typ, "__name__", "VALUE").upper(),
            help=f"({', '.join(archs)})",
        )
    model.add_argument(
        "--model-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=_("any model config field, repeatable"),
    )
    t.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    t.set_defaults(func=run_train)

    e = verbs.add_parser("eval", help=_("BLEU and chrF of a checkpoint on the test split"))
    e.add_argument("--checkpoint", required=True, metavar="DIR")
    e.add_argument("--split", choices=["train", "val", "test"], default="test")
    e.add_argument("--data", metavar="FILE", help=_("override the data file recorded in DIR"))
    e.add_argument("--limit", type=int, default=None, help=_("score the first N pairs only"))
    e.add_argument("--examples", type=int, default=3, help=_("print N example translations"))
    e.add_argument("--beam", type=int, default=None, metavar="N",
                   help=_("beam search with N hypotheses (length penalty 0.6); default "
                          "greedy"))  # fmt: skip
    e.add_argument("--max-len", type=int, default=None, metavar="N", help=_(MAX_LEN_HELP))
    e.add_argument("--device", default="cpu")
    e.add_argument("--int8", action="store_true", help=_(INT8_HELP))
    e.add_argument("--shortlist", metavar="FILE", help=_(SHORTLIST_HELP))
    e.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    e.set_defaults(func=run_eval)

    a = verbs.add_parser(
        "average",
        help=_("average the weights of a run's last N snapshots into a new checkpoint"),
    )
    a.add_argument("--checkpoint", required=True, metavar="DIR",
                   help=_("a run trained with --snapshot-every-steps or "
                          "--snapshot-every-minutes"))  # fmt: skip
    a.add_argument("--last", type=int, required=True, metavar="N",
                   help=_("snapshots to average"))  # fmt: skip
    a.add_argument("--out", required=True, metavar="DIR", help=_("the new checkpoint folder"))
    a.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    a.set_defaults(func=run_average)
    from attnkit.cli.translate_export import register_export

    register_export(verbs)  # attnkit translate export --checkpoint DIR --to ctranslate2 OUT
    from attnkit.cli.translate_import import register_import

    register_import(verbs)  # attnkit translate import --from hf SRC OUT
    from attnkit.cli.translate_contrast import register_contrast

    register_contrast(verbs)  # attnkit translate contrast --checkpoint DIR --pairs FILE.tsv
    from attnkit.cli.translate_shortlist import register_shortlist

    register_shortlist(verbs)  # attnkit translate shortlist --checkpoint DIR [--out FILE]

    r = verbs.add_parser("run", help=_("translate sentences with a checkpoint"))
    r.add_argument("--checkpoint", required=True, metavar="DIR")
    r.add_argument("sentences", nargs="*", metavar="SENTENCE", help=_('e.g. "I lost."'))
    r.add_argument(
        "--input",
        metavar="FILE",
        help=_("translate FILE's lines instead (UTF-8, one sentence per line; - for stdin): "
               "one translation per line, in order"),
    )  # fmt: skip
    r.add_argument(
        "--batch-size", type=int, default=64, help=_("sentences decoded together (default 64)")
    )
    r.add_argument(
        "--merge-pieces",
        action="store_true",
        help=_("with --heatmap on a subword model: words on the axes instead of pieces "
               "(attention to a word = sum over its pieces, from a word = mean of its pieces' "
               "rows)"),
    )  # fmt: skip
    r.add_argument(
        "--heatmap",
        metavar="PNG",
        help=_("write the attention maps (Transformer: encoder self, decoder self and "
               "encoder-decoder attention; Bahdanau: its alignment) to this image "
               "(.png, .svg, .pdf ...; one file per sentence, -0, -1 ... when several)"),
    )  # fmt: skip
    r.add_argument(
        "--all-heads",
        action="store_true",
        help=_("with --heatmap: every layer and head (Transformer: encoder self, decoder self, "
               "encoder-decoder attention)"),
    )  # fmt: skip
    r.add_argument("--beam", type=int, default=None, metavar="K",
                   help=_("beam search of width K"))  # fmt: skip
    r.add_argument("--length-penalty", type=float, default=0.6,
                   help=_("GNMT alpha for --beam"))  # fmt: skip
    r.add_argument("--max-len", type=int, default=None, metavar="N", help=_(MAX_LEN_HELP))
    r.add_argument(
        "--allow-unknown",
        action="store_true",
        help=_("translate words not in the English vocabulary as <unk> (default: error)"),
    )
    r.add_argument("--device", default="cpu")
    r.add_argument("--int8", action="store_true", help=_(INT8_HELP))
    r.add_argument("--shortlist", metavar="FILE", help=_(SHORTLIST_HELP))
    r.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    r.set_defaults(func=run_run)


SHORTLIST_HELP = N_(
    "decode over a vocabulary shortlist (a file of 'translate shortlist'): "
    "the output layer computes only the words likely for each batch"
)
INT8_HELP = N_("linear layers in int8 (CPU): faster in batches, a few outputs change")
MAX_LEN_HELP = N_("at most N new tokens, <eos> included (as transformers' max_new_tokens); "
                  "default: the model's length limit")  # fmt: skip


def _data_flags(data) -> None:
    """The data options of ``translate train`` (their defaults: the recipe's)."""
    data.add_argument("--data", metavar="FILE",
                      help=_("fra.txt-format file (default: generated)"))  # fmt: skip
    data.add_argument("--num-examples", type=int, help=_("keep the first N pairs"))
    data.add_argument("--num-pairs", type=int, default=None, help=_("generated pairs (20000)"))
    data.add_argument("--max-len", type=int, default=None,
                      help=_("tokens + <eos> per side (12)"))  # fmt: skip
    data.add_argument("--min-freq", type=int, default=None, help=_("vocabulary min count (2)"))
    data.add_argument("--val-fraction", type=float, default=None, help=_("default 0.05"))
    data.add_argument("--test-fraction", type=float, default=None, help=_("default 0.05"))
    data.add_argument(
        "--tokenizer",
        choices=["word", "sentencepiece"],
        default=None,
        help=_("word (the book's, default) or sentencepiece subwords trained on the training "
               "split"),
    )  # fmt: skip
    data.add_argument("--vocab-size", type=int, default=None, help=_("subword pieces (8000)"))
    data.add_argument(
        "--subword-type", choices=["unigram", "bpe"], default=None, help=_("default unigram")
    )
    data.add_argument(
        "--separate-vocab",
        action="store_true",
        help=_("one subword model per language (default: one joint model for both)"),
    )


# ----------------------------------------------------------------------------- train


def _model_overrides(args: argparse.Namespace, arch: str) -> dict[str, Any]:
    from attnkit.models.registry import arch_config, parse_config_overrides

    given = {
        k[len("model__") :]: v
        for k, v in vars(args).items()
        if k.startswith("model__") and v is not None
    }
    given.update(parse_config_overrides(arch, args.model_config))
    arch_config(arch, given)  # unknown fields / bad values -> ValueError now
    return given


_DATA_KEYS = ("data", "num_examples", "num_pairs", "max_len", "min_freq", "val_fraction",
              "test_fraction", "tokenizer", "vocab_size", "subword_type")  # fmt: skip


def run_train(args: argparse.Namespace) -> int:
    import torch

    from attnkit import distributed
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.cli.config_flags import describe, given_flags
    from attnkit.data.subword import SubwordTokenizer
    from attnkit.data.translation import load_translation_data
    from attnkit.models.registry import build_model
    from attnkit.training.recipes import resolve
    from attnkit.training.translation import Trainer

    train_flags = given_flags(args, "train__")
    if "device" in train_flags:
        check_device(train_flags["device"])
    _rank, world, _local = distributed.world_from_env()
    if args.nproc is not None and args.nproc < 1:
        raise ValueError(_("--nproc must be a positive int, got {n}").format(n=args.nproc))
    if args.nproc is not None and args.nproc > 1 and world == 1:
        # relaunch this very command in N processes (what torchrun would do)
        return distributed.launch(args.nproc, distributed.without_nproc(args.argv))
    budget = train_flags.get("time_budget_s")
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise ValueError(_("--time-budget must be a positive number of seconds, got {budget:g}")
                         .format(budget=budget))  # fmt: skip
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(_("--threads must be positive, got {n}").format(n=args.threads))
        torch.set_num_threads(args.threads)
    previous = None
    out = Path(args.out) if args.out else None
    if args.resume:
        if out is None:
            raise ValueError(_("--resume needs --out DIR (the checkpoint folder to continue)"))
        if (out / "config.json").exists():
            previous = read_checkpoint_config(out)
        else:
            print(_("note: no checkpoint in {out} yet; starting a new run").format(out=out),
                  file=sys.stderr)  # fmt: skip
    arch = args.arch or (previous or {}).get("arch")
    if arch is None:
        raise ValueError(_("--arch is required (unless --resume finds a checkpoint)"))
    if previous is not None and previous["arch"] != arch:
        raise ValueError(
            _("checkpoint {out} was trained with arch {trained}, not {arch}")
            .format(out=out, trained=repr(previous["arch"]), arch=repr(arch))
        )  # fmt: skip
    out = out or Path(f"runs/translate-{arch}")
    # never train over a finished (or interrupted) run by accident
    if not (args.resume or args.overwrite) and (out / "config.json").exists():
        existing = read_checkpoint_config(out)
        raise ValueError(
            _("{out} already holds a checkpoint (arch {arch}, epoch {epoch}); pass --resume to "
              "continue it, --overwrite to replace it, or --out for a new folder")
            .format(out=out, arch=repr(existing.get("arch")), epoch=existing.get("epoch"))
        )  # fmt: skip
    data_flags = {key: getattr(args, key) for key in _DATA_KEYS}
    data_flags["joint_vocab"] = False if args.separate_vocab else None
    train_flags.update(out_dir=str(out), progress=not args.no_progress)
    flags = {"model": _model_overrides(args, arch), "train": train_flags, "data": data_flags}
    resolved = resolve("translate", arch=arch, preset=args.preset, checkpoint=previous,
                       flags=flags, where=str(out))  # fmt: skip
    config, data_args = resolved.train, dict(resolved.data)
    # a resumed run records its checkpoint's model config as it is
    model_config = (
        dict(previous["model_config"]) if previous else dataclasses.asdict(resolved.model)
    )

    rank, world = distributed.init_from_env(config.device)
    say = print if rank == 0 else (lambda *a, **k: None)
    say(_("settings: {settings}").format(settings=describe(resolved)))
    subword = None
    if previous is not None and previous["data"].get("tokenizer") is not None:
        subword = SubwordTokenizer.load(out, previous["data"]["tokenizer"])  # as trained
    data = load_translation_data(**data_args, subword=subword)
    say(_("data: {data}").format(data=data))
    if data.tokenizer is not None and rank == 0:  # beside config.json, before any save
        data.tokenizer.save(out)
    if world > 1:
        say(_("distributed: {world} processes; --batch-tokens {batch} is global")
            .format(world=world, batch=config.batch_tokens))  # fmt: skip
    torch.manual_seed(config.seed)
    model = build_model(arch, model_config, len(data.src_vocab), len(data.tgt_vocab))
    n_params = sum(p.numel() for p in model.parameters())
    say(_("model: {arch} {config}, {params:,} parameters").format(arch=arch, config=model_config,
                                                                  params=n_params))  # fmt: skip
    try:
        return _fit(Trainer(model, data, config, arch=arch, model_config=model_config,
                            data_args=data_args), previous, out, config, say)  # fmt: skip
    finally:
        distributed.cleanup()


def _fit(trainer, previous, out: Path, config, say) -> int:
    if previous is not None and trainer.resume(out):
        if trainer.batch_in_epoch:
            text = _("resumed {out} at epoch {epoch} batch {batch} (step {step})")
        else:
            text = _("resumed {out} at epoch {epoch} (step {step})")
        say(text.format(out=out, epoch=trainer.epoch, batch=trainer.batch_in_epoch,
                        step=trainer.step))  # fmt: skip
    if trainer.epoch >= config.epochs:
        say(_("nothing to do: {done} epochs done, --epochs {epochs}")
            .format(done=trainer.epoch, epochs=config.epochs))  # fmt: skip
        return 0
    history = trainer.fit()
    val_loss, val_bleu = history["val_loss"][-1], history["val_bleu"][-1]
    val = (
        _("no validation split")
        if math.isnan(val_loss)
        else _("val loss {loss:.3f}, val BLEU {bleu:.1f}").format(loss=val_loss, bleu=val_bleu)
    )
    where = _("epoch {epoch} + {batches} batches") if trainer.batch_in_epoch else _("epoch {epoch}")
    where = where.format(epoch=trainer.epoch, batches=trainer.batch_in_epoch)
    minutes = trainer.train_seconds() / 60
    say(_("saved {out}: {where}, step {step}, {minutes:.1f} min of training, {val}")
        .format(out=out, where=where, step=trainer.step, minutes=minutes, val=val))  # fmt: skip
    if getattr(trainer, "stopped_by_budget", False):
        say(_("stopped by --time-budget; `attnkit translate eval --checkpoint {out}` scores "
              "the test split, `--resume` trains on").format(out=out))  # fmt: skip
    return 0
