"""``attnkit lm``: train recurrent language models (the book's chapter 8) and sample from them.

``attnkit lm train --cell gru --data timemachine.txt --epochs 500 --lr 1`` reproduces the
book's runs (batch 32, 35 steps, 256 hiddens, max 10000 tokens, SGD, clipping at 1);
without ``--data`` it trains on the corpus every Python ships (``pydoc_data.topics``).
``attnkit lm generate --checkpoint DIR --prefix "time traveller"`` samples from the result.
A checkpoint is saved after every epoch and on Ctrl-C/SIGTERM (after the current step);
``attnkit lm train --resume --out DIR`` continues it (model and data options not given
are read from the checkpoint; given ones must match it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

__all__ = ["register", "run_generate", "run_train"]

DEFAULT_PREFIXES = ("time traveller", "traveller")


def register(sub) -> None:
    p = sub.add_parser("lm", help="recurrent language models (RNN, GRU, LSTM): train, generate")
    verbs = p.add_subparsers(dest="lm_command", metavar="VERB")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    t = verbs.add_parser("train", help="train a character (or word) language model")
    # model/data options default to None: a new run fills in the defaults below, --resume
    # the checkpoint's values (and refuses given values that differ from them)
    t.add_argument("--cell", choices=["rnn", "gru", "lstm"], default=None, help="default gru")
    t.add_argument(
        "--scratch", action="store_true", default=None, help="cells written from the equations"
    )
    t.add_argument(
        "--reset-after",
        action="store_true",
        default=None,
        help="scratch GRU in nn.GRU's form (see docs)",
    )
    t.add_argument("--layers", type=int, default=None, help="stacked layers (default 1)")
    t.add_argument("--bidirectional", action="store_true", default=None)
    t.add_argument("--hiddens", type=int, default=None, help="hidden width (default 256)")
    src = t.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="FILE", help="a local text file (e.g. timemachine.txt)")
    src.add_argument(
        "--dataset",
        choices=["builtin", "time_machine"],
        default=None,
        help="builtin: Python's pydoc topics, offline (default); time_machine: download",
    )
    t.add_argument("--token", choices=["char", "word"], default=None, help="default char")
    t.add_argument("--max-tokens", type=int, default=None, help="-1 for all (default 10000)")
    t.add_argument("--batch-size", type=int, default=None, help="default 32")
    t.add_argument("--num-steps", type=int, default=None, help="default 35")
    t.add_argument(
        "--random-iter",
        action="store_true",
        default=None,
        help="random sampling, not sequential",
    )
    t.add_argument("--epochs", type=int, default=None, help="total epochs (default 500)")
    t.add_argument("--lr", type=float, default=None, help="default 1 for sgd, 0.01 for adam")
    t.add_argument("--optimizer", choices=["sgd", "adam"], default=None, help="default sgd")
    t.add_argument("--clip", type=float, default=None, help="gradient-norm bound (default 1)")
    t.add_argument("--seed", type=int, default=None, help="default 0")
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


def _positive(name: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"--{name} must be positive, got {value}")


def _prepare_prefix(prefix: str) -> str:
    """Normalize the prefix as the corpus was (letters, lowercase); say so if it changed."""
    from attnkit.data.lm import normalize_line

    norm = normalize_line(prefix)
    if norm != prefix:
        print(f"prefix normalized like the corpus: {prefix!r} -> {norm!r}", file=sys.stderr)
    return norm


# (argument, config key, default of a new run): options a resumed run must keep
_FIXED = (
    ("cell", "cell", "gru"),
    ("scratch", "scratch", False),
    ("reset_after", "reset_after", False),
    ("hiddens", "num_hiddens", 256),
    ("layers", "num_layers", 1),
    ("bidirectional", "bidirectional", False),
    ("source", "data", "builtin"),
    ("token", "token", "char"),
    ("max_tokens", "max_tokens", 10000),
    ("batch_size", "batch_size", 32),
    ("num_steps", "num_steps", 35),
    ("random_iter", "use_random_iter", False),
    ("seed", "seed", 0),
    ("optimizer", "optimizer", "sgd"),
)
# options a resumed run may change (taken from the checkpoint when not given)
_FREE = (("epochs", "epochs", 500), ("lr", "lr", None), ("clip", "clip", 1.0))


def _flag(name: str) -> str:
    return {"source": "--data/--dataset", "random_iter": "--random-iter"}.get(
        name, "--" + name.replace("_", "-")
    )


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


def _resolve_options(a: argparse.Namespace) -> dict | None:
    """Fill the options left out: from the checkpoint with --resume, else the defaults.

    Refuses to train into a used folder without --resume/--overwrite and, with --resume,
    model/data options that differ from the checkpoint's. Returns the checkpoint's
    config when resuming one, else None.
    """
    out = Path(a.out)
    a.source = a.data if a.data else a.dataset
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
        for name, _, default in (*_FIXED, *_FREE):
            if getattr(a, name) is None:
                setattr(a, name, default)
        return None
    if "cell" not in previous:
        raise ValueError(
            f"{out} holds a translation checkpoint, not a language model from `attnkit lm train`"
        )
    if previous.get("format") is None or "trainer" not in previous.get("files", {}):
        raise ValueError(
            f"{out} holds a language model without training state in the current format "
            "(the layout of an older attnkit, whose trainer.pt this version does not read), so "
            "it cannot be resumed; `attnkit lm generate` still reads it. Pass --overwrite to "
            "replace it, or --out for a new folder"
        )
    changed = []
    for name, key, default in _FIXED:
        given, saved = getattr(a, name), previous.get(key, default)
        if given is not None and given != saved:
            changed.append(f"{_flag(name)} {given!r} (checkpoint: {saved!r})")
        setattr(a, name, saved)
    if changed:
        raise ValueError(
            f"cannot resume {out} with other model/data options: {', '.join(changed)}; "
            "leave them out (they are read from the checkpoint), or train into a new --out"
        )
    for name, key, default in _FREE:
        if getattr(a, name) is None:
            setattr(a, name, previous.get(key, default))
    return previous


def run_train(a: argparse.Namespace) -> int:
    from attnkit import distributed

    sizes = ("layers", "hiddens", "batch_size", "num_steps", "epochs", "num_preds")
    for name in sizes:  # the given ones first: before looking at --out
        if getattr(a, name) is not None:
            _positive(name.replace("_", "-"), getattr(a, name))
    _resolve_options(a)
    for name in sizes:
        _positive(name.replace("_", "-"), getattr(a, name))
    if a.reset_after and not (a.scratch and a.cell == "gru"):
        raise ValueError("--reset-after needs --scratch --cell gru")
    _, world, _ = distributed.world_from_env()
    if a.nproc is not None:
        _positive("nproc", a.nproc)
    processes = a.nproc if world == 1 and a.nproc is not None else world
    if processes > a.batch_size:
        raise ValueError(
            f"--batch-size {a.batch_size} is the global batch, split by rows over "
            f"{processes} processes: it must be at least {processes}"
        )
    if processes > 1 and world == 1:
        # relaunch this very command in N processes (what torchrun would do)
        return distributed.launch(processes, distributed.without_nproc(a.argv))
    rank, world = distributed.init_from_env(a.device)
    try:
        return _train(a, rank, world)
    finally:
        distributed.cleanup()


def _train(a: argparse.Namespace, rank: int, world: int) -> int:
    import matplotlib.pyplot as plt

    from attnkit.checkpoint import atomic_write
    from attnkit.data.lm import load_lm_data
    from attnkit.inference.generation import generate
    from attnkit.metrics import perplexity
    from attnkit.models.rnn import build_lm
    from attnkit.training.engine import Engine, EngineConfig
    from attnkit.training.lm import LMHistory, LMTask
    from attnkit.viz import plot_curves

    say = print if rank == 0 else (lambda *args, **kwargs: None)
    if a.threads:
        torch.set_num_threads(a.threads)
    lr = a.lr if a.lr is not None else (1.0 if a.optimizer == "sgd" else 0.01)
    source = a.source
    out = Path(a.out)
    torch.manual_seed(a.seed)
    loader, vocab = load_lm_data(
        a.batch_size,
        a.num_steps,
        source,
        token=a.token,
        max_tokens=a.max_tokens,
        use_random_iter=a.random_iter,
        seed=a.seed,
        rank=rank,
        world_size=world,
    )
    device = torch.device(a.device)
    model = build_lm(
        a.cell,
        len(vocab),
        a.hiddens,
        a.layers,
        a.bidirectional,
        a.scratch,
        reset_after=a.reset_after,
    ).to(device)
    run_config = {
        "cell": a.cell,
        "scratch": a.scratch,
        "reset_after": a.reset_after,
        "num_hiddens": a.hiddens,
        "num_layers": a.layers,
        "bidirectional": a.bidirectional,
        "token": a.token,
        "preprocess": "letters-lowercase",
        "data": str(source),
        "max_tokens": a.max_tokens,
        "batch_size": a.batch_size,
        "num_steps": a.num_steps,
        "use_random_iter": a.random_iter,
        "epochs": a.epochs,
        "optimizer": a.optimizer,
        "lr": lr,
        "clip": a.clip,
        "seed": a.seed,
        "processes": world,
    }
    config = EngineConfig(
        epochs=a.epochs, lr=lr, clip=a.clip if a.clip > 0 else None, optimizer=a.optimizer,
        beta2=0.999, seed=None, out_dir=str(out), device=a.device,
        progress=not a.no_progress, log_every=max(1, a.epochs // 20),
    )  # fmt: skip
    task = LMTask(loader, use_random_iter=a.random_iter, vocab=vocab, run_config=run_config)
    engine = Engine(model, task, config)
    if a.resume and (out / "config.json").is_file():
        engine.resume()
        for group in engine.optimizer.param_groups:  # --lr may change on resume
            group["lr"] = lr
        if engine.epoch >= a.epochs:
            say(
                f"nothing to train: {out} is at epoch {engine.epoch} of --epochs {a.epochs} "
                "(pass a larger --epochs to train on)"
            )
            return 0
    kind = ("scratch " if a.scratch else "torch.nn ") + a.cell.upper()
    if world > 1:
        say(f"distributed: {world} processes; --batch-size {a.batch_size} is global")
    say(
        f"{kind}: {a.layers} layer(s){', bidirectional' if a.bidirectional else ''}, "
        f"{a.hiddens} hiddens, vocab {len(vocab)}, corpus {len(loader.corpus)} {a.token} tokens "
        f"from {source}; {a.optimizer} lr {lr}, clip {a.clip}, {a.epochs} epochs"
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
    prefixes = DEFAULT_PREFIXES if a.token == "char" else ("the",)
    gen = torch.Generator().manual_seed(a.seed)
    for prefix in prefixes:
        text = generate(model, vocab, prefix, a.num_preds, token=a.token, unknown="unk")
        samples.append(f"greedy          | {text}")
        text = generate(
            model, vocab, prefix, a.num_preds, temperature=0.8, generator=gen, token=a.token,
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
