"""Position-wise sublayers over a batch's valid positions only: the encoder's padding rows
skipped in inference.

Shape legend: B batch, S source length (padded), D model width, N valid positions.

A batch of sources is padded to its longest: 64 random OPUS-MT-sized sentences of 8-40
pieces are 2,560 rows of which about 40% are padding. Attention masks those keys, but the
position-wise FFN (two products of D x 4D) computes every row, padding included, and its
result at a padded position is never read: the encoder's output there is a masked key of
every later attention. CTranslate2 removes the padding before such layers (its
``Padder``); here the encoder's blocks run their FFN sublayer on the N valid rows,
gathered once per block, and the padded rows keep the block's input there (finite values,
weighted exactly 0 wherever they are keys).

Only in inference (eval mode, autograd off), for the standard ``EncoderBlock`` without
hooks, and when at least ``MIN_PADDING`` of the rows are padding; a valid position's
output is the same up to the products' rounding (a row's sums can depend on how many rows
a call multiplies).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["MIN_PADDING", "on_valid_rows", "valid_rows"]

# the share of padded rows from which the FFN skips them (gathering and scattering the
# rows costs two copies of (B S, D) a block)
MIN_PADDING = 0.125


def valid_rows(valid_lens: Tensor | None, B: int, S: int) -> Tensor | None:
    """The flat indices (N,) of the valid positions of a (B, S) batch whose rows have
    ``valid_lens`` (B,) valid positions each, or None where skipping the padding does not
    pay (no lengths, per-query lengths, or less than ``MIN_PADDING`` of padding)."""
    if valid_lens is None or valid_lens.dim() != 1 or B * S == 0:
        return None
    lens = valid_lens.clamp(0, S)
    if float(lens.sum()) > (1 - MIN_PADDING) * B * S:
        return None
    mask = torch.arange(S, device=valid_lens.device) < lens[:, None]  # (B, S)
    return mask.view(-1).nonzero().squeeze(1)  # (N,)


def on_valid_rows(Y: Tensor, rows: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
    """``sublayer`` (position-wise, (N, D) -> (N, D)) of Y's valid rows; Y (B, S, D) ->
    (B, S, D), the other rows as in Y."""
    flat = Y.reshape(-1, Y.shape[-1])  # (B S, D)
    out = sublayer(flat.index_select(0, rows))  # (N, D)
    return flat.index_copy(0, rows, out).view_as(Y)
