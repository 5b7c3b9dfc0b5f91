"""Pick the fastest available device without ever requiring one, and the CPU thread count."""
from __future__ import annotations

import os
import platform
import time
from typing import Callable, Sequence

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


def cpu_summary() -> str:
    """One line naming this machine's CPU for benchmark reports: model, cores, and the instruction set
    PyTorch's CPU kernels use (``ATEN_CPU_CAPABILITY`` can lower it), e.g.
    ``"Intel(R) Xeon(R) Platinum 8488C, 2 cores, torch 2.13.0 kernels: AVX512"``."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:  # not Linux: platform.processor() is the best there is
        pass
    capability = torch.backends.cpu.get_cpu_capability()
    return f"{model}, {os.cpu_count()} cores, torch {torch.__version__} kernels: {capability}"


def fastest_threads(run: Callable[[], object], candidates: Sequence[int] | None = None, *, repeats: int = 2,
                    clock: Callable[[], float] = time.perf_counter) -> tuple[int, dict[int, float]]:
    """Time ``run()`` under each thread count and return the fastest count and every timing.

    Each candidate (default: 1, 2, 4, ... up to the number of cores) is timed ``repeats`` times and keeps
    its best time, which is the least disturbed by other processes. The thread count in force before the
    call is restored; set the winner yourself with ``torch.set_num_threads``. Tiny models usually run
    fastest on one thread (a second one mostly waits), larger ones gain from more: measure, do not guess.
    """
    if not callable(run):
        raise TypeError(f"run must be a callable taking no arguments, got {type(run).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive whole number, got {repeats!r}")
    if candidates is None:
        cores = os.cpu_count() or 1
        candidates = [2 ** i for i in range(cores.bit_length()) if 2 ** i <= cores]
    candidates = list(candidates)
    if not candidates or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in candidates):
        raise ValueError(f"candidates must be positive whole thread counts, got {candidates!r}")
    before = torch.get_num_threads()
    timings = {}
    try:
        for threads in candidates:
            torch.set_num_threads(threads)
            best = float("inf")
            for _ in range(repeats):
                start = clock()
                run()
                best = min(best, clock() - start)
            timings[threads] = best
    finally:
        torch.set_num_threads(before)
    return min(timings, key=timings.get), timings
