"""Pick the fastest available device without ever requiring one, and the CPU thread count."""
from __future__ import annotations

import os

import torch

THREADS_ENV = "MINITFM_NUM_THREADS"


def pick_device() -> torch.device:
    """CUDA if present, else Apple's MPS, else the CPU. The book runs on a CPU; this only speeds it up."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_threads(default: int = 1) -> int:
    """Set torch's CPU thread count and return it.

    The book's models are tiny: a second thread only adds synchronisation, so ``default`` is 1. The
    environment variable ``MINITFM_NUM_THREADS`` overrides it, so that a reader (or CI) can re-run a
    chapter under another thread count and check that its verdicts still hold: a thread count changes how
    sums are split, and with it the last bits of every float result.
    """
    if isinstance(default, bool) or not isinstance(default, int) or default < 1:
        raise ValueError(f"default must be a positive whole number of threads, got {default!r}")
    raw = os.environ.get(THREADS_ENV, "").strip()
    threads = default
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{THREADS_ENV} must be a positive whole number of threads, got {raw!r}")
        threads = int(raw)
    torch.set_num_threads(threads)
    return threads
