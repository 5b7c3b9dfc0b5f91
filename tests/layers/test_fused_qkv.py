"""ModelConfig.fused_qkv: q, k, v stored as one qkv_proj computes what the three matrices compute (logits,
gradients, the KV cache, generate, the lean step, cross-attention), converts both ways bit for bit, and every
place that reaches for q_proj/k_proj/v_proj handles it or refuses by name."""
import dataclasses

import pytest
import torch
from torch import nn

from minitfm import DecoderOnlyLM, EncoderDecoder, ModelConfig
from minitfm.generation import generate
from minitfm.generation.lean_decode import LeanDecoder
from minitfm.layers.multihead import MultiHeadAttention, fuse_qkv, split_qkv

CONFIGS = {  # GQA, QK-norms, biases on q/k/v only, sinks, the output gate, GPT-2's shape
    "gpt2": dict(norm="layer", pos="learned", ffn="gelu", bias=True, pad_id=None, bos_id=0, eos_id=0),
    "llama_gqa": dict(norm="rms", pos="rope", ffn="swiglu", bias=False, n_kv_heads=2, scale_embeddings=False,
                      pad_id=None, bos_id=0, eos_id=1),
    "qwen3_head_norm_mqa": dict(norm="rms", pos="rope", ffn="swiglu", bias=False, qkv_bias=True, n_kv_heads=1,
                                qk_norm="head", pad_id=None, bos_id=0, eos_id=1),
    "olmo2_all_norm_gate_sinks": dict(norm="rms", pos="rope", ffn="swiglu", bias=False, n_kv_heads=2, qk_norm="all",
                                      sublayer_norm="output", attn_output_gate=True, attn_sinks=True, pad_id=None,
                                      bos_id=0, eos_id=1),
}


def config(name, **extra):
    return ModelConfig(vocab_size=40, d_model=32, n_heads=4, n_layers=2, max_seq_len=32, dropout=0.0,
                       **{**CONFIGS[name], **extra})


def pair(name, **extra):
    """(the default layout, the fused layout holding the same weights)."""
    torch.manual_seed(0)
    separate = DecoderOnlyLM(config(name, **extra))
    with torch.no_grad():  # every tensor away from its init (zero biases, unit gains), so a swapped row shows
        for p in separate.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return separate, fuse_qkv(separate)


def test_option_is_checked():
    with pytest.raises(TypeError, match="fused_qkv must be a bool, got str"):
        ModelConfig(fused_qkv="yes")
    with pytest.raises(TypeError, match="fused_qkv must be a bool, got int"):
        MultiHeadAttention(16, 2, fused_qkv=1)
    from minitfm.config import Gemma4Dims, LatentDims
    with pytest.raises(ValueError, match="fused_qkv.*mla"):
        ModelConfig(d_model=32, n_heads=4, fused_qkv=True, pos="rope", norm="rms",
                    mla=LatentDims(kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8))
    with pytest.raises(ValueError, match="fused_qkv.*gemma4"):  # Gemma 4's attention reads q_proj, k_proj, v_proj
        ModelConfig(fused_qkv=True, gemma4=Gemma4Dims(global_head_dim=16))


def test_default_layout_unchanged():
    model = DecoderOnlyLM(config("llama_gqa"))
    keys = list(model.state_dict())
    assert "layers.0.self_attn.q_proj.weight" in keys and not any("qkv_proj" in k for k in keys)
    assert "fused_qkv" not in repr(model.config)  # printed only when set, as the other options of today's decoders
    assert "fused_qkv=True" in repr(config("llama_gqa", fused_qkv=True))
    attn = DecoderOnlyLM(config("llama_gqa", fused_qkv=True)).layers[0].self_attn
    assert attn.qkv_proj.weight.shape == ((4 + 2 + 2) * 8, 32) and not hasattr(attn, "q_proj")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_logits_and_gradients(name):
    separate, fused = pair(name)
    assert fused.config.fused_qkv and sum(p.numel() for p in fused.parameters()) == \
        sum(p.numel() for p in separate.parameters())
    tokens = torch.randint(0, 40, (3, 12))
    outs = []
    for model in (separate, fused):
        model.train()
        logits = model(tokens)
        nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 40), tokens[:, 1:].reshape(-1)).backward()
        outs.append(logits.detach())
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    sep = {k: p.grad for k, p in separate.named_parameters()}
    grads = split_qkv({k: p.grad for k, p in fused.named_parameters()}, fused.config)  # the fused grad, split
    assert set(grads) == set(sep)
    for key in sep:
        torch.testing.assert_close(grads[key], sep[key], rtol=1e-4, atol=1e-6, msg=key)


@pytest.mark.parametrize("name", ["llama_gqa", "gpt2"])
def test_kv_cache_and_generate(name):
    separate, fused = pair(name)
    prompt = torch.randint(0, 40, (2, 5))
    runs = []
    for model in (separate, fused):
        model.eval()
        caches = model.new_caches(2, 16)
        steps = [model(prompt, caches=caches)[:, -1]]  # the module path with a KV cache, token by token
        for t in range(3):
            steps.append(model(prompt[:, t:t + 1], caches=caches)[:, -1])
        runs.append(torch.stack(steps))
        outs = [generate(model, prompt, 6, return_logits=True, use_cache=c) for c in (True, False)]
        runs += [outs[0].logits, outs[1].logits]
        assert torch.equal(outs[0].tokens, outs[1].tokens)
    for a, b in zip(runs[:3], runs[3:]):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
    assert LeanDecoder.of(fused) is not None  # generate took the lean step for the fused model too
    LeanDecoder.release(fused)


def test_lean_step_copies_nothing_it_can_view():
    """GPT-2's shape (LayerNorm: no gain to fold): the lean step reads the fused matrix through a view, so it holds
    the three stacked matrices less than for the default layout; with RMSNorm's gain folded both copy them."""
    sizes = {}
    for name in ("gpt2", "llama_gqa"):
        separate, fused = (m.eval() for m in pair(name))
        decoders = [LeanDecoder.of(m) for m in (separate, fused)]
        sizes[name] = [d.nbytes() for d in decoders]
        for m in (separate, fused):
            LeanDecoder.release(m)
    qkv = 2 * (32 * 3 * 32 + 3 * 32) * 4  # two layers of (D, 3 D) float32 weights and their biases
    assert sizes["gpt2"][0] - sizes["gpt2"][1] == qkv
    assert sizes["llama_gqa"][0] == sizes["llama_gqa"][1]


def test_cross_attention():
    torch.manual_seed(0)
    cfg = ModelConfig.copy_task(n_kv_heads=2)
    separate = EncoderDecoder(cfg).eval()
    fused = fuse_qkv(separate)
    assert not fused.training and fused.decoder[0].cross_attn.fused_qkv
    src, tgt = torch.randint(3, 13, (2, 7)), torch.randint(3, 13, (2, 5))
    torch.testing.assert_close(fused(src, tgt), separate(src, tgt), rtol=1e-5, atol=1e-5)
    out = [generate(m, tgt[:, :1], 4, src=src, return_logits=True) for m in (separate, fused)]
    torch.testing.assert_close(out[1].logits, out[0].logits, rtol=1e-5, atol=1e-5)


def test_round_trip_is_bit_exact():
    separate, fused = pair("qwen3_head_norm_mqa")
    state = separate.state_dict()
    fused_state = fuse_qkv(state)
    assert list(fused_state) == list(fused.state_dict())  # qkv_proj where q_proj was, the rest in order
    for key, value in fused.state_dict().items():
        assert torch.equal(fused_state[key], value), key
    back = split_qkv(fused_state, separate.config)
    assert set(back) == set(state)  # q, k, v where qkv_proj was (their weights, then their biases)
    assert all(torch.equal(back[k], state[k]) for k in state)
    model_back = split_qkv(fused)
    assert type(model_back) is DecoderOnlyLM and not model_back.config.fused_qkv
    assert all(torch.equal(v, state[k]) for k, v in model_back.state_dict().items())
    w = fused_state["layers.0.self_attn.qkv_proj.weight"]  # rows: q (4 heads), k (1), v (1), 8 each
    assert torch.equal(w[32:40], state["layers.0.self_attn.k_proj.weight"])


def test_conversion_refuses_by_name():
    separate, fused = pair("llama_gqa")
    with pytest.raises(ValueError, match="qkv_proj.weight has 64 rows; this config's heads need 96"):
        split_qkv(fused.state_dict(), dataclasses.replace(fused.config, n_kv_heads=4))
    with pytest.raises(TypeError, match="ModelConfig"):
        split_qkv(fused.state_dict())
    with pytest.raises(TypeError, match="state dict"):
        fuse_qkv([1, 2])
    state = separate.state_dict()
    del state["layers.1.self_attn.v_proj.weight"]
    with pytest.raises(ValueError, match=r"layers.1.self_attn.q_proj.weight has no complete q/k/v triple"):
        fuse_qkv(state)
    from minitfm.finetuning.lora import add_lora
    with pytest.raises(ValueError, match="merge_and_unload"):
        fuse_qkv(add_lora(pair("llama_gqa")[0], targets=("q_proj",), r=2))


def test_lora_names_qkv_proj_and_works_on_it():
    from minitfm.finetuning.lora import add_lora, merge_and_unload
    _, fused = pair("llama_gqa")
    with pytest.raises(ValueError, match="qkv_proj.*target 'qkv_proj'"):
        add_lora(fused, targets=("q_proj", "v_proj"))
    tokens = torch.randint(0, 40, (2, 9))
    fused.eval()
    before = fused(tokens)
    add_lora(fused, targets=("qkv_proj",), r=2, seed=0)
    torch.testing.assert_close(fused(tokens), before)  # B = 0: no change at step 0
    with torch.no_grad():
        for name, p in fused.named_parameters():
            if name.endswith("lora_B"):
                p.normal_()
    adapted = fused(tokens)
    assert not torch.allclose(adapted, before)  # the adapter reaches the forward through the fused product
    torch.testing.assert_close(merge_and_unload(fused)(tokens), adapted, rtol=1e-4, atol=1e-4)


def test_pretrained_export_refuses_by_name(tmp_path):
    from minitfm.pretrained import save_pretrained, to_hf
    separate, fused = pair("llama_gqa")
    with pytest.raises(ValueError, match="fused_qkv"):
        save_pretrained(fused, tmp_path / "out")
    with pytest.raises(ValueError, match="fused_qkv"):
        to_hf(fused.state_dict(), fused.config)
    save_pretrained(split_qkv(fused), tmp_path / "split")  # the way out: split, then export
    assert (tmp_path / "split" / "model.safetensors").exists()


def test_checkpoint_keeps_the_layout_and_the_live_engine_refuses_it(tmp_path):
    from minitfm.training.checkpoint import load_checkpoint, save_checkpoint
    from minitfm.viz.live_asset import check_supported
    _, fused = pair("gpt2")
    save_checkpoint(tmp_path / "fused.pt", fused)
    back = load_checkpoint(tmp_path / "fused.pt")
    assert back.config.fused_qkv and all(torch.equal(v, fused.state_dict()[k]) for k, v in back.state_dict().items())
    with pytest.raises(ValueError, match="fused_qkv=True"):
        check_supported(fused)  # live_model.js reads q_proj, k_proj and v_proj
