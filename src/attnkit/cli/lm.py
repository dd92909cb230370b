"""``attnkit lm``: train recurrent language models (the book's chapter 8) and sample from them.

``attnkit lm train --cell gru --data timemachine.txt --epochs 500 --lr 1`` reproduces the
book's runs (batch 32, 35 steps, 256 hiddens, max 10000 tokens, SGD, clipping at 1);
without ``--data`` it trains on the corpus every Python ships (``pydoc_data.topics``).
``attnkit lm generate --checkpoint DIR --prefix "time traveller"`` samples from the result.
A checkpoint is saved after every epoch and on Ctrl-C/SIGTERM (after the current step);
``attnkit lm train --resume --out DIR`` continues it (model and data options not given
are read from the checkpoint; given ones must match it).

The model flags are ``LMConfig``'s fields, the training flags ``LMTrainConfig``'s (their
help is the fields' documentation); settings resolve in
``attnkit.training.recipes.resolve``: the ``book`` recipe's defaults < ``--preset`` < the
checkpoint of ``--resume`` < the flags given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

import torch

__all__ = ["register", "run_generate", "run_train"]

DEFAULT_PREFIXES = ("time traveller", "traveller")


def register(sub) -> None:
    from attnkit.cli.config_flags import add_config_flags
    from attnkit.models.registry import LMConfig
    from attnkit.training.lm import LMTrainConfig
    from attnkit.training.recipes import DEFAULTS, RECIPES

    defaults = DEFAULTS["lm"]
    data_default = defaults.data
    p = sub.add_parser("lm", help="recurrent language models (RNN, GRU, LSTM): train, generate")
    verbs = p.add_subparsers(dest="lm_command", metavar="VERB")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    t = verbs.add_parser("train", help="train a character (or word) language model")
    # every setting defaults to None: a new run fills in the recipe's, --resume the
    # checkpoint's (and refuses model/data options that differ from them)
    t.add_argument(
        "--preset",
        metavar="NAME",
        help=f"a named recipe (attnkit.training.recipes): {', '.join(RECIPES['lm'])}; "
        f"default {defaults.name}; flags override it",
    )
    model = t.add_argument_group("model (fields of LMConfig)")
    add_config_flags(model, LMConfig, prefix="model__", defaults=dataclasses.asdict(defaults.model))
    data = t.add_argument_group("data")
    src = data.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="FILE", help="a local text file (e.g. timemachine.txt)")
    src.add_argument(
        "--dataset",
        choices=["builtin", "time_machine"],
        default=None,
        help="builtin: Python's pydoc topics, offline (default); time_machine: download",
    )
    data.add_argument("--token", choices=["char", "word"], default=None,
                      help=f"default {data_default['token']}")  # fmt: skip
    data.add_argument("--max-tokens", type=int, default=None,
                      help=f"-1 for all (default {data_default['max_tokens']})")  # fmt: skip
    data.add_argument("--batch-size", type=int, default=None,
                      help=f"the global batch (default {data_default['batch_size']})")  # fmt: skip
    data.add_argument("--num-steps", type=int, default=None,
                      help=f"time steps per batch (default {data_default['num_steps']})")  # fmt: skip
    data.add_argument("--random-iter", action="store_true", default=None,
                      help="random sampling, not sequential")  # fmt: skip
    train = t.add_argument_group("training (fields of LMTrainConfig)")
    add_config_flags(train, LMTrainConfig, prefix="train__", defaults=defaults.train)
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0 ... (default cpu)")
    t.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    t.add_argument("--out", default="runs/lm", help="checkpoint folder (default runs/lm)")
    t.add_argument(
        "--resume",
        action="store_true",
        help="continue the checkpoint in --out (saved after every epoch and on Ctrl-C) "
        "until --epochs",
    )
    t.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in --out")
    t.add_argument("--num-preds", type=int, default=50)
    t.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="train with N processes (DistributedDataParallel, as torchrun does); "
        "--batch-size stays the global batch, split by rows",
    )
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--debug", action="store_true", help="show tracebacks")
    t.set_defaults(func=run_train)

    g = verbs.add_parser("generate", help="continue a prefix with a trained model")
    g.add_argument("--checkpoint", required=True, metavar="DIR", help="folder from `lm train`")
    g.add_argument("--prefix", default="time traveller")
    g.add_argument("--num-preds", type=int, default=50)
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--seed", type=int, default=0, help="for temperature sampling")
    g.add_argument("--device", default="cpu")
    g.add_argument("--debug", action="store_true", help="show tracebacks")
    g.set_defaults(func=run_generate)


def _positive(flag: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{flag} must be positive, got {value}")


def _prepare_prefix(prefix: str) -> str:
    """Normalize the prefix as the corpus was (letters, lowercase); say so if it changed."""
    from attnkit.data.lm import normalize_line

    norm = normalize_line(prefix)
    if norm != prefix:
        print(f"prefix normalized like the corpus: {prefix!r} -> {norm!r}", file=sys.stderr)
    return norm


def _checkpoint_config(out: Path) -> dict | None:
    """``out/config.json`` parsed, or None when ``out`` holds no checkpoint."""
    path = out / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not readable JSON ({e})") from None
    return config if isinstance(config, dict) else {}


def _resolve(a: argparse.Namespace):
    """The run's settings (``Resolved``): the recipe's, the checkpoint's with --resume, the
    flags given.

    Refuses to train into a used folder without --resume/--overwrite and, with --resume,
    a checkpoint it cannot continue (model/data options that differ from it are refused
    by the resolution).
    """
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.cli.config_flags import given_flags
    from attnkit.training.recipes import resolve

    out = Path(a.out)
    if a.resume and a.overwrite:
        raise ValueError("--resume and --overwrite exclude each other: continue or replace")
    previous = _checkpoint_config(out)
    if previous is not None and not (a.resume or a.overwrite):
        what = (
            f"{previous.get('cell')} language model, epoch "
            f"{previous.get('epochs_done', previous.get('epochs'))} of {previous.get('epochs')}"
            if "cell" in previous
            else "not a language model"
        )
        raise ValueError(
            f"{out} already holds a checkpoint ({what}); pass --resume to continue it, "
            "--overwrite to replace it, or --out for a new folder"
        )
    if not a.resume or previous is None:
        if a.resume and os.environ.get("RANK", "0") == "0":
            print(f"note: no checkpoint in {out} yet; starting a new run", file=sys.stderr)
        previous = None
    elif "cell" not in previous:
        raise ValueError(
            f"{out} holds a translation checkpoint, not a language model from `attnkit lm train`"
        )
    elif previous.get("format") is None:
        read_checkpoint_config(out, task="lm")  # the layout before the one format: one error
    elif "trainer" not in previous.get("files", {}):
        raise ValueError(
            f"{out} holds a language model without training state (weights only), so it "
            "cannot be resumed. Pass --overwrite to replace it, or --out for a new folder"
        )
    data = {"source": a.data or a.dataset, "token": a.token, "max_tokens": a.max_tokens,
            "batch_size": a.batch_size, "num_steps": a.num_steps, "use_random_iter": a.random_iter}  # fmt: skip
    flags = {"model": given_flags(a, "model__"), "train": given_flags(a, "train__"), "data": data}
    return resolve("lm", preset=a.preset, checkpoint=previous, flags=flags, where=str(out))


def run_train(a: argparse.Namespace) -> int:
    from attnkit import distributed

    sizes = {"--layers": a.model__num_layers, "--hiddens": a.model__num_hiddens,
             "--batch-size": a.batch_size, "--num-steps": a.num_steps,
             "--epochs": a.train__epochs, "--num-preds": a.num_preds}  # fmt: skip
    for flag, value in sizes.items():  # the given ones: before looking at --out
        if value is not None:
            _positive(flag, value)
    resolved = _resolve(a)
    batch_size = resolved.data["batch_size"]
    _, world, _ = distributed.world_from_env()
    if a.nproc is not None:
        _positive("--nproc", a.nproc)
    processes = a.nproc if world == 1 and a.nproc is not None else world
    if processes > batch_size:
        raise ValueError(
            f"--batch-size {batch_size} is the global batch, split by rows over "
            f"{processes} processes: it must be at least {processes}"
        )
    if processes > 1 and world == 1:
        # relaunch this very command in N processes (what torchrun would do)
        return distributed.launch(processes, distributed.without_nproc(a.argv))
    rank, world = distributed.init_from_env(a.device)
    try:
        return _train(a, resolved, rank, world)
    finally:
        distributed.cleanup()


def _train(a: argparse.Namespace, resolved, rank: int, world: int) -> int:
    import matplotlib.pyplot as plt

    from attnkit.checkpoint import atomic_write
    from attnkit.cli.config_flags import describe
    from attnkit.data.lm import load_lm_data
    from attnkit.inference.generation import generate
    from attnkit.metrics import perplexity
    from attnkit.training.engine import Engine
    from attnkit.training.lm import LMHistory, LMTask
    from attnkit.viz import plot_curves

    say = print if rank == 0 else (lambda *args, **kwargs: None)
    if a.threads:
        torch.set_num_threads(a.threads)
    m, c, d = resolved.model, resolved.train, resolved.data  # model, training, data
    source, out = d["source"], Path(a.out)
    say(f"settings: {describe(resolved)}")
    torch.manual_seed(c.seed)
    loader, vocab = load_lm_data(
        d["batch_size"],
        d["num_steps"],
        source,
        token=d["token"],
        max_tokens=d["max_tokens"],
        use_random_iter=d["use_random_iter"],
        seed=c.seed,
        rank=rank,
        world_size=world,
    )
    device = torch.device(a.device)
    model = m.build(len(vocab)).to(device)
    run_config = {
        "cell": m.cell,
        "scratch": m.scratch,
        "reset_after": m.reset_after,
        "num_hiddens": m.num_hiddens,
        "num_layers": m.num_layers,
        "bidirectional": m.bidirectional,
        "token": d["token"],
        "preprocess": "letters-lowercase",
        "data": str(source),
        "max_tokens": d["max_tokens"],
        "batch_size": d["batch_size"],
        "num_steps": d["num_steps"],
        "use_random_iter": d["use_random_iter"],
        "epochs": c.epochs,
        "optimizer": c.optimizer,
        "lr": c.lr,
        "clip": c.clip,
        "seed": c.seed,
        "processes": world,
    }
    config = c.engine_config(out_dir=str(out), device=a.device, progress=not a.no_progress)
    task = LMTask(loader, use_random_iter=d["use_random_iter"], vocab=vocab, run_config=run_config)
    engine = Engine(model, task, config)
    if a.resume and (out / "config.json").is_file():
        engine.resume()
        for group in engine.optimizer.param_groups:  # --lr may change on resume
            group["lr"] = c.lr
        if engine.epoch >= c.epochs:
            say(
                f"nothing to train: {out} is at epoch {engine.epoch} of --epochs {c.epochs} "
                "(pass a larger --epochs to train on)"
            )
            return 0
    kind = ("scratch " if m.scratch else "torch.nn ") + m.cell.upper()
    if world > 1:
        say(f"distributed: {world} processes; --batch-size {d['batch_size']} is global")
    say(
        f"{kind}: {m.num_layers} layer(s){', bidirectional' if m.bidirectional else ''}, "
        f"{m.num_hiddens} hiddens, vocab {len(vocab)}, corpus {len(loader.corpus)} "
        f"{d['token']} tokens from {source}; {c.optimizer} lr {c.lr}, clip {c.clip}, "
        f"{c.epochs} epochs"
    )
    if a.resume and engine.step:
        at = f", batch {engine.batch_in_epoch} of epoch {engine.epoch + 1}"
        say(f"resuming {out} after epoch {engine.epoch}{at if engine.batch_in_epoch else ''}")
    history = LMHistory.from_engine(engine.fit())  # TrainingInterrupted: saved, exit 130
    ppl = perplexity(engine.history["train_loss"][-1])
    speed = sum(history.tokens_per_sec) / len(history.tokens_per_sec)
    say(f"perplexity {ppl:.2f}, {speed:.1f} tokens/sec on {device}, {history.seconds:.1f} s")
    if rank != 0:  # rank 0 alone writes the checkpoint, the plot and the samples
        return 0

    # the checkpoint (config.json with the vocabulary and history, weights, trainer
    # state) was written after the last epoch
    fig = plot_curves(
        {"train": history.perplexity},
        ylabel="perplexity",
        title=f"{kind} on {Path(str(source)).name}",
    )
    atomic_write(out / "perplexity.png", lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)  # written: do not keep it open in this process
    samples = []
    prefixes = DEFAULT_PREFIXES if d["token"] == "char" else ("the",)
    gen = torch.Generator().manual_seed(c.seed)
    for prefix in prefixes:
        text = generate(model, vocab, prefix, a.num_preds, token=d["token"], unknown="unk")
        samples.append(f"greedy          | {text}")
        text = generate(
            model, vocab, prefix, a.num_preds, temperature=0.8, generator=gen, token=d["token"],
            unknown="unk",
        )  # fmt: skip
        samples.append(f"temperature 0.8 | {text}")
    atomic_write(
        out / "samples.txt",
        lambda tmp: Path(tmp).write_text("\n".join(samples) + "\n", encoding="utf-8"),
    )
    print("\n".join(samples))
    print(f"wrote {out}/config.json, model and trainer state, perplexity.png, samples.txt")
    return 0


def run_generate(a: argparse.Namespace) -> int:
    from attnkit.inference.generation import generate
    from attnkit.inference.loading import load_lm_checkpoint

    if a.num_preds < 0:
        raise ValueError(f"--num-preds must be >= 0, got {a.num_preds}")
    model, vocab, config = load_lm_checkpoint(a.checkpoint, a.device)
    token = config.get("token", "char")
    prefix = _prepare_prefix(a.prefix)
    gen = torch.Generator().manual_seed(a.seed)
    text = generate(
        model,
        vocab,
        prefix,
        a.num_preds,
        temperature=a.temperature,
        generator=gen,
        token=token,
        device=a.device,
    )
    print(text)
    return 0
