"""Positions: the one choice of scheme, and the encodings added to the inputs.

Shape legend: B batch, T positions, D width.

``POSITIONS`` names every scheme a model can take (``--positions``):

- ``sinusoidal`` (Vaswani et al., 2017), added to the inputs:
  P[t, 2j] = sin(t / 10000^(2j/D)),  P[t, 2j+1] = cos(t / 10000^(2j/D)) (the book's
  ``interleaved`` layout); ``halves`` (Marian's) holds the same values as
  P[t, j] = sin(...), P[t, ceil(D/2) + j] = cos(...): every sine first, then every cosine;
- ``learned``: a trained (context, D) table added to the inputs (GPT);
- ``rope``: queries and keys rotated inside attention (``attention.rope``);
- ``alibi``: a per-head linear distance penalty on the scores (``attention.alibi``);
- ``none``: no positions at all; a causal model still tells order by what it may see.

``input_positions(scheme, D, context)`` builds what a model adds to its embeddings (a
module, or None for the three schemes that act inside attention or not at all);
``MultiHeadAttention(..., positions=scheme)`` does the rest.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit._validate import non_negative_int, one_of, positive_int, probability
from attnkit.attention.dropout import Dropout
from attnkit.i18n import _

__all__ = [
    "EXTRAPOLATING",
    "IN_ATTENTION",
    "POSITIONS",
    "SINUSOIDAL_LAYOUTS",
    "LearnedPositions",
    "PositionalEncoding",
    "SinusoidalPositions",
    "check_positions",
    "input_positions",
    "sinusoidal_table",
]

POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none")
# where the sines and cosines of the sinusoidal table sit: alternating columns (the book,
# Vaswani et al.) or the sines in the first ceil(D/2) columns, the cosines after (Marian)
SINUSOIDAL_LAYOUTS = ("interleaved", "halves")
IN_ATTENTION = ("rope", "alibi")  # the schemes MultiHeadAttention applies itself
# the schemes with no table of positions: nothing stops them at the training length
EXTRAPOLATING = ("rope", "alibi", "none")


def check_positions(name: str, value: object) -> str:
    """``value`` if it names a scheme of ``POSITIONS`` (ValueError listing them otherwise)."""
    return one_of(name, value, POSITIONS)


def sinusoidal_table(max_len: int, num_hiddens: int, layout: str = "interleaved") -> Tensor:
    """The (max_len, D) float32 table of sines and cosines; any D, odd widths included.

    ``layout`` (one of ``SINUSOIDAL_LAYOUTS``): ``interleaved`` computes it in float32 as
    the book does; ``halves`` puts the ceil(D/2) sines first, then the floor(D/2) cosines,
    computed in float64 and rounded once, as Marian (Hugging Face's MarianMT) does.
    """
    max_len = positive_int("max_len", max_len)
    num_hiddens = positive_int("num_hiddens", num_hiddens)
    if one_of("layout", layout, SINUSOIDAL_LAYOUTS) == "halves":
        pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
        exponent = torch.arange(0, num_hiddens, 2, dtype=torch.float64) / num_hiddens
        angles = pos / torch.pow(10000.0, exponent)  # (T, ceil(D/2))
        half = angles.shape[1]
        return torch.cat(
            [torch.sin(angles), torch.cos(angles[:, : num_hiddens - half])], dim=1
        ).float()  # (T, D)
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    freq = torch.pow(
        10000.0, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens
    )  # (ceil(D/2),)
    angles = pos / freq  # (T, ceil(D/2))
    P = torch.zeros(max_len, num_hiddens)
    P[:, 0::2] = torch.sin(angles)
    P[:, 1::2] = torch.cos(angles[:, : num_hiddens // 2])
    return P


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to (B, T, D) inputs, then dropout.

    The table is a non-persistent buffer: it follows ``.to(device)`` and stays out
    of ``state_dict`` (as in the book, where it is a plain tensor). ``layout``: where its
    sines and cosines sit (``SINUSOIDAL_LAYOUTS``; see :func:`sinusoidal_table`).
    """

    def __init__(
        self,
        num_hiddens: int,
        dropout: float = 0.0,
        max_len: int = 1000,
        layout: str = "interleaved",
    ) -> None:
        super().__init__()
        self.num_hiddens = positive_int("num_hiddens", num_hiddens)
        self.max_len = positive_int("max_len", max_len)
        self.layout = one_of("layout", layout, SINUSOIDAL_LAYOUTS)
        self.dropout = Dropout(probability("dropout", dropout))
        table = sinusoidal_table(max_len, num_hiddens, layout)
        self.register_buffer("P", table.unsqueeze(0), False)

    def forward(self, X: Tensor, offset: int | Tensor = 0) -> Tensor:  # X: (B, T, D)
        """Add the table's rows of X's positions, then dropout.

        Args:
            X: the embedded tokens.
            offset: the first position (positions ``offset .. offset+T-1``; > 0 for cached
                decoding), or the position ids of every row (left-padded batches).

        Shape:
            X: (B, T, D); offset: int or (B, T). Returns (B, T, D).

        Returns:
            Dropout(X + P[positions]); positions at or past ``max_len`` are an error.
        """
        _check_width(X, self.num_hiddens)
        end = _last_position(offset, X) + 1
        if end > self.max_len:
            message = _(
                "sequence positions up to {end} exceed max_len={max_len}; build "
                "PositionalEncoding with a larger max_len"
            )
            raise ValueError(message.format(end=end, max_len=self.max_len))
        return self.dropout(X + _rows(self.P[0], offset, X))


def _check_width(X: Tensor, width: int) -> None:
    if not isinstance(X, Tensor) or X.dim() != 3 or X.shape[-1] != width:
        message = _("X must be (B, T, {width}), got shape {got}")
        raise ValueError(message.format(width=width, got=tuple(getattr(X, "shape", ()))))


def _last_position(positions: int | Tensor, X: Tensor) -> int:
    """The largest position the rows of X take (one host sync for position ids)."""
    if isinstance(positions, Tensor):
        if positions.is_floating_point() or positions.shape != X.shape[:2]:
            message = _(
                "position ids must be integers of shape (B, T) = {expected}, got {dtype} {got}"
            )
            raise ValueError(
                message.format(
                    expected=tuple(X.shape[:2]), dtype=positions.dtype, got=tuple(positions.shape)
                )
            )
        return int(positions.max()) if positions.numel() else -1
    return non_negative_int("offset", positions) + X.shape[1] - 1


def _rows(table: Tensor, positions: int | Tensor, X: Tensor) -> Tensor:
    """table (N, D) rows of X's positions: (1, T, D) for an offset, (B, T, D) for ids."""
    if isinstance(positions, Tensor):
        return table[positions.to(table.device)].to(X.dtype)  # (B, T, D)
    return table[positions : positions + X.shape[1]].unsqueeze(0).to(X.dtype)  # (1, T, D)


class SinusoidalPositions(nn.Module):
    """Adds the sinusoidal table to (B, T, D) inputs, at any length (the table grows).

    Unlike ``PositionalEncoding`` (the book's, with a fixed ``max_len`` and dropout) this
    has no length limit: a model trained on short contexts can be evaluated on longer
    ones (the extrapolation the ALiBi paper measures). No parameters, no state.
    """

    def __init__(self, num_hiddens: int) -> None:
        super().__init__()
        self.num_hiddens = positive_int("num_hiddens", num_hiddens)
        self.register_buffer("P", torch.empty(0, self.num_hiddens), persistent=False)

    def forward(self, X: Tensor, positions: int | Tensor = 0) -> Tensor:
        """Add each position's row of the sinusoidal table.

        Args:
            X: the embedded tokens.
            positions: the first position (int offset: positions offset .. offset+T-1) or
                the position ids of every row.

        Shape:
            X: (B, T, D); positions: int or (B, T). Returns (B, T, D).

        Returns:
            X + P[positions].
        """
        _check_width(X, self.num_hiddens)
        end = _last_position(positions, X) + 1
        if end > self.P.shape[0] or self.P.device != X.device:
            size = max(128, 1 << max(end - 1, 0).bit_length())
            self.P = sinusoidal_table(size, self.num_hiddens).to(X.device)  # (N, D)
        return X + _rows(self.P, positions, X)


class LearnedPositions(nn.Module):
    """Adds a trained (max_len, D) table of positions to (B, T, D) inputs (GPT's).

    The table is ``weight`` (an ``nn.Embedding``'s, initialized N(0, 0.02^2) by the model);
    positions at or past ``max_len`` have no row: a clear error.
    """

    def __init__(self, max_len: int, num_hiddens: int) -> None:
        super().__init__()
        self.max_len = positive_int("max_len", max_len)
        self.num_hiddens = positive_int("num_hiddens", num_hiddens)
        self.weight = nn.Parameter(torch.zeros(self.max_len, self.num_hiddens))

    def forward(self, X: Tensor, positions: int | Tensor = 0) -> Tensor:
        """Add each position's learned row.

        Args:
            X: the embedded tokens.
            positions: the first position (int offset) or the position ids of every row.

        Shape:
            X: (B, T, D); positions: int or (B, T). Returns (B, T, D).

        Returns:
            X + weight[positions].
        """
        _check_width(X, self.num_hiddens)
        end = _last_position(positions, X) + 1
        if end > self.max_len:
            message = _(
                "positions up to {end} exceed the {max_len} learned positions (the "
                "model's context_length): learned positions cannot go past it"
            )
            raise ValueError(message.format(end=end, max_len=self.max_len))
        return X + _rows(self.weight, positions, X)


def input_positions(positions: str, num_hiddens: int, context_length: int) -> nn.Module | None:
    """What a model adds to its embeddings for the scheme ``positions``: a
    ``SinusoidalPositions``, a ``LearnedPositions`` of ``context_length`` rows, or None
    (rope, alibi: inside attention; none: nothing)."""
    check_positions("positions", positions)
    if positions == "sinusoidal":
        return SinusoidalPositions(num_hiddens)
    if positions == "learned":
        return LearnedPositions(context_length, num_hiddens)
    return None
