"""Recurrent LMs: training tokens/s of the book's scratch code, attnkit's scratch cells and torch.nn.

The book's settings: character level, batch 32, 35 steps, 256 hiddens, SGD with clipping
at 1 (one training step = forward, backward, clip, update). Three contenders per cell,
timed side by side in one process (interleaved repeats, median), so the ratios compare:

* ``book scratch``: the book's functional code (one matmul per gate per step, output
  layer per step) through ``d2l.RNNModelScratch``;
* ``attnkit scratch``: ``ScratchRNN`` (input projections of all steps in one matmul,
  gates' hidden matmuls fused);
* ``torch.nn``: ``nn.RNN``/``nn.GRU``/``nn.LSTM`` (fused C++ kernels).

    python -m benchmarks.book.rnn_lm [--data FILE] [--threads 1] [--repeats 5] [--batches 4] [--quick]
"""

from __future__ import annotations

import argparse
import platform

import torch
from torch import nn

from attnkit import d2l
from attnkit.data.lm import LMDataLoader, load_corpus, read_corpus_lines
from attnkit.models.rnn import build_lm
from attnkit.training.lm import train_epoch
from attnkit.training.optim import make_optimizer, sgd_update
from benchmarks.harness import interleaved_median, print_table


# ---------------------------------------------------------------- the book's scratch code
def _normal(shape):
    return torch.randn(size=shape) * 0.01


def _three(V, H):
    return (_normal((V, H)), _normal((H, H)), torch.zeros(H))


def _with_output(params, V, H):
    params = [*params, _normal((H, V)), torch.zeros(V)]
    for p in params:
        p.requires_grad_(True)
    return params


def book_params(cell):
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[cell]

    def get_params(V, H, device):
        return _with_output([t for _ in range(gates) for t in _three(V, H)], V, H)

    return get_params


def book_init_state(cell):
    def init(B, H, device):
        z = torch.zeros((B, H))
        return (z, z.clone()) if cell == "lstm" else (z,)

    return init


def book_rnn(inputs, state, params):
    W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    outputs = []
    for X in inputs:
        H = torch.tanh(torch.mm(X, W_xh) + torch.mm(H, W_hh) + b_h)
        outputs.append(torch.mm(H, W_hq) + b_q)
    return torch.cat(outputs, dim=0), (H,)


def book_gru(inputs, state, params):
    W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    outputs = []
    for X in inputs:
        Z = torch.sigmoid((X @ W_xz) + (H @ W_hz) + b_z)
        R = torch.sigmoid((X @ W_xr) + (H @ W_hr) + b_r)
        H_tilda = torch.tanh((X @ W_xh) + ((R * H) @ W_hh) + b_h)
        H = Z * H + (1 - Z) * H_tilda
        outputs.append(H @ W_hq + b_q)
    return torch.cat(outputs, dim=0), (H,)


def book_lstm(inputs, state, params):
    [W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c, W_hq, b_q] = params
    (H, C) = state
    outputs = []
    for X in inputs:
        I = torch.sigmoid((X @ W_xi) + (H @ W_hi) + b_i)  # noqa: E741
        F = torch.sigmoid((X @ W_xf) + (H @ W_hf) + b_f)
        O = torch.sigmoid((X @ W_xo) + (H @ W_ho) + b_o)  # noqa: E741
        C_tilda = torch.tanh((X @ W_xc) + (H @ W_hc) + b_c)
        C = F * C + I * C_tilda
        H = O * torch.tanh(C)
        outputs.append((H @ W_hq) + b_q)
    return torch.cat(outputs, dim=0), (H, C)


BOOK_FORWARD = {"rnn": book_rnn, "gru": book_gru, "lstm": book_lstm}


# ---------------------------------------------------------------- timing
def make_step(model, batches, updater):
    loss = nn.CrossEntropyLoss()

    def run():
        train_epoch(model, batches, updater, loss=loss, device="cpu", clip=1.0)

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="text file (default: the builtin corpus)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batches", type=int, default=4, help="minibatches per timed run")
    ap.add_argument("--hiddens", type=int, default=256)
    ap.add_argument("--cells", default="rnn,gru,lstm")
    ap.add_argument("--quick", action="store_true", help="2 repeats, 2 batches")
    a = ap.parse_args(argv)
    if a.quick:
        a.repeats, a.batches = 2, 2
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    B, T, H = 32, 35, a.hiddens
    corpus, vocab = load_corpus(read_corpus_lines(a.data), "char", max_tokens=10000)
    batches = list(LMDataLoader(corpus, B, T, seed=0))[: a.batches]
    V = len(vocab)
    tokens = B * T * len(batches)
    print(
        f"torch {torch.__version__}, {a.threads} thread(s), {platform.processor() or 'cpu'}; "
        f"data {a.data or 'builtin'} (V={V}); batch {B}, {T} steps, {H} hiddens; "
        f"{len(batches)} training steps per run, median of {a.repeats}"
    )
    rows = []
    for cell in a.cells.split(","):
        book = d2l.RNNModelScratch(
            V, H, "cpu", book_params(cell), book_init_state(cell), BOOK_FORWARD[cell]
        )
        scratch = build_lm(cell, V, H, scratch=True)
        torch_nn = build_lm(cell, V, H)
        fns = {
            "book": make_step(book, batches, sgd_update(book.params, 1.0)),
            "scratch": make_step(scratch, batches, make_optimizer(scratch, "sgd", 1.0)),
            "nn": make_step(torch_nn, batches, make_optimizer(torch_nn, "sgd", 1.0)),
        }
        t = interleaved_median(fns, repeats=a.repeats, warmup=1)
        tps = {k: tokens / v for k, v in t.items()}
        rows.append(
            [
                cell.upper(),
                f"{tps['book']:,.0f}",
                f"{tps['scratch']:,.0f}",
                f"{tps['nn']:,.0f}",
                f"{tps['scratch'] / tps['book']:.2f}x",
                f"{tps['nn'] / tps['scratch']:.2f}x",
            ]
        )
    print_table(
        [
            "cell",
            "book scratch tok/s",
            "attnkit scratch tok/s",
            "torch.nn tok/s",
            "attnkit / book",
            "torch.nn / attnkit",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
