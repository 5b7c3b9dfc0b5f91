"""Every family minitfm loads beyond GPT-2 and Llama 2, against Hugging Face transformers, offline (issue 38).

Each family's tiny checkpoint is built by transformers with random weights (initializer_range 0.15, and every
norm weight moved off its initial value so that a norm read wrongly shows) and saved with save_pretrained:
nothing is downloaded. Sliding windows are 7 keys wide and every sequence here is longer, so a window ignored
or misplaced changes the logits. For each family: logits within 1e-5 (fp32), 50 greedy tokens identical with
the KV cache, a left-padded batch, an export that re-imports bit-exact, and transformers loading the export.
"""
from __future__ import annotations

import dataclasses
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import safetensors  # noqa: E402,F401  requirements.txt installs it: a missing one fails, never skips
import transformers  # noqa: E402  requirements.txt installs it: a missing one fails, never skips
transformers.logging.set_verbosity_error()

import minitfm  # noqa: E402
from minitfm import pretrained as P  # noqa: E402
from minitfm.generation.lean_refusal import refusal  # noqa: E402

TOL = 1e-5
VOCAB = 97
WINDOW = 7
BASE = dict(num_hidden_layers=3, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=40,
            vocab_size=VOCAB, max_position_embeddings=128, initializer_range=0.15, rms_norm_eps=1e-5,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)
SLIDING = ["sliding_attention", "full_attention", "sliding_attention"]


def _rope(**params):
    return {"rope_parameters": {"rope_theta": 500.0, "rope_type": "default", **params}}


# DeepSeek-V2/V3's sizes: latent attention (R 12, Dn 6, Dr 4, Dv 5) and 8 experts of width 12, top-2, one shared
_DEEPSEEK = dict(num_key_value_heads=4, kv_lora_rank=12, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5, n_routed_experts=8,
                 num_experts_per_tok=2, moe_intermediate_size=12, n_shared_experts=1, first_k_dense_replace=1)


# family -> (transformers config class, its settings, what the family shows off)
FAMILIES = {
    "llama3": ("LlamaConfig", _rope(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                    original_max_position_embeddings=16), "rope_type llama3"),
    "llama-yarn": ("LlamaConfig", _rope(rope_type="yarn", factor=4.0, original_max_position_embeddings=16),
                   "rope_type yarn"),
    "qwen2": ("Qwen2Config", _rope(), "q/k/v biases only"),
    "qwen2-sliding": ("Qwen2Config", {**_rope(), "use_sliding_window": True, "sliding_window": WINDOW,
                                      "max_window_layers": 1}, "q/k/v biases, windows from layer 1"),
    "qwen3": ("Qwen3Config", {**_rope(), "head_dim": 12}, "QK-norm per head, head_dim 12 != D/H"),
    "mistral": ("MistralConfig", {**_rope(), "sliding_window": WINDOW}, "sliding window on every layer"),
    "ministral3": ("Ministral3Config", {"head_dim": 12, "sliding_window": WINDOW, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}},
                   "queries hotter with the position (1 + beta log(1 + floor(p / 16))), YaRN, sliding window"),
    "gemma": ("GemmaConfig", {**_rope(), "head_dim": 12}, "(1 + w) RMSNorm, sqrt(D) embeddings, GeGLU, head_dim"),
    "gemma2": ("Gemma2Config", {**_rope(), "head_dim": 12, "query_pre_attn_scalar": 20, "sliding_window": WINDOW,
                                "layer_types": SLIDING, "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0},
               "soft-caps, sandwich norms, local/global layers, query_pre_attn_scalar"),
    "gemma3": ("Gemma3TextConfig", {"head_dim": 12, "query_pre_attn_scalar": 20, "sliding_window": WINDOW,
                                    "layer_types": SLIDING, "rope_parameters": {
                                        "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
                                        "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}},
               "QK-norm (1 + w), sandwich norms, local RoPE base, scaled global RoPE"),
    "phi3": ("Phi3Config", {**_rope(), "sliding_window": WINDOW}, "fused qkv and gate_up, sliding window"),
    "olmo2": ("Olmo2Config", _rope(), "norms on the sublayers' outputs, QK-norm over all heads"),
    "olmo3": ("Olmo3Config", {"sliding_window": WINDOW, "layer_types": SLIDING, "rope_parameters": {
        "full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 500.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}},
              "OLMo 2's norms with local/global layers, each kind its own RoPE (YaRN on the global ones)"),
    "smollm3": ("SmolLM3Config", {**_rope(), "no_rope_layers": [1, 0, 1]}, "a NoPE layer"),
    "mixtral": ("MixtralConfig", {**_rope(), "num_local_experts": 4, "num_experts_per_tok": 2,
                                  "sliding_window": WINDOW}, "top-2 of 4 experts, renormalised; sliding window"),
    "qwen3_moe": ("Qwen3MoeConfig", {**_rope(), "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                     "norm_topk_prob": False}, "top-2 of 4 experts, not renormalised; QK-norm"),
    "deepseek_v3": ("DeepseekV3Config", {**_rope(), "q_lora_rank": 16, **_DEEPSEEK, "n_group": 2, "topk_group": 1,
                                         "routed_scaling_factor": 2.5}, "latent attention, sigmoid-scored experts "
                    "chosen group-limited with the correction bias, shared experts, a dense first layer"),
    "deepseek_v2": ("DeepseekV2Config", {**_rope(), "q_lora_rank": None, **_DEEPSEEK, "n_group": 2, "topk_group": 1,
                                         "topk_method": "group_limited_greedy", "routed_scaling_factor": 1.5},
                    "latent attention with one query projection (V2-Lite), softmax experts group-limited"),
    "glm4_moe": ("Glm4MoeConfig", {**_rope(partial_rotary_factor=0.5), "moe_intermediate_size": 12,
                                   "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1,
                                   "n_shared_experts": 1, "first_k_dense_replace": 1, "use_qk_norm": True,
                                   "attention_bias": True, "routed_scaling_factor": 1.5},
                 "RoPE on half of each head, q/k/v biases, QK-norm, DeepSeek-V3's experts after a dense layer"),
    "minimax_m2": ("MiniMaxM2Config", {**_rope(partial_rotary_factor=0.5), "head_dim": 8, "num_local_experts": 4,
                                       "num_experts_per_tok": 2}, "QK-norm over all heads, RoPE on half of each head, "
                   "sigmoid experts chosen with the block's correction bias in every layer"),
    "llama4_text": ("Llama4TextConfig", {**_rope(), "num_hidden_layers": 4, "head_dim": 8, "intermediate_size": 12,
                                         "intermediate_size_mlp": 20, "num_local_experts": 4, "num_experts_per_tok": 1,
                                         "interleave_moe_layer_step": 2, "attention_chunk_size": WINDOW,
                                         "floor_scale": 4, "attn_scale": 0.5},
                    "chunked RoPE layers with a weightless QK-norm, a hotter NoPE layer, experts every 2nd layer"),
    "qwen3_5_text": ("Qwen3_5TextConfig", {**_rope(partial_rotary_factor=0.5), "num_hidden_layers": 4, "head_dim": 8,
                                           "linear_num_value_heads": 4, "linear_num_key_heads": 2,
                                           "linear_key_head_dim": 8, "linear_value_head_dim": 6},
                     "Gated DeltaNet in three layers of four, gated attention with (1 + w) QK-norm, partial RoPE"),
    "qwen3_next": ("Qwen3NextConfig", {**_rope(partial_rotary_factor=0.5), "num_hidden_layers": 4, "head_dim": 8,
                                       "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 8,
                                       "linear_value_head_dim": 6, "num_experts": 4, "num_experts_per_tok": 2,
                                       "moe_intermediate_size": 12, "shared_expert_intermediate_size": 20,
                                       "mlp_only_layers": [0]},
                   "Qwen 3.5's layers with DeltaNet's fused projections, experts with a gated shared expert"),
    "gpt_oss": ("GptOssConfig", {"head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2, "swiglu_limit": 1.0,
                                 "sliding_window": WINDOW, "layer_types": SLIDING, "rope_parameters": {
                                     "rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                     "truncate": False, "original_max_position_embeddings": 16, "rope_theta": 500.0}},
                "sink logits, local/global layers, q/k/v/o biases, biased experts with a clamped SwiGLU"),
}


def hf_model(name: str, seed: int = 0):
    cls_name, settings, _ = FAMILIES[name]
    config = getattr(transformers, cls_name)(**{**BASE, **settings})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "norm" in key or key.endswith(("proj_bias", "router.bias")):  # ones or zeros at init: a norm (or
                p.add_(0.3 * torch.randn_like(p))  # gpt-oss's expert and router biases) misread would not show
        for key, b in model.named_buffers():
            if key.endswith("e_score_correction_bias"):  # zeros at init: DeepSeek-V3's choice would ignore it
                b.copy_(0.2 * torch.randn_like(b))
    return model


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def pair(request, tmp_path_factory):
    """(family, transformers model, the same checkpoint loaded into minitfm, checkpoint folder)."""
    hf = hf_model(request.param)
    folder = tmp_path_factory.mktemp(request.param.replace("-", "_"))
    hf.save_pretrained(folder)
    return request.param, hf, P.load(folder), folder


@torch.no_grad()
def test_logits_match_transformers_beyond_the_window(pair):
    _, hf, model, _ = pair
    for shape in [(1, 1), (1, 9), (3, 40)]:
        tokens = torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(shape[1]))
        want, got = hf(tokens).logits, model(tokens)
        assert want.abs().max() > 1.0  # logits of a size that makes 1e-5 a real test
        assert (want - got).abs().max() <= TOL, shape


@torch.no_grad()
def test_left_padded_batch_matches(pair):
    _, hf, model, _ = pair
    tokens = torch.randint(0, VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[1, :5], mask[2, :11] = False, False  # left padding
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    want = hf(tokens, attention_mask=mask.long(), position_ids=positions).logits
    got = model(tokens, key_mask=mask)
    assert (want - got)[mask].abs().max() <= TOL  # real positions; padding rows are undefined in both
    # a window, and Llama 4's temperature, count columns, padding included, as transformers does
    if model.config.sliding_window is None and model.config.attn_temperature != "llama4":
        assert (got[2:, 11:] - model(tokens[2:, 11:])).abs().max() <= TOL


def test_greedy_generation_identical_with_the_kv_cache(pair):
    _, hf, model, _ = pair
    prompt = torch.tensor([[5, 3, 17, 42, 8]])
    want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=50, min_new_tokens=50,
                       eos_token_id=None, pad_token_id=0, do_sample=False)
    got = minitfm.generate(model, prompt, 50, eos_id=-1).tokens  # the lean step where it serves, else the modules
    assert torch.equal(want, got)
    uncached = minitfm.generate(model, prompt, 50, eos_id=-1, use_cache=False).tokens
    assert torch.equal(uncached, got)


def test_export_round_trip_is_bit_exact_and_transformers_loads_it(pair, tmp_path):
    name, hf, model, folder = pair
    family = P.family_of(P.read_config(folder))
    out = P.save_pretrained(model, tmp_path / "export", family=family)
    again = P.load(out)
    for key, value in model.state_dict().items():
        assert torch.equal(value, again.state_dict()[key]), key
    original, exported = P.read_state_dict(folder), P.read_state_dict(out)
    assert exported.keys() <= original.keys()
    for key, value in exported.items():  # the published layouts come back to the bit
        assert torch.equal(value, original[key]), key
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(reloaded) is type(hf)
    tokens = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (reloaded(tokens).logits - model(tokens)).abs().max() <= TOL


# the families whose decode steps the lean step refuses, and the words its reason holds
LEAN_REFUSED = {"mixtral": "MoEFeedForward", "qwen3_moe": "MoEFeedForward", "ministral3": "attn_temperature",
                "deepseek_v3": "LatentAttention", "deepseek_v2": "LatentAttention", "gpt_oss": "RoutedMoE", "glm4_moe": "RoutedMoE", "minimax_m2": "RoutedMoE", "llama4_text": "RoutedMoE", "qwen3_5_text": "GatedDeltaNet", "qwen3_next": "GatedDeltaNet"}


def test_the_lean_step_serves_every_family_but_the_mixtures_of_experts(pair):
    """generate's decode steps take the lean step (the greedy test above checks its tokens), or the modules for
    a mixture of experts, whose router picks each token's experts, and for Ministral 3's query temperature."""
    name, _, model, _ = pair
    reason = refusal(model)
    assert (reason is None) != (name in LEAN_REFUSED), reason
    assert reason is None or LEAN_REFUSED[name] in reason


def test_every_family_is_covered():
    covered = {P.family_of({"model_type": getattr(transformers, FAMILIES[n][0]).model_type}) for n in FAMILIES}
    assert covered == set(P.FAMILIES) - {"gpt2", "gemma4_text"}  # Gemma 4's own model: tests/pretrained/test_gemma4.py


# family -> (the setting that sets it apart, dropped; the family model_family finds then, None = none holds it)
WITHOUT_ITS_SETTING = {"qwen3": ({"qk_norm": "none"}, "llama"), "gemma2": ({"sublayer_norm": "input"}, None),
                       "olmo2": ({"qk_norm": "none"}, None), "smollm3": ({"nope_layers": ()}, "llama"),
                       "mixtral": ({"n_experts": None}, "mistral"), "qwen3_moe": ({"n_experts": None}, "qwen3"),
                       "phi3": ({"sliding_window": None}, "llama")}


@pytest.mark.parametrize("family", sorted(WITHOUT_ITS_SETTING))
def test_model_family_needs_the_familys_settings(family):
    """A config round-trips to the family that holds it; dropping one of its settings moves it elsewhere."""
    hf = hf_model(family)
    config = P.config_from_hf(hf.config.to_dict())
    assert P.check_family(config, family) == family
    with pytest.raises(ValueError, match="cannot hold this model"):
        P.check_family(config, "llama")
    # model_family picks the first family of P.FAMILIES that holds it: Phi-3's architecture is Mistral's
    assert P.model_family(config) == P.check_family(config, None) == ("mistral" if family == "phi3" else family)
    changes, elsewhere = WITHOUT_ITS_SETTING[family]
    dropped = dataclasses.replace(config, **changes)
    if elsewhere is None:
        with pytest.raises(ValueError, match="matches neither"):
            P.model_family(dropped)
    else:
        assert P.model_family(dropped) == elsewhere


def test_from_transformers_reads_the_model_in_memory(pair):
    name, hf, model, _ = pair
    again = P.from_transformers(hf)  # MoE: transformers 5 fuses the experts in memory, the files keep them apart
    for key, value in model.state_dict().items():
        assert torch.equal(value, again.state_dict()[key]), key


def test_the_later_conventions_extend_the_table():
    table = P.conventions_table(later=True)
    assert table.startswith(P.conventions_table()) and table.count("\n") == len(P.CONVENTIONS + P.LATER_CONVENTIONS) + 1
    for word in ("qk_norm", "rms_offset", "sliding_layers", "nope_layers", "qkv_proj", "norm_topk_prob", "llama3",
                 "query_pre_attn_scalar", "post_feedforward_layernorm"):
        assert word in table


@pytest.mark.parametrize("name", ["gemma2", "gemma3", "qwen2-sliding", "llama3"])
def test_an_older_config_json_reads_as_transformers_5s(name):
    """Files written by transformers 4 (on the Hub) have rope_theta/rope_scaling, rope_local_base_freq and
    sliding_window_pattern instead of rope_parameters and layer_types; they give the same config."""
    new = hf_model(name).config.to_dict()
    old = {k: v for k, v in new.items() if k not in ("rope_parameters", "layer_types")}
    rope = new["rope_parameters"]
    if name == "gemma3":
        old.update(rope_theta=rope["full_attention"]["rope_theta"], rope_local_base_freq=rope["sliding_attention"][
            "rope_theta"], rope_scaling={k: v for k, v in rope["full_attention"].items() if k != "rope_theta"})
        old["sliding_window_pattern"] = 3  # every 3rd layer sees everything: layers 0, 1 slide, layer 2 does not
    else:
        old.update(rope_theta=rope["rope_theta"], rope_scaling={k: v for k, v in rope.items() if k != "rope_theta"})
    want = P.config_from_hf(new)
    if name == "gemma3":
        want = P.config_from_hf({**new, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]})
    assert P.config_from_hf(old) == want


def _read(hf: dict):
    """minitfm's reading of a config dict: the ModelConfig, or "refused" (a ValueError or TypeError)."""
    try:
        return P.config_from_hf(hf)
    except (ValueError, TypeError):
        return "refused"


DROPPED = ["rms_norm_eps", "num_key_value_heads", "head_dim", "sliding_window", "max_window_layers", "hidden_act",
           "hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
           "no_rope_layers", "layer_types", "rope_parameters"]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_key_the_file_leaves_out_takes_the_familys_default_as_transformers_does(name):
    """Library review M2: drop each key the family reads from its config.json; minitfm must read what transformers
    reads (its config class fills in the family's default), never a default of its own."""
    cls_name, settings, _ = FAMILIES[name]
    full = getattr(transformers, cls_name)(**{**BASE, **settings}).to_dict()
    for key in (k for k in DROPPED if k in full):
        trimmed = {k: v for k, v in full.items() if k != key}
        transformers_reads = getattr(transformers, cls_name)(**trimmed).to_dict()
        assert _read(trimmed) == _read(transformers_reads), (name, key, transformers_reads.get(key))


def test_the_three_files_of_the_review_read_as_transformers_reads_them():
    phi3 = getattr(transformers, "Phi3Config")(**BASE).to_dict()
    phi3 = {**{k: v for k, v in phi3.items() if k != "rope_parameters"}, "rope_theta": 500.0,
            "partial_rotary_factor": 0.5}  # transformers 4's layout of a partial rotary factor
    with pytest.raises(ValueError, match="partial_rotary_factor=0.5"):
        P.config_from_hf(phi3)
    gemma2 = {k: v for k, v in hf_model("gemma2").config.to_dict().items() if "softcapping" not in k}
    config = P.config_from_hf(gemma2)
    assert (config.attn_softcap, config.final_softcap) == (50.0, 30.0)
    smollm3 = {k: v for k, v in hf_model("smollm3").config.to_dict().items() if k not in ("no_rope_layers",)}
    assert P.config_from_hf({**smollm3, "num_hidden_layers": 8}).nope_layers == (3, 7)  # every 4th layer


@pytest.mark.parametrize("key", ["rms_norm_eps", "rope_theta", "query_pre_attn_scalar", "max_window_layers"])
def test_a_null_number_in_config_json_is_refused_by_name(key):
    hf = hf_model("gemma2" if key == "query_pre_attn_scalar" else "qwen2-sliding").config.to_dict()
    if key == "rope_theta":
        hf["rope_parameters"] = {**hf["rope_parameters"], "rope_theta": None}
    else:
        hf[key] = None
    with pytest.raises(ValueError, match=key):
        P.config_from_hf(hf)


ISSUE_48 = ["olmo3", "ministral3", "deepseek_v3", "deepseek_v2", "gpt_oss", "glm4_moe", "minimax_m2", "llama4_text",
            "qwen3_5_text", "qwen3_next"]


@pytest.mark.parametrize("name", ISSUE_48)
def test_the_families_of_issue_48_round_trip_to_themselves(name):
    """save_pretrained without a family finds each new family (the first of P.FAMILIES that holds the config), and
    Llama's config.json cannot hold any of them."""
    cls_name, settings, _ = FAMILIES[name]
    config = P.config_from_hf(getattr(transformers, cls_name)(**{**BASE, **settings}).to_dict())
    assert P.model_family(config) == name
    with pytest.raises(ValueError, match="cannot hold this model"):
        P.check_family(config, "llama")
