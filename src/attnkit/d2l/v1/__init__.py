"""The current English edition's API (d2l 1.0): ``from attnkit.d2l import v1 as d2l``.

Chapters 9-11 (recurrent networks, modern recurrent networks, attention and Transformers)
and the base classes they use, with d2l 1.0.3's names, signatures, ``state_dict`` keys
(lazy layers: a state dict loads after a first forward, as in the book) and data
semantics (alphabetical ``Vocab``, ``MTFraEng``/``TimeMachine`` splits and arrays).
``Trainer.fit`` runs attnkit's one training engine. Modules: :mod:`.base` (``Module``,
``DataModule``, ``Trainer``...), :mod:`.text`, :mod:`.rnn`, :mod:`.seq2seq`,
:mod:`.attention`, :mod:`.transformer`, :mod:`.kernels`, :mod:`.utils`.

Data come from ``root`` (``'../data'``, relative to the working directory) as in the book:
``../data/timemachine.txt`` (sha1-checked), ``../data/fra-eng/fra.txt`` or
``../data/fra.txt``; ``$ATTNKIT_TIMEMACHINE`` / ``$ATTNKIT_FRA`` win; offline without a
file, ``DatasetUnavailableError`` names every place looked at.

1.0 quirks fixed (each fix changes nothing but the bug):

* A fully masked attention row gets zero weights (the book: uniform weights).
* The notebook's ``TransformerDecoder`` is causal in every mode (the book's only while
  training) and gives each token decoded step by step its own position (the book adds
  position 0's encoding to every one).
* ``bleu`` of an empty prediction is 0.0; ``nadaraya_watson`` gives zero weights (not NaN)
  to a query with no key in the kernel's support.
* ``RNNScratch`` takes its state as a tensor or the book's 1-tuple (``StackedRNNScratch``
  passes a tensor, which the book's ``state, = state`` cannot unpack).
* ``Vocab.to_tokens`` of a one-item list returns the token (the book raises TypeError).
* ``Module.plot`` draws every point when there are fewer batches than points per epoch
  (the book's ``every_n=0`` never draws).
* Arguments are checked (TypeError/ValueError naming the argument): widths, heads,
  dropout, ``num_steps``, ``valid_lens``, empty data files, ``num_train + num_val``
  beyond the data.

Kept as in 1.0: ``Seq2Seq`` trains on ``Classifier.loss`` (cross-entropy over padding too;
the seq2seq notebook adds the masked loss with ``add_to_class``); ``Seq2SeqEncoder`` runs
its GRU over padding; ``MTFraEng`` reads ``num_train + num_val + 1`` lines, so validation
has one row more; ``init_seq2seq`` skips lazy layers not yet materialised;
``prepare_batch`` moves batches to the first GPU only; ``try_all_gpus()`` is ``[]``
without a GPU.

On the core: the Transformer classes are :mod:`attnkit.models.transformer`'s (blocks,
stacks, caches), ``MultiHeadAttention`` is :class:`attnkit.attention.LazyMultiHeadAttention`
and ``predict_step`` is :func:`attnkit.inference.decoding.greedy_decode`. So
``predict_step`` decodes ``num_steps`` tokens per row as the book's, but in eval mode and
without gradients (the book's runs in the model's mode, which after ``fit`` is eval), from
one start token ``tgt[:, 0]`` shared by every row (the book's ``<bos>``; different start
tokens are a ValueError); and ``TransformerDecoder``'s ``state[2][i]`` is block i's core
``BlockCache`` (projected keys and values), where the book keeps block i's raw inputs.

Differences of speed, not of law: ``Trainer.fit`` clips with ``clip_grad_norm_`` (scale
``clip / (norm + 1e-6)``, the book ``clip / norm``); dot-product attention runs the fused
kernel while training (no ``attention_weights`` kept in training mode); in training mode
``EncoderDecoder`` trims a batch's source to its longest sentence when the pair is
attnkit's ``TransformerEncoder``/``TransformerDecoder`` (their padded keys get exactly zero
weight, so the outputs are the same); the headless ``ProgressBoard`` keeps its points
without drawing (``board.save(path)`` writes them as a PNG).
"""

from __future__ import annotations

import torch  # noqa: F401  (d2l.torch, as the book's module has it)
from matplotlib import pyplot as plt
from torch import nn

from attnkit.d2l import tensor_shortcuts as _shortcuts
from attnkit.d2l.utils import set_axes, set_figsize, use_svg_display
from attnkit.d2l.v1.attention import (
    AdditiveAttention,
    AttentionDecoder,
    DotProductAttention,
    MultiHeadAttention,
    Seq2SeqAttentionDecoder,
    masked_softmax,
    show_heatmaps,
)
from attnkit.d2l.v1.base import (
    Classifier,
    DataModule,
    HyperParameters,
    Module,
    ProgressBoard,
    Trainer,
    add_to_class,
    cpu,
    gpu,
    num_gpus,
    try_all_gpus,
    try_gpu,
)
from attnkit.d2l.v1.kernels import (
    boxcar,
    constant,
    epanechikov,
    epanechnikov,
    gaussian,
    nadaraya_watson,
)
from attnkit.d2l.v1.rnn import (
    GRU,
    LSTM,
    RNN,
    RNNLM,
    BiGRU,
    BiRNNScratch,
    GRUScratch,
    LSTMScratch,
    RNNLMScratch,
    RNNScratch,
    StackedRNNScratch,
    check_len,
    check_shape,
)
from attnkit.d2l.v1.seq2seq import (
    Decoder,
    Encoder,
    EncoderDecoder,
    MTFraEng,
    Seq2Seq,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    bleu,
    init_seq2seq,
    show_list_len_pair_hist,
)
from attnkit.d2l.v1.text import TimeMachine, Vocab
from attnkit.d2l.v1.transformer import (
    AddNorm,
    PositionalEncoding,
    PositionWiseFFN,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
)
from attnkit.d2l.v1.utils import DATA_URL, DatasetUnavailableError, Timer, download, extract, plot
from attnkit.d2l.v1.vision import FashionMNIST, LinearRegression

nn_Module = nn.Module  # noqa: N816  (the book's alias)

__all__ = [
    "DATA_URL",
    "GRU",
    "LSTM",
    "RNN",
    "RNNLM",
    "AddNorm",
    "AdditiveAttention",
    "AttentionDecoder",
    "BiGRU",
    "BiRNNScratch",
    "Classifier",
    "DataModule",
    "DatasetUnavailableError",
    "Decoder",
    "DotProductAttention",
    "Encoder",
    "EncoderDecoder",
    "FashionMNIST",
    "GRUScratch",
    "HyperParameters",
    "LSTMScratch",
    "LinearRegression",
    "MTFraEng",
    "Module",
    "MultiHeadAttention",
    "PositionWiseFFN",
    "PositionalEncoding",
    "ProgressBoard",
    "RNNLMScratch",
    "RNNScratch",
    "Seq2Seq",
    "Seq2SeqAttentionDecoder",
    "Seq2SeqDecoder",
    "Seq2SeqEncoder",
    "StackedRNNScratch",
    "TimeMachine",
    "Timer",
    "Trainer",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "Vocab",
    "add_to_class",
    "bleu",
    "boxcar",
    "check_len",
    "check_shape",
    "constant",
    "cpu",
    "download",
    "epanechikov",
    "epanechnikov",
    "extract",
    "gaussian",
    "gpu",
    "init_seq2seq",
    "masked_softmax",
    "nadaraya_watson",
    "num_gpus",
    "plot",
    "plt",
    "set_axes",
    "set_figsize",
    "show_heatmaps",
    "show_list_len_pair_hist",
    "try_all_gpus",
    "try_gpu",
    "use_svg_display",
]  # fmt: skip

# The book's tensor shortcuts (``d2l.reshape``, ``d2l.zeros``...): exactly this edition's
# block of its d2l/torch.py, listed once in attnkit.d2l.tensor_shortcuts.NAMES_1_0.
globals().update({name: getattr(_shortcuts, name) for name in _shortcuts.NAMES_1_0})
__all__ += _shortcuts.NAMES_1_0
