"""Test BLEU of a real-data translator against training minutes (the README's curve).

Train once with snapshots, e.g. the README's recipe run for an hour with a snapshot every
5 minutes (the schedule, warm-up + inverse square root, does not depend on the budget,
so its 30-minute snapshot is the 30-minute recipe's model):

    attnkit translate train --arch transformer --preset base --data fra.txt \\
        --tokenizer sentencepiece --time-budget 3600 --snapshot-every-minutes 5 --out runs/fr

then score the snapshot nearest to each mark (each is written right after the step that
crosses it) on the whole held-out test split:

    python -m benchmarks.models.real_fra_curve runs/fr --minutes 5,10,20,30,60 --average 30:2

``--average M:N`` also scores the mean of the N snapshots ending at minute M (checkpoint
averaging, ``attnkit translate average``). Prints one row per point: minutes of training
(wall clock, evaluations included), step, epochs, test BLEU (sacreBLEU 13a on detokenized
text) and chrF, and the sacreBLEU signature.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import sacrebleu
import torch

from attnkit.inference.decoding import translate
from attnkit.inference.translator import Translator
from attnkit.metrics import bleu_signature, corpus_bleu, corpus_chrf
from attnkit.training.averaging import average_state_dicts, list_snapshots
from benchmarks.harness import load_translator_checkpoint


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run", type=Path, help="checkpoint folder trained with snapshots")
    p.add_argument("--minutes", default="5,10,20,30,60", help="marks, comma-separated")
    p.add_argument("--average", action="append", default=[], metavar="M:N",
                   help="also the mean of the N snapshots ending at minute M")  # fmt: skip
    p.add_argument("--limit", type=int, default=None, help="score the first N test pairs only")
    p.add_argument("--data", default=None, help="override the data file recorded in the run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam", type=int, default=None, help="beam search with N hypotheses")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    model, cfg, data = load_translator_checkpoint(args.run, data_file=args.data)
    sources, refs = data.sources("test"), data.references("test")
    if args.limit:
        sources, refs = sources[: args.limit], refs[: args.limit]
    snapshots = list_snapshots(args.run)
    print(f"{args.run}: {len(snapshots)} snapshots; test split: {len(sources)} pairs")

    def upto(minute: float) -> int:
        """Index of the snapshot nearest to ``minute`` (they are written just after a mark)."""
        gaps = [abs(s["train_seconds"] - minute * 60) for s in snapshots]
        best = min(range(len(snapshots)), key=gaps.__getitem__)
        if gaps[best] > 60:
            raise SystemExit(f"no snapshot within a minute of minute {minute}")
        return best

    points = [(f"{float(m):g}", [upto(float(m))]) for m in args.minutes.split(",")]
    for spec in args.average:
        minute, n = spec.split(":")
        end = upto(float(minute))
        if end + 1 < int(n):
            raise SystemExit(f"--average {spec}: only {end + 1} snapshots up to minute {minute}")
        points.append((f"{minute} (mean of {n})", list(range(end + 1 - int(n), end + 1))))

    # Tatoeba gives one English sentence several French translations, each a test pair of
    # its own: decode each distinct source once; score it against each of its references
    # alone (the README's BLEU) and against all of them at once (multi-reference BLEU)
    unique = list(dict.fromkeys(sources))
    grouped: dict[str, list[str]] = {s: [] for s in unique}
    for src, ref in zip(sources, refs, strict=True):
        grouped[src].append(ref)
    most = max(len(r) for r in grouped.values())
    streams = [
        [grouped[s][j] if j < len(grouped[s]) else None for s in unique] for j in range(most)
    ]
    print(f"{len(unique)} distinct sources, up to {most} references each")
    print("| mark | minutes | step | epochs | test BLEU | chrF | multi-ref BLEU | decode s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, index in points:
        states = [torch.load(snapshots[i]["path"], weights_only=True) for i in index]
        model.load_state_dict(states[0] if len(states) == 1 else average_state_dicts(states))
        model.eval()
        start = time.perf_counter()
        if args.beam is None:
            with torch.inference_mode():
                unique_hyps = [h.text for h in translate(model, data, unique)]
        else:
            unique_hyps = [
                h.text for h in Translator(model, data).translate(unique, beam=args.beam)
            ]
        seconds = time.perf_counter() - start
        by_source = dict(zip(unique, unique_hyps, strict=True))
        hyps = [by_source[s] for s in sources]
        bleu = corpus_bleu(hyps, refs, data.bleu_tokenize)
        chrf = corpus_chrf(hyps, refs)
        multi = sacrebleu.BLEU(tokenize=data.bleu_tokenize).corpus_score(unique_hyps, streams)
        last = snapshots[index[-1]]
        epochs = last["step"] / max(
            1, len(data.batches("train", cfg["train_config"]["batch_tokens"]))
        )
        taken = last["train_seconds"] / 60
        print(f"| {label} | {taken:.2f} min | {last['step']} | {epochs:.2f} | {bleu:.1f} | "
              f"{chrf:.1f} | {multi.score:.1f} | {seconds:.0f} |", flush=True)  # fmt: skip
    search = "greedy" if args.beam is None else f"beam {args.beam}, length penalty 0.6"
    print(f"sacreBLEU signature: {bleu_signature(data.bleu_tokenize)}; {search}")
    for src, hyp, ref in list(zip(sources, hyps, refs))[:5]:
        print(f"  {src} => {hyp}   (reference: {ref})")


if __name__ == "__main__":
    main()
