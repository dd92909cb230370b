"""One decoding step of a Transformer translator: the lean step (``models.transformer_step``)
against the modules' forward, at the row counts decoding meets, side by side.

    python -m benchmarks.kernels.decoder_step [--checkpoint DIR] [--rows 1,4,16,64] [--rounds 5]

Without ``--checkpoint`` it builds the base recipe's model (d_model 256, 2 + 2 layers,
4000 pieces) with random weights: a step's cost does not depend on what the weights
learned. The model is loaded as a checkpoint is (``PrepackedLinear`` layers); each
measurement feeds one position to a decoder whose caches hold ``--held`` positions, a
source of ``--source`` tokens. Prints microseconds per step, median [min-max] over
interleaved rounds, and the ratio (> 1: the lean step is faster).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnkit.inference.prepacked import prepack_linears
from attnkit.models import transformer_step
from attnkit.models.transformer import build_transformer
from attnkit.training.recipes import BASE
from benchmarks.harness import load_translator_checkpoint


def _model(checkpoint: str | None):
    if checkpoint:
        return load_translator_checkpoint(checkpoint, with_data=False)[0]
    torch.manual_seed(0)
    model = build_transformer(BASE.model, 4000, 4000).eval()
    prepack_linears(model)
    return model


def _step_us(decoder, state, y, calls: int) -> float:
    for _ in range(5):
        decoder(y, state)
    t0 = time.perf_counter()
    for _ in range(calls):
        decoder(y, state)
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkpoint", default=None, help="a translator checkpoint folder")
    p.add_argument("--rows", default="1,4,16,64")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=100, help="steps per measurement")
    p.add_argument("--held", type=int, default=10, help="positions already decoded")
    p.add_argument("--source", type=int, default=12, help="source tokens")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = _model(args.checkpoint)
    decoder, vocab = model.decoder, model.decoder.vocab_size
    rows = [int(r) for r in args.rows.split(",")]
    applies = transformer_step.applies
    times: dict[tuple[int, str], list[float]] = {}
    with torch.no_grad():
        states = {}
        for n in rows:
            src = torch.randint(4, model.encoder.vocab_size, (n, args.source))
            src_len = torch.full((n,), args.source)
            state = decoder.init_state(model.encoder(src, src_len), src_len)
            prefix = torch.randint(4, vocab, (n, args.held))
            _, state = decoder(prefix, state)  # fills the caches: held positions
            states[n] = (state, torch.randint(4, vocab, (n, 1)))
        for _ in range(args.rounds):
            for n in rows:
                state, y = states[n]
                transformer_step.applies = applies
                times.setdefault((n, "lean"), []).append(_step_us(decoder, state, y, args.calls))
                transformer_step.applies = lambda *a: False  # the modules' forward
                times.setdefault((n, "modules"), []).append(_step_us(decoder, state, y, args.calls))
        transformer_step.applies = applies
    print(f"torch {torch.__version__}, {args.threads} threads, {args.rounds} rounds, "
          f"{args.held} positions held, a source of {args.source}")  # fmt: skip
    print("| rows | modules us | lean step us | lean vs modules |")
    print("| --- | --- | --- | --- |")
    for n in rows:
        m, s = times[(n, "modules")], times[(n, "lean")]
        ratios = [a / b for a, b in zip(m, s)]
        print(
            f"| {n} | {statistics.median(m):.0f} [{min(m):.0f}-{max(m):.0f}] | "
            f"{statistics.median(s):.0f} [{min(s):.0f}-{max(s):.0f}] | "
            f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}x-{max(ratios):.2f}x] |"
        )


if __name__ == "__main__":
    main()
