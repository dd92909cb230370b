"""``attnkit lm``: train recurrent language models (the book's chapter 8) and sample from them.

``attnkit lm train --cell gru --data timemachine.txt --epochs 500 --lr 1`` reproduces the
book's runs (batch 32, 35 steps, 256 hiddens, max 10000 tokens, SGD, clipping at 1);
without ``--data`` it trains on the corpus every Python ships (``pydoc_data.topics``).
``attnkit lm generate --checkpoint DIR --prefix "time traveller"`` samples from the result.
"""

from __future__ import annotations

import argparse
import json
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
    t.add_argument("--cell", choices=["rnn", "gru", "lstm"], default="gru")
    t.add_argument("--scratch", action="store_true", help="cells written from the equations")
    t.add_argument(
        "--reset-after", action="store_true", help="scratch GRU in nn.GRU's form (see docs)"
    )
    t.add_argument("--layers", type=int, default=1, help="stacked layers (default 1)")
    t.add_argument("--bidirectional", action="store_true")
    t.add_argument("--hiddens", type=int, default=256, help="hidden width (default 256)")
    src = t.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="FILE", help="a local text file (e.g. timemachine.txt)")
    src.add_argument(
        "--dataset",
        choices=["builtin", "time_machine"],
        default="builtin",
        help="builtin: Python's pydoc topics, offline (default); time_machine: download",
    )
    t.add_argument("--token", choices=["char", "word"], default="char")
    t.add_argument("--max-tokens", type=int, default=10000, help="-1 for all (default 10000)")
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--num-steps", type=int, default=35)
    t.add_argument("--random-iter", action="store_true", help="random sampling, not sequential")
    t.add_argument("--epochs", type=int, default=500)
    t.add_argument("--lr", type=float, default=None, help="default 1 for sgd, 0.01 for adam")
    t.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    t.add_argument("--clip", type=float, default=1.0, help="gradient-norm bound (default 1)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0 ... (default cpu)")
    t.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    t.add_argument("--out", default="runs/lm", help="checkpoint folder (default runs/lm)")
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


def run_train(a: argparse.Namespace) -> int:
    from attnkit import distributed

    for name in ("layers", "hiddens", "batch_size", "num_steps", "epochs", "num_preds"):
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
    from attnkit.data.lm import load_lm_data
    from attnkit.models.rnn import build_lm
    from attnkit.training.lm import generate, train_lm
    from attnkit.training.lm_checkpoint import atomic_write, save_lm_checkpoint
    from attnkit.viz import plot_curves

    say = print if rank == 0 else (lambda *args, **kwargs: None)
    if a.threads:
        torch.set_num_threads(a.threads)
    lr = a.lr if a.lr is not None else (1.0 if a.optimizer == "sgd" else 0.01)
    source = a.data if a.data else a.dataset
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
    kind = ("scratch " if a.scratch else "torch.nn ") + a.cell.upper()
    if world > 1:
        say(f"distributed: {world} processes; --batch-size {a.batch_size} is global")
    say(
        f"{kind}: {a.layers} layer(s){', bidirectional' if a.bidirectional else ''}, "
        f"{a.hiddens} hiddens, vocab {len(vocab)}, corpus {len(loader.corpus)} {a.token} tokens "
        f"from {source}; {a.optimizer} lr {lr}, clip {a.clip}, {a.epochs} epochs"
    )
    hist = train_lm(
        model,
        loader,
        num_epochs=a.epochs,
        lr=lr,
        optimizer=a.optimizer,
        clip=a.clip if a.clip > 0 else None,
        use_random_iter=a.random_iter,
        device=device,
        rank=rank,
        world_size=world,
        progress=not a.no_progress,
    )
    ppl, speed = hist.perplexity[-1], sum(hist.tokens_per_sec) / len(hist.tokens_per_sec)
    say(f"perplexity {ppl:.2f}, {speed:.1f} tokens/sec on {device}, {hist.seconds:.1f} s")
    if rank != 0:  # rank 0 alone writes the checkpoint, the plot and the samples
        return 0

    out = Path(a.out)
    config = {
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
        "final_perplexity": ppl,
        "train_seconds": hist.seconds,
    }
    save_lm_checkpoint(out, model, vocab, config)
    history = {"perplexity": hist.perplexity, "tokens_per_sec": hist.tokens_per_sec}
    atomic_write(
        out / "history.json",
        lambda tmp: Path(tmp).write_text(json.dumps(history), encoding="utf-8"),
    )
    fig = plot_curves(
        {"train": hist.perplexity}, ylabel="perplexity", title=f"{kind} on {Path(str(source)).name}"
    )
    atomic_write(out / "perplexity.png", lambda tmp: fig.savefig(tmp, format="png", dpi=120))
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
    print(
        f"wrote {out}/model.pt, config.json, vocab.json, history.json, perplexity.png, samples.txt"
    )
    return 0


def run_generate(a: argparse.Namespace) -> int:
    from attnkit.training.lm import generate
    from attnkit.training.lm_checkpoint import load_lm_checkpoint

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
