"""Loading a model that ships in ``minitfm/lm/assets``, with an error that says what is wrong with the file."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

from minitfm.models import DecoderOnlyLM
from minitfm.training import load_checkpoint


def load_shipped_model(path, script: str) -> DecoderOnlyLM:
    """The DecoderOnlyLM saved at ``path`` (eval mode, CPU); ``script`` is the command that writes it."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a pathlib.Path to a .pt checkpoint, got {type(path).__name__}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}; create it with `{script}`")
    if path.is_dir():
        raise ValueError(f"{path} is a folder; the loader expects the .pt checkpoint file "
                         "written by save_checkpoint")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is an empty file, not a checkpoint (an interrupted download or save?)")
    with open(path, "rb") as file:
        head = file.read(64)
    if head.startswith(b"version https://git-lfs"):
        raise ValueError(f"{path} is a Git LFS pointer, not the checkpoint: fetch the file itself (git lfs pull)")
    if not head.startswith((b"PK\x03\x04", b"\x80")):  # torch.save's zip archive, or its legacy pickle
        raise ValueError(f"{path} is not a checkpoint written by torch.save (it starts with {head[:16]!r}); "
                         "the loader expects the .pt file of save_checkpoint")
    try:
        model = load_checkpoint(path)  # weights_only loading: never runs code from the file
    except (KeyError, EOFError, RuntimeError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path} is not a readable checkpoint ({type(err).__name__}: {str(err)[:200]})") from None
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"{path} holds a {type(model).__name__}, not a DecoderOnlyLM")
    return model


