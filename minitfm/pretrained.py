"""Published checkpoints in minitfm: GPT-2 and Llama load into :class:`~minitfm.models.DecoderOnlyLM`, and back.

Glossary: V vocabulary, D d_model, H query heads, H_kv key/value heads, Dh = D / H, F FFN hidden size, L layers.

A Hugging Face checkpoint is a folder: ``config.json`` (the architecture) and the weights
(``model.safetensors``, ``pytorch_model.bin``, or shards with an index). minitfm's models compute the same
functions as GPT-2 and Llama; only conventions differ (how a matrix is stored, which pairs RoPE rotates,
whether embeddings are scaled). Every difference is handled here, in one place, and listed in
:data:`CONVENTIONS` (``conventions_table()`` prints it as a table):

- :func:`config_from_hf` turns a ``config.json`` into a :class:`~minitfm.config.ModelConfig` (or says which
  setting minitfm does not have);
- :func:`key_map` is the table of rules, one per published tensor: its key, the minitfm key(s) it becomes,
  and the transformation (``copy``, ``transpose``, ``split q|k|v``, ``rotate-half -> pairs``);
- :func:`to_minitfm` / :func:`to_hf` apply the rules in either direction, after checking that no key is
  missing or extra and that every shape fits;
- :func:`load` / :func:`from_pretrained` read a folder (or, online, a Hub name) into a model, and
  :func:`from_transformers` converts a ``transformers`` model already in memory;
  :func:`save_pretrained` writes a folder that ``transformers``' ``from_pretrained`` loads;
- :func:`load_tokenizer` reads GPT-2's ``vocab.json`` and ``merges.txt`` into :class:`minitfm.bpe_tokenizer.Tokenizer`.

Reading the folder's files, and checking every way one can be damaged (an LFS pointer, a truncated file, a
shard index pointing nowhere, a pickle that is more than tensors), lives in :mod:`minitfm.checkpoint_files`.

``transformers`` is not needed for any of this; ``safetensors`` reads and writes the weights and
``huggingface_hub`` downloads by name. They are imported here, on first use, so ``import minitfm`` stays light.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pathlib
import re
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .checkpoint_files import (check_config_fields, check_device, check_dtype, checkpoint_folder,  # noqa: F401
                               read_config, read_state_dict)
from .config import ModelConfig
from .models import DecoderOnlyLM

FAMILIES = ("gpt2", "llama")
LLAMA_TYPES = ("llama", "mistral")  # Mistral without a sliding window is a Llama with GQA

# (what differs, the published model, minitfm, what the loader does)
CONVENTIONS = [
    ("linear layers", "GPT-2's Conv1D stores a weight as (in, out)", "nn.Linear stores (out, in)",
     "transpose every Conv1D weight"),
    ("q, k, v", "GPT-2's c_attn is one (D, 3D) matrix, q then k then v", "q_proj, k_proj, v_proj",
     "split c_attn (and its bias) in three"),
    ("positions", "GPT-2: learned (wpe); Llama: RoPE", "pos='learned' / pos='rope'", "copy wpe; see RoPE pairs"),
    ("RoPE pairs", "Llama (HF) rotates halves: (x_i, x_{i + Dh/2})", "adjacent pairs: (x_2i, x_2i+1)",
     "permute the rows of q_proj and k_proj inside every head (the math is the same)"),
    ("RoPE base", "rope_theta (10000 in Llama 2, 500000 in Llama 3)", "rope_base", "copy"),
    ("embedding scale", "token vectors used as they are", "times sqrt(D) by default (the paper)",
     "scale_embeddings=False"),
    ("output head", "GPT-2 ties it to wte; Llama: tie_word_embeddings", "tie_embeddings", "copy the flag"),
    ("norm", "GPT-2: LayerNorm, eps 1e-5; Llama: RMSNorm, rms_norm_eps (1e-5 or 1e-6)", "norm, norm_eps",
     "copy"),
    ("FFN", "GPT-2: gelu_new (the tanh GELU), F = 4D; Llama: SwiGLU (silu), intermediate_size",
     "ffn='gelu_tanh' / 'swiglu', d_ff", "copy"),
    ("attention heads", "Llama: num_key_value_heads (grouped-query attention)", "n_kv_heads", "copy"),
    ("biases", "GPT-2: everywhere; Llama: attention_bias, mlp_bias (off)", "bias (one flag)",
     "copy; refuse attention_bias != mlp_bias"),
    ("special tokens", "GPT-2: one <|endoftext|> (50256) starts and ends, no pad token", "bos_id, eos_id, pad_id",
     "bos_id = eos_id, pad_id=None"),
    ("buffers", "old files keep attn.bias, attn.masked_bias, rotary_emb.inv_freq", "recomputed", "skip them"),
]


def conventions_table() -> str:
    """:data:`CONVENTIONS` as a Markdown table."""
    rows = ["| difference | published checkpoint | minitfm | the loader |", "| --- | --- | --- | --- |"]
    rows += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in CONVENTIONS]
    return "\n".join(rows)


# ---- configs ---------------------------------------------------------------------------------------------------

def family_of(hf_config: dict) -> str:
    """``"gpt2"`` or ``"llama"`` for a ``config.json`` dict; ValueError for any other architecture."""
    if not isinstance(hf_config, dict):
        raise TypeError(f"hf_config must be the dict of a config.json, got {type(hf_config).__name__}")
    model_type = hf_config.get("model_type")
    if model_type == "gpt2":
        return "gpt2"
    if model_type in LLAMA_TYPES:
        return "llama"
    raise ValueError(f"minitfm.pretrained loads GPT-2 and Llama checkpoints (model_type 'gpt2', "
                     f"{', '.join(repr(t) for t in LLAMA_TYPES)}), got model_type={model_type!r}")


def _refuse(condition: bool, setting: str, value, why: str) -> None:
    if condition:
        raise ValueError(f"this checkpoint sets {setting}={value!r}, which minitfm's models do not have ({why})")


def _rope_settings(hf: dict) -> tuple[float, float]:
    """(rope_base, rope_scale) from either ``rope_parameters`` (transformers 5) or ``rope_theta``/``rope_scaling``."""
    params = dict(hf.get("rope_parameters") or {})
    scaling = hf.get("rope_scaling") or {}
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    kind = params.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    factor = params.get("factor", scaling.get("factor", 1.0))
    if kind == "linear":
        return float(theta), float(factor)
    _refuse(kind != "default", "rope_type", kind, "minitfm's RoPE knows 'default' and 'linear' (position "
            "interpolation) only")
    return float(theta), 1.0


def _special(hf: dict, vocab: int) -> dict:
    out = {}
    for name, key in (("bos_id", "bos_token_id"), ("eos_id", "eos_token_id"), ("pad_id", "pad_token_id")):
        value = hf.get(key)
        if isinstance(value, list):  # Llama 3 lists several end-of-text ids; the first is the one written
            value = value[0] if value else None
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"config.json: {key} must be an int id (or a list of them), got {type(value).__name__} "
                            f"{value!r}")
        if value is not None and not 0 <= value < vocab:
            raise ValueError(f"{key}={value} is not an id of the vocabulary (vocab_size={vocab})")
        out[name] = None if value is None else int(value)
    bos = out["bos_id"] if out["bos_id"] is not None else out["eos_id"]
    eos = out["eos_id"] if out["eos_id"] is not None else bos
    if bos is None:
        bos = eos = 0
    pad = out["pad_id"]
    if pad in (bos, eos):
        pad = None  # a pad that is also <bos>/<eos> (a common GPT-2 set-up) is no padding token of its own
    return {"bos_id": bos, "eos_id": eos, "pad_id": pad}


def config_from_hf(hf_config: dict) -> ModelConfig:
    """The :class:`ModelConfig` of a GPT-2 or Llama ``config.json`` (dropout off: these are for inference)."""
    family = family_of(hf_config)
    hf = hf_config
    check_config_fields(hf, family)
    if family == "gpt2":
        act = hf.get("activation_function", "gelu_new")
        ffn = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}.get(act)
        _refuse(ffn is None, "activation_function", act, "minitfm has gelu_new/gelu_pytorch_tanh, gelu and relu")
        _refuse(not hf.get("scale_attn_weights", True), "scale_attn_weights", False, "scores are always / sqrt(Dh)")
        _refuse(bool(hf.get("scale_attn_by_inverse_layer_idx", False)), "scale_attn_by_inverse_layer_idx", True,
                "no per-layer score scaling")
        _refuse(bool(hf.get("add_cross_attention", False)), "add_cross_attention", True, "decoder-only")
        d, vocab = hf["n_embd"], hf["vocab_size"]
        return ModelConfig(
            vocab_size=vocab, d_model=d, n_heads=hf["n_head"], d_ff=hf.get("n_inner") or 4 * d,
            n_layers=hf["n_layer"], max_seq_len=hf["n_positions"], norm="layer", norm_first=True, pos="learned",
            ffn=ffn, bias=True, dropout=0.0, tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
            scale_embeddings=False, norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)), **_special(hf, vocab))
    _refuse(hf.get("hidden_act", "silu") != "silu", "hidden_act", hf.get("hidden_act"), "SwiGLU uses silu")
    _refuse(hf.get("sliding_window") is not None, "sliding_window", hf.get("sliding_window"),
            "attention sees the whole past")
    d, heads, vocab = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"]
    head_dim = hf.get("head_dim") or d // heads
    _refuse(head_dim * heads != d, "head_dim", head_dim, f"Dh = hidden_size / num_attention_heads = {d // heads}")
    attn_bias, mlp_bias = bool(hf.get("attention_bias", False)), bool(hf.get("mlp_bias", False))
    _refuse(attn_bias != mlp_bias, "attention_bias/mlp_bias", (attn_bias, mlp_bias), "one bias flag for both")
    base, scale = _rope_settings(hf)
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=hf.get("num_key_value_heads") or heads,
        d_ff=hf["intermediate_size"], n_layers=hf["num_hidden_layers"], max_seq_len=hf["max_position_embeddings"],
        norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=attn_bias, dropout=0.0,
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)), scale_embeddings=False, rope_base=base,
        rope_scale=scale, norm_eps=float(hf.get("rms_norm_eps", 1e-6)), **_special(hf, vocab))


def _architecture(config: ModelConfig) -> ModelConfig:
    """``config`` resolved, with the fields that do not change the function a decoder-only LM computes set to
    fixed values: dropout, attn_impl, pad_id, the encoder-decoder depths, and RoPE's base and scale when
    positions are not RoPE."""
    c = config.resolved()
    blank = dict(dropout=0.0, attn_impl="manual", pad_id=None, n_encoder_layers=c.n_layers,
                 n_decoder_layers=c.n_layers)
    if c.pos != "rope":
        blank.update(rope_base=10000.0, rope_scale=1.0)
    return dataclasses.replace(c, **blank)


def _lost_in(config: ModelConfig, family: str) -> dict:
    """The settings of ``config`` that a ``config.json`` of ``family`` cannot hold: those that change when the
    config is written in that family's terms and read back ({} when the family holds the whole model)."""
    want = _architecture(config)
    try:
        back = _architecture(config_from_hf(_config_json(want, family)))
    except ValueError as error:  # e.g. an odd head width read back as a Llama (RoPE needs an even one)
        return {"config.json": str(error)}
    return {f.name: getattr(want, f.name) for f in dataclasses.fields(want)
            if getattr(want, f.name) != getattr(back, f.name)}


def model_family(config: ModelConfig) -> str:
    """Which published family a minitfm config matches (``"gpt2"`` or ``"llama"``); ValueError otherwise.

    A family matches when writing the config as that family's ``config.json`` and reading it back
    (:func:`config_from_hf`) gives the same architecture, so every setting the family lacks (grouped-query
    attention in GPT-2, Llama without SwiGLU, scaled embeddings, Post-LN ...) is refused, and the error
    names it."""
    _check_config(config)
    differences = {}
    for family in FAMILIES:
        lost = _lost_in(config, family)
        if not lost:
            return family
        differences[family] = lost
    raise ValueError("this model matches neither GPT-2 (norm='layer', pos='learned', bias=True, a GELU/ReLU FFN, "
                     "n_kv_heads = n_heads, scale_embeddings=False) nor Llama (norm='rms', pos='rope', ffn='swiglu', "
                     f"scale_embeddings=False); it differs in {differences}")


def config_to_hf(config: ModelConfig) -> dict:
    """The ``config.json`` dict that ``transformers`` needs to build the same model."""
    return _config_json(config, model_family(config))


def _config_json(config: ModelConfig, family: str) -> dict:
    """``config`` written as ``family``'s ``config.json``; a setting the family lacks is left out (so
    :func:`model_family` sees it change on the way back)."""
    c = config.resolved()
    special = {"bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id}
    if family == "gpt2":
        act = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}.get(c.ffn, "gelu_new")
        return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": c.vocab_size,
                "n_positions": c.max_seq_len, "n_embd": c.d_model, "n_layer": c.n_layers, "n_head": c.n_heads,
                "n_inner": c.d_ff, "activation_function": act, "layer_norm_epsilon": c.norm_eps,
                "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
                "tie_word_embeddings": c.tie_embeddings, **special}
    rope = {"rope_theta": c.rope_base, "rope_type": "default"}
    if c.rope_scale != 1.0:
        rope = {"rope_theta": c.rope_base, "rope_type": "linear", "factor": c.rope_scale}
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
            "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.d_head,
            "hidden_act": "silu", "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps,
            "rope_parameters": rope, "rope_theta": c.rope_base,
            "rope_scaling": None if c.rope_scale == 1.0 else {"rope_type": "linear", "factor": c.rope_scale},
            "attention_bias": c.bias, "mlp_bias": c.bias, "attention_dropout": 0.0,
            "tie_word_embeddings": c.tie_embeddings, **special}


# ---- the key map -----------------------------------------------------------------------------------------------

def split_fused_qkv(weight: torch.Tensor, d_model: int) -> list[torch.Tensor]:
    """GPT-2's c_attn (Conv1D, (D, 3D), or its (3D,) bias) -> q, k, v as nn.Linear weights ((D, D)) or biases.

    ValueError for any other shape (a fused q|k|v of grouped-query attention, (D, D + 2 D_kv), is not GPT-2's)."""
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
        raise ValueError(f"d_model must be an int >= 1, got {d_model!r}")
    want = (3 * d_model,) if weight.dim() == 1 else (d_model, 3 * d_model)
    if tuple(weight.shape) != want:
        raise ValueError(f"GPT-2's c_attn holds q, k and v of width d_model={d_model} side by side: expected shape "
                         f"{want}, got {tuple(weight.shape)}")
    if weight.dim() == 1:
        return list(weight.split(d_model))  # (3D,) -> 3 x (D,)
    return [w.t().contiguous() for w in weight.split(d_model, dim=1)]  # (D, 3D) -> 3 x (D_in, D) -> (D, D_in)


def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`split_fused_qkv`; ValueError unless q, k and v have one shape (D, D) or (D,)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    shapes = [tuple(t.shape) for t in (q, k, v)]
    if len(set(shapes)) != 1 or len(shapes[0]) not in (1, 2) or (len(shapes[0]) == 2 and shapes[0][0] != shapes[0][1]):
        raise ValueError(f"GPT-2's c_attn fuses three (D, D) projections (or (D,) biases), got q {shapes[0]}, "
                         f"k {shapes[1]}, v {shapes[2]} (grouped-query attention has no GPT-2 layout)")
    if q.dim() == 1:
        return torch.cat([q, k, v])
    return torch.cat([q.t(), k.t(), v.t()], dim=1).contiguous()


def rotate_half_permutation(d_head: int) -> torch.Tensor:
    """Row order that turns a rotate-half head (pairs (i, i + Dh/2)) into adjacent pairs (2i, 2i + 1).

    minitfm's row 2i is the published row i and its row 2i + 1 the published row i + Dh/2: both then turn
    with frequency i, so every rotation, and every score q . k, is unchanged."""
    if isinstance(d_head, bool) or not isinstance(d_head, int) or d_head < 2 or d_head % 2:
        raise ValueError(f"d_head must be an even int >= 2 (RoPE turns pairs), got {d_head!r}")
    half = d_head // 2
    return torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).flatten()  # [0, h, 1, h+1, ...]


def _head_width(weight: torch.Tensor, n_heads: int) -> int:
    """Dh of a q_proj/k_proj weight (rows = n_heads * Dh) or bias; ValueError unless Dh is a whole even number."""
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    rows = weight.shape[0] if weight.dim() else 0
    if weight.dim() not in (1, 2) or rows == 0 or rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(f"a q_proj/k_proj weight (or bias) has n_heads * Dh rows with an even head width Dh: "
                         f"shape {tuple(weight.shape)} is not {n_heads} heads of an even width")
    return rows // n_heads


def from_rotate_half(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """q_proj/k_proj rows (or bias) of a rotate-half checkpoint, reordered for minitfm's adjacent pairs."""
    d_head = _head_width(weight, n_heads)
    perm = rotate_half_permutation(d_head).to(weight.device)
    return weight.reshape(n_heads, d_head, *weight.shape[1:])[:, perm].reshape(weight.shape).contiguous()


def to_rotate_half(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of :func:`from_rotate_half`."""
    d_head = _head_width(weight, n_heads)
    inverse = torch.argsort(rotate_half_permutation(d_head)).to(weight.device)
    return weight.reshape(n_heads, d_head, *weight.shape[1:])[:, inverse].reshape(weight.shape).contiguous()


@dataclass(frozen=True)
class Rule:
    """One published tensor: where it goes in minitfm and how it is transformed there and back."""

    hf_key: str
    minitfm_keys: tuple[str, ...]
    how: str  # what the chapter's table shows
    to_minitfm: Optional[Callable] = None  # tensor -> list of tensors, one per minitfm key
    to_hf: Optional[Callable] = None  # list of tensors -> tensor
    hf_shape: Optional[tuple] = None  # the published tensor's shape for this config (filled in by key_map)


def _copy(hf_key: str, key: str) -> Rule:
    return Rule(hf_key, (key,), "copy", lambda t: [t], lambda ts: ts[0])


def _transposed(hf_key: str, key: str) -> Rule:
    return Rule(hf_key, (key,), "transpose", lambda t: [t.t().contiguous()], lambda ts: ts[0].t().contiguous())


def _gpt2_rules(c: ModelConfig) -> list[Rule]:
    rules = [_copy("transformer.wte.weight", "tok_emb.weight"), _copy("transformer.wpe.weight", "pos_emb.emb.weight")]
    for i in range(c.n_layers):
        h, m = f"transformer.h.{i}.", f"layers.{i}."
        for part in ("weight", "bias"):
            qkv = tuple(f"{m}self_attn.{p}_proj.{part}" for p in "qkv")
            rules.append(Rule(f"{h}attn.c_attn.{part}", qkv, "split q|k|v" + (" + transpose" if part == "weight" else ""),
                              lambda t: split_fused_qkv(t, c.d_model), lambda ts: fuse_qkv(*ts)))
            rules.append(_copy(f"{h}ln_1.{part}", f"{m}attn_norm.{part}"))
            rules.append(_copy(f"{h}ln_2.{part}", f"{m}ffn_norm.{part}"))
        rules += [_transposed(f"{h}attn.c_proj.weight", f"{m}self_attn.out_proj.weight"),
                  _copy(f"{h}attn.c_proj.bias", f"{m}self_attn.out_proj.bias"),
                  _transposed(f"{h}mlp.c_fc.weight", f"{m}ffn.up_proj.weight"),
                  _copy(f"{h}mlp.c_fc.bias", f"{m}ffn.up_proj.bias"),
                  _transposed(f"{h}mlp.c_proj.weight", f"{m}ffn.down_proj.weight"),
                  _copy(f"{h}mlp.c_proj.bias", f"{m}ffn.down_proj.bias")]
    rules += [_copy("transformer.ln_f.weight", "final_norm.weight"), _copy("transformer.ln_f.bias", "final_norm.bias")]
    if not c.tie_embeddings:
        rules.append(_copy("lm_head.weight", "lm_head.weight"))
    return rules


def _llama_rules(c: ModelConfig) -> list[Rule]:
    rules = [_copy("model.embed_tokens.weight", "tok_emb.weight")]
    parts = ("weight", "bias") if c.bias else ("weight",)
    for i in range(c.n_layers):
        h, m = f"model.layers.{i}.", f"layers.{i}."
        for part in parts:
            for name, heads in (("q", c.n_heads), ("k", c.n_kv_heads)):
                rules.append(Rule(f"{h}self_attn.{name}_proj.{part}", (f"{m}self_attn.{name}_proj.{part}",),
                                  "rotate-half -> pairs",
                                  lambda t, n=heads: [from_rotate_half(t, n)],
                                  lambda ts, n=heads: to_rotate_half(ts[0], n)))
            rules += [_copy(f"{h}self_attn.v_proj.{part}", f"{m}self_attn.v_proj.{part}"),
                      _copy(f"{h}self_attn.o_proj.{part}", f"{m}self_attn.out_proj.{part}")]
            rules += [_copy(f"{h}mlp.{p}_proj.{part}", f"{m}ffn.{p}_proj.{part}") for p in ("gate", "up", "down")]
        rules += [_copy(f"{h}input_layernorm.weight", f"{m}attn_norm.weight"),
                  _copy(f"{h}post_attention_layernorm.weight", f"{m}ffn_norm.weight")]
    rules.append(_copy("model.norm.weight", "final_norm.weight"))
    if not c.tie_embeddings:
        rules.append(_copy("lm_head.weight", "lm_head.weight"))
    return rules


def _check_config(config) -> None:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a minitfm ModelConfig (config_from_hf turns a config.json into one), got "
                        f"{type(config).__name__}")


def _check_state(state, names: str) -> None:
    """TypeError unless ``state`` is a dict of str -> floating-point tensor (``names``: whose keys)."""
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict of {names} -> tensor, got {type(state).__name__}")
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state's keys must be {names} (str), got {type(key).__name__} {key!r}")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"state[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        if not value.is_floating_point() and not key.endswith(_BUFFERS):  # GPT-2's causal-mask buffer is bool
            raise TypeError(f"state[{key!r}] must be a floating-point tensor (weights), got dtype {value.dtype}")


def _layers(keys, pattern: str) -> list[int]:
    return sorted({int(m.group(1)) for k in keys for m in [re.search(pattern, k)] if m})


def _mismatch(what: str, missing: list, extra: list, config: ModelConfig, pattern: str) -> str:
    """The message for keys that a state dict lacks or has beyond what ``config`` uses, both lists, with the
    layers each side holds when they differ."""
    shown = lambda keys: f"{keys[:6]}{' ...' if len(keys) > 6 else ''} ({len(keys)} keys)"  # noqa: E731
    layers = _layers(extra, pattern) + _layers(missing, pattern)
    note = (f"; the config has n_layers={config.n_layers}, and layers {sorted(set(layers))} differ" if layers else "")
    return f"{what}: missing {shown(missing)}, unexpected {shown(extra)}{note}"


def key_map(config: ModelConfig) -> list[Rule]:
    """Every published tensor of a model with this config, as a :class:`Rule` (with its published shape)."""
    _check_config(config)
    c = config.resolved()
    rules = _gpt2_rules(c) if model_family(c) == "gpt2" else _llama_rules(c)
    expected = _expected_shapes(c)
    with torch.device("meta"):  # the shapes only: each rule's inverse applied to empty tensors
        return [dataclasses.replace(rule, hf_shape=tuple(rule.to_hf([torch.empty(expected[k]) for k in
                                                                       rule.minitfm_keys]).shape)) for rule in rules]


_BUFFERS = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")  # not weights: recomputed by minitfm


def _normalise_keys(state: dict, family: str) -> dict:
    """Accept the prefixes that checkpoints use: ``h.0...`` (the original GPT-2 files) as ``transformer.h.0...``."""
    out = {}
    for key, value in state.items():
        if key.endswith(_BUFFERS):
            continue
        if family == "gpt2" and not key.startswith(("transformer.", "lm_head.")):
            key = "transformer." + key
        out[key] = value
    return out


def to_minitfm(state: dict, config: ModelConfig) -> dict:
    """A published state dict (GPT-2 or Llama keys) -> minitfm's state dict for ``DecoderOnlyLM(config)``.

    Raises ValueError naming every missing or unexpected key, and the first tensor whose shape does not fit.
    """
    _check_state(state, "published tensor names")
    rules = key_map(config)
    state = _normalise_keys(state, model_family(config))
    tied_head = state.pop("lm_head.weight", None) if config.tie_embeddings else None
    wanted = {r.hf_key for r in rules}
    missing, extra = sorted(wanted - set(state)), sorted(set(state) - wanted)
    if missing or extra:
        raise ValueError(_mismatch(f"the checkpoint does not fit this {model_family(config)} config", missing, extra,
                                   config, r"(?:\.h|layers)\.(\d+)\."))
    expected = _expected_shapes(config)
    out = {}
    for rule in rules:
        published = state[rule.hf_key]
        if tuple(published.shape) != rule.hf_shape:  # checked before transforming, so no reshape fails first
            raise ValueError(f"{rule.hf_key} has shape {tuple(published.shape)}; this config expects "
                             f"{rule.hf_shape} (it gives {', '.join(rule.minitfm_keys)}: {rule.how})")
        tensors = rule.to_minitfm(published)
        if len(tensors) != len(rule.minitfm_keys):  # zip would drop the rest silently
            raise ValueError(f"{rule.hf_key} {tuple(published.shape)} gave {len(tensors)} tensors; '{rule.how}' must "
                             f"give {len(rule.minitfm_keys)} ({', '.join(rule.minitfm_keys)})")
        for key, tensor in zip(rule.minitfm_keys, tensors):
            want = expected[key]
            if tuple(tensor.shape) != want:
                raise ValueError(f"{rule.hf_key} has shape {tuple(published.shape)}, which gives {key} the "
                                 f"shape {tuple(tensor.shape)}; this config expects {want}")
            out[key] = tensor
    if config.tie_embeddings:
        if tied_head is not None and not torch.equal(tied_head, out["tok_emb.weight"]):
            raise ValueError("the config ties the output head to the token embedding, but lm_head.weight differs "
                             "from the embedding in this checkpoint")
        out["lm_head.weight"] = out["tok_emb.weight"]
    return out


def _expected_shapes(config: ModelConfig) -> dict[str, tuple]:
    """minitfm's parameter shapes for ``config``, without building the model (meta tensors)."""
    with torch.device("meta"):
        model = DecoderOnlyLM(config)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def to_hf(state: dict, config: ModelConfig) -> dict:
    """minitfm's state dict -> the published keys and layouts (tied heads written once, as transformers does).

    Raises ValueError naming every missing and every unused key (a layer beyond the config's included), or
    the first tensor whose shape does not fit ``config``."""
    _check_state(state, "minitfm parameter names")
    rules = key_map(config)
    expected = _expected_shapes(config)
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        raise ValueError(_mismatch("the minitfm state dict does not fit this config", missing, extra, config,
                                   r"^layers\.(\d+)\."))
    for key, shape in expected.items():
        if tuple(state[key].shape) != shape:
            raise ValueError(f"{key} has shape {tuple(state[key].shape)}; this config expects {shape}")
    if config.tie_embeddings and not torch.equal(state["lm_head.weight"], state["tok_emb.weight"]):
        raise ValueError("the config ties the output head to the token embedding, but lm_head.weight differs from "
                         "tok_emb.weight in this state dict: the published file would keep only the embedding")
    out = {}
    for rule in rules:
        tensor = rule.to_hf([state[k] for k in rule.minitfm_keys]).contiguous()
        if tuple(tensor.shape) != rule.hf_shape:
            raise ValueError(f"'{rule.how}' made {rule.hf_key} of shape {tuple(tensor.shape)}; the published "
                             f"layout is {rule.hf_shape}")
        out[rule.hf_key] = tensor
    return out


# ---- folders, the Hub and tokenizers --------------------------------------------------------------------------

def _safetensors():
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("minitfm.pretrained reads and writes weights with safetensors: pip install safetensors") from None
    return safetensors.torch


def load(directory: str | os.PathLike, *, dtype: torch.dtype = torch.float32, device=None) -> DecoderOnlyLM:
    """A :class:`DecoderOnlyLM` holding the GPT-2 or Llama checkpoint in ``directory``, in eval mode.

    Every file is checked as it is read (:mod:`minitfm.checkpoint_files`): a damaged folder gets an error
    naming the file, never a model built from part of it."""
    check_dtype(dtype)
    check_device(device)
    config = config_from_hf(read_config(directory))
    return _build(config, to_minitfm(read_state_dict(directory), config), dtype, device)


def from_transformers(hf_model, *, dtype: torch.dtype = torch.float32, device=None) -> DecoderOnlyLM:
    """A :class:`DecoderOnlyLM` with the weights of a ``transformers`` GPT-2 or Llama model already in memory."""
    check_dtype(dtype)
    check_device(device)
    config_dict = getattr(getattr(hf_model, "config", None), "to_dict", None)
    if config_dict is None or not hasattr(hf_model, "state_dict"):
        raise TypeError(f"hf_model must be a transformers model (GPT2LMHeadModel, LlamaForCausalLM), "
                        f"got {type(hf_model).__name__}")
    config = config_from_hf(config_dict())
    state = {k: v.detach() for k, v in hf_model.state_dict().items()}
    return _build(config, to_minitfm(state, config), dtype, device)


def _build(config: ModelConfig, state: dict, dtype, device) -> DecoderOnlyLM:
    with torch.device("meta"):  # no random initialisation of weights that are replaced at once
        model = DecoderOnlyLM(config)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight  # assign=True replaced the shared parameter by two
    _rebuild_buffers(model)
    return model.to(device).eval() if device is not None else model.eval()


def _rebuild_buffers(model: DecoderOnlyLM) -> None:
    """Non-persistent buffers (RoPE's frequencies) stayed on the meta device: recompute them on the device of
    the weights (a GPU when ``from_transformers`` converts a model that is on one)."""
    device = model.tok_emb.weight.device
    if model.rope is not None:
        model.rope.inv_freq = model.rope._float32_inv_freq().to(device)
    left = [name for name, b in model.named_buffers() if b.device != device]
    if left:
        raise RuntimeError(f"buffers {left} were not rebuilt on {device} after loading")  # a new buffer in the library


def _is_local(name: str) -> bool:
    return pathlib.Path(name).expanduser().is_dir()


_REPO_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")  # "gpt2", "openai-community/gpt2"
_SAFETENSORS = ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"]
_PYTORCH_BIN = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]
_OTHER_FILES = ["config.json", "vocab.json", "merges.txt"]


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


def save_pretrained(model: DecoderOnlyLM, directory: str | os.PathLike) -> pathlib.Path:
    """Write ``config.json`` and ``model.safetensors`` that ``transformers``' ``from_pretrained`` loads."""
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be a DecoderOnlyLM, got {type(model).__name__}")
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a folder's path (str or pathlib.Path), got {type(directory).__name__}")
    folder = pathlib.Path(directory).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file, expected a folder to write config.json and model.safetensors into")
    hf_config = config_to_hf(model.config)  # checked, and the tensors converted, before anything is written
    state = {k: v.detach().cpu().contiguous() for k, v in to_hf(model.state_dict(), model.config).items()}
    folder.mkdir(parents=True, exist_ok=True)
    _safetensors().save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
    return folder


def load_tokenizer(directory: str | os.PathLike):
    """GPT-2's ``vocab.json`` and ``merges.txt`` in ``directory`` as a :class:`minitfm.bpe_tokenizer.Tokenizer`."""
    from .bpe_tokenizer import Tokenizer

    folder = checkpoint_folder(directory, "a folder holding GPT-2's vocab.json and merges.txt")
    missing = [n for n in ("vocab.json", "merges.txt") if not (folder / n).exists()]
    if missing:
        raise ValueError(f"{folder} lacks {missing}: minitfm.bpe reads GPT-2-style byte-level BPE files "
                         "(Llama's SentencePiece tokenizer.model is another format)")
    return Tokenizer.load(folder)
