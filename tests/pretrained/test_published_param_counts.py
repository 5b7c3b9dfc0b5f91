"""Issue 48: the open models of 2025-26, counted from their published ``config.json`` by
:func:`minitfm.params.estimate_params` and :func:`minitfm.params.active_params`, within 3 % of the counts their
authors state; and each count equal to transformers' count of the full-size model built on the meta device (no
memory, no download), so the transcription is read alike by both libraries.

Each entry below holds the fields that shape the model, transcribed by hand from the ``config.json`` of the Hugging
Face repository named above it (training and runtime settings such as ``torch_dtype``, ``quantization_config`` or
``use_cache`` left out). For a multimodal release (Llama 4 Scout, Qwen 3.5) it is the ``text_config``: the language
model minitfm counts; the authors' total also holds a vision encoder, which the comments size.
Gemma 4 is left to its own family's tests.
"""
from __future__ import annotations

import pytest
import torch
import transformers

from minitfm import pretrained as P
from minitfm.config import DeltaDims, ModelConfig, RoutedExperts
from minitfm.params import active_params, estimate_params

transformers.logging.set_verbosity_error()

YARN_V3 = {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
           "original_max_position_embeddings": 4096, "type": "yarn"}
YARN_OSS = {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
            "rope_type": "yarn", "truncate": False}


def _gpt_oss(layers: int, experts: int) -> dict:
    # openai/gpt-oss-120b and openai/gpt-oss-20b, config.json: the two differ in num_hidden_layers (36, 24) and
    # num_local_experts (128, 32)
    return {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "vocab_size": 201088,
            "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": layers, "num_attention_heads": 64,
            "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": experts, "num_experts_per_tok": 4,
            "experts_per_token": 4, "layer_types": ["sliding_attention", "full_attention"] * (layers // 2),
            "sliding_window": 128, "swiglu_limit": 7.0, "attention_bias": True, "hidden_act": "silu",
            "max_position_embeddings": 131072, "initial_context_length": 4096, "rms_norm_eps": 1e-05,
            "rope_theta": 150000, "rope_scaling": YARN_OSS, "tie_word_embeddings": False,
            "eos_token_id": 200002, "pad_token_id": 199999}


PUBLISHED = {
    # deepseek-ai/DeepSeek-V3, config.json (num_nextn_predict_layers names the multi-token-prediction module, 14B
    # more in the repository, outside the 671B and outside transformers' model: neither library builds it)
    "DeepSeek-V3": {
        "model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 129280,
        "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
        "num_nextn_predict_layers": 1, "num_attention_heads": 128, "num_key_value_heads": 128,
        "n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512,
        "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
        "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8, "moe_layer_freq": 1,
        "first_k_dense_replace": 3, "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu",
        "max_position_embeddings": 163840, "rms_norm_eps": 1e-06, "rope_theta": 10000, "rope_scaling": YARN_V3,
        "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1},
    "gpt-oss-120b": _gpt_oss(36, 128),
    "gpt-oss-20b": _gpt_oss(24, 32),
    # meta-llama/Llama-4-Scout-17B-16E, config.json, text_config (tie_word_embeddings from the outer config)
    "Llama-4-Scout": {
        "model_type": "llama4_text", "architectures": ["Llama4ForCausalLM"], "vocab_size": 202048,
        "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 16,
        "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "moe_layers": list(range(48)),
        "no_rope_layers": [1, 1, 1, 0] * 12, "attention_chunk_size": 8192, "attn_temperature_tuning": 4,
        "floor_scale": 8192, "attn_scale": 0.1, "use_qk_norm": True, "hidden_act": "silu",
        "max_position_embeddings": 262144, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": 200000,
        "eos_token_id": [200001, 200007, 200008], "pad_token_id": 200018},
    # Qwen/Qwen3-Next-80B-A3B-Instruct, config.json
    "Qwen3-Next-80B-A3B": {
        "model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "vocab_size": 151936,
        "hidden_size": 2048, "intermediate_size": 5120, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "num_hidden_layers": 48, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 256, "num_experts": 512, "num_experts_per_tok": 10,
        "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 32, "linear_value_head_dim": 128, "partial_rotary_factor": 0.25,
        "hidden_act": "silu", "max_position_embeddings": 262144, "rms_norm_eps": 1e-06, "rope_theta": 10000000,
        "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": 151643,
        "eos_token_id": 151645},
    # Qwen/Qwen3.5-397B-A17B, config.json, text_config (model_type qwen3_5_moe_text: minitfm reads qwen3_5_text
    # and qwen3_next; this one is written as a ModelConfig below, from these fields)
    "Qwen3.5-397B-A17B": {
        "model_type": "qwen3_5_moe_text", "vocab_size": 248320, "hidden_size": 4096, "num_hidden_layers": 60,
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256, "num_experts": 512,
        "num_experts_per_tok": 10, "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
        "full_attention_interval": 4, "linear_num_value_heads": 64, "linear_num_key_heads": 16,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "max_position_embeddings": 262144, "rms_norm_eps": 1e-06, "norm_topk_prob": True,
        "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25}, "tie_word_embeddings": False},
    # allenai/Olmo-3-1125-32B, config.json
    "Olmo-3-32B": {
        "model_type": "olmo3", "architectures": ["Olmo3ForCausalLM"], "vocab_size": 100278, "hidden_size": 5120,
        "intermediate_size": 27648, "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8,
        "hidden_act": "silu", "max_position_embeddings": 65536, "rms_norm_eps": 1e-06, "rope_theta": 500000,
        "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1, "factor": 8.0,
                         "original_max_position_embeddings": 8192, "rope_type": "yarn"},
        "sliding_window": 4096, "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 16,
        "attention_bias": False, "tie_word_embeddings": False, "eos_token_id": 100257, "pad_token_id": 100277},
}

# (total, active per token or None, active_params' embedding=), in billions, as the authors state them
STATED = {
    "DeepSeek-V3": (671, 37, True),  # DeepSeek-V3 technical report (arXiv 2412.19437), abstract: 671B, 37B activated
    # OpenAI, gpt-oss-120b & gpt-oss-20b model card (arXiv 2508.10925), section 2: 116.8B total, 5.1B active; 20.9B,
    # 3.6B. Their active count leaves the embedding table out (the head stays): with it, 5.7B and 4.2B
    "gpt-oss-120b": (116.8, 5.1, False),
    "gpt-oss-20b": (20.9, 3.6, False),
    # Meta's Llama 4 model card (meta-llama/Llama-4-Scout-17B-16E): 17B activated, 109B total, the vision encoder
    # included (the text model counted here: 107.8B)
    "Llama-4-Scout": (109, 17, True),
    # the model card: 80B in total and 3B activated. The active count is not checked: counted as Qwen's 3.3B for
    # Qwen3-30B-A3B is (minitfm.pretrained.published), it is 3.9B, and 3.3B even without the embedding table and head
    "Qwen3-Next-80B-A3B": (80, None, True),
    # the model card: 397B in total and 17B activated, the vision encoder included (the text model: 396.3B)
    "Qwen3.5-397B-A17B": (397, 17, True),
    # Olmo et al. 2025, "Olmo 3" (arXiv 2512.13961): the 32B model. (Olmo 3 7B's config counts 7.30B against its
    # stated 7B, 4 % away: the size is a name there, so it is left out.)
    "Olmo-3-32B": (32, None, True),
}


def qwen3_5_moe(hf: dict) -> ModelConfig:
    """Qwen 3.5's mixture-of-experts text model as a ModelConfig: Qwen3-Next's layers (three Gated DeltaNet layers
    in four, gated attention with a QK-norm, every FFN 512 experts and one gated shared expert) with Qwen 3.5's
    DeltaNet projections (``layout="qwen3_5"``, the same numbers grouped otherwise)."""
    n, every = hf["num_hidden_layers"], hf["full_attention_interval"]
    head, rope = hf["head_dim"], hf["rope_parameters"]
    return ModelConfig(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
        n_kv_heads=hf["num_key_value_heads"], head_dim=head, n_layers=n, max_seq_len=hf["max_position_embeddings"],
        norm="rms_offset", pos="rope", ffn="swiglu", bias=False, tie_embeddings=hf["tie_word_embeddings"],
        scale_embeddings=False, norm_eps=hf["rms_norm_eps"], qk_norm="head", rope_base=float(rope["rope_theta"]),
        rope_dims=int(head * rope["partial_rotary_factor"]), attn_output_gate=True,
        linear_layers=tuple(i for i in range(n) if (i + 1) % every),
        delta_net=DeltaDims(n_heads=hf["linear_num_value_heads"], n_key_heads=hf["linear_num_key_heads"],
                            d_key_head=hf["linear_key_head_dim"], d_value_head=hf["linear_value_head_dim"],
                            conv_kernel=hf["linear_conv_kernel_dim"], layout="qwen3_5"),
        n_experts=hf["num_experts"], experts_per_token=hf["num_experts_per_tok"],
        renormalize_experts=hf["norm_topk_prob"],
        routed=RoutedExperts(d_expert=hf["moe_intermediate_size"], d_shared=hf["shared_expert_intermediate_size"]),
        pad_id=None, bos_id=0, eos_id=0)


def config_of(name: str) -> ModelConfig:
    hf = PUBLISHED[name]
    return qwen3_5_moe(hf) if hf["model_type"] == "qwen3_5_moe_text" else P.config_from_hf(hf)


@pytest.mark.parametrize("name", list(STATED))
def test_the_counts_agree_with_what_the_authors_state(name):
    total, active, embedding = STATED[name]
    config = config_of(name)
    assert (config.n_experts is not None) == (name != "Olmo-3-32B")
    assert abs(estimate_params(config)["total"] / 1e9 / total - 1) < 0.03, estimate_params(config)["total"]
    assert active is None or abs(active_params(config, embedding=embedding) / 1e9 / active - 1) < 0.03


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_the_formula_counts_them_as_transformers_builds_them(name):
    """Total and active (less the E - k unpicked experts' share of transformers' stacked ``.experts.`` tensors)."""
    hf = {k: bool(v) if k == "attn_temperature_tuning" else v for k, v in PUBLISHED[name].items()}  # 5.x: a bool
    config = config_of(name)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**hf))
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    unused, rest = divmod(experts * (config.n_experts - config.experts_per_token), config.n_experts) \
        if config.n_experts else (0, 0)
    assert rest == 0 and (experts > 0) == (config.n_experts is not None)
    assert (estimate_params(config)["total"], active_params(config)) == (total, total - unused)


def test_leaving_the_embedding_table_out_of_the_active_count():
    """OpenAI's convention (gpt-oss): a token reads one row of the table, so only the head counts; a tied table is
    the head, so it stays; a dense model loses exactly the table."""
    oss = config_of("gpt-oss-120b")
    table = oss.vocab_size * oss.d_model
    assert active_params(oss) - active_params(oss, embedding=False) == table
    assert round(active_params(oss, embedding=False) / 1e9, 1) == 5.1 and round(active_params(oss) / 1e9, 1) == 5.7
    tied = ModelConfig.small_lm(tie_embeddings=True)
    assert active_params(tied, embedding=False) == active_params(tied) == estimate_params(tied)["total"]
    learned = ModelConfig.tiny(pos="learned", tie_embeddings=False)
    assert active_params(learned) - active_params(learned, embedding=False) == \
        (learned.vocab_size + learned.max_seq_len) * learned.d_model
    with pytest.raises(TypeError, match="embedding must be a bool"):
        active_params(oss, embedding="no")
