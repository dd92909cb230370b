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

from attnkit.i18n import _

__all__ = ["check_device", "checkpoint_data", "run_average", "run_eval", "run_run"]


# ----------------------------------------------------------------------------- average


def run_average(args: argparse.Namespace) -> int:
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.training.averaging import average_checkpoint

    if args.last < 1:
        raise ValueError(_("--last must be at least 1 (snapshots to average), got {n}")
                         .format(n=args.last))  # fmt: skip
    out = average_checkpoint(args.checkpoint, args.last, args.out)
    steps = read_checkpoint_config(out)["averaged"]["snapshots"]
    print(_("averaged the last {n} snapshots of {checkpoint} (steps {steps}) into {out}")
          .format(n=args.last, checkpoint=args.checkpoint, steps=", ".join(map(str, steps)),
                  out=out))  # fmt: skip
    return 0


# ----------------------------------------------------------------------------- eval


def run_eval(args: argparse.Namespace) -> int:
    from attnkit.inference.int8 import quantize_int8
    from attnkit.inference.loading import load_model
    from attnkit.inference.shortlist import Shortlist
    from attnkit.inference.translator import Translator

    if args.limit is not None and args.limit < 1:
        raise ValueError(_("--limit must be at least 1 (sentences to score), got {n}")
                         .format(n=args.limit))  # fmt: skip
    if args.examples < 0:
        raise ValueError(_("--examples must be 0 or more, got {n}").format(n=args.examples))
    if args.max_len is not None and args.max_len < 1:
        raise ValueError(_("--max-len must be positive, got {n}").format(n=args.max_len))
    if args.beam is not None and args.beam < 1:
        raise ValueError(_("--beam must be at least 1, got {n}").format(n=args.beam))
    check_device(args.device)
    model, cfg = load_model(args.checkpoint, args.device, prepack=not args.int8)
    if args.int8:
        quantize_int8(model)
    data = checkpoint_data(args.checkpoint, cfg, args.data)
    translator = Translator(model, data, model_config=cfg.get("model_config"), arch=cfg["arch"])
    if args.shortlist is not None:
        translator.shortlist = Shortlist.load(args.shortlist)
    ev = translator.evaluate(args.split, args.limit, beam=args.beam, max_len=args.max_len)
    for src, hyp, ref in list(zip(ev.sources, ev.hyps, ev.refs))[: args.examples]:
        print(_("{src} => {hyp}   (reference: {ref})").format(src=src, hyp=hyp, ref=ref))
    search = _("greedy") if args.beam is None else _("beam {k}").format(k=args.beam)
    if args.int8:
        search = _("{search}, int8").format(search=search)
    if args.shortlist is not None:
        search = _("{search}, shortlist").format(search=search)
    print(
        _("{split} BLEU {bleu:.2f}, chrF {chrf:.2f} on {n} sentences (arch {arch}, epoch {epoch}, "
          "step {step}, {search})")
        .format(split=args.split, bleu=ev.bleu, chrf=ev.chrf, n=len(ev.sources), arch=cfg["arch"],
                epoch=cfg.get("epoch"), step=cfg.get("step"), search=search)
    )  # fmt: skip
    print(_("sacreBLEU signature: {signature}").format(signature=ev.signature))
    return 0


def checkpoint_data(checkpoint: str, cfg: dict, data_file: str | None):
    """The ``TranslationData`` a checkpoint was trained with, splits included: the data
    its config records (``data_file`` in place of the recorded file), its own subword
    models; a clear error when they do not give the checkpoint's vocabularies."""
    from attnkit.data.translation import load_translation_data
    from attnkit.data.translation_data import load_tokenizer

    data_args = dict(cfg.get("data_args") or {})
    if data_file is not None:
        data_args["data"] = data_file
    record = cfg["data"].get("tokenizer")
    imported = isinstance(record, dict) and record.get("kind") == "marian"
    if record is not None:  # the checkpoint's subword models, as trained (or imported)
        data_args["subword"] = load_tokenizer(cfg.get("folder", checkpoint), record)
    if imported:  # an imported Marian model: its tokenizer on the given corpus
        data_args.setdefault("tokenizer", "sentencepiece")
        data_args.setdefault("max_len", cfg["data"]["max_len"])
    data = load_translation_data(**data_args)
    if not imported and json.loads(json.dumps(data.to_dict())) != cfg["data"]:
        raise ValueError(
            _("the data ({data}) does not give the vocabularies of checkpoint {checkpoint}; pass "
              "the file it was trained on with --data")
            .format(data=data_args.get("data") or _("generated"), checkpoint=checkpoint)
        )  # fmt: skip
    return data


# ----------------------------------------------------------------------------- run


def run_run(args: argparse.Namespace) -> int:
    from attnkit.inference.attention_maps import plot_attention_maps
    from attnkit.inference.translator import Translator
    from attnkit.models.seq2seq import AttentionDecoder

    if args.max_len is not None and args.max_len < 1:
        raise ValueError(_("--max-len must be positive, got {n}").format(n=args.max_len))
    if args.beam is not None and args.beam < 1:
        raise ValueError(_("--beam must be at least 1, got {n}").format(n=args.beam))
    if args.all_heads and args.heatmap is None:
        raise ValueError(_("--all-heads needs --heatmap PNG"))
    heatmap = None if args.heatmap is None else _check_heatmap_path(args.heatmap)
    check_device(args.device)
    if args.batch_size < 1:
        raise ValueError(_("--batch-size must be at least 1, got {n}").format(n=args.batch_size))
    if args.merge_pieces and args.heatmap is None:
        raise ValueError(_("--merge-pieces needs --heatmap PNG"))
    if bool(args.sentences) == (args.input is not None):
        raise ValueError(
            _("give the sentences to translate either as arguments or with --input FILE "
              "(one per line, - for stdin), not both") if args.sentences else
            _("nothing to translate: give sentences as arguments or --input FILE (- for stdin)")
        )  # fmt: skip
    sentences = list(args.sentences) or _read_input(args.input)
    translator = Translator.load(
        args.checkpoint, args.device, int8=args.int8, shortlist=args.shortlist
    )
    if heatmap is not None and not isinstance(translator.model.decoder, AttentionDecoder):
        raise ValueError(_("arch {arch} has no attention for --heatmap")
                         .format(arch=repr(translator.arch)))  # fmt: skip
    # --input: a blank line gives a blank output line, so output line i translates input line i
    todo = [i for i, s in enumerate(sentences) if args.input is None or s.strip()]
    unknown = translator.check(  # an InputError (a ValueError) says what is wrong
        [sentences[i] for i in todo],
        allow_unknown=args.allow_unknown,
        line_numbers=[i + 1 for i in todo],
        where="" if args.input is None else f"--input {args.input}",
    )
    if unknown:
        print(_("note: unknown words translated as <unk>: {words}").format(words=", ".join(unknown)),
              file=sys.stderr)  # fmt: skip
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
            print(_("heatmap: {path}").format(path=target), file=sys.stderr)
    return 0


def _read_input(name: str) -> list[str]:
    """The sentences of ``--input`` (a UTF-8 file, or ``-`` for stdin), one per line;
    every line counts, so the output has one line per input line, in order."""
    if name == "-":
        text = sys.stdin.read()
    else:
        path = Path(name)
        if not path.is_file():
            raise FileNotFoundError(_("--input {name}: no such file").format(name=name))
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(_("--input {name} is not UTF-8 text (byte {byte})")
                             .format(name=name, byte=e.start)) from None  # fmt: skip
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the newline at the end of the last line
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if not lines:
        raise ValueError(_("--input {name} has no lines to translate").format(name=name))
    return lines


def _check_heatmap_path(text: str) -> Path:
    """An image path that matplotlib can write into an existing folder, or a clear error."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(text)
    supported = FigureCanvasBase.get_supported_filetypes()
    ext = path.suffix.lower().lstrip(".")
    if ext not in supported:
        if path.suffix:
            got = _("extension {suffix}").format(suffix=repr(path.suffix))
        else:
            got = _("no extension")
        raise ValueError(
            _("--heatmap {path}: {got}; use an image format matplotlib writes: {formats}")
            .format(path=text, got=got, formats=", ".join(f".{e}" for e in sorted(supported)))
        )  # fmt: skip
    folder = path.parent
    if not folder.is_dir():
        if folder.exists():
            why = _("--heatmap {path}: the folder {folder} is not a folder")
        else:
            why = _("--heatmap {path}: the folder {folder} does not exist")
        raise ValueError(why.format(path=text, folder=folder))
    if path.is_dir():
        raise ValueError(_("--heatmap {path} is a folder; give a file name such as align.png")
                         .format(path=text))  # fmt: skip
    return path


def check_device(device: str) -> None:
    """A clear error for a device string torch does not know or CUDA that is not there."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(_("--device {device} is not a device (cpu, cuda, cuda:0 ...)")
                         .format(device=repr(device))) from None  # fmt: skip
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                _("--device {device}: CUDA is not available on this machine "
                  "(torch.cuda.is_available() is False); use --device cpu").format(device=device)
            )  # fmt: skip
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise RuntimeError(
                _("--device {device}: this machine has {count} CUDA device(s) "
                  "(cuda:0 .. cuda:{last})").format(device=device, count=count, last=count - 1)
            )  # fmt: skip
