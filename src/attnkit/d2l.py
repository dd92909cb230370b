"""The book's API (d2l 0.17, ``from d2l import torch as d2l``), as thin wrappers.

``from attnkit import d2l`` works wherever the book's code says
``from d2l import torch as d2l``: same names, constructor signatures,
``state_dict`` keys and ``attention_weights`` shapes. Every name here wraps the
real implementation elsewhere in attnkit; nothing is implemented twice.

Differences from the book (deliberate fixes) are listed in the README:
``sequence_mask`` does not modify its input in place; masking fills with the
dtype's lowest value instead of -1e6; a fully masked row gives zero weights;
inputs are validated; ``PositionalEncoding`` works for odd widths; attention
modules record ``attention_weights`` in eval mode only (training uses fused kernels).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit import attention as _att
from attnkit.viz import show_heatmaps as _show_heatmaps

# ---------------------------------------------------------------- chapter 10: attention

masked_softmax = _att.masked_softmax
sequence_mask = _att.sequence_mask
NWKernelRegression = _att.NWKernelRegression


def show_heatmaps(
    matrices,
    xlabel: str,
    ylabel: str,
    titles=None,
    figsize: tuple[float, float] = (2.5, 2.5),
    cmap: str = "Reds",
    **kwargs,
):
    """The book's signature; returns the figure instead of only drawing it.

    Extra keywords (``path``, ``xticklabels``, ``yticklabels``, ``row_titles``) go to
    ``attnkit.viz.show_heatmaps``.
    """
    return _show_heatmaps(
        matrices, xlabel, ylabel, titles=titles, figsize=figsize, cmap=cmap, **kwargs
    )


class _RecordInEval:
    """Mixin: keep ``attention_weights`` in eval mode, as the book always does.

    In training mode the fused kernel runs and no weights are kept.
    """

    def wants_weights(self) -> bool:
        return self.record_weights or not self.training


class AdditiveAttention(_att.AdditiveAttention):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(key_size, query_size, num_hiddens, dropout)


class DotProductAttention(_RecordInEval, _att.DotProductAttention):
    def __init__(self, dropout, **kwargs):
        super().__init__(dropout)


class MultiHeadAttention(_RecordInEval, _att.MultiHeadAttention):
    """The book's ``MultiHeadAttention(key_size, query_size, value_size, num_hiddens, ...)``."""

    def __init__(
        self,
        key_size,
        query_size,
        value_size,
        num_hiddens,
        num_heads,
        dropout,
        bias=False,
        **kwargs,
    ):
        super().__init__(
            num_hiddens,
            num_heads,
            dropout,
            bias,
            query_size=query_size,
            key_size=key_size,
            value_size=value_size,
        )


def _check_heads(fn: str, X, num_heads, expected_shape: str) -> None:
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise TypeError(
            f"{fn}: num_heads must be a positive int, got {num_heads!r} "
            f"({type(num_heads).__name__})"
        )
    if num_heads <= 0:
        raise ValueError(f"{fn}: num_heads must be a positive int, got {num_heads}")
    if not isinstance(X, Tensor):
        raise TypeError(f"{fn}: X must be a torch.Tensor {expected_shape}, got {type(X).__name__}")
    if X.dim() != 3:
        raise ValueError(f"{fn}: X must have shape {expected_shape}, got {tuple(X.shape)}")


def transpose_qkv(X: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B*H, T, D/H)."""
    _check_heads("transpose_qkv", X, num_heads, "(batch, steps, num_hiddens)")
    B, T, D = X.shape
    if D % num_heads:
        raise ValueError(
            f"transpose_qkv: X.shape[2] (num_hiddens) must be divisible by num_heads, "
            f"got {D} and num_heads={num_heads}"
        )
    return X.reshape(B, T, num_heads, -1).transpose(1, 2).reshape(B * num_heads, T, -1)


def transpose_output(X: Tensor, num_heads: int) -> Tensor:
    """(B*H, T, D/H) -> (B, T, D); reverses ``transpose_qkv``."""
    _check_heads(
        "transpose_output", X, num_heads, "(batch * num_heads, steps, num_hiddens / num_heads)"
    )
    BH, T, Dh = X.shape
    if BH % num_heads:
        raise ValueError(
            f"transpose_output: X.shape[0] (batch * num_heads) must be divisible by num_heads, "
            f"got {BH} and num_heads={num_heads}"
        )
    return X.reshape(-1, num_heads, T, Dh).transpose(1, 2).reshape(BH // num_heads, T, -1)


class PositionalEncoding(_att.PositionalEncoding):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)


# Helpers the chapters use from earlier chapters.
def try_gpu(i: int = 0) -> torch.device:
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


_ = nn  # keep `nn` importable as d2l.nn users sometimes expect

# ---------------------------------------------------------------- chapter 8: text and RNNs (issue 3)
# (chapter 8 names: thin wrappers over attnkit.data.lm, attnkit.models.rnn, attnkit.training.lm)
from attnkit.data import lm as _lm  # noqa: E402
from attnkit.data import text as _text  # noqa: E402
from attnkit.models import rnn as _rnn  # noqa: E402
from attnkit.training import lm as _lmtrain  # noqa: E402

tokenize = _text.tokenize
Vocab = _text.Vocab
count_corpus = _text.count_corpus
seq_data_iter_random = _lm.seq_data_iter_random
seq_data_iter_sequential = _lm.seq_data_iter_sequential


def read_time_machine():
    """The book's lines: ``$ATTNKIT_TIMEMACHINE``, else the (cached) hub download."""
    return _lm.read_time_machine()


def load_corpus_time_machine(max_tokens=-1):
    """Character corpus and vocab of The Time Machine; the book prints ``(170580, 28)``."""
    return _lm.load_corpus(read_time_machine(), "char", max_tokens)


class SeqDataLoader(_lm.LMDataLoader):
    """The book's ``SeqDataLoader(batch_size, num_steps, use_random_iter, max_tokens)``."""

    def __init__(self, batch_size, num_steps, use_random_iter, max_tokens):
        corpus, self.vocab = load_corpus_time_machine(max_tokens)
        super().__init__(corpus, batch_size, num_steps, use_random_iter)


def load_data_time_machine(batch_size, num_steps, use_random_iter=False, max_tokens=10000):
    data_iter = SeqDataLoader(batch_size, num_steps, use_random_iter, max_tokens)
    return data_iter, data_iter.vocab


class RNNModelScratch:
    """The book's glue for functional scratch models: ``forward_fn(one_hot(X.T), state, params)``."""

    def __init__(self, vocab_size, num_hiddens, device, get_params, init_state, forward_fn):
        self.vocab_size, self.num_hiddens = vocab_size, num_hiddens
        self.params = get_params(vocab_size, num_hiddens, device)
        self.init_state, self.forward_fn = init_state, forward_fn

    def __call__(self, X, state):
        X = torch.nn.functional.one_hot(X.T, self.vocab_size).type(torch.float32)
        return self.forward_fn(X, state, self.params)

    def begin_state(self, batch_size, device):
        return self.init_state(batch_size, self.num_hiddens, device)


class RNNModel(_rnn.RNNLM):
    """The book's ``RNNModel(rnn_layer, vocab_size)``: same ``rnn.*``/``linear.*`` keys."""

    def __init__(self, rnn_layer, vocab_size, **kwargs):
        super().__init__(rnn_layer, vocab_size)


def predict_ch8(prefix, num_preds, net, vocab, device):
    """Greedy continuation of ``prefix`` (unknown prefix characters raise ValueError)."""
    return _lmtrain.generate(net, vocab, prefix, num_preds, device=device)


def grad_clipping(net, theta):
    """Global L2-norm clipping (``clip_grad_norm_``); returns the norm before clipping."""
    return _lmtrain.clip_gradients(net, theta)


def train_epoch_ch8(net, train_iter, loss, updater, device, use_random_iter):
    stats = _lmtrain.train_epoch(
        net, train_iter, updater, loss=loss, device=device, use_random_iter=use_random_iter
    )
    return stats.perplexity, stats.tokens_per_sec


def train_ch8(net, train_iter, vocab, lr, num_epochs, device, use_random_iter=False):
    """SGD with clipping at 1; a progress bar instead of the Animator; returns the history."""
    if isinstance(net, nn.Module):
        updater = torch.optim.SGD(net.parameters(), lr)
    else:
        updater = _lmtrain.sgd_update(net.params, lr)
    hist = _lmtrain.train_lm(
        net,
        train_iter,
        num_epochs=num_epochs,
        updater=updater,
        device=device,
        use_random_iter=use_random_iter,
    )
    ppl, speed = hist.perplexity[-1], hist.tokens_per_sec[-1]
    print(f"perplexity {ppl:.1f}, {speed:.1f} tokens/sec on {device!s}")
    print(predict_ch8("time traveller", 50, net, vocab, device))
    print(predict_ch8("traveller", 50, net, vocab, device))
    return hist


# ---------------------------------------------------------------- chapter 9: NMT data (issue 4)
# The book's names over attnkit.data.translation. `read_data_nmt` reads $ATTNKIT_FRA when set
# (a local fra.txt), else the hub cache, downloading with a clear error when offline. Files are
# read as UTF-8 (the zh book; en 0.17.6 depends on the locale).
import os as _os  # noqa: E402

from attnkit.data import translation as _nmt  # noqa: E402
from attnkit.data.text import Vocab as _NMTVocab  # noqa: E402

preprocess_nmt = _nmt.preprocess_nmt
tokenize_nmt = _nmt.tokenize_nmt
truncate_pad = _nmt.truncate_pad
build_array_nmt = _nmt.build_array_nmt


def read_data_nmt() -> str:
    """``fra.txt`` as one string: ``$ATTNKIT_FRA`` if set, else ``DATA_HUB['fra-eng']``."""
    path = _os.environ.get("ATTNKIT_FRA")
    return _nmt.read_fra(path if path else _nmt.download_fra())


def load_array(data_arrays, batch_size, is_train=True):
    """A ``DataLoader`` over ``TensorDataset(*data_arrays)``, shuffled when ``is_train``."""
    dataset = torch.utils.data.TensorDataset(*data_arrays)
    return torch.utils.data.DataLoader(dataset, batch_size, shuffle=is_train)


def load_data_nmt(batch_size, num_steps, num_examples=600):
    """``(data_iter, src_vocab, tgt_vocab)``; batches are ``(X, X_valid_len, Y, Y_valid_len)``.

    As the book: ``num_examples + 1`` pairs (its off-by-one), ``min_freq=2``, vocabularies
    over all pairs, ``<eos>`` appended before truncation to ``num_steps``.
    """
    raw = read_data_nmt()
    if num_examples:  # only lines 0..num_examples are read: preprocess just those (same result)
        raw = "\n".join(raw.split("\n", num_examples + 1)[: num_examples + 1])
    source, target = tokenize_nmt(preprocess_nmt(raw), num_examples)
    reserved = ["<pad>", "<bos>", "<eos>"]
    src_vocab = _NMTVocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = _NMTVocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = build_array_nmt(source, src_vocab, num_steps)
    tgt_array, tgt_valid_len = build_array_nmt(target, tgt_vocab, num_steps)
    data_arrays = (src_array, src_valid_len, tgt_array, tgt_valid_len)
    data_iter = load_array(data_arrays, batch_size)
    return data_iter, src_vocab, tgt_vocab


# ---------------------------------------------------------------- chapters 9-10: seq2seq models
# The book's names over attnkit.models.seq2seq, attnkit.training, attnkit.decoding and
# attnkit.metrics (same signatures, state_dict keys and printed line). Differences from the
# book: the encoder packs padded sources when given valid lengths; Seq2SeqDecoder keeps the
# encoder context in its state; bleu returns 0.0 where the book divides by zero;
# train_seq2seq prints only its final line (no Animator).
import time as _time  # noqa: E402

from attnkit import decoding as _decoding  # noqa: E402
from attnkit import metrics as _metrics  # noqa: E402
from attnkit.models import seq2seq as _s2s  # noqa: E402
from attnkit.training import losses as _losses  # noqa: E402
from attnkit.training import trainer as _trainer  # noqa: E402

Encoder = _s2s.Encoder
Decoder = _s2s.Decoder
AttentionDecoder = _s2s.AttentionDecoder
EncoderDecoder = _s2s.EncoderDecoder
Seq2SeqEncoder = _s2s.Seq2SeqEncoder
Seq2SeqDecoder = _s2s.Seq2SeqDecoder
Seq2SeqAttentionDecoder = _s2s.Seq2SeqAttentionDecoder
MaskedSoftmaxCELoss = _losses.MaskedSoftmaxCELoss
bleu = _metrics.bleu


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device):
    """The book's loop: Xavier init, Adam, teacher forcing, ``l.sum().backward()``, clip at 1.

    Batches are ``(X, X_valid_len, Y, Y_valid_len)``. Prints the book's line for the last
    epoch: ``loss {sum of per-sequence losses / tokens:.3f}, {tokens/sec:.1f} tokens/sec``.
    """
    net.apply(_s2s.xavier_init_weights)
    net.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    bos_id = tgt_vocab["<bos>"]
    net.train()
    loss_sum = num_tokens = seconds = 0.0
    for _epoch in range(num_epochs):
        start = _time.perf_counter()
        totals = torch.zeros(2, dtype=torch.float64)
        for batch in data_iter:
            optimizer.zero_grad()
            X, X_valid_len, Y, Y_valid_len = (x.to(device) for x in batch)
            loss = _trainer.teacher_forcing_loss(
                net, X, X_valid_len, Y, Y_valid_len, bos_id, "per_sequence"
            )  # (B,): the book's MaskedSoftmaxCELoss
            loss.sum().backward()
            grad_clipping(net, 1)
            optimizer.step()
            totals += torch.stack([loss.detach().sum().cpu(), Y_valid_len.sum().cpu()])
        seconds = _time.perf_counter() - start
        loss_sum, num_tokens = float(totals[0]), float(totals[1])
    print(f"loss {loss_sum / num_tokens:.3f}, {num_tokens / seconds:.1f} tokens/sec on {device!s}")


def predict_seq2seq(
    net, src_sentence, src_vocab, tgt_vocab, num_steps, device, save_attention_weights=False
):
    """Greedy translation of one sentence; returns ``(translation, attention_weight_seq)``.

    As the book: ``src_sentence.lower().split(' ')`` + ``<eos>``, padded to ``num_steps``;
    ``attention_weight_seq`` holds ``net.decoder.attention_weights`` after every step.
    """
    net.eval()
    src_tokens = src_vocab[src_sentence.lower().split(" ")] + [src_vocab["<eos>"]]
    enc_valid_len = torch.tensor([len(src_tokens)], device=device)
    src_tokens = truncate_pad(src_tokens, num_steps, src_vocab["<pad>"])
    enc_X = torch.tensor([src_tokens], dtype=torch.long, device=device)
    attention_weight_seq = []
    result = _decoding.greedy_decode(
        net,
        enc_X,
        enc_valid_len,
        bos_id=tgt_vocab["<bos>"],
        eos_id=tgt_vocab["<eos>"],
        max_len=num_steps,
        on_step=(lambda dec: attention_weight_seq.append(dec.attention_weights))
        if save_attention_weights
        else None,
    )
    return " ".join(tgt_vocab.to_tokens(result.tokens[0])), attention_weight_seq


# ---------------------------------------------------------------- chapter 10: Transformer (issue 5)
from attnkit.models import transformer as _tf  # noqa: E402


def _book_config(num_hiddens, ffn_num_hiddens, num_heads, num_layers, dropout, use_bias):
    return _tf.TransformerConfig(
        d_model=num_hiddens,
        num_heads=num_heads,
        num_layers=num_layers,
        d_ff=ffn_num_hiddens,
        dropout=dropout,
        bias=use_bias,
    )


PositionWiseFFN = _tf.PositionWiseFFN


class AddNorm(_tf.AddNorm):
    def __init__(self, normalized_shape, dropout, **kwargs):
        super().__init__(normalized_shape, dropout)


def _book_sublayers(block, book_args: tuple, bias: bool, attentions: tuple[str, ...]) -> None:
    """Give a real block the book's sublayer sizes (key/query/value sizes, norm_shape...).

    ``book_args`` = (key_size, query_size, value_size, num_hiddens, norm_shape,
    ffn_num_input, ffn_num_hiddens, num_heads, dropout), the book's block arguments.
    """
    key_size, query_size, value_size, num_hiddens, norm_shape, ffn_in, ffn_hid, heads, p = book_args
    for name in attentions:
        mha = MultiHeadAttention(key_size, query_size, value_size, num_hiddens, heads, p, bias)
        setattr(block, name, mha)
    for name in ("addnorm1", "addnorm2", "addnorm3"):
        if hasattr(block, name):
            setattr(block, name, AddNorm(norm_shape, p))
    block.ffn = PositionWiseFFN(ffn_in, ffn_hid, num_hiddens)


class EncoderBlock(_tf.EncoderBlock):
    """The book's ``EncoderBlock``; ``forward(X, valid_lens)``."""

    def __init__(self, key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                 ffn_num_hiddens, num_heads, dropout, use_bias=False, **kwargs):  # fmt: skip
        book_args = (key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                     ffn_num_hiddens, num_heads, dropout)  # fmt: skip
        super().__init__(
            _book_config(num_hiddens, ffn_num_hiddens, num_heads, 1, dropout, use_bias)
        )
        _book_sublayers(self, book_args, use_bias, ("attention",))

    def forward(self, X, valid_lens):
        mask = self.attention.build_mask(
            X.shape[0], X.shape[1], X.shape[1], valid_lens, False, X.device
        )
        return self.run(X, mask)


class TransformerEncoder(_tf.TransformerEncoder):
    """The book's ``TransformerEncoder``; ``attention_weights`` per block as (B*H, S, S)."""

    def __init__(self, vocab_size, key_size, query_size, value_size, num_hiddens, norm_shape,
                 ffn_num_input, ffn_num_hiddens, num_heads, num_layers, dropout, use_bias=False,
                 **kwargs):  # fmt: skip
        book_args = (key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                     ffn_num_hiddens, num_heads, dropout)  # fmt: skip
        config = _book_config(
            num_hiddens, ffn_num_hiddens, num_heads, num_layers, dropout, use_bias
        )
        super().__init__(vocab_size, config, lambda i: EncoderBlock(*book_args, use_bias))

    @property
    def attention_weights(self):
        return [blk.attention.attention.attention_weights for blk in self.blks]


class DecoderBlock(_tf.DecoderBlock):
    """The book's ``DecoderBlock(..., i)``; ``forward(X, state) -> (X, state)``.

    ``state[2][i]`` holds this block's cache: projected keys/values (ours), where
    the book keeps the raw inputs of the positions decoded so far.
    """

    def __init__(self, key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                 ffn_num_hiddens, num_heads, dropout, i, **kwargs):  # fmt: skip
        book_args = (key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                     ffn_num_hiddens, num_heads, dropout)  # fmt: skip
        super().__init__(_book_config(num_hiddens, ffn_num_hiddens, num_heads, 1, dropout, False))
        self.i = i
        _book_sublayers(self, book_args, False, ("attention1", "attention2"))

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        cross_mask = _tf._padding_mask(enc_valid_lens, *enc_outputs.shape[:2], X.device)
        X, state[2][self.i] = self.step(X, enc_outputs, cross_mask, state[2][self.i])
        return X, state


class TransformerDecoder(_tf.TransformerDecoder):
    """The book's ``TransformerDecoder``; ``attention_weights`` = [[self], [enc-dec]] per block."""

    def __init__(self, vocab_size, key_size, query_size, value_size, num_hiddens, norm_shape,
                 ffn_num_input, ffn_num_hiddens, num_heads, num_layers, dropout, **kwargs):  # fmt: skip
        book_args = (key_size, query_size, value_size, num_hiddens, norm_shape, ffn_num_input,
                     ffn_num_hiddens, num_heads, dropout)  # fmt: skip
        config = _book_config(num_hiddens, ffn_num_hiddens, num_heads, num_layers, dropout, False)
        super().__init__(vocab_size, config, lambda i: DecoderBlock(*book_args, i))

    @property
    def attention_weights(self):
        return [
            [blk.attention1.attention.attention_weights for blk in self.blks],
            [blk.attention2.attention.attention_weights for blk in self.blks],
        ]


# ---------------------------------------------------------------- helpers from earlier chapters
# DATA_HUB/download over attnkit.data.hub (same dict, so the book's
# `d2l.DATA_HUB[name] = (url, sha1)` registers with the real downloader). Differences from
# the book: the default cache is attnkit's (`$ATTNKIT_CACHE` or ~/.cache/attnkit), not
# ../data; a fresh download is verified too; offline gives DatasetUnavailableError with a
# hint; only zip archives are extracted. Timer/Accumulator/Animator/plot are the book's
# notebook helpers (matplotlib, headless-safe: attnkit.viz picks Agg without a display).
import itertools as _itertools  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402  (d2l.plt, as the book)

from attnkit.data import hub as _hub  # noqa: E402

DATA_HUB = _hub.DATA_HUB
DATA_URL = _hub.DATA_URL


def download(name: str, cache_dir=None) -> str:
    """Path (str) of ``DATA_HUB[name]`` in ``cache_dir`` (default: attnkit's cache)."""
    return str(_hub.download(name, cache_dir))


def download_extract(name: str, folder=None) -> str:
    """Download and unzip ``DATA_HUB[name]``; return ``base_dir/folder`` or the zip's stem."""
    if name in DATA_HUB and not DATA_HUB[name][0].endswith(".zip"):
        raise ValueError(
            f"download_extract: {name!r} is {DATA_HUB[name][0]}; only .zip archives are supported"
        )
    data_dir = _hub.download_extract(name)
    return str(data_dir.parent / folder) if folder else str(data_dir)


class Timer:
    """The book's ``Timer``: ``start``, ``stop`` (returns the lap), ``avg``, ``sum``, ``cumsum``."""

    def __init__(self):
        self.times: list[float] = []
        self.start()

    def start(self) -> None:
        self.tik = _time.perf_counter()

    def stop(self) -> float:
        self.times.append(_time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self) -> float:
        return sum(self.times) / len(self.times)

    def sum(self) -> float:
        return sum(self.times)

    def cumsum(self) -> list[float]:
        return list(_itertools.accumulate(self.times))


class Accumulator:
    """The book's ``Accumulator(n)``: ``n`` running float sums."""

    def __init__(self, n: int):
        self.data = [0.0] * n

    def add(self, *args) -> None:
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self) -> None:
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def sgd(params, lr, batch_size) -> None:
    """The book's minibatch SGD: ``p -= lr * p.grad / batch_size`` under no_grad, zero grads."""
    _lmtrain.sgd_update(params, lr)(batch_size)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def use_svg_display() -> None:
    """SVG figures in a Jupyter notebook (as the book); does nothing elsewhere."""
    if _in_notebook():
        try:
            from matplotlib_inline import backend_inline
        except ImportError:
            return
        backend_inline.set_matplotlib_formats("svg")


def set_figsize(figsize=(3.5, 2.5)) -> None:
    """Default size of new figures (``plt.rcParams['figure.figsize']``)."""
    use_svg_display()
    plt.rcParams["figure.figsize"] = figsize


def set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend) -> None:
    """The book's axis setup: labels, scales, limits, legend, grid."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    axes.set_xlim(xlim)
    axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid()


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"), figsize=(3.5, 2.5),
         axes=None):  # fmt: skip
    """The book's ``plot``: one or more curves on ``axes`` (default: a new figure's axes).

    Returns the axes. Unlike the book (which reuses ``plt.gca()``, fresh per notebook cell),
    without ``axes`` it opens a new figure, so scripts do not draw over older plots;
    ``d2l.plt.plot(...)`` afterwards still draws on it, as in the book.
    """
    legend = [] if legend is None else legend
    set_figsize(figsize)
    if axes is None:
        axes = plt.figure(figsize=figsize).gca()

    def has_one_axis(X):
        return (hasattr(X, "ndim") and X.ndim == 1) or (
            isinstance(X, list) and not hasattr(X[0], "__len__")
        )

    if has_one_axis(X):
        X = [X]
    if Y is None:
        X, Y = [[]] * len(X), X
    elif has_one_axis(Y):
        Y = [Y]
    if len(X) != len(Y):
        X = X * len(Y)
    axes.cla()
    for x, y, fmt in zip(X, Y, fmts):
        if len(x):
            axes.plot(x, y, fmt)
        else:
            axes.plot(y, fmt)
    set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend)
    return axes


class Animator:
    """The book's ``Animator``: ``add(x, y)`` appends points and redraws its figure.

    Keeps the points in ``X``/``Y`` (one list per curve) and the figure in ``fig``. In a
    Jupyter notebook it redisplays the figure on every ``add`` as the book does; elsewhere it
    only draws (save it with ``fig.savefig`` or ``attnkit.viz.save_figure``).
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
                 xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"), nrows=1,
                 ncols=1, figsize=(3.5, 2.5)):  # fmt: skip
        legend = [] if legend is None else legend
        use_svg_display()
        self.fig, self.axes = plt.subplots(nrows, ncols, figsize=figsize)
        if nrows * ncols == 1:
            self.axes = [self.axes]
        # The curves go on the first subplot (the book's ``axes[0]``, which for a 2-D grid is
        # a row of axes and crashes there).
        self._ax = self.axes[0] if nrows * ncols == 1 else self.axes.flat[0]
        self.config_axes = lambda: set_axes(
            self._ax, xlabel, ylabel, xlim, ylim, xscale, yscale, legend
        )
        self.X, self.Y, self.fmts = None, None, fmts

    def add(self, x, y) -> None:
        if not hasattr(y, "__len__"):
            y = [y]
        n = len(y)
        if not hasattr(x, "__len__"):
            x = [x] * n
        if not self.X:
            self.X = [[] for _ in range(n)]
        if not self.Y:
            self.Y = [[] for _ in range(n)]
        for i, (a, b) in enumerate(zip(x, y)):
            if a is not None and b is not None:
                self.X[i].append(a)
                self.Y[i].append(b)
        self._ax.cla()
        for xs, ys, fmt in zip(self.X, self.Y, self.fmts):
            self._ax.plot(xs, ys, fmt)
        self.config_axes()
        if _in_notebook():
            from IPython import display

            display.display(self.fig)
            display.clear_output(wait=True)


def show_list_len_pair_hist(legend, xlabel, ylabel, xlist, ylist):
    """The book's histogram of list lengths (second set hatched) on a new figure.

    Returns ``(counts, bins, patches)`` from ``plt.hist``; the book returns nothing.
    """
    set_figsize()
    plt.figure()
    result = plt.hist([[len(seq) for seq in xlist], [len(seq) for seq in ylist]])
    plt.xlabel(xlabel)
    plt.ylabel(ylabel)
    for patch in result[2][1].patches:
        patch.set_hatch("/")
    plt.legend(legend)
    return result
