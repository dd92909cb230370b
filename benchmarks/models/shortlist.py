"""A vocabulary shortlist on a real translator (issue 47): decoding speed with and without
it, in float32 and int8, greedy and beam, how many outputs change, and the test BLEU.

    python -m benchmarks.models.shortlist runs/fr [--data fra.txt] [--limit 2000]
        [--rounds 3] [--threads 2] [--batch 64] [--beams 1,4] [--per-source 50]
        [--frequent 100] [--shortlist FILE]

The shortlist is learned from the checkpoint's training pairs (``Shortlist.learn``, as
``attnkit translate shortlist`` does; ``--shortlist`` reads one instead). The first
``--limit`` test sentences are translated ``--batch`` at a time through the one decoding
path (``decoding.translate``, beam ranked with the length penalty 0.6 of ``translate
eval``), each setting with the shortlist off and on, timed in interleaved rounds; the ids
with it on are compared with the same engine's off, and both are scored (corpus BLEU on
those sentences, sacreBLEU as ``translate eval`` scores). Also printed: the shortlist's
words per sentence and per batch, and how many of the references' words they hold.
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch

from benchmarks.harness import (
    interleaved_times,
    load_translator_checkpoint,
    ratio_table,
    set_threads,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("checkpoint")
    p.add_argument("--data", default=None, help="the training file, if not where recorded")
    p.add_argument("--limit", type=int, default=2000, help="test sentences translated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--beams", default="1,4", help="1: greedy")
    p.add_argument("--per-source", type=int, default=50)
    p.add_argument("--frequent", type=int, default=100)
    p.add_argument("--shortlist", default=None, help="a file of 'translate shortlist'")
    args = p.parse_args(argv)
    set_threads(args.threads)
    from attnkit.inference import decoding
    from attnkit.inference.int8 import quantize_int8
    from attnkit.inference.shortlist import Shortlist
    from attnkit.metrics import bleu_from_stats, bleu_stats

    model, _, data = load_translator_checkpoint(args.checkpoint, data_file=args.data)
    model.eval()
    if args.shortlist:
        shortlist = Shortlist.load(args.shortlist)
    else:
        src_ids, tgt_ids = data.encoded("train")
        shortlist = Shortlist.learn(
            src_ids, tgt_ids, len(data.src_vocab), len(data.tgt_vocab),
            per_source=args.per_source, frequent=args.frequent,
        )  # fmt: skip
    quantized = copy.deepcopy(model)
    quantize_int8(quantized)
    sources, refs = data.sources("test")[: args.limit], data.references("test")[: args.limit]
    _describe(shortlist, data, len(sources))
    print(f"{shortlist!r}; {len(sources)} test sentences, batches of {args.batch}, "
          f"{args.threads} threads, {args.rounds} interleaved rounds; torch {torch.__version__}")  # fmt: skip

    for beam in [int(b) for b in args.beams.split(",")]:
        how = "greedy" if beam == 1 else f"beam {beam}"

        def run(m, sl, beam=beam):
            def go():
                with torch.inference_mode():
                    return decoding.translate(
                        m, data, sources, beam=None if beam == 1 else beam,
                        batch_size=args.batch, shortlist=sl,
                    )  # fmt: skip

            return go

        fns = {
            "float32": run(model, None),
            "float32 + shortlist": run(model, shortlist),
            "int8": run(quantized, None),
            "int8 + shortlist": run(quantized, shortlist),
        }
        outputs = {name: fn() for name, fn in fns.items()}  # warm-up; compared and scored
        times = interleaved_times(fns, repeats=args.rounds, warmup=0)
        own = {"float32 + shortlist": "float32", "int8 + shortlist": "int8", "int8": "float32"}
        extra = {}
        for name, hyps in outputs.items():
            texts = [h.text for h in hyps]
            bleu = bleu_from_stats(bleu_stats(texts, refs, data.bleu_tokenize))
            base = outputs[own.get(name, name)]
            same = sum(a.ids == b.ids for a, b in zip(hyps, base, strict=True))
            extra[name] = [f"{bleu:.2f}", f"{same}/{len(hyps)} ({own.get(name, '-')})"]
        print(f"\n{how}, {len(sources)} test sentences, batches of {args.batch}")
        ratio_table(
            times, "float32", unit="sentences/s", shown=lambda t: len(sources) / t,
            extra=extra, extra_headers=["BLEU", "ids = (engine without the shortlist)"],
        )  # fmt: skip
    return 0


def _describe(shortlist, data, limit: int) -> None:
    """Words per test sentence and per 64 consecutive ones, and the references' words inside."""
    src, tgt = data.encoded("test")
    words, batch, cover = shortlist.coverage(src[:limit], tgt[:limit], (data.special_ids["eos"],))
    print(f"shortlist words: {words:.0f} per sentence, {batch:.0f} per 64 sentences, of "
          f"{len(data.tgt_vocab)}; the references' words inside their sentence's: {cover:.2%}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
