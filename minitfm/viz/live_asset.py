"""The live model's asset format: a trained ``DecoderOnlyLM`` and its tokenizer as the bytes the page's engine reads.

An asset is ``NAME.bin`` (every tensor, little-endian float16 or float32, a tied head stored once) and its header
``NAME.json`` (the format and its version, dtype, the config fields the engine reads, each tensor's name, shape and
byte offset, the tokenizer as JSON, the sha256 of the data and of the checkpoint it came from).
:func:`encode_asset` writes one in memory, :func:`save_asset` and :func:`read_asset` put it on disk and read it back,
:func:`model_from_asset` rebuilds the model exactly as the page computes it, and :func:`rounding_error` measures what
float16 weights cost. :func:`check_supported` refuses a model the engine (``live_engine.js``) does not compute
exactly. Which models the book ships, and the page around them, are ``minitfm.viz.live_model``'s.

Glossary: B batch, T tokens, V vocab_size.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from minitfm.config import ModelConfig
from minitfm.models import DecoderOnlyLM
from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.words import WordTokenizer

FORMAT, FORMAT_VERSION = "minitfm-live", 1
ASSETS = Path(__file__).parent / "live_assets"
SUPPORTED = {"norm": ("rms", "layer"), "pos": ("rope", "learned"), "ffn": ("swiglu", "gelu", "gelu_tanh")}
# the config fields live_model.js reads; every other field must keep its default (dropout and attn_impl aside)
ENGINE_FIELDS = ("vocab_size", "d_model", "n_heads", "n_kv_heads", "d_ff", "n_layers", "max_seq_len", "norm",
                 "norm_first", "pos", "ffn", "bias", "tie_embeddings", "scale_embeddings", "rope_base", "rope_scale",
                 "norm_eps", "pad_id", "bos_id", "eos_id")
_IGNORED = ("dropout", "attn_impl", "n_encoder_layers", "n_decoder_layers")
DTYPES = {"float16": "<f2", "float32": "<f4"}


def check_supported(model) -> None:
    """TypeError/ValueError unless ``live_model.js`` computes ``model`` exactly: a DecoderOnlyLM, Pre-LN, with
    ``norm`` in rms/layer, ``pos`` in rope/learned and ``ffn`` in swiglu/gelu/gelu_tanh (any heads, biases, tying)."""
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"the live engine runs a minitfm DecoderOnlyLM, got {type(model).__name__}")
    c = model.config
    for field, allowed in SUPPORTED.items():
        if getattr(c, field) not in allowed:
            raise ValueError(f"the live engine computes {field} in {allowed}, got {field}={getattr(c, field)!r}")
    if not c.norm_first:
        raise ValueError("the live engine computes Pre-LN blocks (norm_first=True), got norm_first=False")
    for f in dataclasses.fields(c):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.name not in ENGINE_FIELDS + _IGNORED and getattr(c, f.name) != default:
            raise ValueError(f"the live engine does not compute {f.name}={getattr(c, f.name)!r} (only the default "
                             f"{default!r})")


def tokenizer_spec(tokenizer) -> dict:
    """The tokenizer as JSON for ``live_model.js``: a WordTokenizer's words, or a byte-level BPE's merges by rank."""
    if isinstance(tokenizer, WordTokenizer):
        return {"kind": "word", "itos": list(tokenizer.itos), "pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id,
                "eos_id": tokenizer.eos_id, "unk_id": tokenizer.unk_id, "add_bos": True}
    if isinstance(tokenizer, Tokenizer):
        ids = tokenizer.token_to_id
        return {"kind": "bpe", "vocab": [[i, tokenizer.vocab[i].hex()] for i in sorted(tokenizer.vocab)],
                "merges": [[ids[a], ids[b], ids[a + b]] for a, b in tokenizer.merges],
                "byte_ids": [ids[bytes([b])] for b in range(256)],
                "special_tokens": [[t, tokenizer.special_ids[t]] for t in tokenizer.special_tokens]}
    raise TypeError(f"tokenizer must be a WordTokenizer or a byte-level BPE Tokenizer, got {type(tokenizer).__name__}")


def encode_asset(model, tokenizer, name: str, dtype: str = "float32", *, source: Path | None = None,
                 description: dict | None = None) -> tuple[dict, bytes]:
    """``(header, data)`` of an asset: the model's tensors as ``dtype`` bytes and the JSON header describing them."""
    check_supported(model)
    config = {name: getattr(model.config, name) for name in ENGINE_FIELDS}  # every other field holds its default
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    c = model.config
    if tokenizer is not None and tokenizer.vocab_size != c.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens, the model's vocab_size is {c.vocab_size}")
    table, chunks, offset = [], [], 0
    state = {k: v for k, v in model.state_dict().items() if not (c.tie_embeddings and k == "lm_head.weight")}
    for key, tensor in state.items():  # a tied head is the embedding: stored once
        raw = np.ascontiguousarray(tensor.detach().cpu().float().numpy(), dtype=DTYPES[dtype]).tobytes()
        table.append({"name": key, "shape": list(tensor.shape), "offset": offset})
        chunks.append(raw)
        offset += len(raw)
    data = b"".join(chunks)
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": name, "description": description or {},
              "dtype": dtype, "nbytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
              "parameters": sum(int(np.prod(t["shape"])) for t in table), "config": config, "tensors": table,
              "tokenizer": None if tokenizer is None else tokenizer_spec(tokenizer),
              "source": None if source is None else {"file": Path(source).name,
                                                          "sha256": hashlib.sha256(Path(source).read_bytes()).hexdigest()}}
    return header, data


def _rebuild(header: dict, data: bytes) -> DecoderOnlyLM:
    """A float32 DecoderOnlyLM holding the asset's weights (rounded as the page holds them), in eval mode."""
    rebuilt = DecoderOnlyLM(ModelConfig.from_dict(header["config"])).eval()
    rebuilt.load_state_dict(_state(header, data), strict=True)
    return rebuilt


def _state(header: dict, data: bytes) -> dict[str, torch.Tensor]:
    dtype, state = np.dtype(DTYPES[header["dtype"]]), {}
    for t in header["tensors"]:
        count = int(np.prod(t["shape"]))
        values = np.frombuffer(data, dtype=dtype, count=count, offset=t["offset"]).astype(np.float32)
        state[t["name"]] = torch.from_numpy(values.copy()).reshape(t["shape"])
    if header["config"]["tie_embeddings"]:
        state["lm_head.weight"] = state["tok_emb.weight"]
    return state


def rounding_error(model, header: dict, data: bytes, tokens: torch.Tensor) -> dict:
    """How far the asset's weights move the model: max |Δ logit| and max |Δ probability| over ``tokens`` (B, T),
    and how many greedy next tokens stay the same, against the model in float32."""
    rebuilt, was_training = _rebuild(header, data), model.training
    with torch.no_grad():
        exact, rounded = model.eval()(tokens), rebuilt(tokens)
    model.train(was_training)
    keep = tokens != (model.config.pad_id if model.config.pad_id is not None else -1)
    return {"max_abs_logit": float((exact - rounded).abs()[keep].max()),
            "max_abs_prob": float((exact.softmax(-1) - rounded.softmax(-1)).abs()[keep].max()),
            "same_argmax": int((exact.argmax(-1) == rounded.argmax(-1))[keep].sum()), "positions": int(keep.sum())}


def save_asset(header: dict, data: bytes, folder: Path) -> tuple[Path, Path]:
    """Write an :func:`encode_asset` result as ``NAME.json`` and ``NAME.bin`` (NAME = ``header["name"]``)."""
    folder, name = Path(folder), header["name"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.bin").write_bytes(data)
    (folder / f"{name}.json").write_text(json.dumps(header, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder / f"{name}.json", folder / f"{name}.bin"


def read_asset(name: str = "small_lm", folder: Path = ASSETS) -> tuple[dict, bytes]:
    """``(header, data)`` of the asset on disk; ValueError if the .bin does not match its header."""
    path = Path(folder) / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no live asset {path}; write it with `python -m minitfm.viz.live_model write`")
    header = json.loads(path.read_text(encoding="utf-8"))
    if header.get("format") != FORMAT or header.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path} is not a {FORMAT} v{FORMAT_VERSION} header, got {header.get('format')!r} "
                         f"v{header.get('format_version')!r}")
    data = path.with_suffix(".bin").read_bytes()
    if len(data) != header["nbytes"] or hashlib.sha256(data).hexdigest() != header["sha256"]:
        raise ValueError(f"{path.with_suffix('.bin')} does not match its header (size or sha256): rewrite the asset")
    return header, data


def model_from_asset(name: str = "small_lm", folder: Path = ASSETS) -> DecoderOnlyLM:
    """The model exactly as the page computes it: the asset's (rounded) weights in a float32 DecoderOnlyLM."""
    return _rebuild(*read_asset(name, folder))
