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
):
    """The book's signature; returns the figure instead of only drawing it."""
    return _show_heatmaps(matrices, xlabel, ylabel, titles=titles, figsize=figsize, cmap=cmap)


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


def transpose_qkv(X: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B*H, T, D/H)."""
    B, T, D = X.shape
    if D % num_heads:
        raise ValueError(f"width {D} is not divisible by num_heads={num_heads}")
    return X.reshape(B, T, num_heads, -1).transpose(1, 2).reshape(B * num_heads, T, -1)


def transpose_output(X: Tensor, num_heads: int) -> Tensor:
    """(B*H, T, D/H) -> (B, T, D); reverses ``transpose_qkv``."""
    BH, T, Dh = X.shape
    if BH % num_heads:
        raise ValueError(f"leading dim {BH} is not divisible by num_heads={num_heads}")
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
# (chapter 8 names go here)

# ---------------------------------------------------------------- chapter 9: NMT data (issue 4)
# (chapter 9 data names go here)

# ---------------------------------------------------------------- chapters 9-10: seq2seq models
# (encoder-decoder, seq2seq, Bahdanau, training, prediction, bleu go here)

# ---------------------------------------------------------------- chapter 10: Transformer (issue 5)
# (Transformer names go here)
