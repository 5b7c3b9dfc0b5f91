"""Reading a checkpoint folder's files for :mod:`minitfm.pretrained`, each damaged file named with what is wrong.

A Hugging Face checkpoint folder holds ``config.json`` and its weights: ``model.safetensors``,
``pytorch_model.bin``, or shards listed by an index (``model.safetensors.index.json``, whose ``weight_map``
gives each tensor's file). Readers point the loader at folders they downloaded, so every way such a folder
goes wrong gets a ValueError, TypeError or FileNotFoundError that names the file: a folder that is not
there or is a file; a file that is empty, a folder, not UTF-8, not JSON, or a JSON object with a repeated
key; a Git LFS pointer (the 130-byte text file that a clone without ``git-lfs`` leaves instead of the
weights); an index that names a shard that is missing, or tensors its shards do not hold; a weight file
that is truncated or is not what its name says; a ``.bin`` file whose pickle is more than tensors.
``.bin`` files are read with ``torch.load(..., weights_only=True)``, which never runs the code a pickle may
carry: a file it refuses is reported as unreadable, never executed.

``check_dtype`` and ``check_device`` check the ``dtype``/``device`` arguments of the loaders before any
file is read; ``check_config_fields`` checks the sizes and numbers of a ``config.json`` before
:func:`minitfm.pretrained.config_from_hf` reads them.
"""
from __future__ import annotations

import os
import pathlib

import torch

from minitfm.text.gpt2_files import LFS_POINTER, read_json_file

WEIGHT_FORMATS = (("model.safetensors.index.json", "model.safetensors"),
                  ("pytorch_model.bin.index.json", "pytorch_model.bin"))


def checkpoint_folder(directory, what: str = "a checkpoint folder (config.json and its weights)") -> pathlib.Path:
    """``directory`` as a Path: TypeError if not a path, FileNotFoundError if absent, ValueError if a file."""
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be the path of {what} (str or pathlib.Path), got {type(directory).__name__}")
    folder = pathlib.Path(directory).expanduser()
    if not folder.exists():
        raise FileNotFoundError(f"no folder {str(directory)!r} ({folder.absolute()}): expected {what}")
    if not folder.is_dir():
        raise ValueError(f"{folder} is a file, expected {what}")
    return folder


def check_dtype(dtype) -> torch.dtype:
    """``dtype`` if it is a floating-point ``torch.dtype`` (what weights are loaded as)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype such as torch.float32 or torch.bfloat16, got "
                        f"{type(dtype).__name__} {dtype!r}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype (weights are real numbers), got {dtype}")
    return dtype


def check_device(device) -> torch.device | None:
    """``device`` (None, a str such as ``"cuda:0"``, an int or a ``torch.device``) as a ``torch.device``,
    after checking that it names a kind of device torch knows and that this machine has it."""
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"device must be None, a str such as 'cpu' or 'cuda:0', an int or a torch.device, got "
                        f"{type(device).__name__} {device!r}")
    try:
        device = torch.device(device)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"device {device!r} is not a device torch knows ({error})") from None
    available = {"cuda": torch.cuda.is_available, "mps": lambda: torch.backends.mps.is_available()}
    if device.type in available and not available[device.type]():
        raise ValueError(f"device {str(device)!r}: this machine has no {device.type.upper()} device "
                         f"(use 'cpu', or minitfm.device.pick_device())")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def read_config(directory) -> dict:
    """The dict of ``config.json`` in the checkpoint folder ``directory``."""
    folder = checkpoint_folder(directory)
    path = folder / "config.json"
    if not path.exists():
        raise ValueError(f"{directory} has no config.json: a checkpoint folder needs one (what architecture, "
                         "what sizes)")
    config = read_json_file(path, "a config.json (one JSON object)")
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold one JSON object (setting -> value), got a {type(config).__name__}")
    return config


_SIZES = {"gpt2": ("n_embd", "n_head", "n_layer", "n_positions", "vocab_size"),
          "llama": ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                    "max_position_embeddings", "vocab_size")}
_OPTIONAL_SIZES = ("n_inner", "num_key_value_heads", "head_dim")
_POSITIVE_NUMBERS = ("layer_norm_epsilon", "rms_norm_eps", "rope_theta", "rope_local_base_freq", "query_pre_attn_scalar",
                     "sliding_window_pattern", "no_rope_layer_interval")
_NUMBERS = (*_POSITIVE_NUMBERS, "max_window_layers", "partial_rotary_factor", "num_local_experts", "num_experts",
            "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step")  # null is no number here
_FLAGS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
          "add_cross_attention")  # bool("false") is True: a str here would flip the setting silently
_NAMES = ("activation_function", "hidden_act", "model_type")


def check_config_fields(hf: dict, family: str) -> None:
    """ValueError naming the sizes a ``config.json`` lacks; TypeError/ValueError for a size that is not an int
    >= 1 (a bool, a float, a str), a flag that is not a bool, a name that is not a str, RoPE settings that are
    not an object, or an epsilon, RoPE base or factor that is not a number > 0."""
    missing = [key for key in _SIZES[family] if key not in hf]
    if missing:
        raise ValueError(f"this {family} config.json lacks {missing}: they give the model's sizes")
    null = [key for key in (*_SIZES[family], *_NUMBERS) if key in hf and hf[key] is None]
    if null:  # transformers would pass None on and fail later; a key left out takes the family's default
        raise ValueError(f"config.json sets {null} to null, where a number belongs: write the number, or leave the "
                         "key out to take the family's default")
    for key in (*_SIZES[family], *(k for k in _OPTIONAL_SIZES if hf.get(k) is not None)):
        value = hf[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"config.json: {key} must be an int, got {type(value).__name__} {value!r}")
        if value < 1:
            raise ValueError(f"config.json: {key} must be >= 1, got {value}")
    for key in (k for k in _FLAGS if hf.get(k) is not None):
        if not isinstance(hf[key], bool):
            raise TypeError(f"config.json: {key} must be true or false, got {type(hf[key]).__name__} {hf[key]!r}")
    for key in (k for k in _NAMES if hf.get(k) is not None):
        if not isinstance(hf[key], str):
            raise TypeError(f"config.json: {key} must be a str, got {type(hf[key]).__name__} {hf[key]!r}")
    for key in (k for k in ("rope_scaling", "rope_parameters") if hf.get(k) is not None):
        if not isinstance(hf[key], dict):
            raise TypeError(f"config.json: {key} must be an object (or null), got {type(hf[key]).__name__} "
                            f"{hf[key]!r}")
        factor = hf[key].get("factor")
        if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0):
            raise ValueError(f"config.json: {key}['factor'] must be a number > 0, got {factor!r}")
    for key in (k for k in _POSITIVE_NUMBERS if hf.get(k) is not None):
        value = hf[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"config.json: {key} must be a number > 0, got {type(value).__name__} {value!r}")


def read_state_dict(directory) -> dict:
    """The tensors of a checkpoint folder: ``model.safetensors``, ``pytorch_model.bin``, or their sharded index."""
    folder = checkpoint_folder(directory)
    for index_name, single in WEIGHT_FORMATS:
        if (folder / index_name).exists():
            return _read_shards(folder / index_name)
        if (folder / single).exists():
            return _read_weights(folder / single)
    raise ValueError(f"{folder} holds no weights: expected model.safetensors, pytorch_model.bin or a sharded index, "
                     f"found {sorted(p.name for p in folder.iterdir())[:10]}")


def _read_shards(index: pathlib.Path) -> dict:
    """The tensors of every shard an index names, checked against its ``weight_map``."""
    content = read_json_file(index, "a shard index (a JSON object with a 'weight_map')")
    weight_map = content.get("weight_map") if isinstance(content, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index} must hold a JSON object whose 'weight_map' maps each tensor name to its file, got "
                         f"{type(content).__name__ if weight_map is None else repr(weight_map)[:80]}")
    for key, name in weight_map.items():
        if not isinstance(name, str) or pathlib.PurePath(name).name != name or not name:
            raise ValueError(f"{index}: the weight_map gives {key!r} the file {name!r}, expected a file name in "
                             f"this folder")
    state: dict = {}
    for name in sorted(set(weight_map.values())):
        path = index.parent / name
        if not path.exists():
            raise FileNotFoundError(f"{index} names the shard {name!r} (for tensors such as "
                                    f"{next(k for k, v in weight_map.items() if v == name)!r}), which is not in "
                                    f"{index.parent}: an interrupted download?")
        for key, tensor in _read_weights(path).items():
            if key in state:
                raise ValueError(f"the tensor {key!r} is in two shards, {weight_map.get(key)!r} and {name!r}")
            state[key] = tensor
    listed, found = set(weight_map), set(state)
    if listed != found:
        missing, unlisted = sorted(listed - found), sorted(found - listed)
        raise ValueError(f"{index} does not match its shards: {len(missing)} tensors it lists are in no shard "
                         f"({missing[:4]}), {len(unlisted)} in the shards are not listed ({unlisted[:4]})")
    return state


def _read_weights(path: pathlib.Path) -> dict:
    """The tensors of one ``.safetensors`` or ``.bin`` file, each failure a ValueError naming the file."""
    if path.is_dir():
        raise ValueError(f"{path} is a folder, expected a weight file")
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path} is empty (0 bytes): an interrupted download?")
    with open(path, "rb") as file:
        head = file.read(len(LFS_POINTER))
    if head == LFS_POINTER.encode():
        raise ValueError(f"{path} is a Git LFS pointer ({size} bytes of text starting '{LFS_POINTER}'), not the "
                         f"weights: the repository was cloned without git-lfs; run 'git lfs pull' in it, or download "
                         f"the file itself")
    if path.suffix == ".safetensors":
        try:
            import safetensors.torch
        except ImportError:
            raise ImportError("minitfm.pretrained reads weights with safetensors: pip install safetensors") from None
        try:
            state = safetensors.torch.load_file(str(path))
        except Exception as error:  # safetensors' SafetensorError, or an OSError: the file is not whole
            raise ValueError(f"{path} is not a readable safetensors file ({size} bytes; {type(error).__name__}: "
                             f"{error}): truncated, or another format under this name?") from None
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # UnpicklingError (a pickle that is more than tensors), EOFError, RuntimeError
            raise ValueError(f"{path} cannot be read as PyTorch weights ({type(error).__name__}: "
                             f"{str(error).splitlines()[0][:200] if str(error) else ''}). It was loaded with "
                             f"weights_only=True, which never runs code a pickle carries: a truncated file, or one "
                             f"that holds more than tensors") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise ValueError(f"{path} must hold a dict of name -> tensor, got {type(state).__name__}"
                         + (f" holding {type(next(iter(state.values()))).__name__}" if isinstance(state, dict) and state
                            else ""))
    return state
