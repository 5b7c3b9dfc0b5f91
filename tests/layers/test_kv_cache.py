import pytest
import torch
from torch.testing import assert_close

from minitfm import ConcatKVCache, KVCache


@pytest.mark.parametrize("cls", [KVCache, ConcatKVCache])
def test_update_returns_the_whole_history(cls):
    cache = cls(2, 3, 6, 4)
    k1, v1 = torch.randn(2, 3, 2, 4), torch.randn(2, 3, 2, 4)
    k2, v2 = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    assert cache.length == 3
    assert_close(k, torch.cat([k1, k2], dim=2))
    assert_close(v, torch.cat([v1, v2], dim=2))
    assert_close(cache.get()[0], k)


def test_preallocated_cache_keeps_its_buffer():
    cache = KVCache(1, 1, 8, 2)
    buffer = cache.k.data_ptr()
    for _ in range(8):
        cache.update(torch.randn(1, 1, 1, 2), torch.randn(1, 1, 1, 2))
    assert cache.k.data_ptr() == buffer and cache.length == 8


@pytest.mark.parametrize("cls", [KVCache, ConcatKVCache])
def test_overflow_and_shape_errors(cls):
    cache = cls(1, 2, 3, 4)
    cache.update(torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4))
    with pytest.raises(ValueError, match="KV cache overflow.*2 used|KV cache overflow.*2 are used"):
        cache.update(torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"cache holds \(B, H_kv, T, Dh\) = \(1, 2, T, 4\), got k \(1, 3, 1, 4\)"):
        cache.update(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4))


def test_reorder_and_reset():
    cache = KVCache(3, 1, 4, 2)
    k = torch.arange(3.0)[:, None, None, None].expand(3, 1, 2, 2)
    cache.update(k, k + 10)  # values apart from keys: both must follow the rows
    cache.reorder(torch.tensor([2, 2, 0]))
    assert cache.get()[0][:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]
    assert cache.get()[1][:, 0, 0, 0].tolist() == [12.0, 12.0, 10.0]
    cache.reset()
    assert cache.length == 0 and cache.get()[0].shape == (3, 1, 0, 2)
