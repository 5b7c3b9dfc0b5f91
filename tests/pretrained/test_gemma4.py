"""Gemma 4's language model (gemma4_text, issue 48 item 1) against Hugging Face transformers, offline.

Three tiny random checkpoints, built by transformers' own Gemma4TextConfig and saved with save_pretrained: one with
every option of the small models (per-layer inputs, the last two layers sharing earlier keys and values with a
double-wide FFN, global layers with heads twice as wide and a proportional RoPE turning half of them, a final
soft-cap), one with the large models' global layers (values equal to the keys, one K/V head, a plain RoPE, an untied
head), one with the 26B A4B's experts beside every FFN (top-2 of 4) and its global RoPE's positions divided by 2.
Windows are 7 keys wide and the sequences longer. Each must give transformers' logits within 1e-5, its 50 greedy
tokens with the cache, a padded batch, an export that re-imports bit-exact and that transformers loads as
Gemma4ForCausalLM. Google publishes Gemma 4 as a multimodal model (model_type "gemma4"): its language model loads
from such a file too.

The norms' weights are moved off their initial ones (and the layer scalars and the routers' scales off 1), so a
weight misread shows; the QK-norms' are halved: Gemma 4 does not divide the scores by sqrt(Dh), and with norms near 1
the softmax is sharp enough that transformers' own two attention kernels disagree by about 1e-5 on these sizes.
"""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402  requirements.txt installs it: a missing one fails, never skips
transformers.logging.set_verbosity_error()

import minitfm  # noqa: E402
from minitfm import pretrained as P  # noqa: E402
from minitfm._gemma4 import gemma4_cache_bytes, shares_kv  # noqa: E402
from minitfm.generation.lean_refusal import refusal  # noqa: E402
from minitfm.layers.kv_cache import kv_cache_bytes  # noqa: E402
from minitfm.config import ModelConfig  # noqa: E402
from minitfm.models import DecoderOnlyLM  # noqa: E402
from minitfm.params import active_params, count_params, estimate_params  # noqa: E402

TOL = 1e-5
VOCAB = 97
FOUR = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
SIZES = dict(num_hidden_layers=4, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=40,
             vocab_size=VOCAB, max_position_embeddings=128, initializer_range=0.1, rms_norm_eps=1e-5, head_dim=8,
             global_head_dim=16, sliding_window=7, layer_types=FOUR, bos_token_id=1, eos_token_id=2, pad_token_id=0)
CHECKPOINTS = {
    "small": dict(hidden_size_per_layer_input=6, vocab_size_per_layer_input=VOCAB, num_kv_shared_layers=2,
                  use_double_wide_mlp=True, final_logit_softcapping=3.0, rope_parameters={
                      "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
                      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1e3}}),
    "large": dict(hidden_size_per_layer_input=0, attention_k_eq_v=True, num_global_key_value_heads=1,
                  tie_word_embeddings=False, rope_parameters={
                      "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
                      "full_attention": {"rope_type": "default", "rope_theta": 1e3}}),
    "moe": dict(hidden_size_per_layer_input=0, attention_k_eq_v=True, num_global_key_value_heads=1,
                enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=12, rope_parameters={
                    "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
                    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e3,
                                       "factor": 2.0}}),
}


def hf_config(name: str, **changes) -> dict:
    return transformers.Gemma4TextConfig(**{**SIZES, **CHECKPOINTS[name], **changes}).to_dict()


def hf_model(name: str):
    config = transformers.Gemma4TextConfig(**{**SIZES, **CHECKPOINTS[name]})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "norm" in key:
                p.add_(0.3 * torch.randn_like(p))
            if key.endswith(("q_norm.weight", "k_norm.weight")):
                p.mul_(0.5)
            if key.endswith(("router.scale", "per_expert_scale")):  # ones at init
                p.add_(0.3 * torch.randn_like(p))
        for key, b in model.named_buffers():
            if key.endswith("layer_scalar"):  # ones at init: a scalar left out would not show
                b.add_(0.3 * torch.randn_like(b))
    return model


@pytest.fixture(scope="module", params=sorted(CHECKPOINTS))
def pair(request, tmp_path_factory):
    hf = hf_model(request.param)
    folder = tmp_path_factory.mktemp(f"gemma4_{request.param}")
    hf.save_pretrained(folder)
    return request.param, hf, P.load(folder), folder


@torch.no_grad()
def test_logits_match_transformers_beyond_the_window(pair):
    _, hf, model, _ = pair
    for shape in [(1, 1), (1, 9), (3, 40)]:
        tokens = torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(shape[1]))
        want, got = hf(tokens).logits, model(tokens)
        assert want.abs().max() > 1.0
        assert (want - got).abs().max() <= TOL, shape


@torch.no_grad()
def test_left_padded_batch_matches(pair):
    _, hf, model, _ = pair
    tokens = torch.randint(0, VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[1, :5], mask[2, :11] = False, False
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    want = hf(tokens, attention_mask=mask.long(), position_ids=positions).logits
    assert (want - model(tokens, key_mask=mask))[mask].abs().max() <= TOL


@pytest.mark.parametrize("bounded", [False, True])
def test_greedy_generation_identical_with_the_cache(pair, bounded):
    """The sharing layers read their producers' keys, cached (bounded: the sliding layers keep their window)."""
    _, hf, model, _ = pair
    prompt = torch.tensor([[5, 3, 17, 42, 8]])
    want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=50, min_new_tokens=50,
                       eos_token_id=None, pad_token_id=0, do_sample=False)
    caches = model.new_caches(1, 55, bounded=bounded)
    tokens, logits = prompt, model(prompt, caches=caches)
    for _ in range(50):
        tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
        logits = model(tokens[:, -1:], caches=caches)
    assert torch.equal(want, tokens)
    assert torch.equal(minitfm.generate(model, prompt, 50, eos_id=-1).tokens, want)
    assert torch.equal(minitfm.generate(model, prompt, 50, eos_id=-1, use_cache=False).tokens, want)


def test_beam_search_and_a_padded_batch_decode_as_transformers_and_alone(pair):
    """Beam search reorders every layer's cache (the sharing layers' empty ones too); a left-padded row decodes as
    its prompt alone."""
    _, hf, model, _ = pair
    prompt = torch.tensor([[5, 3, 17, 42, 8]])
    want = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12, min_new_tokens=12,
                       num_beams=3, eos_token_id=None, pad_token_id=0, do_sample=False, early_stopping=True)
    assert torch.equal(minitfm.beam_search(model, prompt, 12, num_beams=3, eos_id=-1).tokens, want)
    batch = torch.tensor([[5, 3, 17, 42, 8], [0, 0, 9, 33, 4]])
    both = minitfm.generate(model, batch, 20, eos_id=-1).tokens
    assert torch.equal(both[1, 2:], minitfm.generate(model, batch[1:, 2:], 20, eos_id=-1).tokens[0])


def test_the_cache_bytes_are_those_the_caches_hold(pair):
    """Each layer that computes keys and values holds its own K/V heads of its own width, the sliding ones the last 7
    positions only; the sharing ones none."""
    _, _, model, _ = pair
    c = model.config

    def held(t):  # bytes in float16 of the keys and values of the caches for t positions, the sliding ones cut at 7
        return sum(cache.self_attn.k[:, :, :min(t, c.layer_window(i) or t)].numel() * 2 * 2
                   for i, cache in enumerate(model.new_caches(2, t)) if not shares_kv(c, i))

    assert gemma4_cache_bytes(c, 7, 2) == held(7) and gemma4_cache_bytes(c, 30, 2) == held(30)
    # the book's one entry point for a config's cache counts the same (it counted every layer at one width)
    assert minitfm.generation.kv_memory.config_cache_bytes(c, 30, batch_size=2) == held(30)
    assert gemma4_cache_bytes(c, 30, 2) < kv_cache_bytes(c.n_layers, c.n_kv_heads, 30, c.gemma4.global_head_dim,
                                                         batch_size=2)


def test_export_round_trip_is_bit_exact_and_transformers_loads_it(pair, tmp_path):
    name, hf, model, folder = pair
    assert P.family_of(P.read_config(folder)) == P.model_family(model.config) == "gemma4_text"
    out = P.save_pretrained(model, tmp_path / "export")
    again = P.load(out)
    for key, value in model.state_dict().items():
        assert torch.equal(value, again.state_dict()[key]), key
    original, exported = P.read_state_dict(folder), P.read_state_dict(out)
    assert exported.keys() == original.keys() - ({"lm_head.weight"} if model.config.tie_embeddings else set())
    for key, value in exported.items():
        assert torch.equal(value, original[key]), key
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(reloaded) is type(hf)
    tokens = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (reloaded(tokens).logits - model(tokens)).abs().max() <= TOL
    from_memory = P.from_transformers(hf)
    for key, value in model.state_dict().items():
        assert torch.equal(value, from_memory.state_dict()[key]), key


def test_a_multimodal_checkpoint_loads_as_its_language_model(tmp_path):
    """Google publishes Gemma 4 as Gemma4ForConditionalGeneration (model_type "gemma4"): its text_config and its
    model.language_model.* tensors are the language model; the vision tower is left out."""
    text = hf_model("small")
    config = transformers.Gemma4Config(text_config=text.config.to_dict(), audio_config=None, vision_config=dict(
        hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        head_dim=8, patch_size=4, position_embedding_size=64), image_token_id=90, boi_token_id=91, eoi_token_id=92,
        video_token_id=93, boa_token_id=94, audio_token_id=95, eoa_token_index=96)
    both = transformers.Gemma4ForConditionalGeneration(config).eval()
    both.model.language_model.load_state_dict(text.model.state_dict())
    both.save_pretrained(tmp_path)
    model = P.load(tmp_path)
    assert P.config_from_hf(P.read_config(tmp_path)) == P.config_from_hf(text.config.to_dict())
    assert model.config == P.config_from_hf(text.config.to_dict()).resolved()
    tokens = torch.randint(0, 90, (2, 30), generator=torch.Generator().manual_seed(5))  # text: below the media ids
    with torch.no_grad():
        assert (both(input_ids=tokens).logits - model(tokens)).abs().max() <= TOL
    for key, value in P.from_transformers(both).state_dict().items():
        assert torch.equal(value, model.state_dict()[key]), key


def test_the_lean_step_steps_aside_and_other_families_cannot_hold_it(pair):
    _, _, model, _ = pair
    assert "Gemma4LM" in refusal(model)
    with pytest.raises(ValueError, match="cannot hold this model"):
        P.check_family(model.config, "gemma3_text")
    with pytest.raises(ValueError, match="gemma4"):
        DecoderOnlyLM(model.config)  # the book's blocks do not compute Gemma 4's layers: refused, by name


def test_the_fused_kernel_computes_the_same_and_dropout_is_refused(pair):
    """config.attn_impl reaches Gemma 4's attention; its model has no dropout, so a config asking for it is refused."""
    _, _, model, _ = pair
    fused = P.gemma4.Gemma4LM(dataclasses.replace(model.config, attn_impl="fused")).eval()
    fused.load_state_dict(model.state_dict())
    assert {layer.self_attn.impl for layer in fused.layers} == {"fused"}
    tokens = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert (fused(tokens) - model(tokens)).abs().max() <= TOL
    with pytest.raises(ValueError, match="dropout"):
        dataclasses.replace(model.config, dropout=0.1)
    with pytest.raises(ValueError, match="kv_shared_layers"):  # layer 0 would have no keys to share
        dataclasses.replace(model.config, gemma4=dataclasses.replace(model.config.gemma4, kv_shared_layers=4))
    assert ModelConfig.from_dict(json.loads(json.dumps(model.config.to_dict()))) == model.config  # a config saved


def test_the_formula_minitfm_and_transformers_count_it_alike(pair):
    name, hf, model, _ = pair
    counts = count_params(model)
    assert counts == estimate_params(model.config)
    total = sum(p.numel() for p in hf.parameters())
    assert counts["total"] == total
    experts = sum(p.numel() for key, p in hf.named_parameters() if ".experts." in key)  # E stacked experts per layer
    unused = experts // 4 * 2 if name == "moe" else 0  # 2 of the 4 run for a token
    assert active_params(model.config) == total - unused and (unused > 0) == (name == "moe")


# The published Gemma 4s' language models, their text_config's sizes as code that loads google/gemma-4-31B,
# google/gemma-4-26B-A4B and google/gemma-4-E2B quotes them (the Hugging Face files themselves were not reachable
# here), and the counts Google states in the Gemma 4 model card (Google DeepMind, April 2026; its table of model
# sizes, read as summarised at andysmith.ai/wiki/gemma-4-model-card): "31B: 30.7B" (dense), "26B A4B: 25.2B" total
# and "3.8B" active, "E2B: 5.1B" with embeddings and "2.3B effective".
# 31B: 60 layers of 5376, 32 heads, 16 K/V heads of 256 in the sliding layers, 4 of 512 in every 6th layer whose
# values are its keys, FFN 21504, window 1024, vocabulary 262144, tied.
GEMMA4_31B = {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "vocab_size": 262144,
              "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 60, "num_attention_heads": 32,
              "num_key_value_heads": 16, "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 4,
              "attention_k_eq_v": True, "hidden_size_per_layer_input": 0, "sliding_window": 1024,
              "max_position_embeddings": 262144, "final_logit_softcapping": 30.0, "tie_word_embeddings": True,
              "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(60)]}
# 26B A4B: 30 layers of 2816, 16 heads, 8 K/V heads of 256, 2 of 512 in every 6th layer (values = keys), FFN 2112
# beside 128 experts of 704, top-8.
GEMMA4_26B_A4B = {**GEMMA4_31B, "hidden_size": 2816, "intermediate_size": 2112, "num_hidden_layers": 30,
                  "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2,
                  "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
                  "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(30)]}
# E2B: 35 layers of 1536, 8 heads, 1 K/V head of 256 (512 in every 5th layer), FFN 6144 (twice as wide in the last 20
# layers, which share the keys and values of layers 13 and 14), per-layer inputs of 256, window 512. Its language
# model holds 4.63B; Google's 5.1B counts the vision and audio encoders too, and the summary read here does not say
# what its "2.3B effective" leaves out (this model less its per-layer table holds 2.28B): only transformers' count
# is checked.
GEMMA4_E2B = {**GEMMA4_31B, "hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 35,
              "num_attention_heads": 8, "num_key_value_heads": 1, "num_global_key_value_heads": None,
              "attention_k_eq_v": False, "hidden_size_per_layer_input": 256, "vocab_size_per_layer_input": 262144,
              "num_kv_shared_layers": 20, "use_double_wide_mlp": True, "sliding_window": 512,
              "max_position_embeddings": 131072,
              "layer_types": ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(35)]}


@pytest.mark.parametrize("hf, stated", [(GEMMA4_31B, (30.7e9, 30.7e9)), (GEMMA4_26B_A4B, (25.2e9, 3.8e9))])
def test_the_published_gemma4s_are_counted_as_transformers_builds_them_and_as_google_states(hf, stated):
    config = P.config_from_hf(hf)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**hf))
    total, active = estimate_params(config)["total"], active_params(config)
    assert total == sum(p.numel() for p in model.parameters())
    assert abs(total / stated[0] - 1) < 0.03 and abs(active / stated[1] - 1) < 0.03


def test_gemma4_e2b_is_counted_as_transformers_builds_it():
    config = P.config_from_hf(GEMMA4_E2B)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**GEMMA4_E2B))
    assert estimate_params(config)["total"] == active_params(config) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("change, name", [
    ({"enable_moe_block": True, "num_experts": 4, "top_k_experts": 5, "moe_intermediate_size": 8}, "enable_moe_block"),
    ({"attention_bias": True}, "attention_bias"),
    ({"hidden_activation": "silu"}, "hidden_activation"),
    ({"vocab_size_per_layer_input": 50}, "vocab_size_per_layer_input"),
    ({"num_kv_shared_layers": 4}, "num_kv_shared_layers"),
    ({"per_layer_config": {"1": {"head_dim": 16}, "3": {"head_dim": 8}}}, "per_layer_config"),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
                          "full_attention": {"rope_type": "yarn", "rope_theta": 1e3, "factor": 2.0}}},
     "rope_parameters\\['full_attention'\\]"),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 50.0,
                                                "partial_rotary_factor": 0.5},
                          "full_attention": {"rope_type": "default", "rope_theta": 1e3}}},
     "rope_parameters\\['sliding_attention'\\]"),
])
def test_what_minitfm_lacks_is_refused_by_name(change, name):
    hf = {**hf_config("small"), **change}
    with pytest.raises(ValueError, match=name):
        P.config_from_hf(hf)


def test_bidirectional_attention_is_refused_by_name_and_vision_only_reads_as_causal():
    """'all' makes every layer see both ways; 'vision' only lets image tokens do so, and a text model has none."""
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        P.config_from_hf({**hf_config("small"), "use_bidirectional_attention": "all"})
    assert P.config_from_hf({**hf_config("small"), "use_bidirectional_attention": "vision"}) == \
        P.config_from_hf(hf_config("small"))


def _read(hf: dict):
    try:
        return P.config_from_hf(hf)
    except (ValueError, TypeError):
        return "refused"


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_a_key_the_file_leaves_out_reads_as_transformers_reads_it(name):
    """Drop each key minitfm reads; transformers' config class fills in Gemma 4's default, and minitfm must read
    the same model from both files (global_head_dim 512 without per_layer_config, 6-layer patterns, ...)."""
    full = hf_config(name)
    assert _read(full) != "refused"
    for key in ("head_dim", "num_key_value_heads", "rms_norm_eps", "sliding_window", "layer_types", "rope_parameters",
                "final_logit_softcapping", "hidden_size_per_layer_input", "vocab_size_per_layer_input",
                "num_kv_shared_layers", "attention_k_eq_v", "use_double_wide_mlp", "per_layer_config",
                "tie_word_embeddings", "hidden_activation", "enable_moe_block", "num_experts", "top_k_experts",
                "moe_intermediate_size"):
        trimmed = {k: v for k, v in full.items() if k != key}
        assert _read(trimmed) == _read(transformers.Gemma4TextConfig(**trimmed).to_dict()), (name, key)
