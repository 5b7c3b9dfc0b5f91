"""DeepSeek-V2 and V3 (``deepseek_v2``, ``deepseek_v3``) and GLM-4.5 (``glm4_moe``): their ``config.json`` read into a
:class:`~minitfm.config.ModelConfig` and written back, and the key map of their latent attention and routed experts.

GLM-4.5 routes its experts as DeepSeek-V3 does and keeps Llama's attention, with q/k/v biases, an optional QK-norm
per head (``use_qk_norm``) and RoPE on the first half of each head only (``partial_rotary_factor``: ``rope_dims``).

Both are Llama's block with two sublayers swapped: multi-head latent attention (``config.mla``) and, from layer
``first_k_dense_replace`` on, routed experts with shared ones (``config.routed`` in ``config.moe_layers``; the first
layers keep a dense SwiGLU of ``intermediate_size``). V2 scores the experts with a softmax and picks them greedily or
group-limited (``topk_method``), never renormalising (transformers' V2 block ignores ``norm_topk_prob``); V3 with a
sigmoid and the bias-corrected ``noaux_tc``. The files keep every expert's three matrices apart; minitfm (and
transformers 5 in memory) stacks them (:func:`fuse_experts`, and back with
:func:`minitfm.pretrained.weights.unfuse_experts`). DeepSeek's RoPE rotates adjacent pairs (transformers'
``rope_interleave``), as minitfm does: q and k are copied, not permuted.
"""
from __future__ import annotations

import re

import torch

from minitfm.config import ModelConfig
from minitfm.layers.latent_attention import DEEPSEEK_NAMES
from minitfm.pretrained.families import _refuse, rope_from_hf, special_ids
from minitfm.pretrained.family_json import rope_json
from minitfm.pretrained.transforms import Rule, _copy

DEEPSEEK_TYPES = {"deepseek_v2": "DeepseekV2ForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM",
                  "glm4_moe": "Glm4MoeForCausalLM"}  # the families of routed experts after dense first layers
# transformers' defaults (5.25) for the keys a config.json may leave out
_DEFAULTS = {"deepseek_v2": dict(first_k_dense_replace=0, kv_lora_rank=512, q_lora_rank=1536, n_routed_experts=64,
                                 n_shared_experts=2, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                                 routed_scaling_factor=1.0, topk_method="greedy", moe_intermediate_size=1407),
             "deepseek_v3": dict(first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536, n_routed_experts=256,
                                 n_shared_experts=1, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                                 routed_scaling_factor=2.5, n_group=8, topk_group=4, num_experts_per_tok=8,
                                 norm_topk_prob=True, moe_intermediate_size=2048, num_key_value_heads=128),
             "glm4_moe": dict(first_k_dense_replace=1, n_routed_experts=128, n_shared_experts=1, routed_scaling_factor=1.0,
                              n_group=1, topk_group=1, num_experts_per_tok=8, norm_topk_prob=True,
                              moe_intermediate_size=1408, num_key_value_heads=8, rms_norm_eps=1e-5)}


def deepseek_config_from_hf(hf: dict, model_type: str) -> ModelConfig:
    """The ModelConfig of a DeepSeek-V2/V3 ``config.json`` (dropout off); a setting minitfm lacks is refused by name."""
    def get(key):
        return hf[key] if key in hf else _DEFAULTS[model_type].get(key)

    v3, glm = model_type == "deepseek_v3", model_type == "glm4_moe"
    act = hf.get("hidden_act", "silu")
    _refuse(act != "silu", "hidden_act", act, "DeepSeek's FFNs are SwiGLU (silu)")
    for flag in ("mlp_bias",) if glm else ("attention_bias", "mlp_bias"):
        _refuse(bool(hf.get(flag, False)), flag, True, "minitfm's DeepSeek blocks have no biases")
    _refuse(v3 and hf.get("rope_interleave", True) is False, "rope_interleave", False, "minitfm rotates adjacent pairs")
    method = "noaux_tc" if v3 or glm else get("topk_method")
    _refuse(method not in ("greedy", "group_limited_greedy", "noaux_tc"), "topk_method", method,
            "DeepSeek-V2's router picks 'greedy' or 'group_limited_greedy'")
    _refuse(model_type == "deepseek_v2" and method == "noaux_tc", "topk_method", method, "transformers' DeepSeek-V2 has no 'noaux_tc'")
    shared, experts, k = get("n_shared_experts"), get("n_routed_experts"), get("num_experts_per_tok")
    _refuse(not shared, "n_shared_experts", shared, "transformers builds the shared experts' SwiGLU in every MoE layer")
    _refuse(not experts or not k, "n_routed_experts/num_experts_per_tok", (experts, k), "DeepSeek routes experts")
    d, heads, vocab, n_layers = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    kv = get("num_key_value_heads") or heads
    _refuse(kv != heads and not glm, "num_key_value_heads", kv, f"latent attention expands keys and values for every head ({heads})")
    dense = get("first_k_dense_replace") or 0
    _refuse(dense >= n_layers, "first_k_dense_replace", dense, f"a DeepSeek model has MoE layers (of {n_layers})")
    routed = dict(d_expert=get("moe_intermediate_size"), score_func="sigmoid" if v3 or glm else "softmax",
                  topk_method=method, n_group=get("n_group") or 1, topk_group=get("topk_group") or 1,
                  routed_scaling_factor=float(get("routed_scaling_factor")), n_shared_experts=shared)
    if glm:
        attention = _glm_attention(hf, d, heads, kv)
        hf = attention.pop("hf")
    else:
        attention = {"mla": {key: get(key) for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                                       "v_head_dim", "q_lora_rank")}}
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, d_ff=hf["intermediate_size"], n_layers=n_layers,
        max_seq_len=hf["max_position_embeddings"], norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=False,
        dropout=0.0, tie_embeddings=bool(hf.get("tie_word_embeddings", False)), scale_embeddings=False,
        norm_eps=float(get("rms_norm_eps") or 1e-6), **rope_from_hf(hf, model_type), **special_ids(hf, vocab),
        **attention, n_experts=experts, experts_per_token=k, routed=routed,
        renormalize_experts=bool(get("norm_topk_prob")) and (v3 or glm),
        moe_layers=None if dense == 0 else tuple(range(dense, n_layers)))


def _glm_attention(hf: dict, d: int, heads: int, kv: int) -> dict:
    """GLM-4.5's attention fields, and ``hf`` with its partial rotary factor taken out of the RoPE settings."""
    head_dim = hf.get("head_dim") or d // heads
    params = dict(hf.get("rope_parameters") or {})
    partial = params.pop("partial_rotary_factor", hf.get("partial_rotary_factor", 0.5))  # transformers' default: 0.5
    hf = {**{k: v for k, v in hf.items() if k != "partial_rotary_factor"}, "rope_parameters": params or None}
    rope_dims = int(head_dim * partial)
    _refuse(rope_dims < 2 or rope_dims % 2, "partial_rotary_factor", partial, f"RoPE turns an even number of the "
            f"{head_dim} features of a head")
    return {"hf": hf, "n_kv_heads": kv, "head_dim": None if head_dim * heads == d else head_dim,
            "qkv_bias": bool(hf.get("attention_bias", False)), "qk_norm": "head" if hf.get("use_qk_norm") else "none",
            "rope_dims": None if rope_dims == head_dim else rope_dims}


def deepseek_config_json(c: ModelConfig, model_type: str) -> dict:
    """``c`` (resolved) as a DeepSeek ``config.json``; ValueError for a config without latent attention and routed
    experts (a DeepSeek file always has both); what the family cannot hold otherwise is left out or written as
    DeepSeek has it, so that :func:`~minitfm.pretrained.conventions.model_family` sees the loss on the way back."""
    if (c.mla is None) != (model_type == "glm4_moe") or c.routed is None:
        raise ValueError("a DeepSeek config.json describes latent attention (mla; GLM-4.5: not) and routed experts")
    moe = [c.layer_moe(i) for i in range(c.n_layers)]
    dense = moe.index(True) if True in moe else c.n_layers
    m, r = c.mla, c.routed
    out = {"model_type": model_type, "architectures": [DEEPSEEK_TYPES[model_type]], "vocab_size": c.vocab_size,
           "hidden_size": c.d_model, "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
           "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_heads,
           "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps, "hidden_act": "silu",
           "tie_word_embeddings": c.tie_embeddings, "attention_bias": False, "attention_dropout": 0.0,
           "rope_parameters": rope_json(c), "bos_token_id": c.bos_id, "eos_token_id": c.eos_id,
           "pad_token_id": c.pad_id, "n_routed_experts": c.n_experts, "num_experts_per_tok": c.experts_per_token,
           "moe_intermediate_size": r.d_expert, "n_shared_experts": r.n_shared_experts, "n_group": r.n_group,
           "topk_group": r.topk_group, "routed_scaling_factor": r.routed_scaling_factor,
           "first_k_dense_replace": dense, "norm_topk_prob": c.renormalize_experts}
    if model_type == "glm4_moe":
        out.update(num_key_value_heads=c.n_kv_heads, head_dim=c.d_head, attention_bias=bool(c.qkv_bias),
                   use_qk_norm=c.qk_norm == "head")
        out["rope_parameters"]["partial_rotary_factor"] = (c.rope_dims or c.d_head) / c.d_head
        return out
    out.update(kv_lora_rank=m.kv_lora_rank, q_lora_rank=m.q_lora_rank, qk_nope_head_dim=m.qk_nope_head_dim,
               qk_rope_head_dim=m.qk_rope_head_dim, v_head_dim=m.v_head_dim)
    if model_type == "deepseek_v2":
        out["topk_method"] = r.topk_method
    else:
        out["rope_interleave"] = True
    return out


def deepseek_rules(c: ModelConfig, i: int) -> list[Rule]:
    """Layer ``i``'s attention and FFN rules (norms and embeddings are Llama's), against the stacked experts."""
    h, m = f"model.layers.{i}.", f"layers.{i}."
    present = ["q_proj"] if c.mla.q_lora_rank is None else ["q_a_proj", "q_a_layernorm", "q_b_proj"]
    return [_copy(f"{h}self_attn.{theirs}.weight", f"{m}self_attn.{DEEPSEEK_NAMES[theirs]}.weight")
            for theirs in present + ["kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj"]] + \
        routed_ffn_rules(c, i)


def routed_ffn_rules(c: ModelConfig, i: int) -> list[Rule]:
    """Layer ``i``'s FFN: a dense SwiGLU, or the router, stacked experts, shared experts and correction bias."""
    h, m, rules = f"model.layers.{i}.", f"layers.{i}.", []
    if not c.layer_moe(i):
        return rules + [_copy(f"{h}mlp.{p}_proj.weight", f"{m}ffn.{p}_proj.weight") for p in ("gate", "up", "down")]
    rules += [_copy(f"{h}mlp.gate.weight", f"{m}ffn.router.weight"),
              _copy(f"{h}mlp.experts.gate_up_proj", f"{m}ffn.experts.gate_up_proj"),
              _copy(f"{h}mlp.experts.down_proj", f"{m}ffn.experts.down_proj")]
    rules += [_copy(f"{h}mlp.shared_experts.{p}_proj.weight", f"{m}ffn.shared_experts.{p}_proj.weight")
              for p in ("gate", "up", "down")]
    if c.routed.topk_method == "noaux_tc":
        rules.append(_copy(f"{h}mlp.gate.e_score_correction_bias", f"{m}ffn.e_score_correction_bias"))
    return rules


_FILE_NAMES = {"mlp": ("gate_proj", "up_proj", "down_proj"), "block_sparse_moe": ("w1", "w3", "w2")}


def fuse_experts(state: dict, module: str = "mlp") -> dict:
    """The files' per-expert keys (``{module}.experts.e.gate_proj.weight`` (F, D), up, down (D, F); Mixtral's names
    w1, w3, w2 under ``block_sparse_moe``) -> the stacked ``mlp.experts.gate_up_proj`` (E, 2F, D), gate rows first,
    and ``mlp.experts.down_proj`` (E, D, F), with the router and a block-level correction bias under ``mlp.`` too
    (transformers 5's names in memory); ValueError when a layer's experts are not numbered 0..E-1, each complete."""
    gate, up, down = _FILE_NAMES[module]
    pattern = re.compile(rf"^(.*\.){module}\.experts\.(\d+)\.({gate}|{up}|{down})\.weight$")
    out, parts = {}, {}
    for key, tensor in state.items():
        found = pattern.match(key)
        if found is None:
            out[key.replace(f".{module}.gate.", ".mlp.gate.").replace(f".{module}.e_score", ".mlp.e_score")] = tensor
        else:
            role = {gate: "gate", up: "up", down: "down"}[found.group(3)]
            parts.setdefault(found.group(1) + "mlp.experts", {})[(int(found.group(2)), role)] = tensor
    for prefix, got in parts.items():
        n = 1 + max(e for e, _ in got)
        if set(got) != {(e, p) for e in range(n) for p in ("gate", "up", "down")}:
            raise ValueError(f"{prefix}: the experts must be numbered 0..{n - 1}, each with its gate, up and down "
                             f"matrices; got {sorted(got)[:6]}")
        out[f"{prefix}.gate_up_proj"] = torch.stack([torch.cat([got[e, "gate"], got[e, "up"]]) for e in range(n)])
        out[f"{prefix}.down_proj"] = torch.stack([got[e, "down"] for e in range(n)])
    return out
