"""MiniMax-M2 (``minimax_m2``): its ``config.json`` read into a :class:`~minitfm.config.ModelConfig` and written back,
and the key map of its experts.

MiniMax-M2 is Llama's block with OLMo 2's QK-norm over all heads (``qk_norm="all"``), RoPE on part of each head
(``rotary_dim``, or ``partial_rotary_factor``: ``rope_dims``) and a mixture of experts in every layer, scored with a
sigmoid and chosen with a correction bias as DeepSeek-V3 does, renormalised, without shared experts. Its files name
the experts as Mixtral's (``block_sparse_moe.experts.e.w1/w3/w2``, ``block_sparse_moe.gate``) and keep the bias on the
block (``block_sparse_moe.e_score_correction_bias``); the rules read the stacked names transformers 5 uses in memory
(``mlp.experts.gate_up_proj``, ...), to which :func:`~minitfm.pretrained.deepseek.fuse_experts` brings the files.
"""
from __future__ import annotations

from minitfm.config import ModelConfig
from minitfm.pretrained.families import _refuse, rope_from_hf, special_ids
from minitfm.pretrained.family_json import rope_json
from minitfm.pretrained.transforms import Rule, _copy

MINIMAX_CLASS = "MiniMaxM2ForCausalLM"
_DEFAULTS = dict(num_local_experts=256, num_experts_per_tok=8, head_dim=128, num_key_value_heads=8, rms_norm_eps=1e-6)


def minimax_config_from_hf(hf: dict) -> ModelConfig:
    """The ModelConfig of a MiniMax-M2 ``config.json`` (dropout off); a setting minitfm lacks is refused by name."""
    def get(key):
        return hf[key] if key in hf else _DEFAULTS[key]

    act = hf.get("hidden_act", "silu")
    _refuse(act != "silu", "hidden_act", act, "MiniMax-M2's experts are SwiGLU (silu)")
    _refuse(bool(hf.get("router_jitter_noise")), "router_jitter_noise", hf.get("router_jitter_noise"),
            "minitfm's models are for inference: no noise on the router")
    d, heads, vocab, n_layers = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    head_dim = get("head_dim") or d // heads
    params = dict(hf.get("rope_parameters") or {})
    partial = params.pop("partial_rotary_factor", None)
    if partial is None:  # the released files' legacy rotary_dim, else the whole head
        partial = hf["rotary_dim"] / head_dim if hf.get("rotary_dim") else hf.get("partial_rotary_factor", 1.0)
    if not params and not any(k in hf for k in ("rope_scaling", "rope_theta")):
        params = {"rope_theta": 5e6, "rope_type": "default"}  # transformers' MiniMaxM2Config default
    hf = {**{k: v for k, v in hf.items() if k != "partial_rotary_factor"}, "rope_parameters": params or None}
    rope_dims = int(head_dim * partial)
    _refuse(rope_dims < 2 or rope_dims % 2 or rope_dims > head_dim, "partial_rotary_factor", partial,
            f"RoPE turns an even number of the {head_dim} features of a head")
    f = hf["intermediate_size"]
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=get("num_key_value_heads") or heads,
        head_dim=None if head_dim * heads == d else head_dim, d_ff=f, n_layers=n_layers,
        max_seq_len=hf["max_position_embeddings"], norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=False,
        dropout=0.0, tie_embeddings=bool(hf.get("tie_word_embeddings", False)), scale_embeddings=False,
        norm_eps=float(get("rms_norm_eps")), qk_norm="all", **rope_from_hf(hf, "minimax_m2"),
        **special_ids(hf, vocab), rope_dims=None if rope_dims == head_dim else rope_dims,
        n_experts=get("num_local_experts"), experts_per_token=get("num_experts_per_tok"), renormalize_experts=True,
        routed=dict(d_expert=f, score_func="sigmoid", topk_method="noaux_tc"))


def minimax_config_json(c: ModelConfig) -> dict:
    """``c`` (resolved) as MiniMax-M2's ``config.json``; ValueError for a config without routed experts."""
    if c.routed is None:
        raise ValueError("a MiniMax-M2 config.json describes routed experts (routed)")
    rope = rope_json(c)
    rope["partial_rotary_factor"] = (c.rope_dims or c.d_head) / c.d_head
    return {"model_type": "minimax_m2", "architectures": [MINIMAX_CLASS], "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": c.routed.d_expert, "num_hidden_layers": c.n_layers,
            "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.d_head,
            "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps, "hidden_act": "silu",
            "tie_word_embeddings": c.tie_embeddings, "rope_parameters": rope, "attention_dropout": 0.0,
            "num_local_experts": c.n_experts, "num_experts_per_tok": c.experts_per_token,
            "bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id}


def minimax_ffn_rules(c: ModelConfig, i: int) -> list[Rule]:
    """Layer ``i``'s router, correction bias and stacked experts (under transformers 5's names in memory)."""
    h, m = f"model.layers.{i}.mlp.", f"layers.{i}.ffn."
    return [_copy(f"{h}gate.weight", f"{m}router.weight"),
            _copy(f"{h}e_score_correction_bias", f"{m}e_score_correction_bias"),
            _copy(f"{h}experts.gate_up_proj", f"{m}experts.gate_up_proj"),
            _copy(f"{h}experts.down_proj", f"{m}experts.down_proj")]
