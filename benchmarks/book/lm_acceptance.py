"""The book's chapter 8 runs on the real Time Machine: final perplexity and wall time.

Book settings: character level, max 10000 tokens, batch 32, 35 steps, 256 hiddens, SGD
lr 1, clipping at 1, 500 epochs, sequential partitioning. The book reaches perplexity
~1.0-1.3; the acceptance target is <= 1.2 for GRU and LSTM.

    python -m benchmarks.book.lm_acceptance [--data FILE] [--cells gru,lstm] [--scratch] [--epochs 500]

``--data`` defaults to ``$ATTNKIT_TIMEMACHINE`` or ../shared/data/timemachine/timemachine.txt
relative to the repository root. Equivalent CLI, one run at a time:
``attnkit lm train --cell gru --data FILE --epochs 500 --lr 1 --max-tokens 10000``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from attnkit.data.lm import load_lm_data
from attnkit.inference.generation import generate
from attnkit.models.rnn import build_lm
from attnkit.training.lm import train_lm
from benchmarks.harness import print_table

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("ATTNKIT_TIMEMACHINE") or str(
        REPO.parent / "shared" / "data" / "timemachine" / "timemachine.txt"
    )
    ap.add_argument("--data", default=default)
    ap.add_argument("--cells", default="gru,lstm")
    ap.add_argument("--scratch", action="store_true", help="scratch cells instead of torch.nn")
    ap.add_argument("--epochs", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if not Path(a.data).is_file():
        print(f"no Time Machine at {a.data}; pass --data FILE", file=sys.stderr)
        return 1
    torch.set_num_threads(a.threads)
    rows = []
    for cell in a.cells.split(","):
        torch.manual_seed(a.seed)
        loader, vocab = load_lm_data(32, 35, a.data, max_tokens=10000, seed=a.seed)
        model = build_lm(cell, len(vocab), 256, scratch=a.scratch)
        start = time.perf_counter()
        hist = train_lm(model, loader, num_epochs=a.epochs, lr=1.0, optimizer="sgd", clip=1.0)
        wall = time.perf_counter() - start
        sample = generate(model, "time traveller", vocab=vocab, max_new_tokens=50)
        kind = ("scratch " if a.scratch else "torch.nn ") + cell.upper()
        rows.append(
            [
                kind,
                a.epochs,
                f"{hist.perplexity[-1]:.3f}",
                f"{wall:.0f} s",
                f"{sum(hist.tokens_per_sec) / len(hist.tokens_per_sec):,.0f}",
                sample,
            ]
        )
    print_table(["model", "epochs", "perplexity", "wall", "tokens/s", "time traveller ..."], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
