"""How a published checkpoint's ``config.json`` describes the book's models, and back.

GPT-2 and Llama compute what :class:`~minitfm.models.DecoderOnlyLM` computes; they describe it with other
names and conventions. :data:`CONVENTIONS` lists every difference (``conventions_table()`` prints it),
:func:`config_from_hf` turns a ``config.json`` into a :class:`~minitfm.config.ModelConfig` (or names the setting
minitfm does not have), :func:`model_family` says which family a config round-trips to, and
:func:`config_to_hf` writes the ``config.json`` that ``transformers`` reads back.
"""
from __future__ import annotations

import dataclasses
import warnings

from minitfm.config import ModelConfig
from minitfm.pretrained.files import check_config_fields


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
    if bos is None:  # ModelConfig needs ids; generate stops at eos_id, so 0 is only a placeholder
        warnings.warn("config.json names neither bos_token_id nor eos_token_id: minitfm uses id 0 for both, and "
                      "config_to_hf (save_pretrained) writes 0 back; pass the real ids if the model has them",
                      UserWarning, stacklevel=3)
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


def _check_config(config) -> None:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a minitfm ModelConfig (config_from_hf turns a config.json into one), got "
                        f"{type(config).__name__}")
