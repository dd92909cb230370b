"""Chapter 10 of the book (d2l 0.17): attention scoring, multi-head attention, Transformer.

Thin wrappers over :mod:`attnkit.attention`, :mod:`attnkit.models.transformer` and
:mod:`attnkit.viz`, with the book's constructor signatures, ``state_dict`` keys and
``attention_weights`` shapes.
"""

from __future__ import annotations

from torch import Tensor

from attnkit import attention as _att
from attnkit._validate import positive_int
from attnkit.i18n import _
from attnkit.models import transformer as _tf
from attnkit.viz import show_heatmaps as _show_heatmaps

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


def show_attention(
    attention_weights,  # (B*H, Q, K) | (L, H, Q, K) | a list of L blocks' (B*H, Q, K)
    keys=None,  # (K,) key tokens (the columns)
    queries=None,  # (Q,) query tokens (the rows); default: keys when Q == K
    *,
    num_heads: int | None = None,
    title: str | None = None,
    **kwargs,
):
    """The book's ``attention_weights`` as attnkit's interactive notebook view (head,
    model and matrix views, offline; not in the book: ``show_heatmaps`` stays the book's).

    Takes a module's ``attention_weights`` ((B*H, Q, K) in the book's layout: with
    ``num_heads``, the first sentence's H heads are drawn; without, every row of the first
    axis is a head), a list of them, one per block (the book's
    ``net.encoder.attention_weights``: layers), or a tensor (L, H, Q, K). Extra keywords
    (``view``, ``layer``, ``head``) go to :func:`attnkit.show_attention`.
    """
    import torch

    from attnkit._validate import optional
    from attnkit.views import show_attention as _show

    num_heads = optional(positive_int, "num_heads", num_heads)
    blocks = attention_weights
    if isinstance(blocks, (list, tuple)):
        if not blocks or any(not isinstance(b, Tensor) for b in blocks):
            got = ", ".join(type(b).__name__ for b in blocks) or _("an empty list")
            message = _("attention_weights as a list must hold one tensor per block, got {got}")
            raise TypeError(message.format(got=got))
        if len({tuple(b.shape) for b in blocks}) != 1:
            message = _(
                "attention_weights: every block's weights must have one shape, got {shapes}"
            )
            shapes = ", ".join(str(tuple(b.shape)) for b in blocks)
            raise ValueError(message.format(shapes=shapes))
        blocks = torch.stack([b.detach() for b in blocks])  # (L, B*H, Q, K)
    if num_heads is not None and isinstance(blocks, Tensor) and blocks.dim() in (3, 4):
        if blocks.shape[-3] % num_heads:
            message = _(
                "attention_weights has {rows} rows of heads, not a multiple of "
                "num_heads={num_heads}"
            )
            raise ValueError(message.format(rows=blocks.shape[-3], num_heads=num_heads))
        blocks = blocks.reshape(*blocks.shape[:-3], -1, num_heads, *blocks.shape[-2:])
        blocks = blocks[..., 0, :, :, :]  # the first sentence's heads
    return _show(blocks, keys, queries, title=title, **kwargs)


class _RecordInEval:
    """Mixin: keep ``attention_weights`` in eval mode, as the book always does.

    In training mode the fused kernel runs and no weights are kept.
    """

    def wants_weights(self) -> bool:
        return super().wants_weights() or not self.training


class AdditiveAttention(_att.AdditiveAttention):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(key_size, query_size, num_hiddens, dropout)


class DotProductAttention(_RecordInEval, _att.DotProductAttention):
    def __init__(self, dropout, **kwargs):
        super().__init__(dropout)


class _BookAttentionWeights:
    """The book's ``mha.attention``: its ``attention_weights`` are the multi-head module's
    weights in the book's layout, (B*H, Q, K)."""

    def __init__(self, owner: _att.MultiHeadAttention) -> None:
        self._owner = owner

    @property
    def attention_weights(self) -> Tensor | None:
        w = self._owner.attention_weights  # (B, H, Q, K)
        return None if w is None else w.reshape(-1, *w.shape[-2:])


class MultiHeadAttention(_RecordInEval, _att.MultiHeadAttention):
    """The book's ``MultiHeadAttention(key_size, query_size, value_size, num_hiddens, ...)``:
    the book's parameters (``W_q``, ``W_k``, ``W_v``, ``W_o``) and ``attention`` holder."""

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
            fused_qkv=False,
        )
        self.attention = _BookAttentionWeights(self)


def _check_heads(fn: str, X, num_heads, expected_shape: str) -> None:
    positive_int(f"{fn}: num_heads", num_heads)
    if not isinstance(X, Tensor):
        message = _("{fn}: X must be a torch.Tensor {expected}, got {type}")
        raise TypeError(message.format(fn=fn, expected=expected_shape, type=type(X).__name__))
    if X.dim() != 3:
        message = _("{fn}: X must have shape {expected}, got {shape}")
        raise ValueError(message.format(fn=fn, expected=expected_shape, shape=tuple(X.shape)))


def transpose_qkv(X: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B*H, T, D/H)."""
    _check_heads("transpose_qkv", X, num_heads, "(batch, steps, num_hiddens)")
    B, T, D = X.shape
    if D % num_heads:
        message = _(
            "transpose_qkv: X.shape[2] (num_hiddens) must be divisible by num_heads, "
            "got {d} and num_heads={num_heads}"
        )
        raise ValueError(message.format(d=D, num_heads=num_heads))
    return X.reshape(B, T, num_heads, -1).transpose(1, 2).reshape(B * num_heads, T, -1)


def transpose_output(X: Tensor, num_heads: int) -> Tensor:
    """(B*H, T, D/H) -> (B, T, D); reverses ``transpose_qkv``."""
    _check_heads(
        "transpose_output", X, num_heads, "(batch * num_heads, steps, num_hiddens / num_heads)"
    )
    BH, T, Dh = X.shape
    if BH % num_heads:
        message = _(
            "transpose_output: X.shape[0] (batch * num_heads) must be divisible by "
            "num_heads, got {bh} and num_heads={num_heads}"
        )
        raise ValueError(message.format(bh=BH, num_heads=num_heads))
    return X.reshape(-1, num_heads, T, Dh).transpose(1, 2).reshape(BH // num_heads, T, -1)


class PositionalEncoding(_att.PositionalEncoding):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)


# ---------------------------------------------------------------- the Transformer (10.7)


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

    def forward(self, X, state, *block_args):
        """The book's ``blk(X, state)``; inside the decoder stack, which calls every block
        as ``blk(X, enc_outputs, cross_mask, cache)``, the block's own forward."""
        if block_args:
            return super().forward(X, state, *block_args)
        enc_outputs, enc_valid_lens = state[0], state[1]
        cross_mask = _tf.padding_mask(enc_valid_lens, *enc_outputs.shape[:2], X.device)
        if state[2][self.i] is None:
            state[2][self.i] = _tf.BlockCache()
        return super().forward(X, enc_outputs, cross_mask, state[2][self.i]), state


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
