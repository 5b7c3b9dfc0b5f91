"""Gemma 4's language model (``gemma4_text``): its ``config.json`` read into a :class:`~minitfm.config.ModelConfig`
with ``gemma4`` (:class:`~minitfm.config.Gemma4Dims`) and written back, and the key map of its layers.

Gemma 4 keeps Gemma 3's sandwich norms, QK-norm, GeGLU and local/global layers, with weights used as stored (no
1 + w) and scores not divided by sqrt(Dh); the global layers have their own head width and K/V heads
(``per_layer_config``, or ``global_head_dim`` and ``num_global_key_value_heads``), with ``attention_k_eq_v`` no
value projection, and a proportional RoPE (``partial_rotary_factor`` of the pairs turn).
``hidden_size_per_layer_input`` gives every layer a per-token input of its own (PLE), the last
``num_kv_shared_layers`` layers reuse earlier keys and values (``use_double_wide_mlp``: their FFN twice as wide), and
``enable_moe_block`` (the 26B A4B) adds ``num_experts`` experts of width ``moe_intermediate_size`` beside every FFN,
``top_k_experts`` per token. :class:`Gemma4LM` (:mod:`minitfm._gemma4`) computes it; :func:`decoder_class` says which
model class a config builds. A published (multimodal) Gemma 4 checkpoint, ``model_type`` "gemma4", loads as its
language model (:func:`language_config`, :func:`language_state`). Every other setting is refused by name:
``use_bidirectional_attention="all"``, ``attention_bias``, another activation, a per-layer vocabulary of another
size, other RoPE types.
"""
from __future__ import annotations

from minitfm._gemma4 import Gemma4LM, layer_heads, shares_kv
from minitfm.config import ModelConfig
from minitfm.models import DecoderOnlyLM
from minitfm.pretrained.families import _refuse, special_ids
from minitfm.pretrained.transforms import Rule, _copy, from_rotate_half, to_rotate_half

GEMMA4_CLASS = "Gemma4ForCausalLM"
# transformers' Gemma4TextConfig defaults (5.25), for the keys a config.json leaves out
_DEFAULTS = dict(num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                 tie_word_embeddings=True, sliding_window=512, final_logit_softcapping=None,
                 vocab_size_per_layer_input=262144, hidden_size_per_layer_input=256, attention_k_eq_v=False,
                 num_kv_shared_layers=0, enable_moe_block=False, use_double_wide_mlp=False, global_head_dim=512,
                 num_global_key_value_heads=None, attention_bias=False, use_bidirectional_attention=None,
                 pad_token_id=0, eos_token_id=1, bos_token_id=2)
_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
         "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}
_KINDS = ("sliding_attention", "full_attention")


def language_config(hf: dict) -> dict:
    """A Gemma 4 multimodal ``config.json`` (``model_type`` "gemma4", Gemma4ForConditionalGeneration, as Google
    publishes every Gemma 4) as its language model's: its ``text_config`` (tied as the whole model is). Another
    config passes unchanged."""
    if not isinstance(hf, dict) or hf.get("model_type") != "gemma4":
        return hf
    text = hf.get("text_config")
    _refuse(not isinstance(text, dict), "text_config", text, "a Gemma 4 checkpoint's language model is its text_config")
    return {**text, "model_type": "gemma4_text", "architectures": [GEMMA4_CLASS],
            "tie_word_embeddings": hf.get("tie_word_embeddings", text.get("tie_word_embeddings", True))}


def language_state(hf: dict, state: dict) -> dict:
    """A Gemma 4 multimodal checkpoint's tensors as its language model's: ``model.language_model.*`` renamed
    ``model.*``, the vision and audio towers and their embedders left out. Another checkpoint's pass unchanged."""
    if not isinstance(hf, dict) or hf.get("model_type") != "gemma4":
        return state
    inner = "model.language_model."
    return {("model." + k[len(inner):]) if k.startswith(inner) else k: v for k, v in state.items()
            if k.startswith(inner) or not k.startswith("model.")}


def decoder_class(config: ModelConfig):
    """The model class that holds ``config``: :class:`Gemma4LM` with ``config.gemma4``, else DecoderOnlyLM."""
    return Gemma4LM if config.gemma4 is not None else DecoderOnlyLM


def _global_heads(hf: dict, get, types: list, head_dim: int, kv: int) -> tuple[int, int]:
    """(Dh, H_kv) of the full-attention layers: transformers 5's ``per_layer_config`` (one entry per global layer,
    all alike), or ``global_head_dim`` and, with ``attention_k_eq_v``, ``num_global_key_value_heads``."""
    per_layer = hf.get("per_layer_config")
    if per_layer is None:
        heads = get("num_global_key_value_heads") if get("attention_k_eq_v") else None
        return get("global_head_dim"), heads or kv
    full = {str(i) for i, t in enumerate(types) if t == "full_attention"}
    values = [dict(v) for v in per_layer.values()] if isinstance(per_layer, dict) else []
    _refuse(not isinstance(per_layer, dict) or set(map(str, per_layer)) != full or any(v != values[0] for v in values)
            or any(set(v) - {"head_dim", "num_key_value_heads"} for v in values), "per_layer_config", per_layer,
            "one override, alike, of head_dim and num_key_value_heads for every full_attention layer")
    return (values[0].get("head_dim", head_dim), values[0].get("num_key_value_heads", kv)) if values else (head_dim, kv)


def _rope(hf: dict, global_dim: int) -> dict:
    """RoPE: the full layers' base, factor and turned pairs (proportional or default), the sliding layers' base."""
    params = hf.get("rope_parameters") or _ROPE
    _refuse(not isinstance(params, dict) or set(params) != set(_KINDS), "rope_parameters", params,
            "one RoPE per layer type, 'sliding_attention' and 'full_attention'")
    local, full = dict(params["sliding_attention"] or {}), dict(params["full_attention"] or {})
    _refuse(local.get("rope_type", "default") != "default" or set(local) - {"rope_type", "rope_theta"},
            "rope_parameters['sliding_attention']", local, "the sliding layers' RoPE is the default one")
    kind = full.get("rope_type", "default")
    _refuse(kind not in ("default", "proportional") or set(full) - {"rope_type", "rope_theta", "partial_rotary_factor",
            "factor"} or (kind == "default" and "factor" in full), "rope_parameters['full_attention']", full,
            "'proportional' (partial_rotary_factor, factor) or 'default'")
    for theta in (local.get("rope_theta"), full.get("rope_theta")):
        _refuse(isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0, "rope_theta", theta,
                "a number > 0")
    pairs = None
    if kind == "proportional":
        part = full.get("partial_rotary_factor", 1.0)
        _refuse(isinstance(part, bool) or not isinstance(part, (int, float)) or not 0 <= part <= 1,
                "partial_rotary_factor", part, "a share of the global head in [0, 1]")
        pairs = int(part * global_dim // 2)
        pairs = None if pairs == global_dim // 2 else pairs
    factor = full.get("factor", 1.0)
    _refuse(isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0, "factor", factor,
            "a number > 0")
    return {"rope_base": float(full["rope_theta"]), "rope_scale": float(factor),
            "rope_local_base": float(local["rope_theta"])}, pairs


def gemma4_config_from_hf(hf: dict) -> ModelConfig:
    """The ModelConfig of a Gemma 4 text ``config.json`` (dropout off); a setting minitfm lacks is refused by name."""
    def get(key):
        return hf[key] if key in hf else _DEFAULTS[key]

    _refuse(bool(get("attention_bias")), "attention_bias", get("attention_bias"), "Gemma 4's projections have no biases")
    both_ways = get("use_bidirectional_attention")  # "vision": only image tokens see both ways, and text has none
    _refuse(both_ways not in (None, "vision"), "use_bidirectional_attention", both_ways, "decoders are causal")
    act = get("hidden_activation")
    _refuse(act != "gelu_pytorch_tanh", "hidden_activation", act, "Gemma 4 gates with the tanh GELU")
    d, heads, vocab, n = hf["hidden_size"], hf["num_attention_heads"], hf["vocab_size"], hf["num_hidden_layers"]
    head_dim, kv = get("head_dim") or d // heads, get("num_key_value_heads") or heads
    types = list(hf.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)])
    _refuse(set(types) - set(_KINDS) or len(types) != n, "layer_types", types, f"'sliding_attention' or "
            f"'full_attention' for each of the {n} layers")
    types[-1] = "full_attention"  # transformers forces the last layer global (with a warning)
    shared = get("num_kv_shared_layers")
    _refuse(not 0 <= shared < n or set(types[n - shared:]) - set(types[:n - shared]), "num_kv_shared_layers", shared,
            "fewer than the layers, each kind it shares computed by an earlier layer")
    ple = get("hidden_size_per_layer_input") or 0
    _refuse(bool(ple) and get("vocab_size_per_layer_input") != vocab, "vocab_size_per_layer_input",
            get("vocab_size_per_layer_input"), f"minitfm's per-layer table has the vocabulary's {vocab} rows")
    global_dim, global_kv = _global_heads(hf, get, types, head_dim, kv)
    experts = {}
    if get("enable_moe_block"):
        sizes = {k: hf.get(k) for k in ("num_experts", "top_k_experts", "moe_intermediate_size")}
        _refuse(any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in sizes.values()) or
                sizes["top_k_experts"] > sizes["num_experts"], "enable_moe_block with", sizes,
                "ints >= 1 for the experts' count, top-k (at most the count) and width")
        experts = dict(experts=sizes["num_experts"], top_k=sizes["top_k_experts"], d_expert=sizes["moe_intermediate_size"])
    rope, pairs = _rope(hf, global_dim)
    sliding = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    return ModelConfig(
        vocab_size=vocab, d_model=d, n_heads=heads, n_kv_heads=kv, head_dim=None if head_dim * heads == d else head_dim,
        d_ff=hf["intermediate_size"], n_layers=n, max_seq_len=hf["max_position_embeddings"], norm="rms",
        norm_first=True, pos="rope", ffn="geglu_tanh", bias=False, dropout=0.0,
        tie_embeddings=bool(get("tie_word_embeddings")), scale_embeddings=True, norm_eps=float(get("rms_norm_eps")),
        qk_norm="head", sublayer_norm="both", attn_scale=1.0, final_softcap=get("final_logit_softcapping"), **rope,
        sliding_window=get("sliding_window") if sliding else None, sliding_layers=sliding or None,
        **special_ids({k: get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}, vocab),
        gemma4=dict(global_head_dim=global_dim, global_kv_heads=None if global_kv == kv else global_kv,
                    k_eq_v=bool(get("attention_k_eq_v")), global_rope_pairs=pairs, ple_dim=ple, kv_shared_layers=shared,
                    double_wide_mlp=bool(get("use_double_wide_mlp")) and shared > 0, **experts))


def gemma4_config_json(c: ModelConfig) -> dict:
    """``c`` (resolved) as Gemma 4's text ``config.json``; ValueError for a config without ``gemma4``."""
    g = c.gemma4
    if g is None:
        raise ValueError("a Gemma 4 config.json describes Gemma 4's layers (config.gemma4)")
    global_layers = [i for i in range(c.n_layers) if c.layer_window(i) is None]
    windows = {c.layer_window(i) for i in range(c.n_layers)} - {None}
    full = {"rope_type": "proportional", "rope_theta": c.rope_base, "factor": c.rope_scale,
            "partial_rotary_factor": 1.0 if g.global_rope_pairs is None else 2 * g.global_rope_pairs / g.global_head_dim}
    local = {"rope_type": "default", "rope_theta": c.rope_base if c.rope_local_base is None else c.rope_local_base}
    return {"model_type": "gemma4_text", "architectures": [GEMMA4_CLASS], "vocab_size": c.vocab_size,
            "hidden_size": c.d_model, "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
            "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads, "head_dim": c.d_head,
            "hidden_activation": "gelu_pytorch_tanh" if c.ffn == "geglu_tanh" else c.ffn,
            "max_position_embeddings": c.max_seq_len, "rms_norm_eps": c.norm_eps, "tie_word_embeddings": c.tie_embeddings,
            "rope_parameters": {"sliding_attention": local, "full_attention": full}, "attention_bias": False,
            "attention_dropout": 0.0, "sliding_window": windows.pop() if windows else 512,
            "layer_types": ["full_attention" if i in global_layers else "sliding_attention" for i in range(c.n_layers)],
            "final_logit_softcapping": c.final_softcap, "vocab_size_per_layer_input": c.vocab_size,
            "hidden_size_per_layer_input": g.ple_dim, "attention_k_eq_v": g.k_eq_v,
            "num_kv_shared_layers": g.kv_shared_layers, "use_double_wide_mlp": g.double_wide_mlp,
            "enable_moe_block": bool(g.experts), "num_experts": g.experts or None, "top_k_experts": g.top_k or None,
            "moe_intermediate_size": g.d_expert or None,
            "per_layer_config": {str(i): {"head_dim": g.global_head_dim, "num_key_value_heads": g.global_kv_heads or
                                          c.n_kv_heads} for i in global_layers},
            "bos_token_id": c.bos_id, "eos_token_id": c.eos_id, "pad_token_id": c.pad_id}


def _rotated(hf_key: str, key: str, heads: int) -> Rule:
    return Rule(hf_key, (key,), "rotate-half -> pairs", lambda t: [from_rotate_half(t, heads)],
                lambda ts: to_rotate_half(ts[0], heads))


def _columns_rotated(hf_key: str, key: str, heads: int) -> Rule:
    """o_proj of a layer whose values are its keys: each head's input columns in the keys' (paired) order."""
    return Rule(hf_key, (key,), "columns rotate-half -> pairs", lambda t: [from_rotate_half(t.t(), heads).t()
                                                                           .contiguous()],
                lambda ts: to_rotate_half(ts[0].t(), heads).t())


def gemma4_rules(c: ModelConfig) -> list[Rule]:
    """Every tensor of a Gemma 4 text checkpoint: embeddings and per-layer inputs, each layer, the final norm."""
    rules = [_copy("model.embed_tokens.weight", "tok_emb.weight"), _copy("model.norm.weight", "final_norm.weight")]
    if c.gemma4.ple_dim:
        rules += [_copy(f"model.{theirs}.weight", f"per_layer_embeddings.{ours}.weight") for theirs, ours in
                  (("embed_tokens_per_layer", "table"), ("per_layer_model_projection", "proj"),
                   ("per_layer_projection_norm", "norm"))]
    for i in range(c.n_layers):
        h, m = f"model.layers.{i}.", f"layers.{i}."
        a, s = f"{h}self_attn.", f"{m}self_attn."
        _, kv_heads, k_eq_v = layer_heads(c, i)
        rules += [_rotated(f"{a}q_proj.weight", f"{s}q_proj.weight", c.n_heads),
                  _rotated(f"{a}q_norm.weight", f"{s}q_norm.weight", 1), _copy(f"{h}layer_scalar", f"{m}layer_scalar")]
        values_are_keys = k_eq_v  # its values, and those of the layers that share them, in the keys' order
        rules.append((_columns_rotated if values_are_keys else _copy)(f"{a}o_proj.weight", f"{s}out_proj.weight",
                                                                       *((c.n_heads,) if values_are_keys else ())))
        if not shares_kv(c, i):
            rules += [_rotated(f"{a}k_proj.weight", f"{s}k_proj.weight", kv_heads),
                      _rotated(f"{a}k_norm.weight", f"{s}k_norm.weight", 1)]
            rules += [] if k_eq_v else [_copy(f"{a}v_proj.weight", f"{s}v_proj.weight")]
        rules += [_copy(f"{h}mlp.{p}_proj.weight", f"{m}ffn.{p}_proj.weight") for p in ("gate", "up", "down")]
        rules += [_copy(f"{h}{theirs}.weight", f"{m}{ours}.weight") for theirs, ours in (
            ("input_layernorm", "attn_norm"), ("post_attention_layernorm", "attn_out_norm"),
            ("pre_feedforward_layernorm", "ffn_norm"), ("post_feedforward_layernorm", "ffn_out_norm"))]
        if c.gemma4.experts:  # the router, the stacked experts and their norms, the dense FFN's second output norm
            rules += [_copy(f"{h}{theirs}", f"{m}{ours}") for theirs, ours in (
                ("router.proj.weight", "experts.proj.weight"), ("router.scale", "experts.scale"),
                ("router.per_expert_scale", "experts.per_expert_scale"), ("experts.gate_up_proj", "experts.gate_up_proj"),
                ("experts.down_proj", "experts.down_proj"), ("pre_feedforward_layernorm_2.weight", "experts.norm.weight"),
                ("post_feedforward_layernorm_2.weight", "experts.out_norm.weight"),
                ("post_feedforward_layernorm_1.weight", "ffn_out_norm_1.weight"))]
        if c.gemma4.ple_dim:
            rules += [_copy(f"{h}{theirs}.weight", f"{m}per_layer.{ours}.weight") for theirs, ours in (
                ("per_layer_input_gate", "gate"), ("per_layer_projection", "out"), ("post_per_layer_input_norm", "norm"))]
    if not c.tie_embeddings:
        rules.append(_copy("lm_head.weight", "lm_head.weight"))
    return rules
