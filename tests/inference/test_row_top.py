"""row_argmax / row_topk equal torch.argmax / torch.topk on wide rows: random values, ties,
-inf rows, NaN, with and without a partial last chunk."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.inference import row_top
from attnkit.inference.row_top import CHUNK, row_argmax, row_topk


def _rows(seed: int, rows: int, width: int, levels: int | None) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if levels is None:
        return torch.randn(rows, width, generator=g)
    # few distinct values: many ties, across and inside chunks
    return torch.randint(0, levels, (rows, width), generator=g).float()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.integers(1, 6),
    width=st.integers(8 * CHUNK, 12 * CHUNK + 7),
    levels=st.sampled_from([None, 2, 5, 1000]),
)
def test_row_argmax_is_the_first_maximum(seed, rows, width, levels):
    x = _rows(seed, rows, width, levels)
    assert row_top._wide(x, 1)  # the chunked path, not the fallback
    assert torch.equal(row_argmax(x), x.argmax(dim=-1))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.integers(1, 6),
    k=st.integers(1, 5),
    extra=st.integers(0, 3 * CHUNK + 7),
    levels=st.sampled_from([None, 2, 5, 1000]),
)
def test_row_topk_values_are_topk_values(seed, rows, k, extra, levels):
    width = 8 * CHUNK * k + extra
    x = _rows(seed, rows, width, levels)
    values, columns = row_topk(x, k)
    expected = x.topk(k, dim=-1).values
    assert torch.equal(values, expected)
    assert torch.equal(x.gather(1, columns), values)  # the columns hold those values
    for row in columns.tolist():  # k distinct columns
        assert len(set(row)) == k
    if levels is None:  # no ties: the very same columns
        assert torch.equal(columns, x.topk(k, dim=-1).indices)


def test_maximum_in_the_tail_and_in_the_last_whole_chunk():
    width = 10 * CHUNK + 5
    x = torch.zeros(3, width)
    x[0, width - 1] = 5.0  # the tail's last column
    x[1, width - 7] = 5.0  # the last whole chunk, inside the tail's window
    x[1, width - 2] = 5.0  # a tie after it: the first one wins
    x[2, 0] = x[2, width - 1] = 5.0  # the first chunk against the tail
    assert row_argmax(x).tolist() == [width - 1, width - 7, 0]
    values, columns = row_topk(x, 2)
    assert values[:, 0].tolist() == [5.0, 5.0, 5.0]
    assert set(columns[1].tolist()) == {width - 7, width - 2}
    assert set(columns[2].tolist()) == {0, width - 1}


def test_minus_inf_rows_and_nan():
    width = 9 * CHUNK
    x = torch.full((3, width), float("-inf"))
    x[1, 300] = 0.0  # one finite value (beam search's forced <eos>)
    x[2, 50] = float("nan")  # NaN counts as the largest, as in torch.argmax/topk
    assert row_argmax(x).tolist() == x.argmax(dim=-1).tolist() == [0, 300, 50]
    values, columns = row_topk(x, 3)
    assert values[1, 0] == 0.0 and columns[1, 0] == 300
    assert torch.isnan(values[2, 0]) and columns[2, 0] == 50
    assert torch.isneginf(values[0]).all() and torch.isneginf(values[1, 1:]).all()


def test_narrow_rows_and_other_shapes_fall_back():
    x = torch.randn(4, 3 * CHUNK)
    assert not row_top._wide(x, 1)
    assert torch.equal(row_argmax(x), x.argmax(dim=-1))
    assert torch.equal(row_topk(x, 2)[1], x.topk(2, dim=-1).indices)
    y = torch.randn(2, 3, 9 * CHUNK)  # not 2-D: torch's own
    assert torch.equal(row_argmax(y), y.argmax(dim=-1))
    with pytest.raises(ValueError, match="k"):
        row_topk(x, 0)
