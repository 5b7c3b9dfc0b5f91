"""Generating with real LoRA layers: the lean decoding step (chapter 8) refuses them, names why, and ``generate``
gives the tokens and logits of the plain module path, before and after merging; once merged and unloaded, the
lean step runs again and agrees.

Float64, so that greedy choices are far from rounding ties between the paths.
"""
from __future__ import annotations

import pytest
import torch

import minitfm as m
from minitfm.finetuning import add_lora, lora_layers, merge_and_unload, merge_lora
from minitfm.generation import lean_refusal
from minitfm.generation.lean_decode import LeanDecoder

NEW = 12


def lora_model(seed=0) -> m.DecoderOnlyLM:
    torch.manual_seed(seed)
    config = m.ModelConfig(vocab_size=50, d_model=32, n_heads=4, n_kv_heads=2, d_ff=48, n_layers=2, max_seq_len=64,
                           norm="rms", pos="rope", ffn="swiglu", bias=False, pad_id=0, bos_id=1, eos_id=2)
    model = m.DecoderOnlyLM(config).to(torch.float64).eval()
    add_lora(model, ("q_proj", "k_proj", "v_proj", "out_proj", "gate_proj", "up_proj", "down_proj"), r=4, alpha=8,
             seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=g, dtype=torch.float64) * 0.3)
    return model


PROMPT = torch.tensor([[1, 7, 9, 11, 4], [1, 3, 3, 8, 20]])


def reference(model) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy tokens and their logits by the plainest path: the whole sequence through the modules, every step."""
    tokens, steps = PROMPT.clone(), []
    with torch.no_grad():
        for _ in range(NEW):
            logits = model(tokens)[:, -1]
            steps.append(logits)
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
    return tokens, torch.stack(steps, dim=1)


def generated(model):
    out = m.generate(model, PROMPT, NEW, eos_id=-1, return_logits=True)
    return out.tokens, out.logits


@pytest.mark.parametrize("merged", [False, True], ids=["unmerged", "merged"])
def test_generate_with_lora_layers_takes_the_module_path_and_agrees(merged):
    model = lora_model()
    if merged:
        merge_lora(model)
    reason = lean_refusal.refusal(model)
    assert reason is not None and "LoRALinear" in reason and "not a type the lean step knows" in reason
    tokens, logits = generated(model)
    want_tokens, want_logits = reference(model)
    assert torch.equal(tokens, want_tokens)
    torch.testing.assert_close(logits, want_logits, rtol=0, atol=1e-10)
    uncached = m.generate(model, PROMPT, NEW, eos_id=-1, use_cache=False)
    assert torch.equal(uncached.tokens, want_tokens)


def test_a_lean_decoder_passed_in_is_not_used_for_a_lora_model():
    """Even a LeanDecoder built while the model was plain steps aside once LoRA layers are in."""
    plain = lora_model()
    merge_and_unload(plain)
    decoder = LeanDecoder.build(plain)
    add_lora(plain, ("v_proj",), r=2, alpha=4, seed=3)
    with torch.no_grad():
        plain.layers[0].self_attn.v_proj.lora_B.fill_(0.5)
    with pytest.raises(ValueError, match="rebuild it"):
        m.generate(plain, PROMPT, NEW, eos_id=-1, decoder=decoder)
    tokens, _ = generated(plain)
    assert torch.equal(tokens, reference(plain)[0])


def test_merged_and_unloaded_model_runs_the_lean_step_with_the_same_tokens():
    model = lora_model()
    with_lora_tokens, with_lora_logits = generated(model)
    merge_and_unload(model)
    assert lean_refusal.refusal(model) is None  # plain modules again: the lean step serves it
    tokens, logits = generated(model)
    assert torch.equal(tokens, with_lora_tokens)
    torch.testing.assert_close(logits, with_lora_logits, rtol=0, atol=1e-10)
    margin = with_lora_logits.topk(2, dim=-1).values.diff(dim=-1).abs().min()
    assert margin > 1e-6  # the greedy choices were not ties, so equal tokens say something


def test_without_the_refusal_the_lean_step_would_ignore_the_adapters(monkeypatch):
    """Why the refusal matters (and why the tests above can fail): the lean step reads each layer's ``weight``,
    the base weight alone, so forcing it onto a LoRA model gives other logits."""
    from minitfm.generation import decode_loop

    model = lora_model()
    monkeypatch.setattr(decode_loop, "refusal", lambda model: None)
    _, logits = generated(model)
    assert float((logits - reference(model)[1]).abs().max()) > 1e-3
