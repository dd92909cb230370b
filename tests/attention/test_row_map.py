"""RowMap: query rows sharing memory rows. Attention through the map equals attention over
per-row copies; reorders compose and compact; beam search is unchanged by it."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention import kv_cache, row_map
from attnkit.attention.kernels import explicit_attention
from attnkit.attention.kv_cache import KVCache
from attnkit.attention.row_map import RowMap, attend_by_rows, select


def test_slots_number_each_memory_rows_queries_in_order():
    m = RowMap(torch.tensor([3, 0, 3, 1, 0, 3]))
    assert m.slots.tolist() == [0, 0, 1, 0, 1, 2] and m.width == 3


@pytest.mark.parametrize("masked", [False, True])
def test_attention_through_the_map_equals_attention_over_copies(masked):
    g = torch.Generator().manual_seed(0)
    B, H, S, Dh = 5, 3, 7, 4
    keys = torch.randn(B, H, S, Dh, generator=g, dtype=torch.float64)
    values = torch.randn(B, H, S, Dh, generator=g, dtype=torch.float64)
    rows = torch.tensor([4, 1, 1, 4, 4, 0])  # memory rows 2 and 3 unused
    q = torch.randn(rows.numel(), H, 1, Dh, generator=g, dtype=torch.float64)
    lens = torch.tensor([7, 3, 5, 2, 1])
    mask = (torch.arange(S) < lens[rows, None])[:, None, None, :] if masked else None
    got = attend_by_rows(q, keys, values, RowMap(rows), mask)
    expected = explicit_attention(q, keys[rows], values[rows], mask)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_reorders_compose_and_a_sparse_map_compacts(monkeypatch):
    monkeypatch.setattr(row_map, "MIN_QUERY_ROWS", 1)
    assert select(None, torch.tensor([2, 0, 1]), 4, 2) is None  # no row twice: a copy
    first, keep = select(None, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]), 4, 2)
    assert keep is None and first.rows.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    second, keep = select(first.rows, torch.tensor([7, 6, 6, 1]), 4, 2)  # rows 3, 3, 3, 0
    assert keep.tolist() == [0, 3] and second.rows.tolist() == [1, 1, 1, 0]
    assert second.slots.tolist() == [0, 1, 2, 0] and second.width == 3


def test_a_static_cache_keeps_one_copy_of_the_memory_for_repeated_rows(monkeypatch):
    monkeypatch.setattr(row_map, "MIN_QUERY_ROWS", 1)
    g = torch.Generator().manual_seed(1)
    k, v = torch.randn(4, 2, 3, 5, generator=g), torch.randn(4, 2, 3, 5, generator=g)
    cache = KVCache(static=True)
    cache.update(k, v)
    plain = cache.index_select(torch.tensor([3, 1]))  # no repeats: copied, as before
    assert plain.row_map is None and torch.equal(plain.keys, k[[3, 1]])
    beams = cache.index_select(torch.tensor([0, 0, 2, 2, 1]))
    assert beams.keys is k and beams.row_map.rows.tolist() == [0, 0, 2, 2, 1]
    keys, values = beams.update(k, v)  # one row per query row for any reader
    assert torch.equal(keys, k[[0, 0, 2, 2, 1]]) and torch.equal(values, v[[0, 0, 2, 2, 1]])
    assert beams.copy().row_map is beams.row_map
    later = beams.index_select(torch.tensor([4, 3, 1]))  # rows 1, 2, 0: composed
    assert later.keys is k and later.row_map.rows.tolist() == [1, 2, 0]
    last = later.index_select(torch.tensor([1, 1]))  # rows 2, 2: compacted to one
    assert torch.equal(last.keys, k[[2]]) and last.row_map.rows.tolist() == [0, 0]


def test_small_reorders_copy_and_large_ones_map():
    k = torch.zeros(64, 8, 3, 5)
    cache = KVCache(static=True)
    cache.update(k, k)
    assert cache.index_select(torch.tensor([0, 0, 1, 1])).row_map is None  # 4 x 8 rows
    beams = cache.index_select(torch.arange(64).repeat_interleave(4))  # 256 x 8
    assert beams.row_map is not None and beams.keys is k


def test_beam_search_is_unchanged_by_the_row_map(monkeypatch):
    monkeypatch.setattr(row_map, "MIN_QUERY_ROWS", 1)
    from attnkit.inference.beam_search import BeamSearch
    from attnkit.models.transformer import TransformerConfig, build_transformer

    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=16, num_heads=4, num_layers=2, d_ff=32, bias=True)
    model = build_transformer(cfg, 13, 11).eval()
    src = torch.randint(3, 13, (6, 8))
    src_len = torch.tensor([8, 5, 2, 7, 1, 4])
    search = BeamSearch(3, 9, 1, 2, 0.6)
    calls = []
    real = row_map.attend_by_rows
    monkeypatch.setattr(
        "attnkit.models.transformer_step.attend_by_rows",
        lambda *a: calls.append(1) or real(*a),
    )
    mapped = search(model, src, src_len)
    assert calls  # the decoder step attended through the map
    monkeypatch.setattr(kv_cache, "select", lambda *a: None)  # copies, as before
    copied = search(model, src, src_len)
    for a, b in zip(mapped, copied, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for x, y in zip(a, b, strict=True):
            assert x.score == pytest.approx(y.score, abs=1e-5)
