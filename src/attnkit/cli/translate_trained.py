"""``attnkit translate eval`` and ``attnkit translate run``: a trained translator's test
scores, and translations of given sentences (greedy or beam) with attention heatmaps.

    attnkit translate eval --checkpoint runs/bahdanau              # test BLEU + chrF
    attnkit translate run --checkpoint runs/bahdanau "i lost ." --heatmap align.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["check_device", "run_average", "run_eval", "run_run"]


# ----------------------------------------------------------------------------- average


def run_average(args: argparse.Namespace) -> int:
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.training.averaging import average_checkpoint

    if args.last < 1:
        raise ValueError(f"--last must be at least 1 (snapshots to average), got {args.last}")
    out = average_checkpoint(args.checkpoint, args.last, args.out)
    steps = read_checkpoint_config(out)["averaged"]["snapshots"]
    print(f"averaged the last {args.last} snapshots of {args.checkpoint} (steps "
          f"{', '.join(map(str, steps))}) into {out}")  # fmt: skip
    return 0


# ----------------------------------------------------------------------------- eval


def run_eval(args: argparse.Namespace) -> int:
    from attnkit.data.translation import load_translation_data
    from attnkit.data.translation_data import load_tokenizer
    from attnkit.inference.int8 import quantize_int8
    from attnkit.inference.loading import load_model
    from attnkit.inference.translator import Translator

    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1 (sentences to score), got {args.limit}")
    if args.examples < 0:
        raise ValueError(f"--examples must be 0 or more, got {args.examples}")
    if args.beam is not None and args.beam < 1:
        raise ValueError(f"--beam must be at least 1, got {args.beam}")
    check_device(args.device)
    model, cfg = load_model(args.checkpoint, args.device, prepack=not args.int8)
    if args.int8:
        quantize_int8(model)
    data_args = dict(cfg.get("data_args") or {})
    if args.data is not None:
        data_args["data"] = args.data
    record = cfg["data"].get("tokenizer")
    imported = isinstance(record, dict) and record.get("kind") == "marian"
    if record is not None:  # the checkpoint's subword models, as trained (or imported)
        data_args["subword"] = load_tokenizer(cfg.get("folder", args.checkpoint), record)
    if imported:  # an imported Marian model: its tokenizer on the given corpus
        data_args.setdefault("tokenizer", "sentencepiece")
        data_args.setdefault("max_len", cfg["data"]["max_len"])
    data = load_translation_data(**data_args)
    if not imported and json.loads(json.dumps(data.to_dict())) != cfg["data"]:
        raise ValueError(
            f"the data ({data_args.get('data') or 'generated'}) does not give the vocabularies "
            f"of checkpoint {args.checkpoint}; pass the file it was trained on with --data"
        )
    translator = Translator(model, data, model_config=cfg.get("model_config"), arch=cfg["arch"])
    ev = translator.evaluate(args.split, args.limit, beam=args.beam)
    for src, hyp, ref in list(zip(ev.sources, ev.hyps, ev.refs))[: args.examples]:
        print(f"{src} => {hyp}   (reference: {ref})")
    print(
        f"{args.split} BLEU {ev.bleu:.2f}, chrF {ev.chrf:.2f} on {len(ev.sources)} sentences "
        f"(arch {cfg['arch']}, epoch {cfg.get('epoch')}, step {cfg.get('step')}, "
        f"{'greedy' if args.beam is None else f'beam {args.beam}'}"
        f"{', int8' if args.int8 else ''})"
    )
    print(f"sacreBLEU signature: {ev.signature}")
    return 0


# ----------------------------------------------------------------------------- run


def run_run(args: argparse.Namespace) -> int:
    from attnkit.inference.attention_maps import plot_attention_maps
    from attnkit.inference.translator import Translator
    from attnkit.models.seq2seq import AttentionDecoder

    if args.max_len is not None and args.max_len < 1:
        raise ValueError(f"--max-len must be positive, got {args.max_len}")
    if args.beam is not None and args.beam < 1:
        raise ValueError(f"--beam must be at least 1, got {args.beam}")
    if args.all_heads and args.heatmap is None:
        raise ValueError("--all-heads needs --heatmap PNG")
    heatmap = None if args.heatmap is None else _check_heatmap_path(args.heatmap)
    check_device(args.device)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.merge_pieces and args.heatmap is None:
        raise ValueError("--merge-pieces needs --heatmap PNG")
    if bool(args.sentences) == (args.input is not None):
        raise ValueError(
            "give the sentences to translate either as arguments or with --input FILE "
            "(one per line, - for stdin), not both" if args.sentences else
            "nothing to translate: give sentences as arguments or --input FILE (- for stdin)"
        )  # fmt: skip
    sentences = list(args.sentences) or _read_input(args.input)
    translator = Translator.load(args.checkpoint, args.device, int8=args.int8)
    if heatmap is not None and not isinstance(translator.model.decoder, AttentionDecoder):
        raise ValueError(f"arch {translator.arch!r} has no attention for --heatmap")
    # --input: a blank line gives a blank output line, so output line i translates input line i
    todo = [i for i, s in enumerate(sentences) if args.input is None or s.strip()]
    unknown = translator.check(  # an InputError (a ValueError) says what is wrong
        [sentences[i] for i in todo],
        allow_unknown=args.allow_unknown,
        line_numbers=[i + 1 for i in todo],
        where="" if args.input is None else f"--input {args.input}",
    )
    if unknown:
        print(f"note: unknown words translated as <unk>: {', '.join(unknown)}", file=sys.stderr)
    found = translator.translate(
        [sentences[i] for i in todo],
        beam=args.beam,
        length_penalty=args.length_penalty,
        max_len=args.max_len,
        batch_size=args.batch_size,  # a long --input file is not one batch
    )
    best = [None] * len(sentences)
    for i, hyp in zip(todo, found):
        best[i] = hyp
    for hyp in best:
        print("" if hyp is None else hyp.text, flush=args.input == "-")
    if heatmap is not None:
        for i, (sentence, hyp) in enumerate(zip(sentences, best)):
            if hyp is None:
                continue
            target = heatmap if len(best) == 1 else heatmap.with_stem(f"{heatmap.stem}-{i}")
            maps = translator.maps(sentence, hyp.ids, hyp.finished, merge_pieces=args.merge_pieces)
            plot_attention_maps(maps, target, all_heads=args.all_heads)
            print(f"heatmap: {target}", file=sys.stderr)
    return 0


def _read_input(name: str) -> list[str]:
    """The sentences of ``--input`` (a UTF-8 file, or ``-`` for stdin), one per line;
    every line counts, so the output has one line per input line, in order."""
    if name == "-":
        text = sys.stdin.read()
    else:
        path = Path(name)
        if not path.is_file():
            raise FileNotFoundError(f"--input {name}: no such file")
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"--input {name} is not UTF-8 text (byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the newline at the end of the last line
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if not lines:
        raise ValueError(f"--input {name} has no lines to translate")
    return lines


def _check_heatmap_path(text: str) -> Path:
    """An image path that matplotlib can write into an existing folder, or a clear error."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(text)
    supported = FigureCanvasBase.get_supported_filetypes()
    ext = path.suffix.lower().lstrip(".")
    if ext not in supported:
        got = f"extension {path.suffix!r}" if path.suffix else "no extension"
        raise ValueError(
            f"--heatmap {text}: {got}; use an image format matplotlib writes: "
            + ", ".join(f".{e}" for e in sorted(supported))
        )
    folder = path.parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise ValueError(f"--heatmap {text}: the folder {folder} {why}")
    if path.is_dir():
        raise ValueError(f"--heatmap {text} is a folder; give a file name such as align.png")
    return path


def check_device(device: str) -> None:
    """A clear error for a device string torch does not know or CUDA that is not there."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device {device!r} is not a device (cpu, cuda, cuda:0 ...)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"--device {device}: CUDA is not available on this machine "
                "(torch.cuda.is_available() is False); use --device cpu"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise RuntimeError(
                f"--device {device}: this machine has {count} CUDA device(s) "
                f"(cuda:0 .. cuda:{count - 1})"
            )
