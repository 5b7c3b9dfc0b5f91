"""Counters the generation tests share: how often a LeanDecoder is built, and which aten ops a block of code runs."""
from __future__ import annotations

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode

from minitfm.generation.lean_decode import LeanDecoder


class CountBuilds:
    """``counter.builds``: how many LeanDecoders were built while the test's ``monkeypatch`` is active."""

    def __init__(self, monkeypatch):
        self.builds = 0
        original = LeanDecoder.__init__

        def counted(decoder, *args, **kwargs):
            self.builds += 1
            original(decoder, *args, **kwargs)
        monkeypatch.setattr(LeanDecoder, "__init__", counted)


class CountOps(TorchDispatchMode):
    """``with CountOps() as counter:`` ... ``counter.ops["cat"]``: how often each aten op ran inside the block."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))
