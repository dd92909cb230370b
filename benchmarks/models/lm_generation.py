"""Generation speed of attnkit's decoder-only Transformer LM: the KV cache and grouped-query
attention (issue 24, item 4).

Three measurements, on one model shape (d_model 256, 8 heads, 4 layers, FFN 1024, context
512, RoPE, vocabulary 1000, dropout 0) with **random weights** (nanoGPT's initialization,
seed 0): speed does not depend on what the weights learned, and greedy decoding runs the
same number of steps whatever the tokens are.

(a) tokens/s of ``generate_ids`` (greedy, ``--new-tokens`` new tokens after prompts of
    ``--prompt-len`` random ids, batch 1 and batch 8) with ``use_cache=True`` and
    ``use_cache=False``, timed in interleaved rounds (cached, uncached, cached, ...): the
    median [min-max] and the ratio of the medians. The two must give the same tokens
    (checked, printed).
(b) KV-cache memory per token: ``DecoderLMCache.nbytes`` after a pass over
    batch x (prompt + new) positions, divided by the positions held (batch x tokens), beside
    the formula 2 x layers x kv_heads x head_dim x bytes per element, for kv-heads 8, 2, 1
    (heads 8: plain, grouped, multi-query).
(c) cached tokens/s for the same three kv-heads settings (each its own random model, same
    shape otherwise), interleaved, and the ratio to kv-heads = heads.

tokens/s = batch x new tokens / wall seconds of the whole ``generate_ids`` call (the
prompt's prefill included). CPU, ``--threads`` torch threads (default 2).

    python -m benchmarks.models.lm_generation [--rounds 3] [--threads 2] [--new-tokens 256]

Numbers on a shared or busy machine are indicative only; the interleaving keeps the ratios
fairer than the absolute numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

import torch

from attnkit.inference.generation import generate_ids
from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig
from benchmarks.harness import print_table

V = 1000
SHAPE = dict(
    d_model=256, num_heads=8, num_layers=4, ffn_hidden=1024, context_length=512, dropout=0.0
)


def build(kv_heads: int, seed: int = 0) -> DecoderLM:
    """A random-weight ``DecoderLM`` of ``SHAPE`` with ``kv_heads`` key/value heads."""
    torch.manual_seed(seed)
    return DecoderLMConfig(vocab_size=V, num_kv_heads=kv_heads, **SHAPE).build().eval()


def prompts(batch: int, length: int, seed: int = 1) -> list[list[int]]:
    """``batch`` prompts of ``length`` random ids (all the same length: no padding)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (batch, length), generator=g).tolist()


def rounds(
    fns: dict[str, Callable[[], object]], warmups: dict[str, Callable[[], object]], n: int
) -> dict[str, list[float]]:
    """Wall seconds of each function over ``n`` interleaved rounds, after one warm-up call
    each (``warmups``: a shorter call, so the slow contender's warm-up stays short)."""
    for fn in warmups.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(n):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def rate(tokens: int, seconds: list[float]) -> tuple[float, str]:
    """Median tokens/s and the "median [min-max]" cell."""
    rates = sorted(tokens / s for s in seconds)
    med = statistics.median(rates)
    return med, f"{med:,.0f} [{rates[0]:,.0f}-{rates[-1]:,.0f}]"


def cache_vs_full(args) -> None:
    """(a): tokens/s with and without the KV cache."""
    model = build(SHAPE["num_heads"])
    rows = []
    for batch in args.batches:
        p = prompts(batch, args.prompt_len)
        run = partial(generate_ids, model, p)
        same = run(max_new_tokens=args.new_tokens, use_cache=True) == run(
            max_new_tokens=args.new_tokens, use_cache=False
        )
        times = rounds(
            {
                "cache": partial(run, max_new_tokens=args.new_tokens, use_cache=True),
                "no cache": partial(run, max_new_tokens=args.new_tokens, use_cache=False),
            },
            {
                "cache": partial(run, max_new_tokens=8, use_cache=True),
                "no cache": partial(run, max_new_tokens=8, use_cache=False),
            },
            args.rounds,
        )
        tokens = batch * args.new_tokens
        (c, c_cell), (f, f_cell) = rate(tokens, times["cache"]), rate(tokens, times["no cache"])
        rows.append([batch, c_cell, f_cell, f"{c / f:.1f}x", "yes" if same else "NO"])
        print(f"  batch {batch}: done", file=sys.stderr, flush=True)
    print(
        f"\n(a) tokens/s generating {args.new_tokens} new tokens after {args.prompt_len}-token "
        f"prompts, greedy, kv-heads 8, {args.threads} threads, {args.rounds} interleaved rounds "
        "(median [min-max])\n"
    )
    print_table(["batch", "with cache", "without cache", "cache / no cache", "same tokens"], rows)


def cache_memory(args) -> None:
    """(b): KV-cache bytes per token, measured and by the formula."""
    heads, layers = SHAPE["num_heads"], SHAPE["num_layers"]
    head_dim = SHAPE["d_model"] // heads
    batch, tokens = max(args.batches), args.prompt_len + args.new_tokens
    rows = []
    for kv in args.kv_heads:
        model = build(kv)
        cache = model.new_cache()
        with torch.no_grad():
            model(torch.tensor(prompts(batch, tokens)), cache=cache)
        measured = cache.nbytes / (batch * len(cache))
        elem = next(model.parameters()).element_size()
        formula = 2 * layers * kv * head_dim * elem
        rows.append(
            [kv, f"{measured:,.0f}", f"{formula:,}", f"{cache.nbytes / 2**20:.2f} MiB", measured]
        )
    base = rows[0][-1]
    table = [[*r[:4], f"{base / r[-1]:.0f}x"] for r in rows]
    print(
        f"\n(b) KV-cache memory per token (float32; heads {heads}, layers {layers}, head_dim "
        f"{head_dim}): nbytes / (batch x positions held), after {batch} x {tokens} positions\n"
    )
    print_table(
        ["kv-heads", "measured B/token", "2*L*Hkv*Dh*4 B", f"cache at {batch}x{tokens}",
         f"smaller than kv {args.kv_heads[0]}"],
        table,
    )  # fmt: skip


def kv_heads_speed(args) -> None:
    """(c): cached tokens/s for each kv-heads setting."""
    models = {kv: build(kv) for kv in args.kv_heads}
    rows = []
    for batch in args.batches:
        p = prompts(batch, args.prompt_len)
        times = rounds(
            {
                kv: partial(generate_ids, m, p, max_new_tokens=args.new_tokens)
                for kv, m in models.items()
            },
            {kv: partial(generate_ids, m, p, max_new_tokens=8) for kv, m in models.items()},
            args.rounds,
        )
        tokens = batch * args.new_tokens
        rates = {kv: rate(tokens, ts) for kv, ts in times.items()}
        base = rates[args.kv_heads[0]][0]
        for kv, (med, cell) in rates.items():
            rows.append([batch, kv, cell, f"{med / base:.2f}x"])
        print(f"  batch {batch}: done", file=sys.stderr, flush=True)
    print(
        f"\n(c) tokens/s with the cache by kv-heads (heads {SHAPE['num_heads']}), "
        f"{args.new_tokens} new tokens, {args.rounds} interleaved rounds (median [min-max])\n"
    )
    print_table(["batch", "kv-heads", "tokens/s", f"vs kv-heads {args.kv_heads[0]}"], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--kv-heads", type=int, nargs="+", default=[8, 2, 1])
    ap.add_argument("--skip", choices=["a", "b", "c"], nargs="*", default=[])
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads; model: d_model "
        f"{SHAPE['d_model']}, heads {SHAPE['num_heads']}, layers {SHAPE['num_layers']}, FFN "
        f"{SHAPE['ffn_hidden']}, context {SHAPE['context_length']}, vocab {V}, RoPE, random "
        "weights (seed 0)"
    )
    if "a" not in args.skip:
        cache_vs_full(args)
    if "b" not in args.skip:
        cache_memory(args)
    if "c" not in args.skip:
        kv_heads_speed(args)


if __name__ == "__main__":
    main()
