"""One linear layer at decoding's row counts: ``F.linear`` against ``PrepackedLinear`` (the
weight kept in oneDNN's layout) and ``Int8Linear`` (int8 weights, uint8 inputs), at the
base recipe's layer shapes, side by side in interleaved rounds.

    python -m benchmarks.kernels.linear_layout [--rounds 5] [--threads 2] [--rows 1,4,16,64,256]

Prints microseconds per call, median [min-max] over rounds, and the ratio to ``F.linear``
(> 1: faster) for each (layer, rows). Decoding calls these layers with B rows per step
(B live sentences, or hypotheses in beam search), down to one row at the end of a batch.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.inference import int8, prepacked
from attnkit.inference.int8 import Int8Linear
from attnkit.inference.prepacked import PrepackedLinear
from benchmarks.harness import call_us, set_threads, spread

# (name, in, out) of the base recipe (d_model 256, FFN 1024, 4000 pieces)
LAYERS = [
    ("W_o (256 -> 256)", 256, 256),
    ("W_qkv (256 -> 768)", 256, 768),
    ("FFN in (256 -> 1024)", 256, 1024),
    ("FFN out (1024 -> 256)", 1024, 256),
    ("output (256 -> 4000)", 256, 4000),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", default="1,4,16,64,256")
    p.add_argument("--calls", type=int, default=200, help="calls per measurement")
    args = p.parse_args()
    set_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    kinds = ["F.linear"]
    kinds += ["prepacked"] if prepacked.available() else []
    kinds += ["int8"] if int8.available() else []
    print(f"torch {torch.__version__}, {args.threads} threads, {args.rounds} rounds; "
          f"kinds: {', '.join(kinds)}")  # fmt: skip
    torch.manual_seed(0)
    results: dict[tuple[str, int, str], list[float]] = {}
    layers = []
    for name, d_in, d_out in LAYERS:
        linear = nn.Linear(d_in, d_out)
        layers.append((name, linear, PrepackedLinear(linear), Int8Linear(linear)))
    with torch.no_grad():
        for _ in range(args.rounds):
            for name, linear, packed, quantized in layers:
                for n in rows:
                    x = torch.randn(n, linear.in_features)
                    calls = {
                        "F.linear": (F.linear, (x, linear.weight, linear.bias)),
                        "prepacked": (packed, (x,)),
                        "int8": (quantized, (x,)),
                    }
                    for kind in kinds:
                        fn, fn_args = calls[kind]
                        t = call_us(lambda f=fn, a=fn_args: f(*a), calls=args.calls, warmup=5)
                        results.setdefault((name, n, kind), []).append(t)
    header = (
        ["layer", "rows"] + [f"{k} us" for k in kinds] + [f"{k} vs F.linear" for k in kinds[1:]]
    )
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for name, *_ in layers:
        for n in rows:
            base = results[(name, n, "F.linear")]
            cells = [spread(results[(name, n, k)], "{:.0f}") for k in kinds]
            ratios = [
                spread([b / t for b, t in zip(base, results[(name, n, k)])], "{:.2f}x")
                for k in kinds[1:]
            ]
            print("| " + " | ".join([name, str(n), *cells, *ratios]) + " |")


if __name__ == "__main__":
    main()
