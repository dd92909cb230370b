"""The one choice of position scheme: the encodings added to the inputs (sinusoidal at any
length, learned within its table), position ids per row, and the scheme names."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import (
    POSITIONS,
    LearnedPositions,
    PositionalEncoding,
    SinusoidalPositions,
    input_positions,
    sinusoidal_table,
)


def test_the_schemes_and_what_each_adds_to_the_inputs():
    assert POSITIONS == ("sinusoidal", "learned", "rope", "alibi", "none")
    assert isinstance(input_positions("sinusoidal", 8, 16), SinusoidalPositions)
    learned = input_positions("learned", 8, 16)
    assert isinstance(learned, LearnedPositions) and learned.weight.shape == (16, 8)
    assert [input_positions(p, 8, 16) for p in ("rope", "alibi", "none")] == [None] * 3
    with pytest.raises(ValueError, match="positions must be one of 'sinusoidal', 'learned'"):
        input_positions("relative", 8, 16)


def test_sinusoidal_positions_at_any_length_offsets_and_ids():
    pe = SinusoidalPositions(6)
    X = torch.zeros(2, 4, 6)
    torch.testing.assert_close(pe(X), sinusoidal_table(4, 6).expand(2, 4, 6))
    far = pe(X, 3000)  # no max_len: the table grows
    torch.testing.assert_close(far[0], sinusoidal_table(3004, 6)[3000:])
    ids = torch.tensor([[0, 0, 0, 1], [5, 6, 7, 8]])  # per row: a left-padded row, an offset
    out = pe(X, ids)
    torch.testing.assert_close(out[0, 3], sinusoidal_table(2, 6)[1])
    torch.testing.assert_close(out[1], sinusoidal_table(9, 6)[5:])
    assert pe.state_dict() == {}


def test_learned_positions_stop_at_their_table():
    pe = LearnedPositions(5, 3)
    with torch.no_grad():
        pe.weight.copy_(torch.arange(15.0).view(5, 3))
    X = torch.ones(1, 2, 3)
    torch.testing.assert_close(pe(X, 3), 1 + torch.arange(9.0, 15.0).view(1, 2, 3))
    torch.testing.assert_close(
        pe(X, torch.tensor([[4, 0]]))[0, 0], 1 + torch.tensor([12.0, 13, 14])
    )
    with pytest.raises(ValueError, match="positions up to 6 exceed the 5 learned positions"):
        pe(X, 4)
    with pytest.raises(ValueError, match="positions up to 7 exceed the 5 learned positions"):
        pe(X, torch.tensor([[6, 0]]))
    with pytest.raises(ValueError, match=r"position ids must be integers of shape \(B, T\)"):
        pe(X, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="offset must be a non-negative int, got -1"):
        pe(X, -1)


def test_the_books_encoding_takes_position_ids_too():
    pe = PositionalEncoding(4, 0.0, max_len=10).eval()
    X = torch.zeros(2, 3, 4)
    ids = torch.tensor([[0, 1, 2], [7, 8, 9]])
    torch.testing.assert_close(pe(X, ids)[1], sinusoidal_table(10, 4)[7:])
    torch.testing.assert_close(pe(X, ids)[0], pe(X)[0])
    with pytest.raises(ValueError, match="sequence positions up to 11 exceed max_len=10"):
        pe(X, ids + 1)
