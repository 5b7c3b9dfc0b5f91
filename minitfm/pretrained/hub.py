"""Load a published checkpoint into the book's model, from a folder, a ``transformers`` model or the Hub; save back.

:func:`load` reads a folder, :func:`from_pretrained` a folder or (online) a Hub name, :func:`from_transformers`
converts a ``transformers`` model already in memory, and :func:`save_pretrained` writes a folder that
``transformers``' ``from_pretrained`` loads. :func:`load_tokenizer` reads GPT-2's ``vocab.json`` and
``merges.txt`` into :class:`minitfm.text.bpe_tokenizer.Tokenizer`. Every file is checked as it is read
(:mod:`minitfm.pretrained.files`). ``safetensors`` and ``huggingface_hub`` are imported on first use.
"""
from __future__ import annotations

import importlib
import json
import os
import pathlib
import re

import torch

from minitfm.config import ModelConfig
from minitfm.layers.positional import RotaryEmbedding
from minitfm.models import DecoderOnlyLM
from minitfm.pretrained.conventions import check_family, config_from_hf, config_to_hf, family_of
from minitfm.pretrained.gemma4 import decoder_class, language_state
from minitfm.pretrained.files import check_device, check_dtype, checkpoint_folder, read_config, read_state_dict
from minitfm.pretrained.weights import to_hf, to_minitfm, unfuse_experts


# ---- folders, the Hub and tokenizers --------------------------------------------------------------------------

def _safetensors():
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("minitfm.pretrained reads and writes weights with safetensors: pip install safetensors") from None
    return safetensors.torch


def load(directory: str | os.PathLike, *, dtype: torch.dtype = torch.float32, device=None) -> DecoderOnlyLM:
    """A :class:`DecoderOnlyLM` holding the checkpoint in ``directory`` (any family of ``FAMILIES``), in eval mode.

    ``dtype`` is what the model computes in, whatever the file stores: the default float32 upcasts a
    bfloat16 or float16 checkpoint (on purpose: the book compares logits with ``transformers`` in float32).
    Every file is checked as it is read (:mod:`minitfm.pretrained.files`): a damaged folder gets an error
    naming the file, never a model built from part of it."""
    check_dtype(dtype)
    check_device(device)
    hf_config = read_config(directory)
    config = config_from_hf(hf_config)
    state = language_state(hf_config, read_state_dict(directory))  # Gemma 4's multimodal files: the language model's
    return _build(config, to_minitfm(state, config, family_of(hf_config)), dtype, device)


def from_transformers(hf_model, *, dtype: torch.dtype = torch.float32, device=None) -> DecoderOnlyLM:
    """A :class:`DecoderOnlyLM` with the weights of a ``transformers`` model (any family minitfm loads) in memory."""
    check_dtype(dtype)
    check_device(device)
    config_dict = getattr(getattr(hf_model, "config", None), "to_dict", None)
    if config_dict is None or not hasattr(hf_model, "state_dict"):
        raise TypeError(f"hf_model must be a transformers model (GPT2LMHeadModel, LlamaForCausalLM), "
                        f"got {type(hf_model).__name__}")
    hf_config = config_dict()
    config, family = config_from_hf(hf_config), family_of(hf_config)
    state = {k: v.detach() for k, v in language_state(hf_config, hf_model.state_dict()).items()}  # Gemma 4: its LM
    state = unfuse_experts(state, family)  # MoE: as in the files
    return _build(config, to_minitfm(state, config, family), dtype, device)


def _build(config: ModelConfig, state: dict, dtype, device) -> DecoderOnlyLM:
    with torch.device("meta"):  # no random initialisation of weights that are replaced at once
        model = decoder_class(config)(config)  # Gemma 4's own model for config.gemma4
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight  # assign=True replaced the shared parameter by two
    _rebuild_buffers(model)
    return model.to(device).eval() if device is not None else model.eval()


def _rebuild_buffers(model: DecoderOnlyLM) -> None:
    """Non-persistent buffers (RoPE's frequencies) stayed on the meta device: recompute them on the device of
    the weights (a GPU when ``from_transformers`` converts a model that is on one)."""
    device = model.tok_emb.weight.device
    for rope in model.modules():  # the model's RoPEs, and latent attention's own
        if isinstance(rope, RotaryEmbedding):
            rope.inv_freq = rope.float32_inv_freq().to(device)
    left = [name for name, b in model.named_buffers() if b.device != device]
    if left:
        raise RuntimeError(f"buffers {left} were not rebuilt on {device} after loading")  # a new buffer in the library


def _is_local(name: str) -> bool:
    return pathlib.Path(name).expanduser().is_dir()


_REPO_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")  # "gpt2", "openai-community/gpt2"
_SAFETENSORS = ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"]
_PYTORCH_BIN = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]
_OTHER_FILES = ["config.json", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer.model"]


def _looks_like_a_path(name: str) -> bool:
    """A name that cannot be a Hub repository id: it starts with ``.``, ``/`` or ``~``, or is not ``owner/name``."""
    return name.startswith((".", "/", "~", os.sep)) or not _REPO_ID.match(name)


def _hub_error_kinds():
    """(the Hub's "no such repository or revision" errors, its gated-repository error, the errors of being offline)."""
    from huggingface_hub import errors

    offline = [errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled, ConnectionError, TimeoutError]
    for module_name in ("httpx2", "httpx", "requests"):  # the HTTP clients huggingface_hub versions use
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        kinds = [getattr(module, n, None) for n in ("TransportError", "ConnectionError", "Timeout")]
        offline += [k for k in kinds if isinstance(k, type) and issubclass(k, Exception)]
    return (errors.RepositoryNotFoundError, errors.RevisionNotFoundError), errors.GatedRepoError, tuple(offline)


def _snapshot(name: str, revision: str | None, patterns: list[str]) -> pathlib.Path:
    """``snapshot_download`` of the files matching ``patterns``, its failures told apart (the cause kept)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    not_found, gated, offline = _hub_error_kinds()
    at = f" at revision {revision!r}" if revision else ""
    try:
        return pathlib.Path(snapshot_download(name, revision=revision, allow_patterns=patterns))
    except gated as error:
        raise ValueError(f"the Hugging Face Hub repository {name!r} is gated: accept its terms on its page, then log "
                         "in (hf auth login) or set HF_TOKEN") from error
    except not_found as error:
        raise ValueError(f"the Hugging Face Hub has no model {name!r}{at} (or it is private), and there is no "
                         f"local folder {name!r} either") from error
    except HFValidationError as error:
        raise ValueError(f"{name!r} is not a Hugging Face Hub name (owner/name): {error}") from error
    except offline as error:
        flag = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        raise ConnectionError(
            f"could not fetch {name!r}{at} from the Hugging Face Hub ({type(error).__name__}"
            f"{': HF_HUB_OFFLINE is set' if flag else ''}), and it is not in the local cache. Loading by name needs "
            f"the network once; offline, pass the path of a checkpoint folder (config.json and model.safetensors) "
            f"instead (there is no local folder {name!r})") from error


def download(name: str, *, revision: str | None = None) -> pathlib.Path:
    """The local folder of Hub model ``name`` (downloaded once, then cached by huggingface_hub).

    It fetches ``config.json``, the tokenizer files and one weight format: ``model.safetensors`` (or its
    shards), else ``pytorch_model.bin`` (or its shards) for repositories that have no safetensors.

    Raises:
        ValueError: no such repository or revision on the Hub (or it is private), or it is gated.
        ConnectionError: offline (no network, or ``HF_HUB_OFFLINE=1``) and the model is not cached.
    """
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"name must be a Hub model name such as 'gpt2' (a non-empty str), got {type(name).__name__} "
                        f"{name!r}")
    if revision is not None and not isinstance(revision, str):
        raise TypeError(f"revision must be None or a str (a branch, tag or commit), got {type(revision).__name__}")
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise ImportError("loading a model by name needs huggingface_hub: pip install huggingface_hub "
                          "(or pass the path of a local checkpoint folder)") from None
    folder = _snapshot(name, revision, _OTHER_FILES + _SAFETENSORS)
    if not any(folder.glob("model*.safetensors")):  # a repository with PyTorch's .bin weights only
        folder = _snapshot(name, revision, _OTHER_FILES + _PYTORCH_BIN)
    return folder


def from_pretrained(name_or_path: str | os.PathLike, *, dtype: torch.dtype = torch.float32, device=None,
                    revision: str | None = None) -> DecoderOnlyLM:
    """Load ``"gpt2"``-style Hub names (online) or a local checkpoint folder into minitfm.

    A folder that exists is read; a name that cannot be a Hub repository id (it starts with ``.``, ``/`` or
    ``~``, or is not ``owner/name``), or an ``os.PathLike``, is a path, and a FileNotFoundError names it when
    it is no folder. Other names go to the Hub: see :func:`download` for its errors."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path must be a Hub name or a folder, got {type(name_or_path).__name__}")
    if revision is not None and not isinstance(revision, str):
        raise TypeError(f"revision must be None or a str (a branch, tag or commit), got {type(revision).__name__}")
    check_dtype(dtype)
    check_device(device)
    name = os.fspath(name_or_path)
    if not name.strip():
        raise ValueError("name_or_path is empty: expected a Hub name such as 'gpt2' or a checkpoint folder")
    if _is_local(name) or pathlib.Path(name).expanduser().is_file():  # a file: load names it as no folder
        return load(pathlib.Path(name).expanduser(), dtype=dtype, device=device)
    if not isinstance(name_or_path, str) or _looks_like_a_path(name):
        raise FileNotFoundError(f"no checkpoint folder at {name!r} ({pathlib.Path(name).expanduser().absolute()}); "
                                "a path is read locally and never looked up on the Hub")
    return load(download(name, revision=revision), dtype=dtype, device=device)


def save_pretrained(model: DecoderOnlyLM, directory: str | os.PathLike, family: str | None = None) -> pathlib.Path:
    """Write ``config.json`` and ``model.safetensors`` that ``transformers``' ``from_pretrained`` loads, in the
    layout of ``family`` (a ``model_type`` such as ``"phi3"``; by default the first family that holds the model)."""
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be a DecoderOnlyLM, got {type(model).__name__}")
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a folder's path (str or pathlib.Path), got {type(directory).__name__}")
    folder = pathlib.Path(directory).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file, expected a folder to write config.json and model.safetensors into")
    family = check_family(model.config, family)
    hf_config = config_to_hf(model.config, family)  # checked, and the tensors converted, before anything is written
    state = {k: v.detach().cpu().contiguous() for k, v in to_hf(model.state_dict(), model.config, family).items()}
    folder.mkdir(parents=True, exist_ok=True)
    _safetensors().save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
    return folder


def load_tokenizer(directory: str | os.PathLike):
    """The tokenizer of a checkpoint folder, its ids equal to ``transformers``': a ``tokenizer.json`` (GPT-2, Llama
    2/3, Qwen, Mistral, Gemma: :func:`minitfm.text.tokenizer_json.read_tokenizer_json`), else GPT-2's
    ``vocab.json`` and ``merges.txt`` (:class:`minitfm.text.bpe_tokenizer.Tokenizer`), else SentencePiece's
    ``tokenizer.model`` (:func:`minitfm.text.sentencepiece_model.read_sentencepiece_model`).

    ``tokenizer.json`` goes first: Qwen's folders also hold a vocab.json and merges.txt, which lack its regex
    and its special tokens."""
    from minitfm.text.bpe_tokenizer import Tokenizer
    from minitfm.text.sentencepiece_model import read_sentencepiece_model
    from minitfm.text.tokenizer_json import read_tokenizer_json

    folder = checkpoint_folder(directory, "a folder holding tokenizer files")
    if (folder / "tokenizer.json").exists():
        return read_tokenizer_json(folder / "tokenizer.json")
    if (folder / "vocab.json").exists() and (folder / "merges.txt").exists():
        return Tokenizer.load(folder)
    if (folder / "tokenizer.model").exists():
        return read_sentencepiece_model(folder / "tokenizer.model")
    missing = [n for n in ("vocab.json", "merges.txt") if not (folder / n).exists()]
    raise ValueError(f"{folder} lacks {missing}, tokenizer.json and tokenizer.model: minitfm reads a Hugging Face "
                     "tokenizer.json, GPT-2's byte-level BPE files or a SentencePiece BPE tokenizer.model")
