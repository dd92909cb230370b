"""How often int8 decoding gives its own float32 model's ids, attnkit against CTranslate2,
at OPUS-MT en-fr's shapes on identical random weights, with a paired test.

    python -m benchmarks.peers.opus_mt_agreement [--sentences 512] [--beams 1,4]
        [--batch 64] [--steps 32] [--threads 2] [--seed 3]

The speed benchmark (``benchmarks.peers.opus_mt``) counts agreement on its 128 throughput
sentences; random weights give near-tied logits, so single sentences flip between runs of
equivalent code and 128 cannot tell two engines apart by a few sentences. This runs more
sentences (the same model, sources, lengths and settings: exactly ``--steps`` tokens, no
``</s>`` forced, length penalty 0) once per engine, untimed, and reports per search:

- **sentences**: ids equal to the engine's own float32 model's, all ``--steps`` tokens;
- **tokens**: how many tokens come before the first difference (of sentences x steps);
- **paired test**: of the sentences where exactly one int8 engine matches its float32,
  how many are attnkit's (b) and CTranslate2's (c), and the exact two-sided sign test's
  p-value for b = c (McNemar's exact test): p < 0.05 says the difference is more than
  near-tie noise.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import set_threads
from benchmarks.peers.opus_mt import load_contender, sources
from benchmarks.peers.real_sizes import ct2_marian, hf_marian

ENGINES = {"attnkit int8": "attnkit", "CT2 int8": "CT2 float32"}  # int8 -> its float32


def same_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens come before the first difference."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def sign_test(b: int, c: int) -> float:
    """The exact two-sided p-value of b successes against c under a fair coin."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def agreement(outputs: dict[str, list[list[int]]], steps: int) -> list[str]:
    """The report's lines: each int8 engine against its float32, then the paired test."""
    lines, matches = [], {}
    for int8, own in ENGINES.items():
        pairs = list(zip(outputs[int8], outputs[own], strict=True))
        matches[int8] = [x == y for x, y in pairs]
        tokens = sum(same_prefix(x, y) for x, y in pairs)
        n = len(pairs)
        lines.append(f"  {int8:<13} sentences {sum(matches[int8])}/{n} "
                     f"({sum(matches[int8]) / n:.1%}), tokens {tokens}/{n * steps}")  # fmt: skip
    ours, theirs = matches["attnkit int8"], matches["CT2 int8"]
    b = sum(x and not y for x, y in zip(ours, theirs))
    c = sum(y and not x for x, y in zip(ours, theirs))
    lines.append(f"  paired: only attnkit int8 matches {b}, only CT2 int8 {c}; "
                 f"sign test p = {sign_test(b, c):.2g}")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sentences", type=int, default=512)
    p.add_argument("--beams", default="1,4", help="1: greedy")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=32, help="tokens decoded per sentence")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=3, help="the sources' seed (the speed run: 2)")
    args = p.parse_args(argv)
    set_threads(args.threads)
    import ctranslate2
    import torch

    sentences = sources(args.sentences, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="opus-mt-agreement-") as tmp:
        hf = hf_marian(Path(tmp) / "hf")
        ct2_marian(hf, Path(tmp) / "ct2")
        del hf
        makers = {name: load_contender(name, Path(tmp), args.threads)
                  for pair in ENGINES.items() for name in pair}  # fmt: skip
    print(f"OPUS-MT en-fr shapes, random weights; torch {torch.__version__}, ctranslate2 "
          f"{ctranslate2.__version__}; {args.sentences} sentences (seed {args.seed}) in batches "
          f"of {args.batch}, {args.steps} tokens each")  # fmt: skip
    for beam in [int(b) for b in args.beams.split(",")]:
        outputs = {}
        for name, make in makers.items():
            run = make(beam, args.steps)
            outputs[name] = [ids for i in range(0, len(sentences), args.batch)
                             for ids in run(sentences[i : i + args.batch])]  # fmt: skip
        print("greedy" if beam == 1 else f"beam {beam}")
        print("\n".join(agreement(outputs, args.steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
