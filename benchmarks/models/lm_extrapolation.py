"""Length extrapolation at full size (issue 24, item 4): the Transformer LM trained at context
128 with each position scheme, evaluated at 128, 256, 512 and 1024 characters.

    python -m benchmarks.models.lm_extrapolation --data timemachine.txt [--budget 120] [--threads 2]

Five runs of ``attnkit lm train --arch transformer --positions S`` (the ``transformer``
recipe: d_model 128, 4 heads, 4 blocks, FFN 512, context 128, batches of 16 random windows
of 128 characters, Adam with warm-up and linear decay over ``--budget`` seconds, seed 0) on
The Time Machine's characters with the last 10% held out. Each model is then evaluated on
that held-out text cut into non-overlapping windows of L = 128, 256, 512 and 1024
characters, each window from scratch: the perplexity over every position of the windows,
and over the positions past 128 only (the ones no training window had). ``learned`` has
no position past its 128-row table: not applicable past 128.

The anchor: Press et al. (2021, the ALiBi paper) report sinusoidal positions degrading past
the training length and ALiBi holding (its perplexity even improving with longer inputs).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.harness import attnkit_lm_train, print_table

SCHEMES = ("sinusoidal", "learned", "rope", "alibi", "none")
LENGTHS = (128, 256, 512, 1024)
CONTEXT = 128


def held_out(data: str, vocab) -> torch.Tensor:
    """The last 10% of the corpus as ``attnkit lm train`` holds it out (ids of ``vocab``)."""
    from attnkit.data.lm import load_corpus, read_corpus_lines

    corpus, corpus_vocab = load_corpus(read_corpus_lines(data), "char", -1)
    if corpus_vocab.idx_to_token != vocab.idx_to_token:
        raise RuntimeError("the corpus's vocabulary is not the checkpoint's: another data file?")
    held = int(len(corpus) * 0.1)
    return torch.tensor(corpus[len(corpus) - held :])


@torch.no_grad()
def perplexities(model, ids: torch.Tensor, length: int, batch: int = 4) -> tuple[float, float]:
    """Perplexity over windows of ``length`` (every position; the positions >= CONTEXT)."""
    n = (len(ids) - 1) // length
    x = ids[: n * length].view(n, length)
    y = ids[1 : n * length + 1].view(n, length)
    losses = []
    for rows in torch.arange(n).split(batch):
        logits = model(x[rows])  # (b, length, V)
        losses.append(F.cross_entropy(logits.transpose(1, 2), y[rows], reduction="none"))
    loss = torch.cat(losses)  # (n, length)
    past = loss[:, CONTEXT:] if length > CONTEXT else loss
    return math.exp(float(loss.mean())), math.exp(float(past.mean()))


def main(argv: list[str] | None = None) -> int:
    from attnkit.inference.loading import load_lm_checkpoint

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="timemachine.txt (the book's file)")
    parser.add_argument("--budget", type=float, default=120.0, help="training seconds each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--schemes", nargs="+", choices=SCHEMES, default=list(SCHEMES))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    common = {"data": args.data, "budget": args.budget, "threads": args.threads}
    rows, tails = [], []
    with tempfile.TemporaryDirectory(prefix="lm-extrapolation-") as tmp:
        for scheme in args.schemes:
            out = Path(tmp) / scheme
            flags = ["--arch", "transformer", "--positions", scheme, "--epochs", "100000"]
            attnkit_lm_train(flags, out, **common)
            model, vocab, _ = load_lm_checkpoint(out)
            ids = held_out(args.data, vocab)
            full, past = [], []
            for length in LENGTHS:
                if scheme == "learned" and length > CONTEXT:
                    full.append("n/a")
                    past.append("n/a")
                    continue
                p_all, p_past = perplexities(model, ids, length)
                full.append(f"{p_all:.2f}")
                past.append(f"{p_past:.2f}" if length > CONTEXT else "-")
            rows.append([scheme, *full])
            tails.append([scheme, *past[1:]])
            print(f"  {scheme}: {' / '.join(full)}", flush=True)
    print("\nheld-out perplexity, every position of windows of L characters")
    print_table(["positions", *(f"L = {n}" for n in LENGTHS)], rows)
    print(f"\nheld-out perplexity, positions past {CONTEXT} only")
    print_table(["positions", *(f"L = {n}" for n in LENGTHS[1:])], tails)
    return 0


if __name__ == "__main__":
    sys.exit(main())
