"""The book's own sections, run unchanged on the real d2l 0.17.6 and on ``attnkit.d2l``.

One run, the same code text on both modules (each section is written once, as a function
of the ``d2l`` module), interleaved (book, attnkit, book, attnkit, ...) with the same seed
before every run; only the training call is timed (after an untimed ``--warmup-epochs``
run of each contender, so one-time costs such as matplotlib's first figure do not land on
whoever runs first). Sections:

* ``transformer``: d2l 0.17 section 10.7 (the Transformer on ``fra.txt``, 600 examples,
  ``train_seq2seq`` for 200 epochs) and the four translations with BLEU;
* ``gru``: d2l 0.17 section 9.1, concise (``nn.GRU`` in ``d2l.RNNModel``, ``train_ch8`` for
  500 epochs on The Time Machine); ``gru-scratch`` (or ``--gru-scratch``): the section's
  from-scratch GRU in ``d2l.RNNModelScratch``.

The book defines the Transformer's ``DecoderBlock``/``TransformerDecoder`` in the section's
text, not in the d2l 0.17.6 package: the book runs those (written here once, over the
module's ``MultiHeadAttention``/``AddNorm``/...), attnkit its ``d2l.TransformerDecoder``
(``--decoder section``: the section's classes on both).

The real package is not a dependency of attnkit. Get it (the wheel is enough) with

    pip download --no-deps d2l==0.17.6 -d /tmp/d2lpkg

and run, e.g. (``--book-d2l`` takes the wheel or an extracted folder; env ``D2L0176``)

    nice -n 19 python -m benchmarks.book.sections --book-d2l /tmp/d2lpkg/d2l-0.17.6-py3-none-any.whl \\
        --sections transformer,gru --epochs-transformer 200 --epochs-gru 500 --threads 2

The book's ``d2l/torch.py`` is loaded from that path under a private module name. Its
top-level imports that are not installed here (torchvision, PIL, pandas, requests, IPython,
matplotlib_inline) are satisfied by benchmark-only stub modules while it executes (see
``_book_shims``); they are removed from ``sys.modules`` right after, so attnkit never sees
them. The book's data download is pointed at the local files (``--fra``, ``--timemachine``)
outside the timed part; attnkit reads the same files through ``$ATTNKIT_FRA`` and
``$ATTNKIT_TIMEMACHINE``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import math
import os
import random
import re
import statistics
import sys
import time
import types
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from benchmarks.harness import print_table

REPO = Path(__file__).resolve().parents[2]
DEFAULT_FRA = REPO.parent / "shared" / "data" / "fra-eng" / "fra.txt"
DEFAULT_TIMEMACHINE = REPO.parent / "shared" / "data" / "timemachine" / "timemachine.txt"
BOOK_MODULE_NAME = "_book_d2l_0176_torch"  # private: never shadows an installed `d2l`
SECTIONS = ("transformer", "gru", "gru-scratch")

GET_THE_BOOK = """\
benchmarks/book/sections.py needs the real d2l 0.17.6 package (not a dependency of attnkit):

    pip download --no-deps d2l==0.17.6 -d /tmp/d2lpkg

then pass --book-d2l /tmp/d2lpkg/d2l-0.17.6-py3-none-any.whl (the wheel, or a folder it was
extracted to), or set D2L0176 to that path."""


# ------------------------------------------------------------------ loading the book's module


def _book_shims() -> dict[str, types.ModuleType]:
    """Benchmark-only stand-ins for the book's top-level imports that are not installed.

    d2l 0.17.6's ``torch.py`` imports these at module level for chapters these sections
    never run (torchvision/PIL: images; pandas: CSVs; requests: downloads, which are
    pointed at local files here). Two are called in the sections' loops, only for
    notebook display: ``Animator.add`` calls ``IPython.display.display(fig)`` and
    ``clear_output(wait=True)``, and ``use_svg_display`` calls
    ``matplotlib_inline.backend_inline.set_matplotlib_formats('svg')``; here they do
    nothing (outside a notebook there is nothing to display). The Animator still draws
    its curves with matplotlib (Agg) and that counts in the book's time.
    """
    doc = "benchmark-only shim (benchmarks/book/sections.py); not the real package"

    def module(name: str, **attrs) -> types.ModuleType:
        mod = types.ModuleType(name, doc)
        mod.__dict__.update(attrs)
        return mod

    def _display(*objs, **kwargs) -> None:
        return None

    def _clear_output(wait: bool = False) -> None:
        return None

    def _set_matplotlib_formats(*formats, **kwargs) -> None:
        return None

    transforms = module("torchvision.transforms")
    image = module("PIL.Image")
    display = module("IPython.display", display=_display, clear_output=_clear_output)
    inline = module(
        "matplotlib_inline.backend_inline", set_matplotlib_formats=_set_matplotlib_formats
    )
    return {
        "torchvision": module("torchvision", transforms=transforms),
        "torchvision.transforms": transforms,
        "PIL": module("PIL", Image=image),
        "PIL.Image": image,
        "pandas": module("pandas"),
        "requests": module("requests"),
        # get_ipython() -> None: "not in IPython", for anyone who looks (matplotlib, tqdm)
        "IPython": module("IPython", display=display, get_ipython=lambda: None),
        "IPython.display": display,
        "matplotlib_inline": module("matplotlib_inline", backend_inline=inline),
        "matplotlib_inline.backend_inline": inline,
    }


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _read_book_source(path: Path) -> tuple[str, str, str]:
    """(source of d2l/torch.py, its origin for tracebacks, d2l.__version__) from PATH."""
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "d2l/torch.py" not in names:
                raise SystemExit(f"{path}: no d2l/torch.py in this archive\n\n{GET_THE_BOOK}")
            init = zf.read("d2l/__init__.py").decode() if "d2l/__init__.py" in names else ""
            return zf.read("d2l/torch.py").decode("utf-8"), f"{path}/d2l/torch.py", init
    for torch_py in [path] if path.is_file() else [path / "d2l" / "torch.py", path / "torch.py"]:
        if torch_py.is_file():
            init_py = torch_py.parent / "__init__.py"
            init = init_py.read_text() if init_py.is_file() else ""
            return torch_py.read_text(encoding="utf-8"), str(torch_py), init
    raise SystemExit(f"{path}: no d2l/torch.py there\n\n{GET_THE_BOOK}")


def load_book_d2l(path: Path) -> tuple[types.ModuleType, str, list[str]]:
    """Execute the book's ``d2l/torch.py`` as module ``BOOK_MODULE_NAME``.

    Returns (module, version, names of the stub modules that were needed).
    """
    source, origin, init = _read_book_source(path)
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", init)
    version = found.group(1) if found else "unknown"
    shims = _book_shims()
    needed = [n for n in shims if n not in sys.modules and not _installed(n.split(".")[0])]
    module = types.ModuleType(BOOK_MODULE_NAME, f"d2l {version} torch.py from {origin}")
    module.__file__ = origin
    sys.modules[BOOK_MODULE_NAME] = module  # the book does `d2l = sys.modules[__name__]`
    for name in needed:
        sys.modules[name] = shims[name]
    try:
        exec(compile(source, origin, "exec"), module.__dict__)
    finally:
        for name in needed:  # the book keeps its references; nobody else sees the shims
            sys.modules.pop(name, None)
    return module, version, needed


def point_book_at_local_data(book, fra: Path | None, timemachine: Path | None) -> None:
    """The book's ``download``/``download_extract`` return the local files for its datasets.

    Its ``read_time_machine`` opens ``d2l.download('time_machine')`` and its
    ``read_data_nmt`` opens ``d2l.download_extract('fra-eng')/fra.txt``; the zip's sha1 it
    registers cannot be checked offline, so the archive step is skipped. Other names keep
    the book's own functions.
    """
    book_download, book_download_extract = book.download, book.download_extract

    def download(name, cache_dir=None):
        if name == "time_machine" and timemachine is not None:
            return str(timemachine)
        return book_download(name) if cache_dir is None else book_download(name, cache_dir)

    def download_extract(name, folder=None):
        if name == "fra-eng" and fra is not None:
            return str(fra.parent)
        return book_download_extract(name, folder)

    book.download, book.download_extract = download, download_extract


# ------------------------------------------------------------------ timing one training call


@dataclass
class Captured:
    """Times the block (``time.perf_counter``) and captures its stdout and stderr.

    ``aside``: (object, attribute) pairs of functions that are not training (the book's
    ``Animator.add``, ``predict_ch8``): their time inside the block is summed in
    ``aside_seconds``, so the table can show the speed of the training steps alone.
    """

    seconds: float = math.nan
    aside_seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    aside: tuple = ()

    @contextlib.contextmanager
    def __call__(self):
        out, err = io.StringIO(), io.StringIO()
        originals = [(obj, name, getattr(obj, name)) for obj, name in self.aside]
        for obj, name, fn in originals:
            setattr(obj, name, self._stopwatch(fn))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            start = time.perf_counter()
            try:
                yield self
            finally:
                self.seconds = time.perf_counter() - start
                self.stdout, self.stderr = out.getvalue(), err.getvalue()
                for obj, name, fn in originals:
                    setattr(obj, name, fn)

    def _stopwatch(self, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.aside_seconds += time.perf_counter() - start

        return timed


_LINE = re.compile(
    r"(?P<what>loss|perplexity) (?P<value>\S+), (?P<speed>\S+) tokens/sec on (?P<device>\S+)"
)


@dataclass
class Run:
    section: str
    contender: str
    repeat: int
    epochs: int
    tokens_per_epoch: int
    captured: Captured
    notes: list[str] = field(default_factory=list)
    translations: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def line(self) -> re.Match | None:
        found = list(_LINE.finditer(self.captured.stdout))
        return found[-1] if found else None

    @property
    def whole_run_speed(self) -> float:
        return self.tokens_per_epoch * self.epochs / self.captured.seconds

    @property
    def training_speed(self) -> float:
        """Tokens/s of the training steps: the Animator and predictions taken out."""
        return (
            self.tokens_per_epoch
            * self.epochs
            / (self.captured.seconds - self.captured.aside_seconds)
        )

    @property
    def printed_speed(self) -> float:
        return float(self.line["speed"]) if self.line else math.nan

    @property
    def final(self) -> str:
        return f"{self.line['what']} {self.line['value']}" if self.line else "(no line)"


# ------------------------------------------------------------------ the book's sections


def transformer_section(d2l, num_epochs, timed, decoder="module"):
    """d2l 0.17 section 10.7, unchanged but for ``num_epochs`` (and the timing around training).

    The book defines ``DecoderBlock``/``TransformerDecoder`` in the section's text (they are
    not in the d2l 0.17.6 package); attnkit ships them as ``d2l.TransformerDecoder``. With
    ``decoder="module"`` the module's class is used where it has one, else the section's;
    ``decoder="section"`` uses the section's classes (over the module's blocks) on both.
    """
    if decoder == "module" and hasattr(d2l, "TransformerDecoder"):
        TransformerDecoder, used = d2l.TransformerDecoder, "d2l.TransformerDecoder"
    else:
        TransformerDecoder, used = _section_transformer_decoder(d2l), "the section's classes"

    # ---- the book's code, unchanged from here (but for num_epochs) ----
    # fmt: off
    num_hiddens, num_layers, dropout, batch_size, num_steps = 32, 2, 0.1, 64, 10
    lr, num_epochs, device = 0.005, num_epochs, d2l.try_gpu()
    ffn_num_input, ffn_num_hiddens, num_heads = 32, 64, 4
    key_size, query_size, value_size = 32, 32, 32
    norm_shape = [32]

    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size, num_steps)

    encoder = d2l.TransformerEncoder(
        len(src_vocab), key_size, query_size, value_size, num_hiddens,
        norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
        num_layers, dropout)
    decoder = TransformerDecoder(
        len(tgt_vocab), key_size, query_size, value_size, num_hiddens,
        norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
        num_layers, dropout)
    net = d2l.EncoderDecoder(encoder, decoder)
    with timed():
        d2l.train_seq2seq(net, train_iter, lr, num_epochs, tgt_vocab, device)

    engs = ['go .', "i lost .", 'he\'s calm .', 'i\'m home .']
    fras = ['va !', 'j\'ai perdu .', 'il est calme .', 'je suis chez moi .']
    predictions = []
    for eng, fra in zip(engs, fras):
        translation, dec_attention_weight_seq = d2l.predict_seq2seq(  # noqa: RUF059
            net, eng, src_vocab, tgt_vocab, num_steps, device, True)
        predictions.append((eng, fra, translation))
    # fmt: on
    # ---- end of the book's code (it prints `eng => translation, bleu`: kept for the table) ----
    translations = []
    for eng, fra, translation in predictions:
        try:
            score = f"{d2l.bleu(translation, fra, k=2):.3f}"
        except ZeroDivisionError:  # the book's bleu on a prediction shorter than k
            score = "ZeroDivisionError"
        translations.append((eng, fra, translation, score))
    return [f"decoder: {used}"], translations


def _section_transformer_decoder(d2l):
    """The section's ``DecoderBlock`` and ``TransformerDecoder`` (book text, d2l 0.17 10.7)."""

    # fmt: off
    class DecoderBlock(nn.Module):
        """The `i`-th block in the decoder."""
        def __init__(self, key_size, query_size, value_size, num_hiddens,
                     norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
                     dropout, i, **kwargs):
            super(DecoderBlock, self).__init__(**kwargs)  # noqa: UP008
            self.i = i
            self.attention1 = d2l.MultiHeadAttention(
                key_size, query_size, value_size, num_hiddens, num_heads, dropout)
            self.addnorm1 = d2l.AddNorm(norm_shape, dropout)
            self.attention2 = d2l.MultiHeadAttention(
                key_size, query_size, value_size, num_hiddens, num_heads, dropout)
            self.addnorm2 = d2l.AddNorm(norm_shape, dropout)
            self.ffn = d2l.PositionWiseFFN(ffn_num_input, ffn_num_hiddens,
                                           num_hiddens)
            self.addnorm3 = d2l.AddNorm(norm_shape, dropout)

        def forward(self, X, state):
            enc_outputs, enc_valid_lens = state[0], state[1]
            if state[2][self.i] is None:  # noqa: SIM108
                key_values = X
            else:
                key_values = torch.cat((state[2][self.i], X), axis=1)
            state[2][self.i] = key_values
            if self.training:
                batch_size, num_steps, _ = X.shape
                dec_valid_lens = torch.arange(
                    1, num_steps + 1, device=X.device).repeat(batch_size, 1)
            else:
                dec_valid_lens = None

            # Self-attention
            X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
            Y = self.addnorm1(X, X2)
            # Encoder-decoder attention
            Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
            Z = self.addnorm2(Y, Y2)
            return self.addnorm3(Z, self.ffn(Z)), state

    class TransformerDecoder(d2l.AttentionDecoder):
        def __init__(self, vocab_size, key_size, query_size, value_size,
                     num_hiddens, norm_shape, ffn_num_input, ffn_num_hiddens,
                     num_heads, num_layers, dropout, **kwargs):
            super(TransformerDecoder, self).__init__(**kwargs)  # noqa: UP008
            self.num_hiddens = num_hiddens
            self.num_layers = num_layers
            self.embedding = nn.Embedding(vocab_size, num_hiddens)
            self.pos_encoding = d2l.PositionalEncoding(num_hiddens, dropout)
            self.blks = nn.Sequential()
            for i in range(num_layers):
                self.blks.add_module("block"+str(i),
                    DecoderBlock(key_size, query_size, value_size, num_hiddens,
                                 norm_shape, ffn_num_input, ffn_num_hiddens,
                                 num_heads, dropout, i))
            self.dense = nn.Linear(num_hiddens, vocab_size)

        def init_state(self, enc_outputs, enc_valid_lens, *args):
            return [enc_outputs, enc_valid_lens, [None] * self.num_layers]

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


def gru_section(d2l, num_epochs, timed, scratch=False):
    """d2l 0.17 section 9.1: the concise GRU, or (``scratch``) the from-scratch one."""
    # ---- the book's code, unchanged from here (but for num_epochs) ----
    # fmt: off
    batch_size, num_steps = 32, 35
    train_iter, vocab = d2l.load_data_time_machine(batch_size, num_steps)

    def get_params(vocab_size, num_hiddens, device):
        num_inputs = num_outputs = vocab_size

        def normal(shape):
            return torch.randn(size=shape, device=device)*0.01

        def three():
            return (normal((num_inputs, num_hiddens)),
                    normal((num_hiddens, num_hiddens)),
                    d2l.zeros(num_hiddens, device=device))

        W_xz, W_hz, b_z = three()  # Update gate parameters
        W_xr, W_hr, b_r = three()  # Reset gate parameters
        W_xh, W_hh, b_h = three()  # Candidate hidden state parameters
        # Output layer parameters
        W_hq = normal((num_hiddens, num_outputs))
        b_q = d2l.zeros(num_outputs, device=device)
        # Attach gradients
        params = [W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q]
        for param in params:
            param.requires_grad_(True)
        return params

    def init_gru_state(batch_size, num_hiddens, device):
        return (torch.zeros((batch_size, num_hiddens), device=device), )

    def gru(inputs, state, params):
        W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q = params
        H, = state
        outputs = []
        for X in inputs:
            Z = torch.sigmoid((X @ W_xz) + (H @ W_hz) + b_z)
            R = torch.sigmoid((X @ W_xr) + (H @ W_hr) + b_r)
            H_tilda = torch.tanh((X @ W_xh) + ((R * H) @ W_hh) + b_h)
            H = Z * H + (1 - Z) * H_tilda
            Y = H @ W_hq + b_q
            outputs.append(Y)
        return torch.cat(outputs, dim=0), (H,)

    vocab_size, num_hiddens, device = len(vocab), 256, d2l.try_gpu()
    num_epochs, lr = num_epochs, 1
    if scratch:
        model = d2l.RNNModelScratch(len(vocab), num_hiddens, device, get_params,
                                    init_gru_state, gru)
        with timed():
            d2l.train_ch8(model, train_iter, vocab, lr, num_epochs, device)
    else:
        num_inputs = vocab_size
        gru_layer = nn.GRU(num_inputs, num_hiddens)
        model = d2l.RNNModel(gru_layer, len(vocab))
        model = model.to(device)
        with timed():
            d2l.train_ch8(model, train_iter, vocab, lr, num_epochs, device)
    # fmt: on
    # ---- end of the book's code ----
    return [], []


# ------------------------------------------------------------------ driver


def tokens_per_epoch(ak, section: str) -> int:
    """Target tokens one epoch trains on, counted with attnkit's iterators (same data)."""
    if section == "transformer":  # the section's batch_size, num_steps = 64, 10
        train_iter, _, _ = ak.load_data_nmt(64, 10)
        return sum(int(batch[3].sum()) for batch in train_iter)  # sum of Y_valid_len
    # the section's batch_size, num_steps = 32, 35; with 10000 tokens every random offset
    # gives the same number of batches (8), so every epoch trains on the same count
    train_iter, _ = ak.load_data_time_machine(32, 35)
    return 32 * 35 * sum(1 for _ in train_iter)


def _compact(text: str, keep: int = 3) -> list[str]:
    """Last ``keep`` non-empty lines (carriage-return progress bars: their last state)."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    lines = [seg.split("\r")[-1].strip() for seg in text.replace("\r\n", "\n").split("\n")]
    lines = [ln for ln in lines if ln]
    shown = lines[-keep:]
    if len(lines) > keep:
        shown.insert(0, f"({len(lines) - keep} earlier lines)")
    return shown


def _fmt(x: float, digits: int = 1) -> str:
    return "n/a" if math.isnan(x) else f"{x:,.{digits}f}"


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--book-d2l",
        type=Path,
        default=os.environ.get("D2L0176") or None,
        help="the d2l-0.17.6 wheel or a folder it was extracted to (env D2L0176)",
    )
    ap.add_argument("--fra", type=Path, default=DEFAULT_FRA if DEFAULT_FRA.is_file() else None)
    ap.add_argument(
        "--timemachine",
        type=Path,
        default=DEFAULT_TIMEMACHINE if DEFAULT_TIMEMACHINE.is_file() else None,
    )
    ap.add_argument("--sections", default="transformer,gru", help=f"comma list of {SECTIONS}")
    ap.add_argument("--gru-scratch", action="store_true", help="also the from-scratch GRU")
    ap.add_argument("--epochs-transformer", type=int, default=200)
    ap.add_argument("--epochs-gru", type=int, default=500, help="gru and gru-scratch")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--repeats", type=int, default=1, help="book, attnkit, book, ... per section")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--warmup-epochs",
        type=int,
        default=1,
        help="untimed run of each section per contender first (first-call costs such as "
        "matplotlib's first figure would otherwise land on whoever runs first); 0: none",
    )
    ap.add_argument(
        "--decoder",
        choices=("module", "section"),
        default="module",
        help="transformer: the module's TransformerDecoder where it has one (attnkit), else "
        "the section's own classes (the book); 'section': the section's classes on both",
    )
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if args.gru_scratch and "gru-scratch" not in sections:
        sections.append("gru-scratch")
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown sections {unknown}; choose from {SECTIONS}")
    args.section_list = sections
    if args.book_d2l is None or not Path(args.book_d2l).exists():
        what = f"--book-d2l {args.book_d2l} does not exist" if args.book_d2l else "no --book-d2l"
        print(f"{what}.\n\n{GET_THE_BOOK}", file=sys.stderr)
        raise SystemExit(2)
    if "transformer" in sections and (args.fra is None or not args.fra.is_file()):
        ap.error("transformer needs --fra PATH/fra.txt (default ../shared/data/fra-eng/fra.txt)")
    if "transformer" in sections and args.fra.name != "fra.txt":
        ap.error("--fra must be a file named fra.txt (the book opens DIR/fra.txt)")
    if any(s.startswith("gru") for s in sections) and (
        args.timemachine is None or not args.timemachine.is_file()
    ):
        ap.error("gru needs --timemachine PATH (default ../shared/data/timemachine/...)")
    return args


def not_training(d2l) -> tuple:
    """What the train functions call besides training: the book's Animator (drawing every
    10 epochs) and ``predict_ch8`` (every 10 epochs in the book's ``train_ch8``, twice at
    the end in both), looked up where each module's train functions find them."""
    if d2l.__name__.startswith("attnkit"):
        import attnkit.d2l.training as loops

        return ((loops, "predict_ch8"),)
    return ((d2l.Animator, "add"), (d2l, "predict_ch8"))


def run_section(d2l, section: str, epochs: int, timed: Captured, args) -> tuple[list, list]:
    """Seed (``random``, ``torch``), then run one section on ``d2l``; training is ``timed``."""
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    if section == "transformer":
        return transformer_section(d2l, epochs, timed, args.decoder)
    return gru_section(d2l, epochs, timed, scratch=section == "gru-scratch")


def main(argv=None) -> None:
    args = parse_args(argv)
    # Both modules draw with matplotlib (the book's Animator; attnkit's viz): never a window.
    os.environ["MPLBACKEND"] = "Agg"
    if args.fra is not None:
        os.environ["ATTNKIT_FRA"] = str(args.fra.resolve())
    if args.timemachine is not None:
        os.environ["ATTNKIT_TIMEMACHINE"] = str(args.timemachine.resolve())
    import matplotlib.pyplot as plt

    from attnkit import d2l as ak

    book, version, shims = load_book_d2l(Path(args.book_d2l))
    point_book_at_local_data(
        book,
        args.fra.resolve() if args.fra else None,
        args.timemachine.resolve() if args.timemachine else None,
    )
    torch.set_num_threads(args.threads)
    contenders = {f"book d2l {version}": book, "attnkit.d2l": ak}

    print(f"# The book's sections: d2l {version} (real package) vs attnkit.d2l\n")
    print(f"- book module: {book.__file__} (loaded as `{BOOK_MODULE_NAME}`)")
    print(f"- stub modules while it loaded: {', '.join(shims) or 'none'}")
    print(f"- data: fra={args.fra}, timemachine={args.timemachine}")
    print(
        f"- torch {torch.__version__}, {torch.get_num_threads()} threads, seed {args.seed} "
        f"before every run; device {ak.try_gpu()}"
    )
    print(
        "- timed: the training call only (wall clock). The book's train functions draw a "
        "matplotlib Animator (Agg) every 10 epochs, and train_ch8 also prints a prediction "
        "every 10 epochs; that is part of its loop and counts in its time. Any progress output "
        "of either (stdout/stderr) is captured during the timed call and shown compactly."
    )
    print(
        "- whole-run tokens/s = tokens per epoch x epochs / wall s; the printed line's tokens/s "
        "is the book's (last epoch only)\n"
    )

    runs: list[Run] = []
    for section in args.section_list:
        epochs = args.epochs_transformer if section == "transformer" else args.epochs_gru
        per_epoch = tokens_per_epoch(ak, section)
        print(f"## {section}: {epochs} epochs, {per_epoch:,} tokens per epoch\n")
        if args.warmup_epochs > 0:  # one-time costs (first figure, allocator) off the clock
            for name, d2l in contenders.items():
                warm = Captured()
                run_section(d2l, section, args.warmup_epochs, warm, args)
                plt.close("all")
                for warning in re.findall(r"\w*Warning: .*", warm.stderr):  # shown once only
                    print(f"{name} (warm-up) ! {warning}")
            print(f"(warm-up: {args.warmup_epochs} untimed epoch(s) per contender first)\n")
        for repeat in range(1, args.repeats + 1):
            for name, d2l in contenders.items():
                timed = Captured(aside=not_training(d2l))
                notes, translations = run_section(d2l, section, epochs, timed, args)
                plt.close("all")
                run = Run(section, name, repeat, epochs, per_epoch, timed, notes, translations)
                runs.append(run)
                tag = f" (run {repeat})" if args.repeats > 1 else ""
                extra = f"; {'; '.join(notes)}" if notes else ""
                print(f"{name}{tag}: {timed.seconds:.2f} s{extra}")
                for ln in _compact(timed.stdout):
                    print(f"    | {ln}")
                for ln in _compact(timed.stderr, keep=2):
                    print(f"    ! {ln}")
                for eng, fra, translation, score in translations:
                    print(f"    {eng} => {translation!r}  (ref {fra!r}, bleu {score})")
            print()

    headers = [
        "section",
        "contender",
        "epochs",
        "wall s",
        "of which Animator + predictions",
        "tokens/s (whole run)",
        "tokens/s (training steps)",
        "printed line's tokens/s",
        "final loss/ppl",
        "ratio (whole run)",
        "ratio (training steps)",
    ]
    rows = []
    book_name = next(iter(contenders))
    for section in args.section_list:
        sruns = [r for r in runs if r.section == section]
        for r in sruns:
            base = next(b for b in sruns if b.repeat == r.repeat and b.contender == book_name)
            label = r.contender + (f" #{r.repeat}" if args.repeats > 1 else "")
            rows.append([
                r.section, label, r.epochs, f"{r.captured.seconds:.2f}",
                f"{r.captured.aside_seconds:.2f}", _fmt(r.whole_run_speed),
                _fmt(r.training_speed), _fmt(r.printed_speed), r.final,
                f"{r.whole_run_speed / base.whole_run_speed:.2f}x",
                f"{r.training_speed / base.training_speed:.2f}x",
            ])  # fmt: skip
        if args.repeats > 1:

            def median(name, key, sruns=sruns):
                return statistics.median(key(r) for r in sruns if r.contender == name)

            for name in contenders:
                whole = median(name, lambda r: r.whole_run_speed)
                steps = median(name, lambda r: r.training_speed)
                rows.append([
                    section, f"{name} (median)", sruns[0].epochs,
                    f"{median(name, lambda r: r.captured.seconds):.2f}",
                    f"{median(name, lambda r: r.captured.aside_seconds):.2f}", _fmt(whole),
                    _fmt(steps), _fmt(median(name, lambda r: r.printed_speed)), "",
                    f"{whole / median(book_name, lambda r: r.whole_run_speed):.2f}x",
                    f"{steps / median(book_name, lambda r: r.training_speed):.2f}x",
                ])  # fmt: skip
    print("## Results\n")
    print_table(headers, rows)

    tf_runs = [r for r in runs if r.section == "transformer"]
    if tf_runs:
        print("\n## Transformer translations (greedy, predict_seq2seq; BLEU k=2)\n")
        trows = []
        for r in tf_runs:
            label = r.contender + (f" #{r.repeat}" if args.repeats > 1 else "")
            for eng, fra, translation, score in r.translations:
                trows.append([label, eng, fra, translation or "(empty)", score])
        print_table(["contender", "English", "reference", "translation", "BLEU"], trows)


if __name__ == "__main__":
    main()
