"""Translate English text to French with a CTranslate2 export of an attnkit translator: the
command line that ``benchmarks/peers/translation.py decode`` times beside ``attnkit translate run``.

    python -m benchmarks.peers.ct2_translate MODEL_DIR --input FILE [--beam K] [--length-penalty A]
        [--batch-size 64] [--threads 2] [--max-decoding-length N] [--compute-type default]

``MODEL_DIR`` is a folder written by ``attnkit translate export --to ctranslate2`` (or
``attnkit.inference.export_ctranslate2.export_ctranslate2``). One translation per input
line is printed, in order. Only ctranslate2, sentencepiece and the standard library are
imported (what a CTranslate2 user's script imports): the source text is normalized by
attnkit's ``attnkit/data/normalize.py`` (standard library only), loaded as a file so that
attnkit's package, and with it torch, is not imported.

``--length-penalty``: CTranslate2 divides a hypothesis's log-probability by
``length ** A`` (attnkit by the GNMT ``((5 + length) / 6) ** A``; with 0 both rank by the
raw log-probability). ``--max-decoding-length``: decoder steps, ``<eos>`` included
(``Translator.decode_steps()`` of the checkpoint gives attnkit's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["load", "normalizer", "read_lines", "translate"]


def normalizer() -> Callable[[str], str]:
    """attnkit's ``normalize_source``, loaded from its file without importing attnkit."""
    spec = importlib.util.find_spec("attnkit")  # finds the package; does not import it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("attnkit is not installed: its normalize_source is needed")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "normalize.py"
    module_spec = importlib.util.spec_from_file_location("_attnkit_normalize", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.normalize_source


def load(model_dir: str | Path, threads: int, compute_type: str = "default"):
    """(ctranslate2.Translator, source SentencePiece, target SentencePiece) of a folder."""
    import ctranslate2
    import sentencepiece as spm

    folder = Path(model_dir)
    translator = ctranslate2.Translator(
        str(folder), device="cpu", compute_type=compute_type,
        inter_threads=1, intra_threads=threads,
    )  # fmt: skip
    if (folder / "sentencepiece.model").is_file():
        sp = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.model"))
        return translator, sp, sp
    src = spm.SentencePieceProcessor(model_file=str(folder / "source.model"))
    tgt = spm.SentencePieceProcessor(model_file=str(folder / "target.model"))
    return translator, src, tgt


def translate(
    translator,
    sp_src,
    sentences: list[str],
    normalize: Callable[[str], str],
    *,
    beam: int = 1,
    length_penalty: float = 0.0,
    batch_size: int = 64,
    max_decoding_length: int = 256,
) -> list[list[str]]:
    """The best hypothesis's target pieces of each sentence, in input order (CTranslate2
    sorts by length and batches ``batch_size`` sentences itself)."""
    pieces = [sp_src.encode(normalize(s), out_type=str) for s in sentences]
    results = translator.translate_batch(
        pieces,
        max_batch_size=batch_size,
        batch_type="examples",
        beam_size=beam,
        length_penalty=length_penalty,
        max_decoding_length=max_decoding_length,
        min_decoding_length=0,
    )
    return [r.hypotheses[0] for r in results]


def read_lines(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", metavar="MODEL_DIR")
    ap.add_argument("--input", required=True, metavar="FILE", help="one sentence a line; - stdin")
    ap.add_argument("--beam", type=int, default=1, help="beam size (1: greedy)")
    ap.add_argument("--length-penalty", type=float, default=0.0, help="CTranslate2's exponent")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="intra_threads")
    ap.add_argument("--max-decoding-length", type=int, default=256)
    ap.add_argument("--compute-type", default="default", help="default, int8, float32 ...")
    ap.add_argument("--json", action="store_true", help="print the pieces as JSON lines")
    args = ap.parse_args(argv)
    normalize = normalizer()
    translator, sp_src, sp_tgt = load(args.model_dir, args.threads, args.compute_type)
    lines = read_lines(args.input)
    todo = [i for i, line in enumerate(lines) if line.strip()]  # blank in, blank out
    found = translate(
        translator, sp_src, [lines[i] for i in todo], normalize,
        beam=args.beam, length_penalty=args.length_penalty, batch_size=args.batch_size,
        max_decoding_length=args.max_decoding_length,
    )  # fmt: skip
    out = [""] * len(lines)
    for i, tokens in zip(todo, found):
        out[i] = json.dumps(tokens, ensure_ascii=False) if args.json else sp_tgt.decode(tokens)
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
