"""Qwen 3.5's language model (``qwen3_5_text``) and Qwen3-Next (``qwen3_next``): their ``config.json`` read into a
:class:`~minitfm.config.ModelConfig` and written back, and the key map of their two kinds of layers.

Qwen3-Next is Qwen 3.5's architecture with DeltaNet's projections fused otherwise (``in_proj_qkvz``, ``in_proj_ba``:
``delta_net.layout="qwen3_next"``) and a mixture of experts (softmax routing, ``norm_topk_prob``) with one shared
expert of its own width gated per token (``shared_expert_intermediate_size``: ``routed.d_shared``), in the layers
``decoder_sparse_step`` picks that ``mlp_only_layers`` does not list.

Three layers in four are Gated DeltaNet (``layer_types`` "linear_attention": ``config.linear_layers``, sizes
``linear_*``: ``config.delta_net``), a state of fixed size in place of a growing cache; the fourth is Qwen 3's
attention with an output gate: ``q_proj`` holds, head after head, the query (Dh rows) and the gate (Dh rows)
(``attn_output_gate``), RoPE turns the first quarter of each head (``partial_rotary_factor``: ``rope_dims``) and
every norm scales by 1 + w (``norm="rms_offset"``, its QK-norm too). The FFNs are dense SwiGLUs.
"""
from __future__ import annotations

import torch

from minitfm.config import ModelConfig
from minitfm.pretrained.families import _refuse, rope_from_hf, special_ids
from minitfm.pretrained.family_json import rope_json
from minitfm.pretrained.transforms import Rule, _copy, from_rotate_half, to_rotate_half

QWEN3_5_CLASSES = {"qwen3_5_text": "Qwen3_5ForCausalLM", "qwen3_next": "Qwen3NextForCausalLM"}
_DEFAULTS = dict(num_key_value_heads=4, head_dim=256, rms_norm_eps=1e-6, linear_conv_kernel_dim=4,
                 linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
                 decoder_sparse_step=1, moe_intermediate_size=512, shared_expert_intermediate_size=512,
                 num_experts_per_tok=10, num_experts=512, norm_topk_prob=True)
_NEXT_DEFAULTS = {**_DEFAULTS, "num_key_value_heads": 2}  # Qwen3NextConfig's, where they differ
_NEXT_KEYS = ("A_log", "conv1d.weight", "dt_bias", "in_proj_ba.weight", "in_proj_qkvz.weight", "norm.weight",
              "out_proj.weight")
_DELTA_KEYS = ("A_log", "conv1d.weight", "dt_bias", "in_proj_a.weight", "in_proj_b.weight", "in_proj_qkv.weight",
               "in_proj_z.weight", "norm.weight", "out_proj.weight")


def qwen3_5_config_from_hf(hf: dict, model_type: str = "qwen3_5_text") -> ModelConfig:
    """The ModelConfig of a Qwen 3.5 text or Qwen3-Next ``config.json`` (dropout off); a setting minitfm lacks is
    refused by name."""
    def get(key):
        return hf[key] if key in hf else (_NEXT_DEFAULTS if model_type == "qwen3_next" else _DEFAULTS)[key]

    act = hf.get("hidden_act", "silu")
    _refuse(act != "silu", "hidden_act", act, "Qwen 3.5's FFN and DeltaNet convolution use silu")
    _refuse(bool(hf.get("attention_bias")), "attention_bias", True, "Qwen 3.5's attention has no biases here")
    d, heads, vocab, n = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    head_dim = get("head_dim") or d // heads
    types = hf.get("layer_types") or ["linear_attention" if (i + 1) % hf.get("full_attention_interval", 4) else
                                      "full_attention" for i in range(n)]
    _refuse(set(types) - {"linear_attention", "full_attention"} or len(types) != n, "layer_types", types,
            f"'linear_attention' or 'full_attention' for each of the {n} layers")
    params = dict(hf.get("rope_parameters") or {})
    _refuse(bool(params.get("mrope_section")), "rope_parameters['mrope_section']", params.get("mrope_section"),
            "text positions only: one RoPE")
    partial = params.pop("partial_rotary_factor", hf.get("partial_rotary_factor", 0.25))  # transformers' default
    params = {k: v for k, v in params.items() if k not in ("mrope_section", "mrope_interleaved")}
    hf = {**{k: v for k, v in hf.items() if k != "partial_rotary_factor"}, "rope_parameters": params or None}
    rope_dims = int(head_dim * partial)
    _refuse(rope_dims < 2 or rope_dims % 2, "partial_rotary_factor", partial, f"RoPE turns an even part of {head_dim}")
    linear = tuple(i for i, kind in enumerate(types) if kind == "linear_attention")
    delta = dict(n_heads=get("linear_num_value_heads"), n_key_heads=get("linear_num_key_heads"),
                 d_key_head=get("linear_key_head_dim"), d_value_head=get("linear_value_head_dim"),
                 conv_kernel=get("linear_conv_kernel_dim"), layout="qwen3_next" if model_type == "qwen3_next" else "qwen3_5")
    experts = _next_experts(hf, n, get) if model_type == "qwen3_next" else {}
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=get("num_key_value_heads") or heads,
        head_dim=None if head_dim * heads == d else head_dim, d_ff=hf["intermediate_size"], n_layers=n,
        max_seq_len=hf["max_position_embeddings"], norm="rms_offset", norm_first=True, pos="rope", ffn="swiglu",
        bias=False, dropout=0.0, tie_embeddings=bool(hf.get("tie_word_embeddings", False)), scale_embeddings=False,
        norm_eps=float(get("rms_norm_eps")), qk_norm="head", **rope_from_hf(hf, "qwen3_5_text"),
        **special_ids(hf, vocab), rope_dims=None if rope_dims == head_dim else rope_dims, attn_output_gate=True,
        linear_layers=linear, delta_net=delta if linear else None, **experts)


def _next_experts(hf: dict, n: int, get) -> dict:
    """Qwen3-Next's experts: which layers, and their routing."""
    e, skip, step = get("num_experts"), set(hf.get("mlp_only_layers") or ()), get("decoder_sparse_step")
    layers = tuple(i for i in range(n) if i not in skip and e > 0 and (i + 1) % step == 0)
    if not layers:
        return {}
    shared = get("shared_expert_intermediate_size")
    _refuse(not shared, "shared_expert_intermediate_size", shared, "transformers builds the gated shared expert")
    return {"n_experts": e, "experts_per_token": get("num_experts_per_tok"),
            "renormalize_experts": bool(get("norm_topk_prob")), "moe_layers": None if len(layers) == n else layers,
            "routed": dict(d_expert=get("moe_intermediate_size"), d_shared=shared)}


def qwen3_5_config_json(c: ModelConfig, model_type: str = "qwen3_5_text") -> dict:
    """``c`` (resolved) as Qwen 3.5's text or Qwen3-Next's ``config.json``; ValueError for a config without the
    output gate (or, for Qwen3-Next, its experts)."""
    if not c.attn_output_gate or c.norm != "rms_offset" or c.qk_norm != "head":
        raise ValueError("a Qwen 3.5 config.json describes gated attention with (1 + w) norms and a QK-norm per head")
    r = c.routed
    if (model_type == "qwen3_next") != (r is not None and r.d_shared is not None):
        raise ValueError("Qwen3-Next's layers have experts with a gated shared expert (routed.d_shared); Qwen 3.5's none")
    n = c.delta_net
    rope = rope_json(c)
    rope["partial_rotary_factor"] = (c.rope_dims or c.d_head) / c.d_head
    out = {"model_type": model_type, "architectures": [QWEN3_5_CLASSES[model_type]], "vocab_size": c.vocab_size,
           "hidden_size": c.d_model, "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
           "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.d_head,
           "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps, "hidden_act": "silu",
           "tie_word_embeddings": c.tie_embeddings, "rope_parameters": rope, "attention_bias": False,
           "attention_dropout": 0.0, "bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id,
           "layer_types": ["linear_attention" if i in c.linear_layers else "full_attention" for i in range(c.n_layers)]}
    if n is not None:
        out.update(linear_num_value_heads=n.n_heads, linear_num_key_heads=n.n_key_heads,
                   linear_key_head_dim=n.d_key_head, linear_value_head_dim=n.d_value_head,
                   linear_conv_kernel_dim=n.conv_kernel)
    if r is not None:
        out.update(num_experts=c.n_experts, num_experts_per_tok=c.experts_per_token, norm_topk_prob=c.renormalize_experts,
                   moe_intermediate_size=r.d_expert, shared_expert_intermediate_size=r.d_shared, decoder_sparse_step=1,
                   mlp_only_layers=[i for i in range(c.n_layers) if not c.layer_moe(i)])
    return out


def _gated_query(hf_key: str, keys: tuple, heads: int, d_head: int, rope_dims) -> Rule:
    """q_proj (H 2 Dh, D), each head's query rows then its gate rows -> q_proj (query rows in pairs) and gate_proj."""
    def forward(t):
        parts = t.view(heads, 2, d_head, -1)
        return [from_rotate_half(parts[:, 0].reshape(heads * d_head, -1), heads, rope_dims),
                parts[:, 1].reshape(heads * d_head, -1).contiguous()]

    def inverse(ts):
        q = to_rotate_half(ts[0], heads, rope_dims).view(heads, 1, d_head, -1)
        return torch.cat([q, ts[1].view(heads, 1, d_head, -1)], dim=1).reshape(heads * 2 * d_head, -1)

    return Rule(hf_key, keys, "split each head's query | gate rows + rotate-half -> pairs", forward, inverse)


def _rotated(hf_key: str, key: str, heads: int, rope_dims) -> Rule:
    return Rule(hf_key, (key,), "rotate-half -> pairs", lambda t: [from_rotate_half(t, heads, rope_dims)],
                lambda ts: to_rotate_half(ts[0], heads, rope_dims))


def qwen3_5_rules(c: ModelConfig, i: int) -> list[Rule]:
    """Layer ``i``'s token mixer (Gated DeltaNet, or gated attention) and SwiGLU."""
    h, m = f"model.layers.{i}.", f"layers.{i}."
    mlp = [_copy(f"{h}mlp.{p}_proj.weight", f"{m}ffn.{p}_proj.weight") for p in ("gate", "up", "down")]
    if c.layer_moe(i):  # Qwen3-Next: router, stacked experts, the gated shared expert
        mlp = [_copy(f"{h}mlp.gate.weight", f"{m}ffn.router.weight"),
               _copy(f"{h}mlp.shared_expert_gate.weight", f"{m}ffn.shared_expert_gate.weight")] + \
            [_copy(f"{h}mlp.experts.{p}", f"{m}ffn.experts.{p}") for p in ("gate_up_proj", "down_proj")] + \
            [_copy(f"{h}mlp.shared_expert.{p}_proj.weight", f"{m}ffn.shared_experts.{p}_proj.weight")
             for p in ("gate", "up", "down")]
    if i in c.linear_layers:
        keys = _NEXT_KEYS if c.delta_net.layout == "qwen3_next" else _DELTA_KEYS
        return [_copy(f"{h}linear_attn.{k}", f"{m}self_attn.{k}") for k in keys] + mlp
    a, r = f"{h}self_attn.", f"{m}self_attn."
    return [_gated_query(f"{a}q_proj.weight", (f"{r}q_proj.weight", f"{r}gate_proj.weight"), c.n_heads, c.d_head,
                         c.rope_dims),
            _rotated(f"{a}k_proj.weight", f"{r}k_proj.weight", c.n_kv_heads, c.rope_dims),
            _copy(f"{a}v_proj.weight", f"{r}v_proj.weight"), _copy(f"{a}o_proj.weight", f"{r}out_proj.weight"),
            _rotated(f"{a}q_norm.weight", f"{r}q_norm.weight", 1, c.rope_dims),
            _rotated(f"{a}k_norm.weight", f"{r}k_norm.weight", 1, c.rope_dims)] + mlp
