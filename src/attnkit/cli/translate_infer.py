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
    from attnkit.training.averaging import average_checkpoint, list_snapshots

    if args.last < 1:
        raise ValueError(f"--last must be at least 1 (snapshots to average), got {args.last}")
    snapshots = list_snapshots(args.checkpoint, check=False)
    out = average_checkpoint(args.checkpoint, args.last, args.out)
    chosen = snapshots[-args.last :]
    steps = ", ".join(str(s["step"]) for s in chosen)
    print(
        f"averaged the last {args.last} snapshots of {args.checkpoint} (steps {steps}) into {out}"
    )
    return 0


# ----------------------------------------------------------------------------- eval


def run_eval(args: argparse.Namespace) -> int:
    import torch

    from attnkit.data.subword import SubwordTokenizer
    from attnkit.data.translation import load_translation_data
    from attnkit.inference.decoding import translate
    from attnkit.metrics import bleu_signature, corpus_bleu, corpus_chrf
    from attnkit.training.checkpoint import load_model

    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1 (sentences to score), got {args.limit}")
    if args.examples < 0:
        raise ValueError(f"--examples must be 0 or more, got {args.examples}")
    check_device(args.device)
    model, cfg = load_model(args.checkpoint, args.device)
    data_args = dict(cfg.get("data_args") or {})
    if args.data is not None:
        data_args["data"] = args.data
    if cfg["data"].get("tokenizer") is not None:  # the checkpoint's subword models, as trained
        data_args["subword"] = SubwordTokenizer.load(args.checkpoint, cfg["data"]["tokenizer"])
    data = load_translation_data(**data_args)
    if json.loads(json.dumps(data.to_dict())) != cfg["data"]:
        raise ValueError(
            f"the data ({data_args.get('data') or 'generated'}) does not give the vocabularies "
            f"of checkpoint {args.checkpoint}; pass the file it was trained on with --data"
        )
    sources, refs = data.sources(args.split), data.references(args.split)
    if args.limit is not None:
        sources, refs = sources[: args.limit], refs[: args.limit]
    if not sources:
        raise ValueError(f"the {args.split} split is empty")
    with torch.inference_mode():
        hyps, _ = translate(model, data, sources, max_len=_decode_steps(data, cfg, None))
    tokenize = data.bleu_tokenize
    bleu, chrf = corpus_bleu(hyps, refs, tokenize), corpus_chrf(hyps, refs)
    for src, hyp, ref in list(zip(sources, hyps, refs))[: args.examples]:
        print(f"{src} => {hyp}   (reference: {ref})")
    print(
        f"{args.split} BLEU {bleu:.2f}, chrF {chrf:.2f} on {len(sources)} sentences "
        f"(arch {cfg['arch']}, epoch {cfg.get('epoch')}, step {cfg.get('step')})"
    )
    print(f"sacreBLEU signature: {bleu_signature(tokenize)}")
    return 0


# ----------------------------------------------------------------------------- run


def run_run(args: argparse.Namespace) -> int:
    import torch

    from attnkit.data.translation import TranslationData
    from attnkit.inference.attention_maps import attention_maps, merge_pieces, plot_attention_maps
    from attnkit.models.seq2seq import AttentionDecoder
    from attnkit.training.checkpoint import load_model

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
    model, cfg = load_model(args.checkpoint, args.device)
    data = TranslationData.from_dict(cfg["data"], args.checkpoint)
    if heatmap is not None and not isinstance(model.decoder, AttentionDecoder):
        raise ValueError(f"arch {cfg['arch']!r} has no attention for --heatmap")
    # --input: a blank line gives a blank output line, so output line i translates input line i
    todo = [i for i, s in enumerate(sentences) if args.input is None or s.strip()]
    _check_sentences(data, cfg, [sentences[i] for i in todo], args.allow_unknown, args.input,
                     line_numbers=[i + 1 for i in todo])  # fmt: skip
    steps = _decode_steps(data, cfg, args.max_len)

    device = next(model.parameters()).device
    found: list[tuple[list[int], bool]] = []
    with torch.inference_mode():  # in chunks: a long --input file is not one batch
        for start in range(0, len(todo), args.batch_size):
            chunk = [sentences[i] for i in todo[start : start + args.batch_size]]
            found += _decode(model, data, chunk, steps, args.beam, args.length_penalty, device)
    best: list[tuple[list[int], bool] | None] = [None] * len(sentences)
    for i, result in zip(todo, found):
        best[i] = result
    for result in best:
        print("" if result is None else data.detokenize(result[0]), flush=args.input == "-")
    if heatmap is not None:
        for i, (sentence, result) in enumerate(zip(sentences, best)):
            if result is None:
                continue
            ids, finished = result
            target = heatmap if len(best) == 1 else heatmap.with_stem(f"{heatmap.stem}-{i}")
            maps = attention_maps(model, data, sentence, tokens=ids, finished=finished)
            if args.merge_pieces:
                maps = merge_pieces(maps)
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


def _decode(
    model, data, sentences, steps, beam, length_penalty, device
) -> list[tuple[list[int], bool]]:
    """Per sentence: the best translation's ids (``<eos>`` excluded) and whether it ended."""
    from attnkit.inference.beam_search import BeamSearch
    from attnkit.inference.decoding import greedy_decode

    tgt = data.tgt_vocab
    bos, eos = tgt["<bos>"], tgt["<eos>"]
    src, src_len = data.encode_source(sentences)
    src, src_len = src.to(device), src_len.to(device)
    if beam is not None:
        search = BeamSearch(beam, steps, bos, eos, length_penalty)
        return [(list(h[0].tokens), h[0].finished) for h in search(model, src, src_len)]
    res = greedy_decode(model, src, src_len, bos_id=bos, eos_id=eos, max_len=steps)
    return list(zip(res.tokens, res.finished))


def _short(sentence: str, limit: int = 60) -> str:
    """``sentence`` cut to its first ``limit`` characters (+ "…"), for messages."""
    return sentence if len(sentence) <= limit else sentence[:limit].rstrip() + "…"


def _model_max_len(cfg: dict) -> int | None:
    """The most positions the checkpoint's model can encode (its config's ``max_len``)."""
    value = (cfg.get("model_config") or {}).get("max_len")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_sentences(
    data,
    cfg: dict,
    sentences: list[str],
    allow_unknown: bool,
    input_name: str | None = None,
    line_numbers: list[int] | None = None,
) -> None:
    """Empty, too long or (unless ``allow_unknown``) unknown words: a clear error (naming
    the ``--input`` line, from ``line_numbers``, when the sentences came from one)."""
    limit = data.max_len - 1  # words or pieces (punctuation included); <eos> is added
    model_max = _model_max_len(cfg)
    if model_max is not None:
        limit = min(limit, model_max - 1)
    unknown: dict[str, None] = {}
    numbers = line_numbers or list(range(1, len(sentences) + 1))
    for number, sentence in zip(numbers, sentences):
        where = f"--input {input_name} line {number}: " if input_name is not None else ""
        words = data.source_tokens(sentence)
        if not words:
            raise ValueError(f"{where}cannot translate an empty sentence: {sentence!r}")
        if len(words) > limit:
            raise ValueError(
                f"{where}sentence {_short(sentence)!r} has {len(words)} {data.unit} + <eos>, "
                f"more than max_len={limit + 1} of this model"
            )
        if data.tokenizer is None:  # subwords spell every word (bytes at worst)
            unknown.update((w, None) for w in words if w not in data.src_vocab)
    if unknown and not allow_unknown:
        raise ValueError(
            f"unknown words (not in the model's {len(data.src_vocab)}-word English "
            f"vocabulary): {', '.join(unknown)}; pass --allow-unknown to translate them "
            "as <unk>"
        )
    if unknown:
        print(f"note: unknown words translated as <unk>: {', '.join(unknown)}", file=sys.stderr)


def _decode_steps(data, cfg: dict, max_len: int | None) -> int:
    """Decoder steps (``<eos>`` included) for ``--max-len``, checked against the model.

    A model with positional encodings (the Transformer) takes at most its config's
    ``max_len`` decoder positions; the heatmap's teacher-forced pass adds ``<bos>`` to
    the steps, so they stay one below it.
    """
    model_max = _model_max_len(cfg)
    if max_len is None:
        steps = data.max_len + 2
        return steps if model_max is None else max(1, min(steps, model_max - 1))
    steps = max_len + 1
    if model_max is not None and steps > model_max - 1:
        raise ValueError(
            f"--max-len {max_len} is more than this model can produce: its config has "
            f"max_len={model_max} positions, so --max-len can be at most {model_max - 2}"
        )
    return steps


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
