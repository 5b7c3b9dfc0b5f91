"""The ``config.json`` of nine published open decoders, as their authors released them, and the parameter counts
the authors state: what chapter 13b counts without downloading a byte.

:data:`PUBLISHED` maps a model's name to its ``config.json`` (the fields that shape the model and its special ids;
training and runtime settings such as ``torch_dtype`` or ``use_cache`` left out), transcribed by hand from the file
in the Hugging Face repository named in the comment above each entry (nothing is fetched); the totals they imply
agree with the authors' own, :data:`STATED`, which ``tests/pretrained/test_family_params.py`` checks. :func:`minitfm.pretrained.config_from_hf` reads
every entry; :func:`minitfm.params.estimate_params` and :func:`minitfm.params.active_params` count it.
:data:`STATED` holds the counts the authors state, in billions, ``(total, active per token or None)``, with where
they state them. They are rounded, and not always to the nearest: compare a count with them to a few percent.
"""
from __future__ import annotations

PUBLISHED = {
    # Qwen/Qwen3-0.6B, config.json
    "Qwen3-0.6B": {
        "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "hidden_size": 1024,
        "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000, "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": True,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28,
        "bos_token_id": 151643, "eos_token_id": 151645},
    # meta-llama/Llama-3.2-1B, config.json
    "Llama-3.2-1B": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 64, "hidden_act": "silu", "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "bos_token_id": 128000, "eos_token_id": 128001},
    # google/gemma-3-1b-pt, config.json
    "Gemma-3-1B": {
        "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], "vocab_size": 262144, "hidden_size": 1152,
        "intermediate_size": 6912, "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_local_base_freq": 10000, "rope_scaling": None,
        "query_pre_attn_scalar": 256, "sliding_window": 512, "sliding_window_pattern": 6,
        "attn_logit_softcapping": None, "final_logit_softcapping": None, "attention_bias": False,
        "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0},
    # mistralai/Mistral-7B-v0.1, config.json
    "Mistral-7B-v0.1": {
        "model_type": "mistral", "architectures": ["MistralForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "sliding_window": 4096, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2},
    # microsoft/Phi-3-mini-4k-instruct, config.json
    "Phi-3-mini": {
        "model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "vocab_size": 32064, "hidden_size": 3072,
        "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "hidden_act": "silu", "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": None, "sliding_window": 2047,
        "attention_bias": False, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 32000,
        "pad_token_id": 32000},
    # allenai/OLMo-2-0425-1B, config.json
    "OLMo-2-1B": {
        "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "vocab_size": 100352, "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 500000,
        "rope_scaling": None, "attention_bias": False, "tie_word_embeddings": False,
        "eos_token_id": 100257, "pad_token_id": 100277},
    # HuggingFaceTB/SmolLM3-3B, config.json (no_rope_layers: 1 = RoPE, every 4th layer without)
    "SmolLM3-3B": {
        "model_type": "smollm3", "architectures": ["SmolLM3ForCausalLM"], "vocab_size": 128256, "hidden_size": 2048,
        "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 4,
        "hidden_act": "silu", "max_position_embeddings": 65536, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0,
        "rope_scaling": None, "no_rope_layers": [1, 1, 1, 0] * 9, "no_rope_layer_interval": 4,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28, "attention_bias": False,
        "mlp_bias": False, "tie_word_embeddings": True, "bos_token_id": None, "eos_token_id": 128012,
        "pad_token_id": 128004},
    # mistralai/Mixtral-8x7B-v0.1, config.json
    "Mixtral-8x7B": {
        "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_local_experts": 8, "num_experts_per_tok": 2, "hidden_act": "silu", "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
        "bos_token_id": 1, "eos_token_id": 2},
    # Qwen/Qwen3-30B-A3B, config.json (every layer a mixture: decoder_sparse_step 1, no mlp_only_layers)
    "Qwen3-30B-A3B": {
        "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 151936, "hidden_size": 2048,
        "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
        "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "hidden_act": "silu",
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "rope_scaling": None,
        "attention_bias": False, "use_sliding_window": False, "sliding_window": None, "max_window_layers": 48,
        "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645},
}

# (total, active per token or None), in billions of parameters, as the authors write them
STATED = {
    "Qwen3-0.6B": (0.6, None),  # the model card: 0.6B, 0.44B without the embeddings
    "Llama-3.2-1B": (1.23, None),  # the model card's table: 1B (1.23B)
    "Gemma-3-1B": (1.0, None),  # Gemma 3 technical report, table 1: 302M embedding + 698M non-embedding
    "Mistral-7B-v0.1": (7.3, None),  # Mistral AI's announcement, "Mistral 7B": 7.3B
    "Phi-3-mini": (3.8, None),  # Abdin et al., 2024 (the Phi-3 technical report): 3.8 billion
    "SmolLM3-3B": (3.0, None),  # the model card: a 3B model
    "Mixtral-8x7B": (46.7, 12.9),  # Mistral AI's announcement "Mixtral of experts" (Jiang et al., 2024: 47B, 13B)
    "Qwen3-30B-A3B": (30.5, 3.3),  # the model card: 30.5B in total, 3.3B activated
}
