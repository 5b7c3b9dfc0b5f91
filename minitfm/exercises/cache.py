"""Checker for a KV-cache update: write new keys and values into preallocated buffers at a length pointer."""
from __future__ import annotations

import torch

from ..cache import KVCache
from ._core import Case, CheckResult, Mistake, randn, run_cases


def _wrong_update(k_cache, v_cache, length, k_new, v_new, *, start=None, whole=False, advance=True):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    begin = length if start is None else start(length)
    end = begin + k_new.shape[2]
    k_cache[:, :, begin:end], v_cache[:, :, begin:end] = k_new, v_new
    stop = k_cache.shape[2] if whole else length + k_new.shape[2]
    return k_cache[:, :, :stop], v_cache[:, :, :stop], length + k_new.shape[2] if advance else length


def check_kv_cache_update(cache_update, verbose: bool = True) -> CheckResult:
    """Check ``cache_update(k_cache, v_cache, length, k_new, v_new) -> (k_all, v_all, new_length)``.

    k_cache and v_cache are preallocated buffers (B, H, T_max, Dh) whose first ``length`` positions are
    filled; k_new and v_new are (B, H, T_new, Dh). Write them **in place** at positions
    ``length .. length + T_new - 1`` and return the valid prefixes (B, H, length + T_new, Dh) of both
    buffers and the new length ``length + T_new`` (an int).
    """
    mistakes = [
        Mistake("you write at position 0 every time, over the old keys; write at the length pointer: "
                "[length : length + T_new]", lambda i: _wrong_update(*i.values(), start=lambda n: 0)),
        Mistake("off by one: you write one position after the length pointer; the first free slot is `length`",
                lambda i: _wrong_update(*i.values(), start=lambda n: n + 1)),
        Mistake("you return the whole buffer (T_max positions); return only the valid prefix "
                "[:, :, :length + T_new], the positions written so far",
                lambda i: _wrong_update(*i.values(), whole=True)),
        Mistake("the length pointer did not move: new_length must be length + T_new",
                lambda i: _wrong_update(*i.values(), advance=False)),
    ]

    def written(inputs, got):
        k_cache, length, k_new = inputs["k_cache"], inputs["length"], inputs["k_new"]
        end = length + k_new.shape[2]
        if not (torch.equal(k_cache[:, :, length:end], k_new) and torch.equal(inputs["v_cache"][:, :, length:end],
                                                                             inputs["v_new"])):
            return ("your answer is right but the buffers were not written: the point of preallocation is to write "
                    "in place, k_cache[:, :, length:end] = k_new (torch.cat makes a new tensor every step)")
        return None

    def case(what, b, h, t_max, dh, length, t_new, seed, dtype=torch.float32):
        def make():
            k_cache, v_cache = torch.zeros(b, h, t_max, dh, dtype=dtype), torch.zeros(b, h, t_max, dh, dtype=dtype)
            k_cache[:, :, :length] = randn(b, h, length, dh, seed=seed, dtype=dtype)
            v_cache[:, :, :length] = randn(b, h, length, dh, seed=seed + 1, dtype=dtype)
            return {"k_cache": k_cache, "v_cache": v_cache, "length": length,
                    "k_new": randn(b, h, t_new, dh, seed=seed + 2, dtype=dtype),
                    "v_new": randn(b, h, t_new, dh, seed=seed + 3, dtype=dtype)}
        i = make()
        cache = KVCache(b, h, t_max, dh, dtype=dtype)
        cache.k, cache.v, cache.length = i["k_cache"], i["v_cache"], length
        k_all, v_all = cache.update(i["k_new"], i["v_new"])
        return Case(what, make, (k_all, v_all, length + t_new), mistakes, after_call=written,
                    may_change=("k_cache", "v_cache"))

    cases = [
        case("prefill: 4 prompt tokens into an empty cache of 8", 2, 3, 8, 4, 0, 4, seed=1),
        case("one decode step at length 4", 2, 3, 8, 4, 4, 1, seed=2),
        case("two tokens at length 6 fill the cache exactly (T_max=8)", 2, 3, 8, 4, 6, 2, seed=3),
        case("a batch of 1, one head, odd Dh=5", 1, 1, 7, 5, 3, 1, seed=4),
        case("float16 buffers", 2, 2, 6, 8, 2, 3, seed=5, dtype=torch.float16),
    ]
    return run_cases("check_kv_cache_update", cache_update, cases, verbose=verbose)
