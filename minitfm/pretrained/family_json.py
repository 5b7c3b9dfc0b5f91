"""The Llama-like families' ``config.json`` written back from a :class:`~minitfm.config.ModelConfig`: the other
half of :mod:`minitfm.pretrained.families`, which reads them. :func:`decoder_config_json` writes a config in a
family's terms and leaves out what the family cannot hold, so that
:func:`minitfm.pretrained.conventions.model_family` sees the loss on the way back.
"""
from __future__ import annotations

import math

from minitfm.config import ModelConfig
from minitfm.pretrained.families import DECODER_FAMILIES


def rope_json(c: ModelConfig) -> dict:
    """``c``'s RoPE as a ``rope_parameters`` dict (default, linear, llama3 or yarn)."""
    rope = {"rope_theta": c.rope_base, "rope_type": "default"}
    if c.rope_scale != 1.0:
        rope.update(rope_type="linear", factor=c.rope_scale)
    if c.rope_scaling is not None:
        s = c.rope_scaling
        rope.update(rope_type=s.kind, factor=s.factor, original_max_position_embeddings=s.original_max_len)
        if s.kind == "llama3":
            rope.update(low_freq_factor=s.low_freq_factor, high_freq_factor=s.high_freq_factor)
        else:
            rope.update(beta_fast=s.beta_fast, beta_slow=s.beta_slow, truncate=s.truncate,
                        **{k: getattr(s, k) for k in ("attention_factor", "mscale", "mscale_all_dim")
                           if getattr(s, k) is not None})
    return rope


def decoder_config_json(c: ModelConfig, model_type: str) -> dict:
    """``c`` (resolved) as family ``model_type``'s ``config.json``; what the family cannot hold is left out."""
    fam = DECODER_FAMILIES[model_type]
    act = {"geglu_tanh": "gelu_pytorch_tanh", "geglu": "gelu"}.get(c.ffn, "silu") if fam.gemma else "silu"
    rope = rope_json(c)
    out = {"model_type": model_type, "architectures": [fam.cls], "vocab_size": c.vocab_size, "hidden_size": c.d_model,
           "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.n_kv_heads, "head_dim": c.d_head, "max_position_embeddings": c.max_seq_len,
           "rms_norm_eps": c.norm_eps, "attention_dropout": 0.0, "tie_word_embeddings": c.tie_embeddings,
           "hidden_activation" if fam.gemma and model_type != "gemma" else "hidden_act": act,
           "rope_parameters": rope, "bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id}
    if fam.bias == "llama":
        out.update(attention_bias=c.bias, mlp_bias=c.bias)
    windowed = [c.layer_window(i) is not None for i in range(c.n_layers)]
    if fam.layer_types:
        out["layer_types"] = ["sliding_attention" if w else "full_attention" for w in windowed]
        out["sliding_window"] = c.sliding_window
        if fam.window_flag:
            out.update(use_sliding_window=c.sliding_window is not None, max_window_layers=0)
    elif fam.windows:  # Mistral, Phi-3, Mixtral: one window for every layer (null, not left out: Mistral's default is
        out["sliding_window"] = c.sliding_window if all(windowed) else None  # 4096)
    if fam.gemma and model_type != "gemma":
        out["query_pre_attn_scalar"] = c.d_head if c.attn_scale is None else _pre_attn_scalar(c.attn_scale)
        out.update(attn_logit_softcapping=c.attn_softcap, final_logit_softcapping=c.final_softcap)
    if model_type in ("gemma3_text", "olmo3"):
        local = {"rope_theta": c.rope_base if c.rope_local_base is None else c.rope_local_base, "rope_type": "default"}
        out["rope_parameters"] = {"full_attention": rope, "sliding_attention": local}
    if model_type == "ministral3" and c.attn_temperature == "ministral3":
        length = out["rope_parameters"].setdefault("original_max_position_embeddings", c.attn_temperature_length)
        if length == c.attn_temperature_length:  # otherwise left out: model_family sees the temperature lost
            out["rope_parameters"]["llama_4_scaling_beta"] = c.attn_temperature_beta
    elif model_type == "ministral3":
        out["rope_parameters"]["llama_4_scaling_beta"] = 0.0
        out["rope_parameters"].setdefault("original_max_position_embeddings", c.max_seq_len)
    if model_type == "smollm3":
        out["no_rope_layers"] = [int(i not in c.nope_layers) for i in range(c.n_layers)]
    if fam.experts == "mixtral":
        out.update(num_local_experts=c.n_experts, num_experts_per_tok=c.experts_per_token)
    elif fam.experts == "qwen":
        out.update(num_local_experts=c.n_experts, num_experts_per_tok=c.experts_per_token, moe_intermediate_size=c.d_ff,
                   norm_topk_prob=c.renormalize_experts, decoder_sparse_step=1, mlp_only_layers=[])
    return out


def _pre_attn_scalar(scale: float) -> float | int:
    """query_pre_attn_scalar q with q^-0.5 = ``scale``: an int when it is one (as published configs write it)."""
    q = scale ** -2
    return round(q) if math.isclose(q, round(q), rel_tol=1e-12) else q
