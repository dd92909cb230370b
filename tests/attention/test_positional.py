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
    with pytest.raises(ValueError, match="max_len must be a positive int, got 0"):
        sinusoidal_table(0, 4)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((4.0, 0.0), TypeError, r"num_hiddens must be a positive int, got 4\.0 \(float\)"),
        (("4", 0.0), TypeError, r"num_hiddens must be a positive int, got '4' \(str\)"),
        ((0, 0.0), ValueError, "num_hiddens must be a positive int, got 0"),
        ((4, 1.0), ValueError, r"dropout must be in \[0, 1\), got 1\.0"),
        ((4, 0.0, 0), ValueError, "max_len must be a positive int, got 0"),
    ],
)
def test_constructor_checks_its_arguments(args, error, message):
    with pytest.raises(error, match=message):
        PositionalEncoding(*args)


def test_numpy_integer_sizes_are_accepted():
    np = pytest.importorskip("numpy")
    pe = PositionalEncoding(np.int64(6), 0.0, max_len=np.int64(7))
    assert pe.P.shape == (1, 7, 6) and isinstance(pe.num_hiddens, int)
