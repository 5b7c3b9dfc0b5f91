"""Pick the fastest available device without ever requiring one."""
from __future__ import annotations

import torch


def pick_device() -> torch.device:
    """CUDA if present, else Apple's MPS, else the CPU. The book runs on a CPU; this only speeds it up."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
