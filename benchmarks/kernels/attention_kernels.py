"""The two attention kernels measured side by side: which one ``attention.kernels`` should
choose on this machine, per dtype and length (issue 25).

    python -m benchmarks.kernels.attention_kernels [--device cpu] [--threads 2] [--rounds 7]

For each dtype (float32, bfloat16; float16 too on CUDA), mask (causal self-attention, as
in a decoder; key padding, as in an encoder) and length L, one forward and backward of
attention over q, k, v (B, H, L, Dh) = (tokens / L, 4, L, 64) with about 2,048 tokens per
batch (the base recipe's batches hold about 1,600 target tokens), timed with each kernel:
``sdpa`` (``F.scaled_dot_product_attention``) and ``matmul`` (``explicit_attention``),
interleaved over ``--rounds`` rounds (median). The table gives both times, the ratio
sdpa / matmul (> 1: the explicit products are faster) and what ``choose_kernel`` picks
("auto"); "!" marks a row where it picks the slower kernel by more than 5%.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from attnkit.attention.kernels import choose_kernel, explicit_attention
from benchmarks.harness import print_table

LENGTHS = (16, 32, 64, 128, 256, 512, 1024)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def case(device, dtype, L: int, masked: str, tokens: int = 2048, heads: int = 4, dh: int = 64):
    """Two closures (sdpa, matmul): forward + backward of one attention call."""
    g = torch.Generator(device="cpu").manual_seed(0)
    B = max(1, tokens // L)
    shape = (B, heads, L, dh)
    q, k, v = (torch.randn(shape, generator=g).to(device, dtype).requires_grad_() for _ in "qkv")
    mask, causal = None, masked == "causal"
    if masked == "padding":  # each row's keys cut at a random length in [L/2, L]
        lens = torch.randint(L // 2, L + 1, (B,), generator=g).to(device)
        mask = (torch.arange(L, device=device)[None, :] < lens[:, None])[:, None, None, :]

    def sdpa():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        out.sum().backward()

    def matmul():
        out = explicit_attention(q, k, v, mask, 0.0, is_causal=causal)
        out.sum().backward()

    return {"sdpa": sdpa, "matmul": matmul}, q


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtypes = [torch.float32, torch.bfloat16] + ([torch.float16] if device.type == "cuda" else [])
    print(f"{device} ({args.threads} threads), torch {torch.__version__}, median of "
          f"{args.rounds} interleaved rounds, forward + backward")  # fmt: skip
    rows = []
    for dtype in dtypes:
        for masked in ("causal", "padding"):
            for L in args.lengths:
                fns, q = case(device, dtype, L, masked)
                times = {name: [] for name in fns}
                for fn in fns.values():  # warm-up
                    fn()
                for _ in range(args.rounds):
                    for name, fn in fns.items():
                        _sync(device)
                        t0 = time.perf_counter()
                        fn()
                        _sync(device)
                        times[name].append(time.perf_counter() - t0)
                med = {n: statistics.median(t) for n, t in times.items()}
                ratio = med["sdpa"] / med["matmul"]
                auto = choose_kernel(q.detach(), L)
                faster = "matmul" if ratio > 1 else "sdpa"
                off = "!" if auto != faster and max(ratio, 1 / ratio) > 1.05 else ""
                rows.append([str(dtype).removeprefix("torch."), masked, str(L),
                             f"{med['sdpa'] * 1e3:.2f}", f"{med['matmul'] * 1e3:.2f}",
                             f"{ratio:.2f}x", auto + off])  # fmt: skip
    print_table(["dtype", "mask", "L", "sdpa ms", "matmul ms", "sdpa / matmul", "auto picks"],
                rows)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
