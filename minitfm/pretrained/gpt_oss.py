"""gpt-oss (``gpt_oss``): its ``config.json`` read into a :class:`~minitfm.config.ModelConfig` and written back, and
the key map of what it adds to Llama's block.

gpt-oss is Llama's block with four changes: a learned sink logit per head joins every softmax (``attn_sinks``),
layers alternate between a sliding window and the whole past (``layer_types``), biases on q, k, v and o
(``attention_bias``), and every FFN is a mixture of experts with a biased router, biased experts and a clamped
SwiGLU whose gate and up rows alternate (``config.routed``). The router takes a softmax over the k chosen logits,
which is the renormalised softmax (``renormalize_experts``). The files store the experts as (E, in, out):
``mlp.experts.gate_up_proj`` (E, D, 2F) and ``down_proj`` (E, F, D), transposed on the way in and back.
"""
from __future__ import annotations

from minitfm.config import ModelConfig
from minitfm.pretrained.families import _refuse, rope_from_hf, special_ids
from minitfm.pretrained.family_json import rope_json
from minitfm.pretrained.transforms import Rule, _copy

GPT_OSS_CLASS = "GptOssForCausalLM"
# transformers' GptOssConfig RoPE when a file has none
GPT_OSS_ROPE = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096, "rope_theta": 150000.0}
_DEFAULTS = dict(num_local_experts=128, num_experts_per_tok=4, head_dim=64, num_key_value_heads=8, sliding_window=128,
                 rms_norm_eps=1e-5, swiglu_alpha=1.702, swiglu_limit=7.0, attention_bias=True)


def gpt_oss_config_from_hf(hf: dict) -> ModelConfig:
    """The ModelConfig of a gpt-oss ``config.json`` (dropout off); a setting minitfm lacks is refused by name."""
    def get(key):
        return hf[key] if key in hf else _DEFAULTS[key]

    if not any(k in hf for k in ("rope_parameters", "rope_scaling", "rope_theta")):
        hf = {**hf, "rope_parameters": dict(GPT_OSS_ROPE)}
    d, heads, vocab, n_layers = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    types = hf.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
    _refuse(set(types) - {"sliding_attention", "full_attention"} or len(types) != n_layers, "layer_types", types,
            f"one of 'sliding_attention', 'full_attention' per layer ({n_layers})")
    sliding = tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")
    window = get("sliding_window") if sliding else None
    bias = bool(get("attention_bias"))
    f = hf["intermediate_size"]
    routed = dict(d_expert=f, score_func="softmax", topk_method="greedy", router_bias=True, expert_bias=True,
                  activation="clamped_swiglu", swiglu_alpha=float(get("swiglu_alpha")),
                  swiglu_limit=float(get("swiglu_limit")), gate_up_layout="interleaved")
    head_dim = get("head_dim")
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=get("num_key_value_heads") or heads,
        head_dim=None if head_dim * heads == d else head_dim, d_ff=f, n_layers=n_layers,
        max_seq_len=hf["max_position_embeddings"], norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=bias,
        dropout=0.0, tie_embeddings=bool(hf.get("tie_word_embeddings", False)), scale_embeddings=False,
        norm_eps=float(get("rms_norm_eps")), **rope_from_hf(hf, "gpt_oss"), **special_ids(hf, vocab),
        sliding_window=window, sliding_layers=None if window is None or len(sliding) == n_layers else sliding,
        n_experts=get("num_local_experts"), experts_per_token=get("num_experts_per_tok"), renormalize_experts=True,
        routed=routed, attn_sinks=True)


def gpt_oss_config_json(c: ModelConfig) -> dict:
    """``c`` (resolved) as gpt-oss's ``config.json``; ValueError for a config without sinks or routed experts."""
    if not c.attn_sinks or c.routed is None:
        raise ValueError("a gpt-oss config.json describes sink attention (attn_sinks) and routed experts (routed)")
    r = c.routed
    windowed = [c.layer_window(i) is not None for i in range(c.n_layers)]
    return {"model_type": "gpt_oss", "architectures": [GPT_OSS_CLASS], "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": r.d_expert, "num_hidden_layers": c.n_layers,
            "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.d_head,
            "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps, "attention_bias": c.bias,
            "tie_word_embeddings": c.tie_embeddings, "rope_parameters": rope_json(c), "attention_dropout": 0.0,
            "layer_types": ["sliding_attention" if w else "full_attention" for w in windowed],
            "sliding_window": c.sliding_window, "num_local_experts": c.n_experts,
            "num_experts_per_tok": c.experts_per_token, "swiglu_alpha": r.swiglu_alpha, "swiglu_limit": r.swiglu_limit,
            "bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id}


def _experts_transposed(hf_key: str, key: str) -> Rule:
    return Rule(hf_key, (key,), "transpose (E, in, out) -> (E, out, in)", lambda t: [t.transpose(1, 2).contiguous()],
                lambda ts: ts[0].transpose(1, 2).contiguous())


def gpt_oss_rules(c: ModelConfig, i: int) -> list[Rule]:
    """Layer ``i``'s sinks, router and experts (attention's q, k, v, o and the norms are Llama's)."""
    h, m = f"model.layers.{i}.", f"layers.{i}."
    return [_copy(f"{h}self_attn.sinks", f"{m}self_attn.sinks"),
            _copy(f"{h}mlp.router.weight", f"{m}ffn.router.weight"), _copy(f"{h}mlp.router.bias", f"{m}ffn.router.bias"),
            _experts_transposed(f"{h}mlp.experts.gate_up_proj", f"{m}ffn.experts.gate_up_proj"),
            _copy(f"{h}mlp.experts.gate_up_proj_bias", f"{m}ffn.experts.gate_up_proj_bias"),
            _experts_transposed(f"{h}mlp.experts.down_proj", f"{m}ffn.experts.down_proj"),
            _copy(f"{h}mlp.experts.down_proj_bias", f"{m}ffn.experts.down_proj_bias")]
