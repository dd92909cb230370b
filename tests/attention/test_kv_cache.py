"""KVCache: appending, a static memory, copies that stay apart, row selection, errors."""

from __future__ import annotations

import pytest
import torch

from attnkit.attention.kv_cache import KVCache


def _kv(T, B=2, H=2, Dh=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, H, T, Dh, generator=g), torch.randn(B, H, T, Dh, generator=g)


def test_update_appends_the_new_positions():
    cache = KVCache()
    assert len(cache) == 0 and not cache.filled
    k1, v1 = _kv(3)
    k2, v2 = _kv(1, seed=1)
    assert cache.update(k1, v1)[0] is k1
    keys, values = cache.update(k2, v2)
    assert len(cache) == 4
    assert torch.equal(keys, torch.cat([k1, k2], 2)) and torch.equal(values, torch.cat([v1, v2], 2))


def test_a_static_cache_keeps_its_first_keys_and_values():
    cache = KVCache(static=True)
    k, v = _kv(5)
    cache.update(k, v)
    other_k, other_v = _kv(2, seed=3)
    keys, values = cache.update(other_k, other_v)
    assert keys is k and values is v and len(cache) == 5
    strided = KVCache(static=True)  # a projection's transposed view: stored contiguous
    k_view, v_view = (
        k.transpose(1, 2).contiguous().transpose(1, 2),
        v.transpose(2, 3).contiguous().transpose(2, 3),
    )
    keys, values = strided.update(k_view, v_view)
    assert not k_view.is_contiguous() and keys.is_contiguous() and values.is_contiguous()
    assert torch.equal(keys, k) and torch.equal(values, v)


def test_copy_and_index_select_leave_the_original_as_it_was():
    cache = KVCache()
    k, v = _kv(2)
    cache.update(k, v)
    twin = cache.copy()
    twin.update(*_kv(1, seed=1))
    assert len(cache) == 2 and len(twin) == 3 and cache.keys is k
    rows = cache.index_select(torch.tensor([1, 1, 0]))
    assert torch.equal(rows.keys, k[[1, 1, 0]]) and torch.equal(rows.values, v[[1, 1, 0]])
    assert len(KVCache(static=True).index_select(torch.tensor([0]))) == 0
    assert "static=False" in repr(cache) and "(2, 2, 2, 3)" in repr(cache)


def test_errors_name_the_problem():
    k, v = _kv(2)
    with pytest.raises(ValueError, match="needs both keys and values"):
        KVCache(k)
    with pytest.raises(ValueError, match=r"keys must be a \(B, H, T, Dh\) tensor, got torch.Size"):
        KVCache().update(k[0], v[0])
    with pytest.raises(ValueError, match=r"keys and values must share \(B, H, T\)"):
        KVCache(k, v[:, :, :1])
    cache = KVCache(k, v)
    with pytest.raises(ValueError, match=r"the new keys .* do not match it"):
        cache.update(*_kv(1, B=3))
    with pytest.raises(TypeError, match=r"static must be a bool, got 1 \(int\)"):
        KVCache(static=1)


def test_a_preallocated_cache_keeps_backward_working_and_its_capacity_through_reorders():
    from attnkit.attention.kv_cache import KVCache

    torch.manual_seed(0)
    steps = [torch.randn(2, 1, 1, 4, requires_grad=True) for _ in range(3)]
    buffered, plain = KVCache(capacity=8), KVCache()
    for cache in (buffered, plain):
        total = 0
        for k in steps:
            keys, values = cache.update(k * 2, k * 3)
            total = total + keys.sum() + values.sum()
        total.backward()  # an in-place write into a buffer an earlier graph holds would fail
    grads = [k.grad.clone() for k in steps]
    # each step is held at that step and every later one (3, 2, 1 times), d/dk = 2 + 3, in both caches
    for k, times in zip(grads, (3, 2, 1)):
        assert torch.equal(k, torch.full_like(k, 2 * 5.0 * times))
    with torch.no_grad():
        for k in steps:
            keys, _ = buffered.update(k, k)
    assert buffered.index_select(torch.tensor([1])).capacity == 8


def test_copies_share_the_room_and_only_the_one_at_its_end_writes_in_place():
    """Two continuations of one state (siblings) both append: the first writes in place,
    the second, behind the high-water mark, gets buffers of its own; every holder keeps
    exactly its own positions, and index_select keeps room to write in place."""
    from attnkit.attention.kv_cache import KVCache

    g = torch.Generator().manual_seed(1)
    parts = [(torch.randn(3, 2, 1, 4, generator=g), torch.randn(3, 2, 1, 4, generator=g))]
    parts += [(torch.randn(3, 2, 1, 4, generator=g), torch.randn(3, 2, 1, 4, generator=g))]
    base = KVCache(capacity=4)
    base.update(*parts[0])
    first, second = base.copy(), base.copy()
    first.update(*parts[1])
    assert first.keys.data_ptr() == base.keys.data_ptr()  # written in place
    k2, v2 = parts[1][0] + 1, parts[1][1] - 1
    second.update(k2, v2)
    assert second.keys.data_ptr() != base.keys.data_ptr()  # behind the mark: its own buffer
    assert len(base) == 1 and torch.equal(base.keys, parts[0][0])
    assert torch.equal(first.keys, torch.cat([parts[0][0], parts[1][0]], 2))
    assert torch.equal(first.values, torch.cat([parts[0][1], parts[1][1]], 2))
    assert torch.equal(second.keys, torch.cat([parts[0][0], k2], 2))
    assert torch.equal(second.values, torch.cat([parts[0][1], v2], 2))
    # the original itself appending after its copies did also gets its own buffer
    base.update(k2, v2)
    assert torch.equal(base.keys, second.keys) and torch.equal(
        first.keys[:, :, 1], parts[1][0][:, :, 0]
    )
    picked = first.index_select(torch.tensor([2, 0]))
    assert torch.equal(picked.keys, first.keys[[2, 0]])
    ptr = picked.keys.data_ptr()
    picked.update(parts[0][0][:2], parts[0][1][:2])
    assert picked.keys.data_ptr() == ptr and len(picked) == 3  # the kept room was used
    assert torch.equal(picked.keys[:, :, 2], parts[0][0][:2, :, 0])


@pytest.mark.parametrize("capacity", [None, 4])
def test_a_cache_with_a_dtype_stores_and_keeps_its_precision(capacity):
    """dtype=bfloat16: every update is stored rounded to it (appending, preallocated or
    static), and copies and row selections keep it."""
    bf16 = torch.bfloat16
    cache = KVCache(capacity=capacity, dtype=bf16)
    k1, v1 = _kv(3)
    k2, v2 = _kv(2, seed=1)
    cache.update(k1, v1)
    keys, values = cache.update(k2, v2)
    assert keys.dtype == values.dtype == bf16 and len(cache) == 5
    assert torch.equal(keys, torch.cat([k1, k2], 2).to(bf16))
    assert torch.equal(values, torch.cat([v1, v2], 2).to(bf16))
    rows = cache.index_select(torch.tensor([1, 0]))
    assert rows.dtype == bf16 and torch.equal(rows.keys, keys[[1, 0]])
    assert rows.update(*_kv(1, seed=2))[0].dtype == bf16 and cache.copy().dtype == bf16
    static = KVCache(static=True, dtype=bf16)
    assert torch.equal(static.update(k1, v1)[1], v1.to(bf16)) and static.keys.dtype == bf16
    assert KVCache(k1, v1, dtype=bf16).keys.dtype == bf16  # given tensors too
    assert "dtype=torch.bfloat16" in repr(cache)
    with pytest.raises(TypeError, match=r"dtype must be a floating torch\.dtype"):
        KVCache(dtype=torch.int8)
    with pytest.raises(TypeError, match=r"dtype must be a floating torch\.dtype"):
        KVCache(dtype="bfloat16")
