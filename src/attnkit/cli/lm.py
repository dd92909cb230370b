"""``attnkit lm``: train language models (the book's RNNs of chapter 8, or the decoder-only
Transformer) and sample from them.

``attnkit lm train --cell gru --data timemachine.txt --epochs 500 --lr 1`` reproduces the
book's runs (batch 32, 35 steps, 256 hiddens, max 10000 tokens, SGD, clipping at 1);
without ``--data`` it trains on the corpus every Python ships (``pydoc_data.topics``).
``attnkit lm train --arch transformer`` trains the Transformer LM of the ``transformer``
recipe (``--positions``, ``--kv-heads``, ``--context`` ...); ``--tokenizer sentencepiece``
trains on SentencePiece pieces of the raw text instead of the book's letters.
``attnkit lm generate --checkpoint DIR --prompt "time traveller"`` samples from the result
(``attnkit.cli.lm_generate``). ``attnkit lm import --from hf SRC OUT`` and ``attnkit lm export
--to hf --checkpoint DIR OUT`` move GPT-2 models in and out (``attnkit.cli.lm_import``).
A checkpoint is saved after every epoch and on Ctrl-C/SIGTERM (after the current step);
``attnkit lm train --resume --out DIR`` continues it (model and data options not given are
read from the checkpoint; given ones must match it).

The model flags are ``LMConfig``'s and ``DecoderLMConfig``'s fields (``--layers`` is both
archs'), the training flags ``LMTrainConfig``'s (their help is the fields'
documentation); settings resolve in ``attnkit.training.recipes.resolve``: the arch's
recipe (``book`` or ``transformer``) < ``--preset`` < the checkpoint of ``--resume`` < the
flags given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import torch

from attnkit.i18n import _

__all__ = ["register", "run_train"]


def register(sub) -> None:
    from attnkit.cli.config_flags import add_config_flags
    from attnkit.cli.lm_generate import register_generate
    from attnkit.cli.lm_import import register_transfer
    from attnkit.models.decoder_lm import DecoderLMConfig
    from attnkit.models.registry import LM_ARCHS, LMConfig
    from attnkit.training.lm import LMTrainConfig
    from attnkit.training.recipes import LM_DEFAULTS, RECIPES

    book, tf = LM_DEFAULTS["rnn"], LM_DEFAULTS["transformer"]
    p = sub.add_parser("lm", help=_("language models (RNN, GRU, LSTM, Transformer): train, "
                                    "generate, import/export GPT-2"))  # fmt: skip
    verbs = p.add_subparsers(dest="lm_command", metavar=_("VERB"))
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    t = verbs.add_parser("train", help=_("train a character, word or subword language model"))
    # every setting defaults to None: a new run fills in the recipe's, --resume the
    # checkpoint's (and refuses model/data options that differ from them)
    t.add_argument("--arch", choices=list(LM_ARCHS), default=None,
                   help=_("rnn: the book's recurrent LMs (default); transformer: the "
                          "decoder-only Transformer"))  # fmt: skip
    t.add_argument(
        "--preset",
        metavar="NAME",
        help=_("a named recipe (attnkit.training.recipes): {names}; default: {book} for --arch "
               "rnn, {tf} for --arch transformer; flags override it")
        .format(names=", ".join(RECIPES["lm"]), book=book.name, tf=tf.name),
    )  # fmt: skip
    model = t.add_argument_group(
        _("model, --arch rnn (fields of LMConfig; --layers is both archs': default {rnn} for "
          "rnn, {tf} for transformer)").format(rnn=book.model.num_layers, tf=tf.model.num_layers)
    )  # fmt: skip
    add_config_flags(model, LMConfig, prefix="model__", defaults=dataclasses.asdict(book.model))
    model = t.add_argument_group(_("model, --arch transformer (fields of DecoderLMConfig)"))
    add_config_flags(model, DecoderLMConfig, prefix="model__", skip={"num_layers"},
                     defaults=dataclasses.asdict(tf.model))  # fmt: skip
    _data_flags(t.add_argument_group(_("data")), book.data, tf.data)
    train = t.add_argument_group(
        _("training (fields of LMTrainConfig; the defaults shown are --arch rnn's, --arch "
          "transformer's are its recipe's: {settings})")
        .format(settings=", ".join(f"{k}={v}" for k, v in tf.train.items()))
    )  # fmt: skip
    add_config_flags(train, LMTrainConfig, prefix="train__", defaults=book.train)
    t.add_argument("--device", default="cpu", help=_("cpu, cuda, cuda:0 ... (default cpu)"))
    t.add_argument("--threads", type=int, default=None, help=_("torch.set_num_threads"))
    t.add_argument("--out", default="runs/lm", help=_("checkpoint folder (default runs/lm)"))
    t.add_argument(
        "--resume",
        action="store_true",
        help=_("continue the checkpoint in --out (saved after every epoch and on Ctrl-C) "
               "until --epochs"),
    )  # fmt: skip
    t.add_argument("--overwrite", action="store_true",
                   help=_("replace a checkpoint already in --out"))  # fmt: skip
    t.add_argument("--sample-tokens", type=int, default=50, metavar="N",
                   help=_("tokens of each sample written to samples.txt after training "
                          "(default 50)"))  # fmt: skip
    t.add_argument(
        "--nproc",
        type=int,
        default=None,
        help=_("train with N processes (DistributedDataParallel, as torchrun does); "
               "--batch-size stays the global batch, split by rows"),
    )  # fmt: skip
    t.add_argument("--no-progress", action="store_true", help=_("no progress bar"))
    t.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    t.set_defaults(func=run_train)
    register_generate(verbs)
    register_transfer(verbs)


def _data_flags(data, book: dict, tf: dict) -> None:
    src = data.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="FILE",
                     help=_("a local UTF-8 text file (e.g. timemachine.txt)"))  # fmt: skip
    src.add_argument(
        "--dataset",
        choices=["builtin", "time_machine"],
        default=None,
        help=_("builtin: Python's pydoc topics, offline (default); time_machine: download"),
    )
    data.add_argument("--tokenizer", choices=["book", "sentencepiece"], default=None,
                      help=_("book: the book's letters and spaces, as --token characters or "
                             "words (default); sentencepiece: subword pieces of the raw text, "
                             "trained on it"))  # fmt: skip
    data.add_argument("--token", choices=["char", "word"], default=None,
                      help=_("with --tokenizer book (default {token})").format(token=book["token"]))  # fmt: skip
    data.add_argument("--vocab-size", type=int, default=None, metavar="N",
                      help=_("SentencePiece pieces, with --tokenizer sentencepiece (default {n})")
                      .format(n=book["subword_vocab"]))  # fmt: skip
    data.add_argument("--max-tokens", type=int, default=None,
                      help=_("-1 for all (default {rnn} for rnn, {tf} for transformer)")
                      .format(rnn=book["max_tokens"], tf=tf["max_tokens"]))  # fmt: skip
    data.add_argument("--batch-size", type=int, default=None,
                      help=_("the global batch (default {rnn} for rnn, {tf} for transformer)")
                      .format(rnn=book["batch_size"], tf=tf["batch_size"]))  # fmt: skip
    data.add_argument("--num-steps", type=int, default=None,
                      help=_("time steps per batch (default {rnn} for rnn, the --context for "
                             "transformer)").format(rnn=book["num_steps"]))  # fmt: skip
    data.add_argument("--random-iter", action="store_true", default=None,
                      help=_("random sampling, not sequential (transformer: the default)"))  # fmt: skip
    data.add_argument("--val-fraction", type=float, default=None, metavar="F",
                      help=_("the last F of the corpus held out for the validation perplexity "
                             "(default {rnn} for rnn, {tf} for transformer)")
                      .format(rnn=book["val_fraction"], tf=tf["val_fraction"]))  # fmt: skip
    data.add_argument("--val-steps", type=int, default=None, metavar="N",
                      help=_("tokens per validation window, each from a fresh state (default: "
                             "--num-steps); one length for models trained on different "
                             "windows"))  # fmt: skip


def _positive(flag: str, value: int) -> None:
    if value <= 0:
        raise ValueError(_("{flag} must be positive, got {value}").format(flag=flag, value=value))


def _checkpoint_config(out: Path) -> dict | None:
    """``out/config.json`` parsed, or None when ``out`` holds no checkpoint."""
    path = out / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(
            _("{path} is not readable JSON ({error})").format(path=path, error=e)
        ) from None
    return config if isinstance(config, dict) else {}


def _is_lm(config: dict) -> bool:
    return config.get("task") == "lm" or "cell" in config


def _kind(config: dict) -> str:
    """What a checkpoint's config.json holds, for messages."""
    if not _is_lm(config):
        return _("not a language model")
    arch = config.get("cell") if config.get("arch", "rnn") == "rnn" else config.get("arch")
    done = config.get("epochs_done", config.get("epochs"))
    return _("{arch} language model, epoch {done} of {epochs}").format(
        arch=arch, done=done, epochs=config.get("epochs"))  # fmt: skip


def _resolve(a: argparse.Namespace):
    """The run's settings (``Resolved``) and the checkpoint's config it resumes (or None):
    the recipe's, the checkpoint's with --resume, the flags given.

    Refuses to train into a used folder without --resume/--overwrite and, with --resume,
    a checkpoint it cannot continue (model/data options that differ from it are refused
    by the resolution).
    """
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.cli.config_flags import given_flags
    from attnkit.training.recipes import resolve

    out = Path(a.out)
    if a.resume and a.overwrite:
        raise ValueError(_("--resume and --overwrite exclude each other: continue or replace"))
    previous = _checkpoint_config(out)
    if previous is not None and not (a.resume or a.overwrite):
        raise ValueError(
            _("{out} already holds a checkpoint ({kind}); pass --resume to continue it, "
              "--overwrite to replace it, or --out for a new folder")
            .format(out=out, kind=_kind(previous))
        )  # fmt: skip
    if not a.resume or previous is None:
        if a.resume and os.environ.get("RANK", "0") == "0":
            print(_("note: no checkpoint in {out} yet; starting a new run").format(out=out),
                  file=sys.stderr)  # fmt: skip
        previous = None
    elif not _is_lm(previous):
        raise ValueError(
            _("{out} holds a translation checkpoint, not a language model from "
              "`attnkit lm train`").format(out=out)
        )  # fmt: skip
    elif previous.get("format") is None:
        read_checkpoint_config(out, task="lm")  # the layout before the one format: one error
    elif "trainer" not in previous.get("files", {}):
        raise ValueError(
            _("{out} holds a language model without training state (weights only), so it "
              "cannot be resumed. Pass --overwrite to replace it, or --out for a new folder")
            .format(out=out)
        )  # fmt: skip
    data = {"source": a.data or a.dataset, "token": a.token, "max_tokens": a.max_tokens,
            "batch_size": a.batch_size, "num_steps": a.num_steps, "use_random_iter": a.random_iter,
            "val_fraction": a.val_fraction, "val_steps": a.val_steps, "tokenizer": a.tokenizer,
            "subword_vocab": a.vocab_size}  # fmt: skip
    flags = {"model": given_flags(a, "model__"), "train": given_flags(a, "train__"), "data": data}
    resolved = resolve(
        "lm", arch=a.arch, preset=a.preset, checkpoint=previous, flags=flags, where=str(out)
    )
    return resolved, previous


def run_train(a: argparse.Namespace) -> int:
    from attnkit import distributed

    sizes = {"--layers": a.model__num_layers, "--hiddens": a.model__num_hiddens,
             "--batch-size": a.batch_size, "--num-steps": a.num_steps, "--val-steps": a.val_steps,
             "--epochs": a.train__epochs, "--threads": a.threads}  # fmt: skip
    for flag, value in sizes.items():  # the given ones: before looking at --out
        if value is not None:
            _positive(flag, value)
    if a.sample_tokens < 0:
        raise ValueError(_("--sample-tokens must be >= 0, got {n}").format(n=a.sample_tokens))
    resolved, previous = _resolve(a)
    batch_size = resolved.data["batch_size"]
    _rank, world, _local = distributed.world_from_env()
    if a.nproc is not None:
        _positive("--nproc", a.nproc)
    processes = a.nproc if world == 1 and a.nproc is not None else world
    if processes > batch_size:
        raise ValueError(
            _("--batch-size {batch} is the global batch, split by rows over {n} processes: it "
              "must be at least {n}").format(batch=batch_size, n=processes)
        )  # fmt: skip
    if processes > 1 and world == 1:
        # relaunch this very command in N processes (what torchrun would do)
        return distributed.launch(processes, distributed.without_nproc(a.argv))
    rank, world = distributed.init_from_env(a.device)
    try:
        return _train(a, resolved, previous, rank, world)
    finally:
        distributed.cleanup()


def _corpus(d, out: Path, previous: dict | None):
    """The corpus as token ids, its vocabulary and its SentencePiece tokenizer (None for
    the book's characters or words); a resumed subword run reads its tokenizer back."""
    from attnkit.data.lm import load_corpus, read_corpus_lines
    from attnkit.data.lm_subword import LMSubwordTokenizer
    from attnkit.inference.loading import load_lm_tokenizer

    if d["tokenizer"] != "sentencepiece":
        corpus, vocab = load_corpus(read_corpus_lines(d["source"]), d["token"], d["max_tokens"])
        return corpus, vocab, None
    lines = read_corpus_lines(d["source"], normalize=False)
    if previous is not None:
        tokenizer = load_lm_tokenizer(out, previous)
    else:
        tokenizer = LMSubwordTokenizer.train(lines, vocab_size=d["subword_vocab"])
    corpus = tokenizer.encode_lines(lines)
    if d["max_tokens"] > 0:
        corpus = corpus[: d["max_tokens"]]
    return corpus, tokenizer.vocab, tokenizer


def _run_config(arch: str, model, resolved, world: int, tokenizer) -> dict:
    """What config.json records of the run: "arch", the model's config fields, the data
    and training settings (``LMTask.checkpoint_config`` adds the vocabulary)."""
    m, c, d = resolved.model, resolved.train, resolved.data
    fields = model.config.to_dict() if arch == "transformer" else dataclasses.asdict(m)
    data = {
        "token": d["token"], "tokenizer": d["tokenizer"],
        "preprocess": "none" if tokenizer is not None else "letters-lowercase",
        "data": str(d["source"]), "max_tokens": d["max_tokens"],
        "batch_size": d["batch_size"], "num_steps": d["num_steps"],
        "use_random_iter": d["use_random_iter"], "val_fraction": d["val_fraction"],
        "val_steps": d["val_steps"],
    }  # fmt: skip
    if tokenizer is not None:
        data["subword_vocab"], data["tokenizer_model"] = d["subword_vocab"], tokenizer.meta()
    train = {k: getattr(c, k) for k in ("epochs", "optimizer", "lr", "clip", "seed", "schedule",
                                        "warmup_steps", "precision", "time_budget_s",
                                        "save_every_minutes", "save_every_steps",
                                        "max_nonfinite_steps", "divergence_factor")}  # fmt: skip
    return {"arch": arch, **fields, **data, **train, "processes": world}


def _train(a: argparse.Namespace, resolved, previous, rank: int, world: int) -> int:
    from attnkit.cli.config_flags import describe
    from attnkit.cli.lm_report import (
        describe_model,
        model_kind,
        plot_perplexity,
        run_line,
        write_samples,
    )
    from attnkit.data.lm import LMDataLoader
    from attnkit.metrics import perplexity
    from attnkit.training.engine import Engine
    from attnkit.training.lm import LMHistory, LMTask

    say = print if rank == 0 else (lambda *args, **kwargs: None)
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    arch, m, c, d = resolved.arch, resolved.model, resolved.train, resolved.data
    source, out = d["source"], Path(a.out)
    say(_("settings: {settings}").format(settings=describe(resolved)))
    torch.manual_seed(c.seed)
    corpus, vocab, tokenizer = _corpus(d, out, previous)
    held = int(len(corpus) * d["val_fraction"])  # the last tokens: the validation split
    train_ids, val_ids = corpus[: len(corpus) - held], (corpus[len(corpus) - held :] or None)
    loader = LMDataLoader(
        train_ids, d["batch_size"], d["num_steps"], d["use_random_iter"], seed=c.seed,
        rank=rank, world_size=world,
    )  # fmt: skip
    device = torch.device(a.device)
    model = m.build(len(vocab)).to(device)
    if tokenizer is not None and rank == 0:
        tokenizer.save(out)  # beside config.json (its sha256 goes into it)
    run_config = _run_config(arch, model, resolved, world, tokenizer)
    config = c.engine_config(out_dir=str(out), device=a.device, progress=not a.no_progress)
    task = LMTask(
        loader, use_random_iter=d["use_random_iter"], vocab=vocab, run_config=run_config,
        val_data=None if val_ids is None else torch.tensor(val_ids),
        val_steps=d["val_steps"], val_batch_size=d["batch_size"],
    )  # fmt: skip
    engine = Engine(model, task, config)
    if a.resume and (out / "config.json").is_file():
        engine.resume()  # the optimizer takes this run's lr (--lr may change on resume)
        if engine.epoch >= c.epochs:
            say(_("nothing to train: {out} is at epoch {epoch} of --epochs {epochs} (pass a "
                  "larger --epochs to train on)").format(out=out, epoch=engine.epoch,
                                                         epochs=c.epochs))  # fmt: skip
            return 0
    if world > 1:
        say(_("distributed: {world} processes; --batch-size {batch} is global")
            .format(world=world, batch=d["batch_size"]))  # fmt: skip
    say(run_line(describe_model(arch, model, m), len(vocab), len(corpus), held, source, c,
                  "subword" if tokenizer is not None else d["token"]))  # fmt: skip
    if a.resume and engine.step:
        if engine.batch_in_epoch:
            at = _("resuming {out} after epoch {epoch}, batch {batch} of epoch {next}")
        else:
            at = _("resuming {out} after epoch {epoch}")
        say(at.format(out=out, epoch=engine.epoch, batch=engine.batch_in_epoch,
                      next=engine.epoch + 1))  # fmt: skip
    history = LMHistory.from_engine(engine.fit())  # TrainingInterrupted: saved, exit 130
    ppl = perplexity(engine.history["train_loss"][-1])
    val = engine.history.get("val_perplexity", [])
    speed = sum(history.tokens_per_sec) / len(history.tokens_per_sec)
    if val:
        done = _("perplexity {ppl:.2f}, validation perplexity {val:.2f}, {speed:.1f} tokens/sec "
                 "on {device}, {seconds:.1f} s")  # fmt: skip
    else:
        done = _("perplexity {ppl:.2f}, {speed:.1f} tokens/sec on {device}, {seconds:.1f} s")
    say(done.format(ppl=ppl, val=val[-1] if val else 0.0, speed=speed, device=device,
                    seconds=history.seconds))  # fmt: skip
    if rank != 0:  # rank 0 alone writes the checkpoint, the plot and the samples
        return 0
    # the checkpoint (config.json with the vocabulary and history, weights, trainer
    # state) was written after the last epoch
    title = {"model": model_kind(arch, m), "corpus": Path(str(source)).name}
    plot_perplexity(out, history.perplexity, val, title)
    write_samples(a, out, model, vocab, tokenizer, d, c.seed)
    print(_("wrote {out}/config.json, model and trainer state, perplexity.png, samples.txt")
          .format(out=out))  # fmt: skip
    return 0
