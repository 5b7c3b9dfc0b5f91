"""Save a trained model with its config, and load it back: what the book's checkpoints (``minitfm/lm/assets``) are."""
from __future__ import annotations

import pickle
from pathlib import Path

import torch

from minitfm.config import ModelConfig
from minitfm.models import DecoderOnlyLM, EncoderDecoder


MODEL_CLASSES = {"EncoderDecoder": EncoderDecoder, "DecoderOnlyLM": DecoderOnlyLM}


def save_checkpoint(path, model: torch.nn.Module) -> None:
    """Save the model class name, its config (plain values), its dtype and its weights."""
    if type(model).__name__ not in MODEL_CLASSES:
        raise TypeError(f"save_checkpoint saves {tuple(MODEL_CLASSES)}, got {type(model).__name__}")
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    if isinstance(path, (str, Path)) and not Path(path).parent.is_dir():
        raise ValueError(f"cannot save {path}: the folder {Path(path).parent} does not exist")
    torch.save({"kind": type(model).__name__, "config": model.config.to_dict(), "dtype": dtype,
                "state_dict": model.state_dict()}, path)


def _checkpoint_device(map_location) -> torch.device:
    """The device a checkpoint is rebuilt on (checked before anything is read)."""
    if not isinstance(map_location, (str, torch.device)):
        raise TypeError(f"map_location must be a device name such as 'cpu' or 'cuda', got {type(map_location).__name__}")
    try:
        device = torch.device(map_location)
    except RuntimeError as err:
        raise ValueError(f"map_location {map_location!r} is not a device name ({err})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"map_location={map_location!r} but this machine has no CUDA device; use 'cpu'")
    if device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"map_location={map_location!r} but MPS is not available here; use 'cpu'")
    return device


def _read_checkpoint(path, device: torch.device) -> dict:
    """torch.load with safe unpickling, turning every failure into an error that names the file."""
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory, not a checkpoint file")
    try:
        data = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError:
        raise ValueError(f"refused to load {path}: it holds Python objects other than tensors and plain values, "
                         "which could run code when loaded. minitfm checkpoints (save_checkpoint) never do; "
                         "only load files you made or trust, and re-save them with save_checkpoint") from None
    except (EOFError, RuntimeError, OSError) as err:
        raise ValueError(f"{path} is not a readable checkpoint (empty, truncated or not made by torch.save): "
                         f"{type(err).__name__}: {str(err)[:120] or 'no data'}") from None
    if not isinstance(data, dict) or not {"kind", "config", "state_dict"} <= set(data):
        keys = sorted(map(str, data))[:4] if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path} is not a minitfm checkpoint (no 'kind'/'config'/'state_dict'; found {keys}). "
                         "A bare state_dict loads into a model you build yourself: model.load_state_dict(...)")
    if data["kind"] not in MODEL_CLASSES:
        raise ValueError(f"{path} holds an unknown model kind {data['kind']!r}; expected one of {tuple(MODEL_CLASSES)}")
    if not isinstance(data["config"], dict):
        raise ValueError(f"{path}: its config must be a dict of ModelConfig fields, got {type(data['config']).__name__}")
    state = data["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: its state_dict must be a dict of name -> tensor, got {type(state).__name__}")
    return data


def load_checkpoint(path, map_location="cpu") -> torch.nn.Module:
    """Rebuild a model saved by :func:`save_checkpoint` with safe loading (``weights_only=True``).

    The model comes back in eval mode, on ``map_location``, in the dtype it was saved in (an fp16 or bf16
    model round-trips bit for bit). Every failure (missing, empty, truncated or unsafe file, a bare
    state_dict, an unknown kind, weights that do not fit the config) raises an error naming the file.
    """
    device = _checkpoint_device(map_location)
    data = _read_checkpoint(path, device)
    try:
        config = ModelConfig.from_dict(data["config"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: its config is not a valid ModelConfig ({err})") from None
    dtype = getattr(torch, data.get("dtype", ""), None) if "dtype" in data else next(
        (t.dtype for t in data["state_dict"].values() if t.is_floating_point()), torch.float32)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{path}: unknown dtype {data['dtype']!r}")
    # load_state_dict copies into the model's parameters wherever they are, so build the model on the
    # requested device and in the saved dtype (building it there also keeps the tied embedding/head one matrix).
    with torch.device(device):
        model = MODEL_CLASSES[data["kind"]](config).to(dtype)
    try:
        model.load_state_dict(data["state_dict"])
    except RuntimeError as err:
        raise ValueError(f"{path}: the weights do not fit its config ({str(err)[:300]})") from None
    return model.eval()
