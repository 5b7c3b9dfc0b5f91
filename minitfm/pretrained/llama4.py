"""Llama 4's language model (``llama4_text``): its ``config.json`` read into a :class:`~minitfm.config.ModelConfig` and
written back, and the key map of its FFNs.

Llama 4 keeps Llama's block and changes four things: every ``no_rope_layer_interval``-th layer has no RoPE
(``no_rope_layers``, 1 = RoPE) and attends to the whole past, with queries made hotter with the position
(``attn_temperature_tuning``: ``attn_temperature="llama4"``); the RoPE layers attend within chunks of
``attention_chunk_size`` positions (``attention_chunk``) and normalise q and k after RoPE by an RMSNorm without
weights (``use_qk_norm``: ``qk_norm="weightless"``); the ``moe_layers`` route each token to k experts whose input
the sigmoid of the router's logit scales, plus one shared expert, the other layers keep a dense SwiGLU of
``intermediate_size_mlp``. Its RoPE rotates adjacent pairs, as minitfm's: q and k are copied. The files store the
experts as (E, in, out), transposed on the way in and back.
"""
from __future__ import annotations

from minitfm.config import ModelConfig
from minitfm.pretrained.families import _refuse, rope_from_hf, special_ids
from minitfm.pretrained.family_json import rope_json
from minitfm.pretrained.gpt_oss import _experts_transposed
from minitfm.pretrained.transforms import Rule, _copy

LLAMA4_CLASS = "Llama4ForCausalLM"
_DEFAULTS = dict(num_local_experts=16, num_experts_per_tok=1, head_dim=128, num_key_value_heads=8, rms_norm_eps=1e-5,
                 interleave_moe_layer_step=1, no_rope_layer_interval=4, attention_chunk_size=8192, use_qk_norm=True,
                 attn_temperature_tuning=True, floor_scale=8192, attn_scale=0.1, intermediate_size_mlp=16384)


def llama4_config_from_hf(hf: dict) -> ModelConfig:
    """The ModelConfig of a Llama 4 text ``config.json`` (dropout off); a setting minitfm lacks is refused by name."""
    def get(key):
        return hf[key] if key in hf else _DEFAULTS[key]

    act = hf.get("hidden_act", "silu")
    _refuse(act != "silu", "hidden_act", act, "Llama 4's FFNs are SwiGLU (silu)")
    _refuse(bool(hf.get("attention_bias")), "attention_bias", True, "Llama 4's attention has no biases")
    d, heads, vocab, n = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    head_dim = get("head_dim") or d // heads
    interval = get("no_rope_layer_interval")
    rope = hf.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
    step = get("interleave_moe_layer_step")
    moe = hf["moe_layers"] if hf.get("moe_layers") is not None else list(range(step - 1, n, step))
    types = hf.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in rope]
    _refuse(set(types) - {"chunked_attention", "full_attention"} or len(types) != n or len(rope) != n, "layer_types",
            types, f"'chunked_attention' or 'full_attention', and no_rope_layers, for each of the {n} layers")
    chunk = get("attention_chunk_size")
    chunked = tuple(i for i, kind in enumerate(types) if kind == "chunked_attention") if chunk else ()
    temperature = dict(attn_temperature="llama4", attn_temperature_beta=float(get("attn_scale")),
                       attn_temperature_length=int(get("floor_scale"))) if get("attn_temperature_tuning") else {}
    f = hf["intermediate_size"]
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=get("num_key_value_heads") or heads,
        head_dim=None if head_dim * heads == d else head_dim, d_ff=get("intermediate_size_mlp"), n_layers=n,
        max_seq_len=hf["max_position_embeddings"], norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=False,
        dropout=0.0, tie_embeddings=bool(hf.get("tie_word_embeddings", False)), scale_embeddings=False,
        norm_eps=float(get("rms_norm_eps")), qk_norm="weightless" if get("use_qk_norm") else "none",
        **rope_from_hf(hf, "llama4_text"), **special_ids(hf, vocab), **temperature,
        nope_layers=tuple(i for i, r in enumerate(rope) if not r), attention_chunk=chunk if chunked else None,
        chunked_layers=None if len(chunked) in (0, n) else chunked, n_experts=get("num_local_experts"),
        experts_per_token=get("num_experts_per_tok"), renormalize_experts=False,
        routed=dict(d_expert=f, score_func="sigmoid", n_shared_experts=1, weights_on="input"),
        moe_layers=None if len(moe) == n else tuple(moe))


def llama4_config_json(c: ModelConfig) -> dict:
    """``c`` (resolved) as Llama 4's text ``config.json``; ValueError for a config without Llama 4's experts."""
    r = c.routed
    if r is None or r.weights_on != "input" or c.attn_temperature == "ministral3":
        raise ValueError("a Llama 4 config.json describes experts whose input the router scales (routed.weights_on)")
    chunked = [c.layer_chunk(i) is not None for i in range(c.n_layers)]
    temperature = c.attn_temperature == "llama4"
    return {"model_type": "llama4_text", "architectures": [LLAMA4_CLASS], "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": r.d_expert, "intermediate_size_mlp": c.d_ff,
            "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads,
            "head_dim": c.d_head, "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps,
            "hidden_act": "silu", "tie_word_embeddings": c.tie_embeddings, "rope_parameters": rope_json(c),
            "attention_dropout": 0.0, "attention_bias": False, "num_local_experts": c.n_experts,
            "num_experts_per_tok": c.experts_per_token,
            "moe_layers": [i for i in range(c.n_layers) if c.layer_moe(i)], "use_qk_norm": c.qk_norm == "weightless",
            "no_rope_layers": [int(i not in c.nope_layers) for i in range(c.n_layers)],
            "attention_chunk_size": c.attention_chunk,
            "layer_types": ["chunked_attention" if ch else "full_attention" for ch in chunked],
            "attn_temperature_tuning": temperature, "attn_scale": c.attn_temperature_beta,
            "floor_scale": c.attn_temperature_length, "bos_token_id": c.bos_id, "eos_token_id": c.eos_id,
            "pad_token_id": c.pad_id}


def llama4_rules(c: ModelConfig, i: int) -> list[Rule]:
    """Layer ``i``'s attention (q and k copied: adjacent pairs already) and FFN: dense, or router, experts, shared."""
    h, m = f"model.layers.{i}.", f"layers.{i}."
    rules = [_copy(f"{h}self_attn.{p}_proj.weight", f"{m}self_attn.{p}_proj.weight") for p in "qkv"]
    rules.append(_copy(f"{h}self_attn.o_proj.weight", f"{m}self_attn.out_proj.weight"))
    if not c.layer_moe(i):
        return rules + [_copy(f"{h}feed_forward.{p}_proj.weight", f"{m}ffn.{p}_proj.weight")
                        for p in ("gate", "up", "down")]
    return rules + [_copy(f"{h}feed_forward.router.weight", f"{m}ffn.router.weight"),
                    _experts_transposed(f"{h}feed_forward.experts.gate_up_proj", f"{m}ffn.experts.gate_up_proj"),
                    _experts_transposed(f"{h}feed_forward.experts.down_proj", f"{m}ffn.experts.down_proj")] + \
        [_copy(f"{h}feed_forward.shared_expert.{p}_proj.weight", f"{m}ffn.shared_experts.{p}_proj.weight")
         for p in ("gate", "up", "down")]
