"""KV caches: keep the keys and values of past tokens so each generation step only processes the new one.

Glossary: B batch, H_kv key/value heads, T_max capacity, Dh head dimension.

Only K and V are cached, never Q: a past query is never needed again, while every new query attends to
all past keys and values. The cache is an object the caller owns and passes into attention; the
attention module holds no hidden state.

:func:`kv_cache_bytes` is the one formula of the bytes such a cache holds, which every count in minitfm calls
(``generation.kv_memory`` for whole models, the latent-attention and DeltaNet layers for their comparisons).
"""
from __future__ import annotations

import torch

from minitfm._checks import check_positive_int, check_tensor, inputs_trusted

_BYTES = {"fp32": 4, "float32": 4, "fp16": 2, "float16": 2, "bf16": 2, "bfloat16": 2, "int8": 1, "fp8": 1}


def bytes_per_element(dtype: torch.dtype | str | int) -> int:
    """Bytes of one number: a ``torch.dtype``, one of 'fp32', 'fp16', 'bf16', 'int8', 'fp8', or the count itself
    (a positive int: 2 for bf16)."""
    if isinstance(dtype, torch.dtype):
        return torch.empty((), dtype=dtype).element_size()
    if isinstance(dtype, str) and dtype in _BYTES:
        return _BYTES[dtype]
    if isinstance(dtype, int) and not isinstance(dtype, bool) and dtype > 0:
        return dtype
    raise ValueError(f"dtype must be a torch.dtype, one of {sorted(_BYTES)} or a positive number of bytes, "
                     f"got {dtype!r}")


def kv_cache_bytes(n_layers: int, n_kv_heads: int, seq_len: int, d_head: int, *,
                   batch_size: int = 1, dtype: torch.dtype | str | int = torch.float16) -> int:
    """2 x layers x H_kv x T x Dh x bytes per element x B: the bytes of a full KV cache (a key and a value of Dh
    numbers per key/value head, position, layer and sequence: the buffers of :class:`KVCache` at T = T_max)."""
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("seq_len", seq_len),
                        ("d_head", d_head), ("batch_size", batch_size)):
        check_positive_int(value, name)
    return 2 * n_layers * n_kv_heads * seq_len * d_head * bytes_per_element(dtype) * batch_size


class KVCache:
    """Preallocated buffers of shape (B, H_kv, T_max, Dh) and a length pointer.

    ``update(k, v)`` writes the new keys/values at ``length`` and returns views of the valid prefix
    (B, H_kv, length, Dh). Writing in place keeps the cost of one step constant, where growing a tensor
    with ``torch.cat`` copies the whole history every step (see :class:`ConcatKVCache`).
    """

    def __init__(self, batch_size: int, n_kv_heads: int, max_seq_len: int, d_head: int,
                 dtype: torch.dtype = torch.float32, device=None):
        for name, value in (("batch_size", batch_size), ("n_kv_heads", n_kv_heads),
                            ("max_seq_len", max_seq_len), ("d_head", d_head)):
            check_positive_int(value, name)
        shape = (batch_size, n_kv_heads, max_seq_len, d_head)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    @property
    def max_seq_len(self) -> int:
        return self.k.shape[2]

    def _check_new(self, k: torch.Tensor, v: torch.Tensor) -> None:
        if not inputs_trusted():  # the model's own attention layers pass 4-D float tensors
            check_tensor(k, "k", ndim=4, floating=True)
            check_tensor(v, "v", ndim=4, floating=True)
        b, h, _, d = self.k.shape
        for name, t in (("k", k), ("v", v)):
            if (t.shape[0], t.shape[1], t.shape[3]) != (b, h, d):
                raise ValueError(f"cache holds (B, H_kv, T, Dh) = ({b}, {h}, T, {d}), got {name} {tuple(t.shape)}")
        if k.shape[2] != v.shape[2]:
            raise ValueError(f"k and v must add the same number of steps, got {k.shape[2]} and {v.shape[2]}")
        if k.dtype != self.k.dtype or v.dtype != self.k.dtype:  # writing would round silently
            raise TypeError(f"the cache holds {self.k.dtype}, got k {k.dtype} and v {v.dtype}; build the cache "
                            "with the model's dtype (model.new_caches does) or cast k and v")

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (B, H_kv, T_new, Dh) keys and values; return all (B, H_kv, length, Dh) so far."""
        self._check_new(k, v)
        end = self.length + k.shape[2]
        if end > self.max_seq_len:
            raise ValueError(
                f"KV cache overflow: it holds {self.max_seq_len} positions, {self.length} are used and "
                f"{k.shape[2]} more were added; allocate a larger max_seq_len"
            )
        self.k.narrow(2, self.length, k.shape[2]).copy_(k)  # k[:, :, length:end] = k, in fewer operations
        self.v.narrow(2, self.length, v.shape[2]).copy_(v)
        self.length = end
        return self.k.narrow(2, 0, end), self.v.narrow(2, 0, end)

    def get(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The valid prefix (B, H_kv, length, Dh) without adding anything."""
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search keeps the cache of the beams it continues).

        ``index`` is a 1-D integer tensor of row numbers in [0, B); rows may repeat, and its length is
        the new batch size.
        """
        check_tensor(index, "index", ndim=1)
        if index.is_floating_point() or index.dtype == torch.bool:
            raise TypeError(f"index must hold integer row numbers, got dtype {index.dtype}")
        b = self.k.shape[0]
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= b):
            raise ValueError(f"index must select rows in [0, B={b}), got min {int(index.min())}, max {int(index.max())}")
        self.k = self.k.index_select(0, index)
        self.v = self.v.index_select(0, index)

    def reset(self) -> None:
        self.length = 0


class ConcatKVCache(KVCache):
    """The naive cache: starts empty and grows with ``torch.cat`` every step.

    Same interface as :class:`KVCache`. Each step copies the whole history, so per-step time grows with
    the length; it exists so the book can measure that against preallocation.
    """

    def __init__(self, batch_size: int, n_kv_heads: int, max_seq_len: int, d_head: int,
                 dtype: torch.dtype = torch.float32, device=None):
        super().__init__(batch_size, n_kv_heads, 1, d_head, dtype=dtype, device=device)
        check_positive_int(max_seq_len, "max_seq_len")
        self._capacity = max_seq_len
        self.k = self.k[:, :, :0]
        self.v = self.v[:, :, :0]

    @property
    def max_seq_len(self) -> int:
        return self._capacity

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self._check_new(k, v)
        if self.length + k.shape[2] > self._capacity:
            raise ValueError(
                f"KV cache overflow: capacity {self._capacity}, {self.length} used, {k.shape[2]} added"
            )
        self.k = torch.cat([self.k, k], dim=2)  # copies the whole history: O(length) per step
        self.v = torch.cat([self.v, v], dim=2)
        self.length = self.k.shape[2]
        return self.k, self.v

    def reset(self) -> None:
        self.k, self.v = self.k[:, :, :0], self.v[:, :, :0]
        self.length = 0


class SlidingKVCache(KVCache):
    """A bounded cache for a sliding-window layer: it keeps only the ``window`` latest positions.

    A layer with window W never looks further back than W - 1 keys, so older keys can go: the memory stays
    bounded however long the text, and never exceeds a plain :class:`KVCache`'s:

    - ``max_seq_len <= 2 W``: a plain buffer of ``max_seq_len`` slots, position p at slot p, exactly the plain
      cache (the window drops nothing worth the bookkeeping);
    - longer: a ring of W slots written **twice**, at slot p mod W and at p mod W + W (2 W slots in all), so
      that the W latest keys are always one contiguous view, oldest first.

    Either way a decode step copies nothing but its own key and value, and returns a view: until the ring wraps,
    positions 0 .. length - 1 sit at slots 0 .. length - 1. ``length`` still counts every position seen (RoPE and
    the causal mask continue from it); ``update`` returns fewer keys than ``length`` once it exceeds the window,
    the latest ones in order, and the attention aligns its mask to the right (the dropped columns are outside
    every query's window). Only a prompt of several tokens that crosses the ring's end is copied once.
    """

    def __init__(self, batch_size: int, n_kv_heads: int, max_seq_len: int, d_head: int,
                 dtype: torch.dtype = torch.float32, device=None, *, window: int = 4096):
        check_positive_int(window, "window")
        check_positive_int(max_seq_len, "max_seq_len")
        self.ring = max_seq_len > 2 * window  # else the plain layout costs no more than the ring's 2 W slots
        super().__init__(batch_size, n_kv_heads, 2 * window if self.ring else max_seq_len, d_head, dtype=dtype,
                         device=device)
        self.window, self._capacity = window, max_seq_len

    @property
    def max_seq_len(self) -> int:
        return self._capacity

    def held(self) -> int:
        """How many positions the cache still holds: min(length, W)."""
        return min(self.length, self.window)

    def _start(self, end: int, count: int) -> int:
        """The slot of the first of the ``count`` positions that end at position ``end`` - 1 (oldest first)."""
        first = end - count
        return first % self.window if self.ring and end > self.window else first

    def get(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The held keys and values (B, H_kv, min(length, W), Dh), oldest first (a view)."""
        start = self._start(self.length, self.held())
        return self.k.narrow(2, start, self.held()), self.v.narrow(2, start, self.held())

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (B, H_kv, T_new, Dh); return every key/value a new query may see, oldest first: those held before
        the call (at most W - 1 of them count) then the new ones. A view, except for a prompt of several tokens that
        crosses the end of the ring (one copy)."""
        self._check_new(k, v)
        t, w, length = k.shape[2], self.window, self.length
        end = length + t
        if end > self._capacity:
            raise ValueError(f"KV cache overflow: capacity {self._capacity}, {length} used, {t} added")
        if not self.ring or end <= w:  # no wrap yet (or never): the plain cache's write, positions at their slots
            self.k.narrow(2, length, t).copy_(k)
            self.v.narrow(2, length, t).copy_(v)
            self.length = end
            start = max(0, (length if t > 1 else end) - w)  # held before the call and the new ones; one token: W
            return self.k.narrow(2, start, end - start), self.v.narrow(2, start, end - start)
        out = None
        if t > 1:  # a prompt crossing the ring's end: the keys in order, one copy, before older slots are overwritten
            old_k, old_v = self.get()
            out = torch.cat([old_k, k], dim=2), torch.cat([old_v, v], dim=2)
        p = max(length, end - w)  # only the last W new positions are kept: in at most two runs of slots
        while p < end:
            slot = p % w
            n = min(end - p, w - slot)
            for buffer, new in ((self.k, k), (self.v, v)):
                run = new.narrow(2, p - length, n)
                buffer.narrow(2, slot, n).copy_(run)
                buffer.narrow(2, slot + w, n).copy_(run)
            p += n
        self.length = end
        return out if out is not None else self.get()
