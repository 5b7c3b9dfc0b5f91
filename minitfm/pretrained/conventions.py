"""How a published checkpoint's ``config.json`` describes the book's models, and back.

GPT-2, Llama and their successors compute what :class:`~minitfm.models.DecoderOnlyLM` computes; they describe it
with other names and conventions. :data:`CONVENTIONS` lists every difference of GPT-2 and Llama 2, and
:data:`LATER_CONVENTIONS` what the later families add (``conventions_table(later=True)`` prints both),
:func:`config_from_hf` turns a ``config.json`` into a :class:`~minitfm.config.ModelConfig` (or names the setting
minitfm does not have; the Llama-like families are read in :mod:`minitfm.pretrained.families`),
:func:`model_family` says which family a config round-trips to, and :func:`config_to_hf` writes the
``config.json`` that ``transformers`` reads back.
"""
from __future__ import annotations

import dataclasses

from minitfm.config import ModelConfig
from minitfm.pretrained.families import DECODER_FAMILIES, _refuse, decoder_config_from_hf, special_ids
from minitfm.pretrained.deepseek import DEEPSEEK_TYPES, deepseek_config_from_hf, deepseek_config_json
from minitfm.pretrained.family_json import decoder_config_json
from minitfm.pretrained.gemma4 import gemma4_config_from_hf, gemma4_config_json, language_config
from minitfm.pretrained.gpt_oss import gpt_oss_config_from_hf, gpt_oss_config_json
from minitfm.pretrained.llama4 import llama4_config_from_hf, llama4_config_json
from minitfm.pretrained.minimax import minimax_config_from_hf, minimax_config_json
from minitfm.pretrained.qwen3_5 import qwen3_5_config_from_hf, qwen3_5_config_json
from minitfm.pretrained.files import check_config_fields


# every model_type minitfm loads, in the order export tries them
FAMILIES = ("gpt2",) + tuple(DECODER_FAMILIES) + tuple(DEEPSEEK_TYPES) + ("gpt_oss", "minimax_m2", "llama4_text",
                                                                          "qwen3_5_text", "qwen3_next", "gemma4_text")
LLAMA_TYPES = tuple(DECODER_FAMILIES)  # the Llama-like ones (pretrained.families)

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

# What the families after Llama 2 change (pretrained.families), in the same four columns
LATER_CONVENTIONS = [
    ("RoPE scaling", "rope_type 'llama3' (Llama 3.1) or 'yarn', with their factors", "rope_scaling=RopeScaling(...)",
     "copy; refuse other rope_types (longrope, dynamic)"),
    ("QK-norm", "Qwen 3, Gemma 3: q_norm/k_norm of width Dh; OLMo 2: of width H Dh", "qk_norm='head' / 'all'",
     "copy, permuted like the rows of q and k"),
    ("head size", "head_dim (Gemma, Qwen 3), not hidden_size / num_attention_heads", "head_dim", "copy"),
    ("biases", "Qwen 2: on q, k and v only", "qkv_bias=True, bias=False", "copy"),
    ("Gemma's norm offset", "Gemma stores w and scales by (1 + w)", "norm='rms_offset' keeps w as stored",
     "copy (adding 1 on load would not come back to the bit)"),
    ("Gemma's embeddings and FFN", "token vectors times sqrt(D); GeGLU (gelu_pytorch_tanh)",
     "scale_embeddings=True; ffn='geglu_tanh'", "copy"),
    ("norm placement", "OLMo 2: post_attention/post_feedforward_layernorm on the sublayer's output; Gemma 2/3: "
     "input, post_attention, pre_feedforward and post_feedforward norms", "sublayer_norm='output' / 'both'",
     "map each norm to attn_norm, attn_out_norm, ffn_norm, ffn_out_norm"),
    ("scores", "Gemma 2/3: query_pre_attn_scalar; Gemma 2: attn_logit_softcapping, final_logit_softcapping",
     "attn_scale; attn_softcap, final_softcap", "attn_scale = scalar^-0.5; copy"),
    ("sliding windows", "sliding_window, with layer_types (and use_sliding_window for Qwen, SmolLM3)",
     "sliding_window, sliding_layers", "the sliding layers' indices"),
    ("NoPE and local RoPE", "SmolLM3: no_rope_layers (1 = RoPE); Gemma 3: rope_parameters per layer type",
     "nope_layers; rope_local_base", "the layers without RoPE; the sliding layers' base"),
    ("Phi-3's fused projections", "qkv_proj (q, k, v rows stacked); gate_up_proj (gate, then up)",
     "q_proj, k_proj, v_proj; gate_proj, up_proj", "split the rows (and permute q and k)"),
    ("mixture of experts", "Mixtral: block_sparse_moe.gate, experts.e.w1/w3/w2; Qwen3-MoE: mlp.gate, "
     "experts.e.gate/up/down_proj, norm_topk_prob", "ffn.router, ffn.experts.e; n_experts, experts_per_token, "
     "renormalize_experts", "copy"),
    ("latent attention", "DeepSeek-V2/V3: q_a_proj, kv_a_proj_with_mqa, kv_b_proj, kv_lora_rank, qk_rope_head_dim",
     "mla=LatentDims(...); LatentKVCache", "rename (DEEPSEEK_NAMES); RoPE pairs already adjacent: copy"),
    ("routed experts", "DeepSeek, GLM-4.5, MiniMax-M2, gpt-oss, Llama 4, Qwen3-Next: sigmoid or softmax scores, "
     "noaux_tc, shared experts, first_k_dense_replace / moe_layers", "routed=RoutedExperts(...), moe_layers",
     "stack the files' experts (E, 2F, D); transpose gpt-oss's and Llama 4's (E, in, out)"),
    ("attention variants", "gpt-oss: self_attn.sinks; Ministral 3: llama_4_scaling_beta; Llama 4: chunked layers, "
     "attn_temperature_tuning, weightless use_qk_norm", "attn_sinks; attn_temperature; attention_chunk, "
     "qk_norm='weightless'", "copy the sinks; q and k of Llama 4 copied (adjacent pairs)"),
    ("partial RoPE", "GLM-4.5, MiniMax-M2, Qwen3-Next/3.5: partial_rotary_factor (MiniMax: rotary_dim)", "rope_dims",
     "rotate-half -> pairs on the first rope_dims rows of each head only"),
    ("linear attention", "Qwen3-Next/3.5: linear_attn (Gated DeltaNet) in the linear_attention layers; q_proj's "
     "per-head query | gate rows", "linear_layers, delta_net; attn_output_gate (gate_proj)",
     "copy; split each head's query and gate rows"),
    ("Gemma 4's layers", "per_layer_config (global head width), attention_k_eq_v, proportional RoPE, "
     "hidden_size_per_layer_input, num_kv_shared_layers, layer_scalar", "gemma4=Gemma4Dims(...); Gemma4LM",
     "rotate-half -> pairs over each whole head; o_proj's columns too where the values are the keys"),
]


def conventions_table(later: bool = False) -> str:
    """:data:`CONVENTIONS` (GPT-2 and Llama 2) as a Markdown table; with ``later``, :data:`LATER_CONVENTIONS`
    (what Llama 3, Mistral, Qwen, Gemma, Phi-3, OLMo 2, SmolLM3 and the mixtures of experts change) follow."""
    rows = ["| difference | published checkpoint | minitfm | the loader |", "| --- | --- | --- | --- |"]
    rows += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in CONVENTIONS + (LATER_CONVENTIONS if later else [])]
    return "\n".join(rows)


# ---- configs ---------------------------------------------------------------------------------------------------

def family_of(hf_config: dict) -> str:
    """The family (its ``model_type``: ``"gpt2"``, ``"llama"``, ``"qwen3"``, ...) of a ``config.json`` dict;
    ValueError for an architecture minitfm does not load."""
    if not isinstance(hf_config, dict):
        raise TypeError(f"hf_config must be the dict of a config.json, got {type(hf_config).__name__}")
    model_type = language_config(hf_config).get("model_type")  # Gemma 4's multimodal file: its language model
    if model_type in FAMILIES:
        return model_type
    raise ValueError(f"minitfm.pretrained loads the families with model_type 'gpt2', "
                     f"{', '.join(repr(t) for t in FAMILIES[1:])}; got model_type={model_type!r}")


def config_from_hf(hf_config: dict) -> ModelConfig:
    """The :class:`ModelConfig` of a ``config.json`` of any family minitfm loads (dropout off: these are for
    inference); a setting minitfm's models do not have is refused with a ValueError naming it."""
    family = family_of(hf_config)
    hf = language_config(hf_config)  # a Gemma 4 multimodal config.json: its text_config
    if family == "gemma4_text":  # Gemma 4 writes its experts' sizes as null when it has none
        hf = {k: v for k, v in hf.items() if v is not None or k not in ("num_experts", "moe_intermediate_size")}
    check_config_fields(hf, "gpt2" if family == "gpt2" else "llama")
    if family in DEEPSEEK_TYPES:
        return deepseek_config_from_hf(hf, family)
    readers = {"gpt_oss": gpt_oss_config_from_hf, "minimax_m2": minimax_config_from_hf,
               "llama4_text": llama4_config_from_hf, "qwen3_5_text": qwen3_5_config_from_hf,
               "qwen3_next": lambda hf: qwen3_5_config_from_hf(hf, "qwen3_next"), "gemma4_text": gemma4_config_from_hf}
    if family in readers:
        return readers[family](hf)
    if family != "gpt2":
        return decoder_config_from_hf(hf, family)
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
        scale_embeddings=False, norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)), **special_ids(hf, vocab))


def _architecture(config: ModelConfig) -> ModelConfig:
    """``config`` resolved, with the fields that do not change the function a decoder-only LM computes set to
    fixed values: dropout, attn_impl, pad_id, the encoder-decoder depths, RoPE's settings when positions are not
    RoPE, and every optional field written the one way that means its default (``head_dim`` = D / H, a
    ``qkv_bias`` equal to ``bias``, a window over every layer, an ``attn_scale`` of 1 / sqrt(Dh), ...)."""
    c = config.resolved()
    blank = dict(dropout=0.0, attn_impl="manual", pad_id=None, n_encoder_layers=c.n_layers,
                 n_decoder_layers=c.n_layers)
    if c.pos != "rope":
        blank.update(rope_base=10000.0, rope_scale=1.0)
    if c.head_dim is not None and c.head_dim * c.n_heads == c.d_model:
        blank["head_dim"] = None
    if c.qkv_bias == c.bias:
        blank["qkv_bias"] = None
    if c.attn_scale is not None and abs(c.attn_scale * c.d_head ** 0.5 - 1.0) < 1e-12:
        blank["attn_scale"] = None
    windowed = [c.layer_window(i) is not None for i in range(c.n_layers)]
    if c.sliding_window is not None and not any(windowed):
        blank.update(sliding_window=None, sliding_layers=None)
    elif all(windowed):
        blank["sliding_layers"] = None
    same_rope = c.rope_local_base == c.rope_base and c.rope_scale == 1.0 and c.rope_scaling is None
    if c.rope_local_base is not None and (not any(windowed) or same_rope):
        blank["rope_local_base"] = None
    if c.n_experts is None:
        blank.update(experts_per_token=2, renormalize_experts=True)
    if c.rope_dims == c.d_head:
        blank["rope_dims"] = None
    if c.moe_layers is not None and all(c.layer_moe(i) for i in range(c.n_layers)):
        blank["moe_layers"] = None
    if c.attn_temperature is None or c.attn_temperature_beta == 0:
        blank.update(attn_temperature=None, attn_temperature_beta=0.1, attn_temperature_length=8192)
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
    """Which published family a minitfm config matches (the first of :data:`FAMILIES` that holds it); ValueError
    otherwise.

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
                     f"scale_embeddings=False) nor any other family minitfm writes; it differs in {differences}")


def check_family(config: ModelConfig, family: str | None) -> str:
    """``family`` if a ``config.json`` of it holds ``config`` (ValueError naming what it cannot hold), or, for
    ``None``, the first family that does (:func:`model_family`)."""
    if family is None:
        return model_family(config)
    _check_config(config)
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    lost = _lost_in(config, family)
    if lost:
        raise ValueError(f"a {family} config.json cannot hold this model: it differs in {lost}")
    return family


def config_to_hf(config: ModelConfig, family: str | None = None) -> dict:
    """The ``config.json`` dict that ``transformers`` needs to build the same model, as ``family`` (a
    ``model_type`` of :data:`FAMILIES`) or, by default, as the first family that holds it."""
    return _config_json(config, check_family(config, family))


def _config_json(config: ModelConfig, family: str) -> dict:
    """``config`` written as ``family``'s ``config.json``; a setting the family lacks is left out (so
    :func:`model_family` sees it change on the way back)."""
    c = config.resolved()
    if family in DEEPSEEK_TYPES:
        return deepseek_config_json(c, family)
    writers = {"gpt_oss": gpt_oss_config_json, "minimax_m2": minimax_config_json, "llama4_text": llama4_config_json,
               "qwen3_5_text": qwen3_5_config_json, "qwen3_next": lambda c: qwen3_5_config_json(c, "qwen3_next"),
               "gemma4_text": gemma4_config_json}
    if family in writers:
        return writers[family](c)
    if family != "gpt2":
        return decoder_config_json(c, family)
    special = {"bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id}
    act = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}.get(c.ffn, "gelu_new")
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": c.vocab_size,
            "n_positions": c.max_seq_len, "n_embd": c.d_model, "n_layer": c.n_layers, "n_head": c.n_heads,
            "n_inner": c.d_ff, "activation_function": act, "layer_norm_epsilon": c.norm_eps,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
            "tie_word_embeddings": c.tie_embeddings, **special}


def _check_config(config) -> None:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a minitfm ModelConfig (config_from_hf turns a config.json into one), got "
                        f"{type(config).__name__}")
