"""The lean decode step on today's model options: equal to the modules where it serves, refused where it does not.

Each configuration turns on the options of one family (QK-norm, Gemma's norms and GeGLU, soft-caps, sandwich
and output norms, sliding windows with full and bounded caches, NoPE layers, YaRN, Gemma 3's local RoPE), and the
lean step's logits must equal the module path's at every step, with and without left padding. Mixtures of experts
and the soft-cap with ALiBi are refused with a reason, and generate then runs the modules and gives the tokens of
the uncached recompute.
"""
from __future__ import annotations


import pytest
import torch

import minitfm
from minitfm.generation.lean_decode import LeanDecoder
from minitfm.generation.lean_refusal import refusal
from minitfm.layers.rope_scaling import RopeScaling

from counting import CountOps

BASE = dict(vocab_size=41, d_model=32, n_heads=4, n_kv_heads=2, n_layers=3, max_seq_len=96)
OPTIONS = {
    "qwen3": dict(head_dim=12, qk_norm="head"),
    "olmo2": dict(qk_norm="all", sublayer_norm="output"),
    "gemma": dict(norm="rms_offset", ffn="geglu_tanh", scale_embeddings=True, head_dim=12),
    "gemma2": dict(norm="rms_offset", ffn="geglu_tanh", sublayer_norm="both", attn_softcap=2.0, final_softcap=3.0,
                   attn_scale=0.2, sliding_window=6, sliding_layers=(0, 2)),
    "mistral": dict(sliding_window=6),
    "qwen2": dict(qkv_bias=True),
    "smollm3": dict(nope_layers=(1,)),
    "yarn": dict(rope_scaling=RopeScaling("yarn", 4.0, 16)),
    "gemma3": dict(norm="rms_offset", ffn="geglu_tanh", sublayer_norm="both", qk_norm="head", sliding_window=6,
                   sliding_layers=(0, 1), rope_local_base=50.0, rope_scale=2.0),
}
REFUSED = {  # the lean step refuses these; generate falls back to the modules
    "mixtral": (dict(n_experts=4, experts_per_token=2, sliding_window=6), "MoEFeedForward"),
    "qwen3_moe": (dict(n_experts=4, experts_per_token=2, renormalize_experts=False, qk_norm="head"), "MoEFeedForward"),
    "softcap-alibi": (dict(pos="alibi", attn_softcap=1.0), "soft-cap"),
}


def _model(options, seed=0):
    torch.manual_seed(seed)
    model = minitfm.DecoderOnlyLM(minitfm.ModelConfig.small_lm(**{**BASE, **options})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))  # norms off their initial values, so each one matters
    return model


@torch.no_grad()
@pytest.mark.parametrize("bounded", [False, True], ids=["full-cache", "bounded-cache"])
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_lean_step_equals_the_modules(name, bounded):
    model = _model(OPTIONS[name])
    assert refusal(model) is None
    decoder = LeanDecoder.build(model)
    tokens = torch.randint(0, 41, (2, 30), generator=torch.Generator().manual_seed(1))
    key_mask = torch.ones(2, 30, dtype=torch.bool)
    key_mask[1, :4] = False  # left padding in row 1
    for mask in (None, key_mask):
        lean_caches, module_caches = model.new_caches(2, 40, bounded=bounded), model.new_caches(2, 40)
        prefix = None if mask is None else mask[:, :8]
        model(tokens[:, :8], caches=lean_caches, key_mask=prefix)
        model(tokens[:, :8], caches=module_caches, key_mask=prefix)
        for i in range(8, 30):  # past every window
            step = None if mask is None else mask[:, :i + 1]
            lean = decoder(tokens[:, i:i + 1], lean_caches, step)
            modules = model(tokens[:, i:i + 1], caches=module_caches, key_mask=step)[:, -1]
            assert (lean - modules).abs().max() < 1e-5, (name, i)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_generate_with_the_lean_step_equals_the_uncached_recompute(name):
    model = _model(OPTIONS[name], seed=2)
    prompt = torch.tensor([[3, 1, 4, 1, 5], [0, 0, 9, 2, 6]])
    fast = minitfm.generate(model, prompt, 30, eos_id=-1, pad_id=0)
    slow = minitfm.generate(model, prompt, 30, eos_id=-1, pad_id=0, use_cache=False)
    assert torch.equal(fast.tokens, slow.tokens)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_models_fall_back_to_the_modules(name, monkeypatch):
    options, reason = REFUSED[name]
    model = _model(options)
    assert reason in refusal(model)
    assert LeanDecoder.build(model) is None
    calls = []
    monkeypatch.setattr(LeanDecoder, "__call__", lambda *a, **k: calls.append(1))  # would be seen if it ran
    prompt = torch.tensor([[3, 1, 4, 1, 5], [0, 0, 9, 2, 6]])
    cached = minitfm.generate(model, prompt, 20, eos_id=-1, pad_id=0)  # the module path with the KV cache
    uncached = minitfm.generate(model, prompt, 20, eos_id=-1, pad_id=0, use_cache=False)
    assert torch.equal(cached.tokens, uncached.tokens) and not calls


@torch.no_grad()
def test_a_per_head_qk_norm_is_one_pass_unless_the_eps_differ():
    """Qwen 3's per-head QK-norm: every query and key head in one sum of squares, with their gains in one table
    (no mean, no cat); a k_norm whose eps differs from q_norm's takes the two-norm path, still equal to the modules."""
    model = _model(OPTIONS["qwen3"])
    tokens = torch.randint(0, 41, (1, 12), generator=torch.Generator().manual_seed(3))
    for changed_layers in (0, 1):
        if changed_layers:
            model.layers[1].self_attn.k_norm.eps = 0.5  # read at every step, as the modules read it
        decoder = LeanDecoder.build(model)
        lean_caches, module_caches = model.new_caches(1, 16), model.new_caches(1, 16)
        model(tokens[:, :8], caches=lean_caches)
        model(tokens[:, :8], caches=module_caches)
        with CountOps() as counter:
            lean = decoder(tokens[:, 8:9], lean_caches)
        assert counter.ops["mean"] == 0 if not changed_layers else counter.ops["mean"] == 2, counter.ops
        assert counter.ops["cat"] == changed_layers, counter.ops
        assert (lean - model(tokens[:, 8:9], caches=module_caches)[:, -1]).abs().max() < 1e-5
        for i in range(9, 12):  # and later steps
            lean = decoder(tokens[:, i:i + 1], lean_caches)
            assert (lean - model(tokens[:, i:i + 1], caches=module_caches)[:, -1]).abs().max() < 1e-5, i
