"""int8 linear layers at OPUS-MT's shapes, side by side: the float32 product (prepacked, as a
float32 translator runs it), the int8 layer as it was until 2026-12-07 ("old int8": the float
product of the rounded weights below 2^25 rows x weights, oneDNN's int8 product above) and
``Int8Linear`` now ("new int8": FBGEMM's int8 product, oneDNN's from ``ONEDNN_MIN_WORK``).

    python -m benchmarks.kernels.int8_linear [--rounds 3] [--threads 1] [--rows 1,4,64,256]

Prints the CPU's int8 ISA flags, then per (layer, rows) microseconds per call, median
[min-max] over interleaved rounds, the ratios per round (> 1: the first is faster), the
kernel the new layer ran, and each kind's largest error against the float64 product of the
unrounded weights, relative to the largest |output|.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.inference import int8
from attnkit.inference.int8 import Int8Linear
from attnkit.inference.prepacked import PrepackedLinear
from benchmarks.harness import call_us, print_table, set_threads, spread

# (name, in, out) of OPUS-MT en-fr's decoder (width 512, FFN 2048, 59,514 ids)
LAYERS = [
    ("W_qkv 512 -> 1536", 512, 1536),
    ("W_o 512 -> 512", 512, 512),
    ("FFN in 512 -> 2048", 512, 2048),
    ("FFN out 2048 -> 512", 2048, 512),
    ("output 512 -> 59514", 512, 59514),
]
KINDS = ["float32", "old int8", "new int8"]


def isa_flags() -> str:
    """The CPU's AVX-512 / VNNI / AMX flags (Linux), or what PyTorch reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                keep = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx")
                return " ".join(f for f in line.split()[2:] if f.startswith(keep))
    except OSError:
        pass
    return f"vnni={torch.cpu._is_vnni_supported()}"


def layers(seed: int = 0):
    """(name, float64 reference weights, {kind: layer}) with one set of weights each."""
    torch.manual_seed(seed)
    for name, d_in, d_out in LAYERS:
        linear = nn.Linear(d_in, d_out)
        with torch.no_grad():
            linear.weight.normal_(0, 0.02)
        packed = PrepackedLinear(nn.Linear(d_in, d_out)).eval()
        packed.load_state_dict(linear.state_dict())
        old = Int8Linear(linear)
        old._fbgemm = None  # without FBGEMM: the old layer's float / oneDNN choice
        yield name, linear, {"float32": packed, "old int8": old, "new int8": Int8Linear(linear)}


def old_int8(fn):
    """Run ``fn`` with the old layer's threshold (int8 from 2^25 rows x weights)."""

    def run(*args):
        saved = int8.INT8_MIN_WORK
        int8.INT8_MIN_WORK = 1 << 25
        try:
            return fn(*args)
        finally:
            int8.INT8_MIN_WORK = saved

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", default="1,4,64,256")
    p.add_argument("--budget", type=float, default=0.1, help="seconds per measurement")
    args = p.parse_args()
    set_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    print(f"torch {torch.__version__}, {args.threads} threads, {args.rounds} interleaved rounds; "
          f"CPU flags: {isa_flags()}; exact int8 product: {int8.exact_int8_product()}")  # fmt: skip
    table, errors = [], []
    with torch.no_grad():
        for name, linear, kinds in layers():
            fns = {k: old_int8(m) if k == "old int8" else m for k, m in kinds.items()}
            for n in rows:
                x = torch.randn(n, linear.in_features)
                ref = F.linear(x.double(), linear.weight.double(), linear.bias.double())
                errors.append([name, n] + [
                    f"{float((fns[k](x).double() - ref).abs().max() / ref.abs().max()):.1e}"
                    for k in KINDS
                ])  # fmt: skip
                times = {k: [] for k in KINDS}
                for _ in range(args.rounds):
                    for k in KINDS:
                        times[k].append(call_us(lambda f=fns[k], x=x: f(x), budget_s=args.budget))
                over = lambda a, b, t=times: spread(  # noqa: E731
                    [u / v for u, v in zip(t[a], t[b])], "{:.2f}x"
                )
                table.append([name, n, *(spread(times[k], "{:,.0f}") for k in KINDS),
                              over("old int8", "new int8"), over("float32", "new int8"),
                              over("float32", "old int8"), kinds["new int8"].kernel(n)])  # fmt: skip
    print_table(
        ["layer", "rows", *(f"{k} us" for k in KINDS), "new / old int8", "new int8 / float32",
         "old int8 / float32", "new kernel"], table,
    )  # fmt: skip
    print("\nlargest |error| / largest |output| against float64 of the unrounded weights")
    print_table(["layer", "rows", *KINDS], errors)


if __name__ == "__main__":
    main()
