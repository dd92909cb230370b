"""Translation at OPUS-MT en-fr's size on identical weights: attnkit against Hugging Face
``generate`` and CTranslate2 (float32 and int8), greedy and beam 4, batch 1 latency and
batch 64 throughput, with the token ids of every contender compared to attnkit's.

    python -m benchmarks.peers.opus_mt [--rounds 3] [--threads 2] [--steps 32]
        [--latency-sentences 8] [--sentences 128] [--batch 64] [--beams 1,4] [--quick]
        [--processes] [--only NAMES] [--batches 1,64] [--profile]

One random-weight ``MarianMTModel`` (transformers' initialization, seed 0; ~75 M
parameters at Helsinki-NLP/opus-mt-en-fr's shapes) is saved as a Hugging Face folder;
attnkit reads it through ``attnkit.convert.marian.marian_model`` (its linear layers then
prepacked, as a loaded translator's are), CTranslate2 through its own Marian converter
(float32 weights; ``compute_type="int8"`` for int8). The inputs are random source ids of
realistic lengths (8-40 pieces, then ``</s>``). Random weights translate degenerately, so
every contender decodes exactly ``--steps`` tokens: ``</s>`` is never forced (HF's
``forced_eos_token_id`` off), beams rank by raw log-probability (length penalty 0), the pad
id is never emitted (Marian's ``bad_words_ids``); each sequence of ids is compared with
attnkit's step for step.

Each setting (greedy or beam, batch 1 or batch 64) times its contenders in interleaved
rounds (harness) and prints a table: ms per sentence (batch 1) or sentences/s (batch 64),
median [min-max] over rounds, attnkit's and attnkit int8's speed over each contender's,
per round, and the ids against attnkit's and each int8 engine's own float32's.
``--processes`` runs every contender in its own process (``harness.ContenderProcesses``):
CTranslate2 brings its own libgomp, and in one process with it attnkit ran up to 25%
slower once it had run. Goals: attnkit >= 1.5x HF and >= 0.5x CTranslate2 float32 in every
row (issue 35); attnkit int8 >= 1.0x CTranslate2 int8 (issue 47).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.harness import (
    ContenderProcesses,
    interleaved_times,
    ratio_table,
    set_threads,
)
from benchmarks.peers.real_sizes import OPUS_MT_EN_FR, ct2_marian, hf_marian, int8_columns

PAD, EOS = OPUS_MT_EN_FR["pad_token_id"], OPUS_MT_EN_FR["eos_token_id"]
START = OPUS_MT_EN_FR["decoder_start_token_id"]


def sources(n: int, seed: int) -> list[list[int]]:
    """``n`` random sentences of 8-40 piece ids (not ``</s>``, ``<unk>`` or pad), ``</s>`` last."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(8, 41, (n,), generator=gen).tolist()
    return [[*torch.randint(2, PAD, (n_,), generator=gen).tolist(), EOS] for n_ in lengths]


def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (B, S) and lengths (B,)."""
    lens = torch.tensor([len(r) for r in rows])
    ids = torch.full((len(rows), int(lens.max())), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids, lens


def attnkit_decoder(model, beam: int, steps: int):
    from attnkit.inference.beam_search import BeamSearch
    from attnkit.inference.decoding import greedy_decode

    search = BeamSearch(beam, steps, START, EOS, 0.0, suppress=(PAD,)) if beam > 1 else None

    @torch.inference_mode()
    def run(rows: list[list[int]]) -> list[list[int]]:
        src, src_len = padded(rows)
        if search is None:
            out = greedy_decode(
                model, src, src_len, bos_id=START, eos_id=EOS, max_len=steps, suppress=(PAD,)
            )
            return out.tokens
        return [hyps[0].tokens for hyps in search(model, src, src_len)]

    return run


def hf_decoder(model, beam: int, steps: int):
    beam_options = {"length_penalty": 0.0, "early_stopping": False} if beam > 1 else {}

    @torch.inference_mode()
    def run(rows: list[list[int]]) -> list[list[int]]:
        src, src_len = padded(rows)
        mask = torch.arange(src.shape[1]) < src_len[:, None]
        out = model.generate(
            src, attention_mask=mask.long(), max_new_tokens=steps, num_beams=beam,
            do_sample=False, forced_eos_token_id=None,
            bad_words_ids=[[PAD]], **beam_options,
        )  # fmt: skip
        return [[t for t in row[1:] if t not in (PAD, EOS)] for row in out.tolist()]

    return run


def ct2_decoder(translator, tokens: list[str], beam: int, steps: int):
    index = {t: i for i, t in enumerate(tokens)}

    def run(rows: list[list[int]]) -> list[list[int]]:
        results = translator.translate_batch(
            [[tokens[i] for i in r] for r in rows], beam_size=beam, max_decoding_length=steps,
            length_penalty=0.0, max_batch_size=len(rows),
        )  # fmt: skip
        return [[index[t] for t in r.hypotheses[0]] for r in results]

    return run


def timed(decoders: dict, sentences: list[list[int]], batch: int, rounds: int):
    """Each contender translates ``sentences`` ``batch`` at a time: once untimed (warm-up; its
    ids are compared), then in interleaved rounds. Returns (seconds per round, ids)."""

    def all_of(run):
        return lambda: [ids for i in range(0, len(sentences), batch)
                        for ids in run(sentences[i : i + batch])]  # fmt: skip

    fns = {name: all_of(run) for name, run in decoders.items()}
    outputs = {name: fn() for name, fn in fns.items()}
    return interleaved_times(fns, repeats=rounds, warmup=0), outputs


def load_contender(name: str, folder: Path, threads: int):
    """In a worker process: ``name``'s model from the saved folders, and a function
    ``(beam, steps) -> decoder`` (one decoder per beam size, made once)."""
    set_threads(threads)
    if name.startswith("CT2"):
        import ctranslate2

        from benchmarks.peers.real_sizes import ct2_tokens

        translator = ctranslate2.Translator(
            str(folder / "ct2"), device="cpu", compute_type=name.split()[1],
            inter_threads=1, intra_threads=threads,
        )  # fmt: skip
        tokens = ct2_tokens(OPUS_MT_EN_FR["vocab_size"], EOS, PAD)
        return lambda beam, steps: ct2_decoder(translator, tokens, beam, steps)
    if name == "HF generate":
        from transformers import MarianMTModel

        hf = MarianMTModel.from_pretrained(folder / "hf", attn_implementation="eager").eval()
        return lambda beam, steps: hf_decoder(hf, beam, steps)
    from attnkit.convert.marian import marian_model
    from attnkit.inference.int8 import quantize_int8
    from attnkit.inference.prepacked import prepack_linears

    model = marian_model(folder / "hf")
    if name == "attnkit int8":
        quantize_int8(model)
    else:
        prepack_linears(model)
    return lambda beam, steps: attnkit_decoder(model, beam, steps)


def runner(name: str, folder: str, threads: int):
    """In a contender's process (``--processes``): ``run((beam, steps, sentences, batch))``
    translates the sentences ``batch`` at a time and returns their ids."""
    make = load_contender(name, Path(folder), threads)
    decoders: dict = {}

    def run(request):
        beam, steps, sents, batch = request
        fn = decoders.setdefault((beam, steps), make(beam, steps))
        return [out for i in range(0, len(sents), batch) for out in fn(sents[i : i + batch])]

    return run


def report(title: str, times, outputs, n: int, batch: int) -> None:
    """The ratio table, with the ids against attnkit's and each int8 engine's own float32's
    and "attnkit int8 / it" per round (issue 47: attnkit int8 against CTranslate2 int8)."""
    print(f"\n{title}")
    reference = "attnkit" if "attnkit" in times else next(iter(times))
    headers, cells = int8_columns(times, outputs, reference)
    ratio_table(
        times, reference,
        unit="ms / sentence" if batch == 1 else "sentences/s",
        shown=(lambda t: t / n * 1e3) if batch == 1 else (lambda t: n / t),
        extra=cells, extra_headers=headers,
    )  # fmt: skip


def profile_top(decoders: dict, batch: list[list[int]], rows: int = 12) -> None:
    """The top operators (self CPU time) of one batch translated by each of attnkit,
    attnkit int8 and HF that ``--only`` keeps (CTranslate2's are not torch operators)."""
    from torch.profiler import ProfilerActivity, profile

    for name in [n for n in ("attnkit", "attnkit int8", "HF generate") if n in decoders]:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            decoders[name](batch)
        print(f"\nprofile of one batch of {len(batch)}, {name}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=32, help="tokens decoded per sentence")
    p.add_argument("--latency-sentences", type=int, default=8, help="batch-1 sentences a round")
    p.add_argument("--sentences", type=int, default=128, help="batch-64 sentences a round")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--beams", default="1,4", help="1: greedy")
    p.add_argument("--profile", action="store_true", help="top operators, batch-64 calls")
    p.add_argument("--quick", action="store_true", help="1 round, 2 + 8 sentences, 8 steps")
    p.add_argument("--only", default=None, help="comma-separated contenders (default: all): "
                   "attnkit, attnkit int8, HF generate, CT2 float32, CT2 int8")  # fmt: skip
    p.add_argument(
        "--batches", default="1,64", help="1: batch-1 latency; any other number: --batch throughput"
    )
    p.add_argument("--processes", action="store_true",
                   help="each contender in its own process (no shared thread pools or "
                        "allocator; --profile is then not available)")  # fmt: skip
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.latency_sentences, args.sentences, args.batch, args.steps = 1, 2, 8, 8, 8
    set_threads(args.threads)
    import ctranslate2

    names = ["attnkit", "attnkit int8", "HF generate", "CT2 float32", "CT2 int8"]
    if args.only:
        names = [name.strip() for name in args.only.split(",")]
    with tempfile.TemporaryDirectory(prefix="opus-mt-size-") as tmp:
        hf = hf_marian(Path(tmp) / "hf")
        ct2_marian(hf, Path(tmp) / "ct2")
        if args.processes:
            workers = ContenderProcesses(
                names, "benchmarks.peers.opus_mt:runner", (tmp, args.threads)
            )
        else:
            makers = {name: load_contender(name, Path(tmp), args.threads) for name in names}
    params = sum(p.numel() for p in hf.parameters())
    print(f"OPUS-MT en-fr shapes, random weights: {params:,} parameters (HF's count); torch "
          f"{torch.__version__}, ctranslate2 {ctranslate2.__version__}, {args.threads} threads, "
          f"{args.rounds} interleaved rounds, {args.steps} tokens decoded per sentence, "
          f"{'each contender in its own process' if args.processes else 'one process'}")  # fmt: skip
    latency = sources(args.latency_sentences, seed=1)
    throughput = sources(args.sentences, seed=2)
    for beam in [int(b) for b in args.beams.split(",")]:
        how = "greedy" if beam == 1 else f"beam {beam}"
        chosen = args.batches.split(",")
        settings = [(latency, 1)] * ("1" in chosen) + [(throughput, args.batch)] * (
            any(b != "1" for b in chosen)
        )
        for sents, batch in settings:
            if args.processes:
                times, outputs = workers.timed((beam, args.steps, sents, batch), args.rounds)
            else:
                decoders = {name: make(beam, args.steps) for name, make in makers.items()}
                times, outputs = timed(decoders, sents, batch, args.rounds)
            what = f"{len(sents)} sentences one at a time" if batch == 1 else (
                f"{len(sents)} sentences, batches of {batch}")  # fmt: skip
            report(f"{how}, batch {batch} ({what})", times, outputs, len(sents), batch)
        if args.profile and not args.processes:
            decoders = {name: make(beam, args.steps) for name, make in makers.items()}
            profile_top(decoders, throughput[: args.batch])
    if args.processes:
        workers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
