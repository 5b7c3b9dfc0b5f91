"""The ``config.json`` of every Llama-like family, read into a :class:`~minitfm.config.ModelConfig` and written back.

Llama 2 and 3, Mistral, Qwen 2 and 3, Gemma 1-3, Phi-3, OLMo 2, SmolLM3, Mixtral and Qwen3-MoE are one
architecture (RMSNorm, RoPE, a gated FFN, grouped-query attention) with a few settings changed per family.
:data:`DECODER_FAMILIES` says which, one row per ``model_type``; :func:`decoder_config_from_hf` reads every
setting a family has (refusing, with its name, a value minitfm's models do not have);
:mod:`minitfm.pretrained.family_json` writes a config back in a family's terms.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from minitfm.config import ModelConfig
from minitfm.layers.rope_scaling import RopeScaling


@dataclass(frozen=True)
class Family:
    """What a ``model_type`` fixes (the rest is read from its ``config.json``)."""

    cls: str  # the transformers class that reads the export
    norm: str = "rms"
    qk_norm: str = "none"
    sublayer_norm: str = "input"
    gemma: bool = False  # (1 + w) norms, embeddings times sqrt(D), GELU-gated FFN, query_pre_attn_scalar
    window_flag: bool = False  # the window needs use_sliding_window (the Qwen family, SmolLM3)
    layer_types: bool = False  # per-layer windows from layer_types
    bias: str = "llama"  # "llama": attention_bias == mlp_bias; "qkv": q/k/v only (Qwen 2); "none"
    experts: str | None = None  # "mixtral" or "qwen" keys and settings
    tied: bool = False  # tie_word_embeddings when the file does not say
    windows: bool = True  # has sliding windows at all (Llama and Gemma 1 do not)


DECODER_FAMILIES = {
    "llama": Family("LlamaForCausalLM", windows=False),
    "mistral": Family("MistralForCausalLM"),
    "ministral3": Family("Ministral3ForCausalLM", bias="none"),
    "qwen2": Family("Qwen2ForCausalLM", window_flag=True, layer_types=True, bias="qkv"),
    "qwen3": Family("Qwen3ForCausalLM", qk_norm="head", window_flag=True, layer_types=True, bias="none"),
    "gemma": Family("GemmaForCausalLM", norm="rms_offset", gemma=True, bias="none", tied=True, windows=False),
    "gemma2": Family("Gemma2ForCausalLM", norm="rms_offset", sublayer_norm="both", gemma=True, layer_types=True,
                     bias="none", tied=True),
    "gemma3_text": Family("Gemma3ForCausalLM", norm="rms_offset", qk_norm="head", sublayer_norm="both", gemma=True,
                          layer_types=True, bias="none", tied=True),
    "phi3": Family("Phi3ForCausalLM", bias="none"),
    "olmo2": Family("Olmo2ForCausalLM", qk_norm="all", sublayer_norm="output", bias="none", windows=False),
    "olmo3": Family("Olmo3ForCausalLM", qk_norm="all", sublayer_norm="output", layer_types=True, bias="none"),
    "smollm3": Family("SmolLM3ForCausalLM", window_flag=True, layer_types=True, tied=True),
    "mixtral": Family("MixtralForCausalLM", bias="none", experts="mixtral"),
    "qwen3_moe": Family("Qwen3MoeForCausalLM", qk_norm="head", window_flag=True, layer_types=True, bias="none",
                        experts="qwen"),
}
# transformers' defaults (its 5.25 config classes) for the keys a config.json may leave out, per family ("*": the
# others): a file without the key reads as transformers reads it, never with a default of minitfm's own
_DEFAULTS = {
    "rms_norm_eps": {"phi3": 1e-5, "olmo2": 1e-5, "olmo3": 1e-5, "ministral3": 1e-5, "mixtral": 1e-5, "*": 1e-6},
    "rope_theta": {"smollm3": 2e6, "mixtral": 1e6, "gemma3_text": 1e6, "olmo3": 5e5, "llama4_text": 5e5, "*": 1e4},
    "rope_local_base_freq": {"olmo3": 5e5, "*": 1e4},  # OLMo 3: an older file's rope_theta leaves the sliding at 5e5
    "hidden_act": {"gemma": "gelu_pytorch_tanh", "gemma2": "gelu_pytorch_tanh", "gemma3_text": "gelu_pytorch_tanh",
                   "*": "silu"},
    "head_dim": {"gemma": 256, "gemma2": 256, "gemma3_text": 256, "qwen3": 128, "ministral3": 128, "*": None},  # None: D / H
    "num_key_value_heads": {"mistral": 8, "ministral3": 8, "qwen2": 32, "qwen3": 32, "gemma": 16, "gemma2": 4, "gemma3_text": 4,
                            "smollm3": 4, "mixtral": 8, "qwen3_moe": 4, "*": None},  # None: one per query head
    "sliding_window": {"mistral": 4096, "qwen2": 4096, "qwen3": 4096, "qwen3_moe": 4096, "gemma2": 4096,
                       "gemma3_text": 4096, "olmo3": 4096, "*": None},
    "max_window_layers": {"qwen3_moe": 0, "*": 28},  # transformers' Qwen3-MoE has none: every layer
    "sliding_window_pattern": {"*": 6},
    "query_pre_attn_scalar": {"*": 256},
    "attn_logit_softcapping": {"gemma2": 50.0, "*": None},
    "final_logit_softcapping": {"gemma2": 30.0, "*": None},
    "no_rope_layer_interval": {"*": 4},
}


def family_value(hf: dict, key: str, model_type: str):
    """``hf[key]``, or transformers' default for family ``model_type`` when the file leaves ``key`` out."""
    if key in hf:
        return hf[key]
    table = _DEFAULTS[key]
    return table.get(model_type, table["*"])


_GATES = {"silu": "swiglu", "gelu_pytorch_tanh": "geglu_tanh", "gelu_new": "geglu_tanh", "gelu": "geglu"}


def _refuse(condition: bool, setting: str, value, why: str) -> None:
    if condition:
        raise ValueError(f"this checkpoint sets {setting}={value!r}, which minitfm's models do not have ({why})")


def _one_rope(params: dict) -> dict:
    """The ModelConfig fields of one RoPE parameter dict (``rope_type`` default, linear, llama3 or yarn)."""
    kind = params.get("rope_type", params.get("type", "default"))
    theta = params.get("rope_theta")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
        raise ValueError(f"config.json: rope_theta must be a number > 0, got {type(theta).__name__} {theta!r}")
    theta = float(theta)
    partial = params.get("partial_rotary_factor", 1.0)
    _refuse(partial != 1.0, "partial_rotary_factor", partial, "RoPE turns the whole head")
    if kind == "linear":
        return {"rope_base": theta, "rope_scale": float(params["factor"])}
    if kind in ("llama3", "yarn"):
        keys = {"factor": "factor", "original_max_position_embeddings": "original_max_len",
                "low_freq_factor": "low_freq_factor", "high_freq_factor": "high_freq_factor",
                "beta_fast": "beta_fast", "beta_slow": "beta_slow", "attention_factor": "attention_factor",
                "mscale": "mscale", "mscale_all_dim": "mscale_all_dim", "truncate": "truncate"}
        values = {ours: params[theirs] for theirs, ours in keys.items() if params.get(theirs) is not None}
        lacking = [k for k in ("factor", "original_max_position_embeddings") if params.get(k) is None]
        _refuse(bool(lacking), f"rope_type={kind!r} without", lacking, "minitfm needs the factor and the pretraining "
                "context of a scaled RoPE")
        return {"rope_base": theta, "rope_scaling": RopeScaling(kind, **values)}
    _refuse(kind != "default", "rope_type", kind, "minitfm's RoPE knows 'default', 'linear', 'llama3' and 'yarn'")
    return {"rope_base": theta}


def rope_from_hf(hf: dict, model_type: str = "llama") -> dict:
    """RoPE's ModelConfig fields from ``rope_parameters`` (transformers 5; per layer type for Gemma 3) or from
    ``rope_theta``/``rope_scaling`` (and Gemma 3's ``rope_local_base_freq``: older files); a top-level
    ``partial_rotary_factor`` (Phi-3 in transformers 4's layout) counts as transformers 5 moves it into the RoPE."""
    params = dict(hf.get("rope_parameters") or {})
    top = {"partial_rotary_factor": hf["partial_rotary_factor"]} if "partial_rotary_factor" in hf else {}
    if model_type in ("gemma3_text", "olmo3") and not ({"full_attention", "sliding_attention"} & set(params)):
        params = {"full_attention": {**(hf.get("rope_scaling") or {}), **params}}  # an older file: scaling is global
    if "full_attention" in params or "sliding_attention" in params:  # Gemma 3: a base per kind of layer
        out = _one_rope({"rope_theta": family_value(hf, "rope_theta", model_type), **top,
                         **(params.get("full_attention") or {})})
        local = _one_rope({"rope_theta": family_value(hf, "rope_local_base_freq", model_type),
                           **(params.get("sliding_attention") or {})})
        _refuse(set(local) != {"rope_base"}, "rope_parameters['sliding_attention']", params.get("sliding_attention"),
                "the sliding layers' RoPE is unscaled")
        return {**out, "rope_local_base": local["rope_base"]}
    scaling = hf.get("rope_scaling") or {}
    return _one_rope({"rope_theta": family_value(hf, "rope_theta", model_type), **top, **scaling, **params})


def _layer_types(hf: dict, model_type: str, n_layers: int) -> list:
    """``layer_types``, or for an older file without it the pattern transformers derives from the file."""
    if hf.get("layer_types") is not None:
        return hf["layer_types"]
    if model_type in ("gemma2", "gemma3_text"):  # every 2nd (Gemma 2) or 6th (Gemma 3) layer sees everything
        period = 2 if model_type == "gemma2" else family_value(hf, "sliding_window_pattern", model_type)
        sliding = [bool((i + 1) % period) for i in range(n_layers)]
    elif model_type == "olmo3":  # every 4th layer sees everything
        sliding = [bool((i + 1) % 4) for i in range(n_layers)]
    elif model_type == "smollm3":  # windows on the NoPE layers only
        sliding = [not rope for rope in _rope_layers(hf, n_layers)]
    else:  # the Qwen family: from layer max_window_layers on
        sliding = [i >= family_value(hf, "max_window_layers", model_type) for i in range(n_layers)]
    return ["sliding_attention" if s else "full_attention" for s in sliding]


def _rope_layers(hf: dict, n_layers: int) -> list:
    """SmolLM3's ``no_rope_layers`` (1 = RoPE, 0 = NoPE); without it every ``no_rope_layer_interval``-th is NoPE."""
    if hf.get("no_rope_layers") is not None:
        return hf["no_rope_layers"]
    interval = family_value(hf, "no_rope_layer_interval", "smollm3")
    return [int((i + 1) % interval != 0) for i in range(n_layers)]


def _windows(hf: dict, fam: Family, n_layers: int, model_type: str) -> dict:
    window = family_value(hf, "sliding_window", model_type) if fam.windows else None
    if fam.window_flag and not hf.get("use_sliding_window", False):
        window = None
    types = _layer_types(hf, model_type, n_layers) if fam.layer_types else None
    if window is None:
        return {}
    layers = None
    if types is not None:
        unknown = set(types) - {"sliding_attention", "full_attention"}
        _refuse(bool(unknown), "layer_types", sorted(unknown), "layers are 'full_attention' or 'sliding_attention'")
        _refuse(len(types) != n_layers, "layer_types", types, f"one entry per layer ({n_layers})")
        layers = tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")
        if not layers:
            return {}
        layers = None if len(layers) == n_layers else layers
    return {"sliding_window": int(window), "sliding_layers": layers}


def _experts(hf: dict, fam: Family) -> dict:
    needs = ("num_local_experts", "num_experts_per_tok") if fam.experts == "mixtral" else \
        ("num_experts_per_tok", "moe_intermediate_size")
    lacking = [k for k in needs if hf.get(k) is None] + \
        (["num_experts"] if fam.experts == "qwen" and hf.get("num_experts", hf.get("num_local_experts")) is None else [])
    if lacking:
        raise ValueError(f"this config.json of a mixture of experts lacks {lacking} (or sets them to null): they give "
                         "the experts' count and size")
    if fam.experts == "mixtral":
        return {"n_experts": hf["num_local_experts"], "experts_per_token": hf["num_experts_per_tok"]}
    _refuse(bool(hf.get("mlp_only_layers")), "mlp_only_layers", hf.get("mlp_only_layers"), "every layer is a MoE")
    _refuse(hf.get("decoder_sparse_step", 1) != 1, "decoder_sparse_step", hf.get("decoder_sparse_step"),
            "every layer is a MoE")
    experts = hf.get("num_experts", hf.get("num_local_experts"))  # transformers 5 writes num_local_experts
    return {"n_experts": experts, "experts_per_token": hf["num_experts_per_tok"],
            "renormalize_experts": bool(hf.get("norm_topk_prob", False)), "d_ff": hf["moe_intermediate_size"]}


def _biases(hf: dict, fam: Family) -> dict:
    attn_bias, mlp_bias = bool(hf.get("attention_bias", False)), bool(hf.get("mlp_bias", False))
    if fam.bias == "qkv":
        return {"bias": False, "qkv_bias": True}
    if fam.bias == "none":
        _refuse(attn_bias or mlp_bias, "attention_bias/mlp_bias", (attn_bias, mlp_bias), "this family has no biases")
        return {"bias": False}
    _refuse(attn_bias != mlp_bias, "attention_bias/mlp_bias", (attn_bias, mlp_bias), "one bias flag for both")
    return {"bias": attn_bias}


def decoder_config_from_hf(hf: dict, model_type: str) -> ModelConfig:
    """The ModelConfig of a Llama-like ``config.json`` of family ``model_type`` (dropout off)."""
    fam = DECODER_FAMILIES[model_type]
    if model_type == "ministral3" and not any(k in hf for k in ("rope_parameters", "rope_scaling", "rope_theta")):
        hf = {**hf, "rope_parameters": dict(MINISTRAL3_ROPE)}
    act = hf.get("hidden_activation") or family_value(hf, "hidden_act", model_type)
    if model_type == "gemma" and act == "gelu":
        act = "gelu_pytorch_tanh"  # transformers reads Gemma 1's legacy "gelu" as the tanh GELU it was trained with
    ffn = _GATES.get(act)
    _refuse(ffn is None or (ffn != "swiglu") != fam.gemma, "hidden_act", act,
            "Gemma gates with GELU, the others with silu" if ffn else "a gated FFN with silu or GELU")
    d, heads, vocab, n_layers = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    head_dim = family_value(hf, "head_dim", model_type) or d // heads
    _refuse(bool(hf.get("use_bidirectional_attention")), "use_bidirectional_attention", True, "decoders are causal")
    fields = dict(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=family_value(hf, "num_key_value_heads", model_type) or heads,
        head_dim=None if head_dim * heads == d else head_dim, d_ff=hf["intermediate_size"], n_layers=n_layers,
        max_seq_len=hf["max_position_embeddings"], norm=fam.norm, norm_first=True, pos="rope", ffn=ffn, dropout=0.0,
        tie_embeddings=bool(hf.get("tie_word_embeddings", fam.tied)), scale_embeddings=fam.gemma,
        norm_eps=float(family_value(hf, "rms_norm_eps", model_type)), qk_norm=fam.qk_norm, sublayer_norm=fam.sublayer_norm,
        **_biases(hf, fam), **rope_from_hf(hf, model_type), **_windows(hf, fam, n_layers, model_type),
        **special_ids(hf, vocab))
    extra = {}
    if fam.gemma and model_type != "gemma":
        scalar = family_value(hf, "query_pre_attn_scalar", model_type)
        extra["attn_scale"] = None if scalar == head_dim else float(scalar) ** -0.5
        extra["attn_softcap"] = family_value(hf, "attn_logit_softcapping", model_type)
        extra["final_softcap"] = family_value(hf, "final_logit_softcapping", model_type)
    if model_type == "smollm3":
        extra["nope_layers"] = tuple(i for i, rope in enumerate(_rope_layers(hf, n_layers)) if not rope)
    if fam.experts:
        extra.update(_experts(hf, fam))
    if model_type == "ministral3":
        extra.update(_temperature(hf))
    return ModelConfig(**{**fields, **extra})


# transformers' Ministral3Config fills in this RoPE when a file has none
MINISTRAL3_ROPE = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "original_max_position_embeddings": 16384,
                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}


def _temperature(hf: dict) -> dict:
    """Ministral 3's query temperature: 1 + beta log(1 + floor(p / L)), beta its RoPE's ``llama_4_scaling_beta`` and
    L its ``original_max_position_embeddings`` (both must be there: transformers computes with them)."""
    rope = hf.get("rope_parameters") or {}
    beta, length = rope.get("llama_4_scaling_beta"), rope.get("original_max_position_embeddings")
    _refuse(beta is None or length is None, "rope_parameters without", ["llama_4_scaling_beta",
            "original_max_position_embeddings"], "Ministral 3 scales its queries with both")
    check = isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0 or isinstance(length, bool) \
        or not isinstance(length, int) or length < 1
    _refuse(check, "llama_4_scaling_beta/original_max_position_embeddings", (beta, length), "a number >= 0, an int >= 1")
    if beta == 0:  # tau = 1 everywhere
        return {}
    return {"attn_temperature": "ministral3", "attn_temperature_beta": float(beta), "attn_temperature_length": length}


def special_ids(hf: dict, vocab: int) -> dict:
    """bos_id, eos_id and pad_id from a ``config.json`` (every family, GPT-2 too)."""
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
    if bos is None:  # ModelConfig needs ids; generate stops at eos_id, so 0 is only a placeholder
        warnings.warn("config.json names neither bos_token_id nor eos_token_id: minitfm uses id 0 for both, and "
                      "config_to_hf (save_pretrained) writes 0 back; pass the real ids if the model has them",
                      UserWarning, stacklevel=4)
        bos = eos = 0
    pad = out["pad_id"]
    if pad in (bos, eos):
        pad = None  # a pad that is also <bos>/<eos> (a common GPT-2 set-up) is no padding token of its own
    return {"bos_id": bos, "eos_id": eos, "pad_id": pad}
