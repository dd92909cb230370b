"""Sinusoidal positional encoding (Vaswani et al., 2017).

P[t, 2j] = sin(t / 10000^(2j/D)),  P[t, 2j+1] = cos(t / 10000^(2j/D)).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit._validate import positive_int, probability
from attnkit.attention.dropout import Dropout

__all__ = ["PositionalEncoding", "sinusoidal_table"]


def sinusoidal_table(max_len: int, num_hiddens: int) -> Tensor:
    """The (max_len, D) table of sines and cosines; any D, odd widths included."""
    max_len = positive_int("max_len", max_len)
    num_hiddens = positive_int("num_hiddens", num_hiddens)
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
    of ``state_dict`` (as in the book, where it is a plain tensor).
    """

    def __init__(self, num_hiddens: int, dropout: float = 0.0, max_len: int = 1000) -> None:
        super().__init__()
        self.num_hiddens = positive_int("num_hiddens", num_hiddens)
        self.max_len = positive_int("max_len", max_len)
        self.dropout = Dropout(probability("dropout", dropout))
        self.register_buffer("P", sinusoidal_table(max_len, num_hiddens).unsqueeze(0), False)

    def forward(self, X: Tensor, offset: int = 0) -> Tensor:  # X: (B, T, D)
        """Add positions ``offset .. offset+T-1`` (offset > 0 for cached decoding)."""
        if X.dim() != 3 or X.shape[-1] != self.num_hiddens:
            raise ValueError(f"X must be (B, T, {self.num_hiddens}), got shape {tuple(X.shape)}")
        end = offset + X.shape[1]
        if end > self.max_len:
            raise ValueError(
                f"sequence positions up to {end} exceed max_len={self.max_len}; "
                "build PositionalEncoding with a larger max_len"
            )
        return self.dropout(X + self.P[:, offset:end].to(X.dtype))
