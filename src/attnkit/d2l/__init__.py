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

Data, as the book, comes from ``../data`` (relative to the working directory) first:
``download``, ``download_extract``, ``read_time_machine`` and ``read_data_nmt`` use a
file there (sha1-checked where the hub registers one) before attnkit's cache and the
network; ``$ATTNKIT_TIMEMACHINE`` / ``$ATTNKIT_FRA`` win over both.

The names live in modules by chapter: :mod:`~attnkit.d2l.utils` (earlier chapters'
helpers: ``DATA_HUB``, ``download``, ``Timer``, ``plot``...), :mod:`~attnkit.d2l.rnn`
(chapter 8), :mod:`~attnkit.d2l.seq2seq` (chapter 9), :mod:`~attnkit.d2l.attention`
(chapter 10, the Transformer included) and :mod:`~attnkit.d2l.training` (the training
loops ``train_ch8``, ``train_epoch_ch8``, ``grad_clipping``, ``train_seq2seq``).
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # d2l.plt, as the book
import torch
from torch import Tensor, nn

from attnkit.d2l import tensor_shortcuts as _shortcuts
from attnkit.d2l.attention import (
    AdditiveAttention,
    AddNorm,
    DecoderBlock,
    DotProductAttention,
    EncoderBlock,
    MultiHeadAttention,
    NWKernelRegression,
    PositionalEncoding,
    PositionWiseFFN,
    TransformerDecoder,
    TransformerEncoder,
    masked_softmax,
    sequence_mask,
    show_attention,
    show_heatmaps,
    transpose_output,
    transpose_qkv,
)
from attnkit.d2l.rnn import (
    RNNModel,
    RNNModelScratch,
    SeqDataLoader,
    Vocab,
    count_corpus,
    load_corpus_time_machine,
    load_data_time_machine,
    predict_ch8,
    read_time_machine,
    seq_data_iter_random,
    seq_data_iter_sequential,
    tokenize,
)
from attnkit.d2l.seq2seq import (
    AttentionDecoder,
    Decoder,
    Encoder,
    EncoderDecoder,
    MaskedSoftmaxCELoss,
    Seq2SeqAttentionDecoder,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    bleu,
    build_array_nmt,
    load_array,
    load_data_nmt,
    predict_seq2seq,
    preprocess_nmt,
    read_data_nmt,
    tokenize_nmt,
    truncate_pad,
)
from attnkit.d2l.training import (
    evaluate_loss,
    grad_clipping,
    train_ch8,
    train_epoch_ch8,
    train_seq2seq,
)
from attnkit.d2l.utils import (
    DATA_HUB,
    DATA_URL,
    Accumulator,
    Animator,
    Timer,
    download,
    download_extract,
    plot,
    set_axes,
    set_figsize,
    sgd,
    show_list_len_pair_hist,
    try_gpu,
    use_svg_display,
)

__all__ = [
    "DATA_HUB",
    "DATA_URL",
    "Accumulator",
    "AddNorm",
    "AdditiveAttention",
    "Animator",
    "AttentionDecoder",
    "Decoder",
    "DecoderBlock",
    "DotProductAttention",
    "Encoder",
    "EncoderBlock",
    "EncoderDecoder",
    "MaskedSoftmaxCELoss",
    "MultiHeadAttention",
    "NWKernelRegression",
    "PositionWiseFFN",
    "PositionalEncoding",
    "RNNModel",
    "RNNModelScratch",
    "Seq2SeqAttentionDecoder",
    "Seq2SeqDecoder",
    "Seq2SeqEncoder",
    "SeqDataLoader",
    "Tensor",
    "Timer",
    "TransformerDecoder",
    "TransformerEncoder",
    "Vocab",
    "bleu",
    "build_array_nmt",
    "count_corpus",
    "download",
    "download_extract",
    "evaluate_loss",
    "grad_clipping",
    "load_array",
    "load_corpus_time_machine",
    "load_data_nmt",
    "load_data_time_machine",
    "masked_softmax",
    "nn",
    "plot",
    "plt",
    "predict_ch8",
    "predict_seq2seq",
    "preprocess_nmt",
    "read_data_nmt",
    "read_time_machine",
    "seq_data_iter_random",
    "seq_data_iter_sequential",
    "sequence_mask",
    "set_axes",
    "set_figsize",
    "sgd",
    "show_attention",
    "show_heatmaps",
    "show_list_len_pair_hist",
    "tokenize",
    "tokenize_nmt",
    "torch",
    "train_ch8",
    "train_epoch_ch8",
    "train_seq2seq",
    "transpose_output",
    "transpose_qkv",
    "truncate_pad",
    "try_gpu",
    "use_svg_display",
]

# The book's tensor shortcuts (``d2l.reshape``, ``d2l.zeros``...): exactly this edition's
# block of its d2l/torch.py, listed once in attnkit.d2l.tensor_shortcuts.NAMES_0_17.
globals().update({name: getattr(_shortcuts, name) for name in _shortcuts.NAMES_0_17})
__all__ += _shortcuts.NAMES_0_17
