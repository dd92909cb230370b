"""The current edition's Transformer section (d2l 1.0, 11.7) on the real d2l 1.0.3 and on
``attnkit.d2l.v1``, side by side in one run.

The section: ``MTFraEng(batch_size=128)``, width 256, 2 blocks, 4 heads, FFN 64, dropout
0.2, ``Seq2Seq(..., lr=0.001)`` (Adam), ``Trainer(max_epochs=30, gradient_clip_val=1,
num_gpus=1).fit(model, data)``, then the four translations with BLEU. The section's code
is written once (``section``) as a function of the ``d2l`` module and run unchanged on
both; only ``trainer.fit`` is timed. Runs are interleaved (book, attnkit, book, ...) with
the same seed before each, after an untimed one-epoch warm-up of each contender.

The book defines ``TransformerDecoderBlock``/``TransformerDecoder`` in the section's
text; the book runs those (written here once, over the module's classes), attnkit its
``d2l.TransformerDecoder`` (``--decoder section``: the section's classes on both).

The real package is not a dependency of attnkit (it pins numpy 1.23.5). Get it with
``pip download --no-deps d2l==1.0.3 -d /tmp/d2lpkg`` and run, e.g.

    nice -n 10 python -m benchmarks.book.v1_transformer --epochs 30 --repeats 1

Its ``d2l/torch.py`` is executed from ``--book-d2l`` (the wheel or an extracted folder)
under a private module name, with the benchmark-only stub modules of
``benchmarks/book/sections.py`` (plus ``scipy``) for imports not installed here; its
``MTFraEng._download`` reads ``--fra`` (attnkit reads the same file via ``$ATTNKIT_FRA``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import statistics
import sys
import time
import types
from pathlib import Path

import torch

from benchmarks.book.sections import _book_shims, _installed, _read_book_source
from benchmarks.harness import print_table

REPO = Path(__file__).resolve().parents[2]
DEFAULT_FRA = REPO.parent / "shared" / "data" / "fra-eng" / "fra.txt"
DEFAULT_BOOK = Path("/tmp/d2lpkg/d2l103")
DEFAULT_WHEEL = Path("/tmp/d2lpkg/d2l-1.0.3-py3-none-any.whl")
BOOK_MODULE_NAME = "_book_d2l_103_torch"  # private: never shadows an installed `d2l`


def load_book_d2l(path: Path) -> tuple[types.ModuleType, str, list[str]]:
    """Execute d2l 1.0.3's ``torch.py`` as ``BOOK_MODULE_NAME`` with stub modules."""
    source, origin, init = _read_book_source(path)
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", init)
    version = found.group(1) if found else "unknown"
    shims = _book_shims()
    spatial = types.ModuleType("scipy.spatial", "benchmark-only shim")
    spatial.distance_matrix = None  # used by chapters this section never runs
    shims["scipy"] = types.ModuleType("scipy", "benchmark-only shim")
    shims["scipy"].spatial = spatial
    shims["scipy.spatial"] = spatial
    needed = [n for n in shims if n not in sys.modules and not _installed(n.split(".")[0])]
    module = types.ModuleType(BOOK_MODULE_NAME, f"d2l {version} torch.py from {origin}")
    module.__file__ = origin
    sys.modules[BOOK_MODULE_NAME] = module
    for name in needed:
        sys.modules[name] = shims[name]
    try:
        exec(compile(source, origin, "exec"), module.__dict__)
    finally:
        for name in needed:
            sys.modules.pop(name, None)
    return module, version, needed


def point_book_at(book, fra: Path) -> None:
    """The book's ``MTFraEng._download`` returns the text of the local ``fra.txt``."""

    def _download(self):
        with open(fra, encoding="utf-8") as f:
            return f.read()

    book.MTFraEng._download = _download


def section_decoder(d2l):
    """The section's ``TransformerDecoderBlock``/``TransformerDecoder`` (book text, 11.7)."""
    from torch import nn

    # fmt: off
    class TransformerDecoderBlock(nn.Module):
        # The i-th block in the Transformer decoder
        def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
            super().__init__()
            self.i = i
            self.attention1 = d2l.MultiHeadAttention(num_hiddens, num_heads, dropout)
            self.addnorm1 = d2l.AddNorm(num_hiddens, dropout)
            self.attention2 = d2l.MultiHeadAttention(num_hiddens, num_heads, dropout)
            self.addnorm2 = d2l.AddNorm(num_hiddens, dropout)
            self.ffn = d2l.PositionWiseFFN(ffn_num_hiddens, num_hiddens)
            self.addnorm3 = d2l.AddNorm(num_hiddens, dropout)

        def forward(self, X, state):
            enc_outputs, enc_valid_lens = state[0], state[1]
            if state[2][self.i] is None:  # noqa: SIM108  (the book's text)
                key_values = X
            else:
                key_values = torch.cat((state[2][self.i], X), dim=1)
            state[2][self.i] = key_values
            if self.training:
                batch_size, num_steps, _ = X.shape
                dec_valid_lens = torch.arange(
                    1, num_steps + 1, device=X.device).repeat(batch_size, 1)
            else:
                dec_valid_lens = None
            X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
            Y = self.addnorm1(X, X2)
            Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
            Z = self.addnorm2(Y, Y2)
            return self.addnorm3(Z, self.ffn(Z)), state

    class TransformerDecoder(d2l.AttentionDecoder):
        def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                     num_blks, dropout):
            super().__init__()
            self.num_hiddens = num_hiddens
            self.num_blks = num_blks
            self.embedding = nn.Embedding(vocab_size, num_hiddens)
            self.pos_encoding = d2l.PositionalEncoding(num_hiddens, dropout)
            self.blks = nn.Sequential()
            for i in range(num_blks):
                self.blks.add_module("block"+str(i), TransformerDecoderBlock(
                    num_hiddens, ffn_num_hiddens, num_heads, dropout, i))
            self.dense = nn.LazyLinear(vocab_size)

        def init_state(self, enc_outputs, enc_valid_lens):
            return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

        def forward(self, X, state):
            X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
            self._attention_weights = [[None] * len(self.blks) for _ in range (2)]
            for i, blk in enumerate(self.blks):
                X, state = blk(X, state)
                # Decoder self-attention weights
                self._attention_weights[0][
                    i] = blk.attention1.attention.attention_weights
                # Encoder-decoder attention weights
                self._attention_weights[1][
                    i] = blk.attention2.attention.attention_weights
            return self.dense(X), state

        @property
        def attention_weights(self):
            return self._attention_weights
    # fmt: on
    return TransformerDecoder


def section(d2l, max_epochs, decoder_cls):
    """The section's code, unchanged but for ``max_epochs`` and the timing around ``fit``."""
    # fmt: off
    data = d2l.MTFraEng(batch_size=128)
    num_hiddens, num_blks, dropout = 256, 2, 0.2
    ffn_num_hiddens, num_heads = 64, 4
    encoder = d2l.TransformerEncoder(
        len(data.src_vocab), num_hiddens, ffn_num_hiddens, num_heads,
        num_blks, dropout)
    decoder = decoder_cls(
        len(data.tgt_vocab), num_hiddens, ffn_num_hiddens, num_heads,
        num_blks, dropout)
    model = d2l.Seq2Seq(encoder, decoder, tgt_pad=data.tgt_vocab['<pad>'],
                        lr=0.001)
    trainer = d2l.Trainer(max_epochs=max_epochs, gradient_clip_val=1, num_gpus=1)
    board = _Stopwatch(d2l.ProgressBoard, "draw")  # the board's share, shown apart
    start = time.perf_counter()
    with board, contextlib.redirect_stdout(io.StringIO()):  # the book's board prints figures
        trainer.fit(model, data)
    seconds = time.perf_counter() - start

    engs = ['go .', 'i lost .', 'he\'s calm .', 'i\'m home .']
    fras = ['va !', 'j\'ai perdu .', 'il est calme .', 'je suis chez moi .']
    preds, _ = model.predict_step(
        data.build(engs, fras), d2l.try_gpu(), data.num_steps)
    lines = []
    for en, fr, p in zip(engs, fras, preds):
        translation = []
        for token in data.tgt_vocab.to_tokens(p):
            if token == '<eos>':
                break
            translation.append(token)
        lines.append(f'{en} => {translation}, bleu,'
                     f'{d2l.bleu(" ".join(translation), fr, k=2):.3f}')
    # fmt: on
    train_Y = data.arrays[3][: data.num_train]
    pad = data.tgt_vocab["<pad>"]
    tokens = {"valid": int((train_Y != pad).sum()), "positions": train_Y.numel()}
    return (seconds, board.seconds), tokens, lines


class _Stopwatch:
    """Within the block, sums the time spent in ``cls.name`` (restored afterwards)."""

    def __init__(self, cls, name):
        self.cls, self.name, self.seconds = cls, name, 0.0

    def __enter__(self):
        self.original = original = self.cls.__dict__[self.name]

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(self.cls, self.name, timed)
        return self

    def __exit__(self, *exc):
        setattr(self.cls, self.name, self.original)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_book = DEFAULT_BOOK if DEFAULT_BOOK.exists() else DEFAULT_WHEEL
    p.add_argument("--book-d2l", type=Path, default=Path(os.environ.get("D2L103", default_book)))
    p.add_argument("--fra", type=Path, default=Path(os.environ.get("ATTNKIT_FRA", DEFAULT_FRA)))
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads (both contenders)")
    p.add_argument("--decoder", choices=("module", "section"), default="module")
    args = p.parse_args(argv)
    if not args.fra.is_file():
        raise SystemExit(f"--fra {args.fra}: no such file (the fra-eng fra.txt)")
    torch.set_num_threads(args.threads)
    os.environ["ATTNKIT_FRA"] = str(args.fra)
    import matplotlib

    matplotlib.use("Agg")
    book, version, stubs = load_book_d2l(args.book_d2l)
    point_book_at(book, args.fra)
    from attnkit.d2l import v1 as ak

    contenders = {
        f"d2l {version}": (book, section_decoder(book)),
        "attnkit.d2l.v1": (
            ak,
            section_decoder(ak) if args.decoder == "section" else ak.TransformerDecoder,
        ),
    }
    print(f"d2l {version} from {args.book_d2l}; stubs: {', '.join(stubs) or 'none'}")
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.epochs} epochs, "
          f"decoder: {args.decoder}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for d2l, dec in contenders.values():  # warm-up, untimed
        torch.manual_seed(0)
        section(d2l, 1, dec)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    outputs: dict[str, list[str]] = {}
    tokens = {}
    for _ in range(args.repeats):
        for name, (d2l, dec) in contenders.items():
            torch.manual_seed(0)
            seconds, tokens, lines = section(d2l, args.epochs, dec)
            times[name].append(seconds)
            outputs[name] = lines
    valid = tokens["valid"] * args.epochs
    med = {
        name: (statistics.median(t for t, _ in ts), statistics.median(t - b for t, b in ts))
        for name, ts in times.items()
    }
    base, base_steps = med[f"d2l {version}"]
    rows = []
    for name, (t, steps) in med.items():
        rows.append([
            name, f"{t:.1f}", f"{t - steps:.1f}", f"{valid / t:,.0f}", f"{base / t:.2f}x",
            f"{valid / steps:,.0f}", f"{base_steps / steps:.2f}x",
        ])  # fmt: skip
    print()
    print_table(
        ["contender", "fit s", "of which board s", "tokens/s (fit)", "vs book",
         "tokens/s (board apart)", "vs book"],
        rows,
    )  # fmt: skip
    print("\n(tokens: non-<pad> target tokens of the training split x epochs; medians)")
    for name, lines in outputs.items():
        print(f"\n{name}:")
        for line in lines:
            print("  " + line)


if __name__ == "__main__":
    main()
