"""Multi-head attention: attnkit vs the book's formulation vs torch.nn.MultiheadAttention.

Forward + backward time at batch 32, width 256, 8 heads, random valid lengths, and
peak memory of an inference forward at batch 4, length 2048. All contenders run
side by side in one process (times interleaved), so the ratios are comparable.
``attnkit`` is the default (the padding mask into PyTorch's fused kernel); ``attnkit
skip`` opts in to the key-padded CPU path (``skip_key_padding=True``).

    python -m benchmarks.book.attention [--threads N] [--repeats R] [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

from attnkit.attention import MultiHeadAttention
from benchmarks.harness import interleaved_times, print_table


# ---------------------------------------------------------------- the book, as the book writes it
def book_sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = (
        torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    )
    X[~mask] = value
    return X


def book_masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = book_sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class BookDotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = book_masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class BookMultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = BookDotProductAttention(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        return self.W_o(transpose_output(output, self.num_heads))


# ---------------------------------------------------------------- contenders
def build(kind: str, D: int, H: int) -> tuple[nn.Module, object]:
    """Module and a call(X, lens) running self-attention with padding."""
    torch.manual_seed(0)
    if kind in ("attnkit", "attnkit skip"):
        m = MultiHeadAttention(D, H, dropout=0.0, skip_key_padding=kind == "attnkit skip")
        return m, lambda X, lens: m(X, valid_lens=lens)  # self-attention
    if kind == "book":
        m = BookMultiHeadAttention(D, H, 0.0)
        return m, lambda X, lens: m(X, X, X, lens)
    m = nn.MultiheadAttention(D, H, bias=False, batch_first=True)

    def call(X, lens):
        pad = torch.arange(X.shape[1]) >= lens[:, None]  # True = ignore (PyTorch's convention)
        return m(X, X, X, key_padding_mask=pad, need_weights=False)[0]

    return m, call


def time_fwd_bwd(B: int, T: int, D: int, H: int, repeats: int) -> dict[str, list[float]]:
    g = torch.Generator().manual_seed(T)
    X = torch.randn(B, T, D, generator=g, requires_grad=True)
    lens = torch.randint(1, T + 1, (B,), generator=g)
    fns = {}
    for kind in ("attnkit", "attnkit skip", "book", "torch.nn"):
        _, call = build(kind, D, H)

        def step(call=call):
            call(X, lens).sum().backward()

        fns[kind] = step
    return interleaved_times(fns, repeats=repeats)


def peak_forward_mib(kind: str, B: int, T: int, D: int, H: int) -> float:
    """Peak RSS growth (MiB) of one no-grad forward, measured in a fresh process.

    Uses /proc's VmHWM after resetting it (clear_refs 5): ``ru_maxrss`` would carry
    the parent's high-water mark across fork + exec.
    """
    code = f"""
import sys, torch
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from benchmarks.book.attention import build
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
m, call = build({kind!r}, {D}, {H})
X = torch.randn({B}, {T}, {D}); lens = torch.randint(1, {T} + 1, ({B},))
with torch.no_grad():
    call(X[:, :8], torch.clamp(lens, max=8))  # warm up kernels and allocator
    base = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")
    call(X, lens)
print(status("VmHWM") - base)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B, D, H = (4, 64, 8) if args.quick else (32, 256, 8)
    lengths = (16, 32) if args.quick else (128, 512)
    print(f"torch {torch.__version__}, {args.threads} threads, float32 CPU, B={B} D={D} H={H}\n")
    rows = []
    for T in lengths:
        times = time_fwd_bwd(B, T, D, H, args.repeats)
        med = {k: statistics.median(v) for k, v in times.items()}
        best = {k: min(v) for k, v in times.items()}

        def ratio(a, b, med=med, best=best):
            return f"{med[a] / med[b]:.2f}x / {best[a] / best[b]:.2f}x"

        rows.append(
            [T, *(f"{med[k] * 1e3:.1f}" for k in med), ratio("book", "attnkit"),
             ratio("torch.nn", "attnkit"), ratio("attnkit", "attnkit skip")]
        )  # fmt: skip
    print(
        f"forward+backward, random valid lengths ({args.repeats} interleaved rounds; "
        "median ms; ratios of medians / of best times)"
    )
    print_table(
        ["T", "attnkit", "attnkit skip", "book", "nn.MultiheadAttention", "book / attnkit",
         "nn.MHA / attnkit", "attnkit / skip"],
        rows,
    )  # fmt: skip
    Bm, Tm = (2, 256) if args.quick else (4, 2048)
    print(f"\npeak memory of one forward (no grad), B={Bm}, T={Tm}")
    mem = {kind: peak_forward_mib(kind, Bm, Tm, D, H) for kind in ("attnkit", "book", "torch.nn")}
    print_table(
        ["contender", "peak MiB", "fraction of book"],
        [[k, f"{v:.0f}", f"{v / max(mem['book'], 1e-9):.3f}"] for k, v in mem.items()],
    )


if __name__ == "__main__":
    main()
