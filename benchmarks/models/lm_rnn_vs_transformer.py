"""The book's recurrent language models against the decoder-only Transformer on The Time
Machine's characters: validation perplexity against training seconds, at matched parameter
counts and one time budget (issue 24, item 4).

    python -m benchmarks.models.lm_rnn_vs_transformer --data timemachine.txt [--budget 120]
        [--threads 2] [--out docs/lm-rnn-vs-transformer.png]

Four runs of ``attnkit lm train``, one after the other, each with ``--time-budget`` seconds
of training on the whole corpus with its last 10% held out (the same 17,058 characters of
validation for all four), ``--threads`` torch threads, seed 0:

- ``--cell rnn|gru|lstm``: the book's models (``torch.nn`` cells, one layer) with the
  hidden size that brings each to the Transformer's parameter count (within 2%), trained
  as the book trains them: batches of 32 windows of 35 characters in sequential order,
  SGD at lr 1, gradients clipped at 1;
- ``--arch transformer``: the ``transformer`` recipe (d_model 128, 4 heads, 4 blocks, FFN
  512, RoPE, context 128, Adam at 2e-3 with warm-up and linear decay to the budget).

The validation perplexity is evaluated after every epoch, for all four the same way: the
held-out text cut into windows of 128 characters (``--val-steps 128``, the Transformer's
context), each from a fresh state. The table gives each model's value at fixed points of
its training time (the last evaluation at or before it) and at the end, and the plot the
curves. Training seconds exclude evaluation (the engine's own clock).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import REPO, attnkit_lm_train, print_table

CELLS = ("rnn", "gru", "lstm")


def transformer_parameters(vocab: int) -> int:
    from attnkit.training.recipes import LM_TRANSFORMER

    model = LM_TRANSFORMER.model.build(vocab)
    return sum(p.numel() for p in model.parameters())


def matched_hiddens(cell: str, vocab: int, target: int) -> tuple[int, int]:
    """The hidden size of a one-layer ``cell`` LM whose parameter count is nearest ``target``."""
    from attnkit.models.registry import LMConfig

    def count(h: int) -> int:
        model = LMConfig(cell=cell, num_hiddens=h, num_layers=1).build(vocab)
        return sum(p.numel() for p in model.parameters())

    lo, hi = 1, 4096
    while lo < hi:  # the smallest h with count(h) >= target
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if count(mid) < target else (lo, mid)
    best = min((lo - 1, lo), key=lambda h: abs(count(h) - target))
    return best, count(best)


def curve(config: dict) -> tuple[list[float], list[float]]:
    """(cumulative training seconds, validation perplexity) after each evaluated epoch."""
    h = config["history"]
    seconds, total = [], 0.0
    for s in h["seconds"]:
        total += s
        seconds.append(total)
    return seconds[: len(h["val_perplexity"])], list(h["val_perplexity"])


def at(seconds: list[float], values: list[float], t: float) -> str:
    seen = [v for s, v in zip(seconds, values, strict=True) if s <= t]
    return f"{seen[-1]:.2f}" if seen else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="timemachine.txt (the book's file)")
    parser.add_argument("--budget", type=float, default=120.0, help="training seconds each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "lm-rnn-vs-transformer.png")
    args = parser.parse_args(argv)
    vocab = 28  # The Time Machine's letters, space and <unk>
    target = transformer_parameters(vocab)
    runs = {}
    common = {"data": args.data, "budget": args.budget, "threads": args.threads}
    with tempfile.TemporaryDirectory(prefix="lm-compare-") as tmp:
        for cell in CELLS:
            hiddens, params = matched_hiddens(cell, vocab, target)
            flags = ["--cell", cell, "--hiddens", str(hiddens), "--max-tokens", "-1",
                     "--val-fraction", "0.1", "--val-steps", "128", "--epochs", "100000"]  # fmt: skip
            config = attnkit_lm_train(flags, Path(tmp) / cell, **common)
            runs[f"{cell.upper()} ({hiddens} hiddens)"] = (params, config)
        flags = ["--arch", "transformer", "--epochs", "100000"]
        config = attnkit_lm_train(flags, Path(tmp) / "transformer", **common)
        runs["Transformer (RoPE, 4 blocks)"] = (target, config)
    marks = [args.budget * f for f in (0.25, 0.5, 0.75)]
    rows = []
    for name, (params, config) in runs.items():
        seconds, ppl = curve(config)
        rows.append([name, f"{params:,}", str(len(ppl)),
                     *(at(seconds, ppl, t) for t in marks), f"{ppl[-1]:.2f}", f"{min(ppl):.2f}"])  # fmt: skip
    print_table(["model", "parameters", "epochs",
                 *(f"val ppl at {t:.0f} s" for t in marks), "at the end", "best"], rows)  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, (_, config) in runs.items():
        seconds, ppl = curve(config)
        ax.plot(seconds, ppl, marker=".", label=name)
    ax.set_xlabel("training seconds (2 CPU cores)")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.set_title(f"The Time Machine, characters: ~{target / 1e6:.2f} M parameters each")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
