"""Sinusoidal positional encoding against the formula in float64."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import PositionalEncoding, sinusoidal_table


@pytest.mark.parametrize("D", [1, 2, 5, 32, 33])
def test_table_matches_formula(D):
    P = sinusoidal_table(50, D).double()
    for t in (0, 1, 7, 49):
        for d in range(D):
            angle = t / 10000 ** ((d - d % 2) / D)
            expected = (
                torch.sin(torch.tensor(angle)) if d % 2 == 0 else torch.cos(torch.tensor(angle))
            )
            assert abs(float(P[t, d]) - float(expected)) < 1e-5


def test_module_adds_table_buffer_not_in_state_dict():
    pe = PositionalEncoding(6, dropout=0.0, max_len=10).eval()
    X = torch.zeros(2, 4, 6)
    torch.testing.assert_close(pe(X), sinusoidal_table(10, 6)[:4].expand(2, 4, 6))
    assert "P" not in pe.state_dict()
    assert pe.to(torch.float64).P.dtype == torch.float64  # buffer follows the module
    torch.testing.assert_close(pe(X, offset=3)[0, 0], sinusoidal_table(10, 6)[3])


def test_long_max_len_and_errors():
    pe = PositionalEncoding(8, 0.0, max_len=5000)
    assert pe(torch.zeros(1, 4096, 8)).shape == (1, 4096, 8)
    short = PositionalEncoding(8, 0.0, max_len=4)
    with pytest.raises(ValueError, match="positions up to 5 exceed max_len=4"):
        short(torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match=r"X must be \(B, T, 8\)"):
        short(torch.zeros(1, 3, 7))
    with pytest.raises(ValueError, match="must be positive"):
        sinusoidal_table(0, 4)
