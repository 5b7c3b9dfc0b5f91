"""The key map: one rule per published tensor, from GPT-2's and Llama's state dicts to the book's, and back.

Glossary: V vocabulary, D d_model, H query heads, H_kv key/value heads, Dh = D / H, F FFN hidden size, L layers.

:func:`key_map` lists the rules: the published key, the minitfm key(s) it becomes and the transformation
(``copy``, ``transpose``, ``split q|k|v``, ``rotate-half -> pairs``). :func:`to_minitfm` and :func:`to_hf` apply
them in either direction after checking that no key is missing or extra and that every shape fits.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from minitfm.config import ModelConfig
from minitfm.models import DecoderOnlyLM
from minitfm.pretrained.conventions import _check_config, model_family


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
    forward: Callable  # published tensor -> list of tensors, one per minitfm key (what to_minitfm applies)
    inverse: Callable  # list of minitfm tensors -> the published tensor (what to_hf applies)
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
        return [dataclasses.replace(rule, hf_shape=tuple(rule.inverse([torch.empty(expected[k]) for k in
                                                                       rule.minitfm_keys]).shape)) for rule in rules]


# Buffers, not weights: minitfm recomputes them. GPT-2 stores its causal mask as `h.N.attn.bias` (and
# `attn.masked_bias`); the leading dot matters: `h.N.attn.c_attn.bias` ends in "c_attn.bias", not ".attn.bias".
_BUFFERS = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")


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
        tensors = rule.forward(published)
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
        tensor = rule.inverse([state[k] for k in rule.minitfm_keys]).contiguous()
        if tuple(tensor.shape) != rule.hf_shape:
            raise ValueError(f"'{rule.how}' made {rule.hf_key} of shape {tuple(tensor.shape)}; the published "
                             f"layout is {rule.hf_shape}")
        out[rule.hf_key] = tensor
    return out


