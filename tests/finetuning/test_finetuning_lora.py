"""minitfm.finetuning.lora against Hugging Face peft, and the rules LoRA must keep.

A tiny Llama-style DecoderOnlyLM (RMSNorm, SwiGLU, RoPE, grouped-query attention) is exported to transformers
with minitfm.pretrained, both are wrapped with LoRA on the same targets, and the same A and B are copied from
minitfm's layers into peft's. Llama stores q_proj and k_proj rows in the rotate-half order (chapter 13), so B's rows
(its output side) are permuted for those two, as the export permutes W's rows; A (the input side) is copied as is.
Logits must agree to 1e-5 in float32, unmerged and merged.
"""
from __future__ import annotations

import os

import pytest
import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import peft  # noqa: E402  (requirements.txt: the reference; a missing one fails here, never skips)
import transformers  # noqa: E402

transformers.logging.set_verbosity_error()

import minitfm as m  # noqa: E402
from minitfm import pretrained as P  # noqa: E402
from minitfm.finetuning import (LoRALinear, adam_state_numbers, add_lora, linear_names, lora_layers,  # noqa: E402
                                merge_and_unload, merge_lora, trainable_parameters, unmerge_lora)

# peft 0.21 calls a transformers 5 method that warns of its own deprecation; nothing of ours
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

TOL = 1e-5
ALL_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "gate_proj", "up_proj", "down_proj")
HF_NAME = {"out_proj": "o_proj"}


def llama_like(**overrides) -> m.ModelConfig:
    base = dict(vocab_size=97, d_model=32, n_heads=4, n_kv_heads=2, d_ff=40, n_layers=2, max_seq_len=64, norm="rms",
                pos="rope", ffn="swiglu", bias=False, tie_embeddings=False, scale_embeddings=False, pad_id=None,
                bos_id=1, eos_id=2, rope_base=500.0)
    return m.ModelConfig(**{**base, **overrides})


def build(seed=0, **overrides) -> m.DecoderOnlyLM:
    torch.manual_seed(seed)
    return m.DecoderOnlyLM(llama_like(**overrides)).eval()


def randomise_b(model, seed=1, scale=0.2) -> None:
    """B = 0 at init would make every comparison trivial: give every B random values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=g) * scale)


def hf_module_name(name: str) -> str:
    """minitfm's module name -> the module's name inside a peft-wrapped LlamaForCausalLM."""
    name = name.replace(".ffn.", ".mlp.")
    head, _, last = name.rpartition(".")
    return f"base_model.model.model.{head}.{HF_NAME.get(last, last)}"


def copy_adapters(model, peft_model, permute_rows: bool = True) -> None:
    c = model.config
    modules = dict(peft_model.named_modules())
    with torch.no_grad():
        for name, layer in lora_layers(model).items():
            target = modules[hf_module_name(name)]
            b = layer.lora_B
            if permute_rows and name.endswith(("q_proj", "k_proj")):
                b = P.to_rotate_half(b, c.n_heads if name.endswith("q_proj") else c.n_kv_heads)
            target.lora_A["default"].weight.copy_(layer.lora_A)
            target.lora_B["default"].weight.copy_(b)


def peft_pair(tmp_path, targets, r=4, alpha=8, **overrides):
    model = build(**overrides)
    P.save_pretrained(model, tmp_path / "base")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "base").eval()
    add_lora(model, targets, r=r, alpha=alpha, seed=0)
    randomise_b(model)
    config = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=[HF_NAME.get(t, t) for t in targets],
                             lora_dropout=0.0, bias="none")
    peft_model = peft.get_peft_model(hf, config).eval()
    copy_adapters(model, peft_model)
    return model, peft_model


TOKENS = torch.randint(0, 97, (3, 20), generator=torch.Generator().manual_seed(5))


@torch.no_grad()
def gap(model, peft_model) -> float:
    return float((model(TOKENS) - peft_model(input_ids=TOKENS).logits).abs().max())


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ALL_TARGETS], ids=["q-v", "all-linear"])
def test_lora_gives_peft_logits_unmerged_and_merged(tmp_path, targets):
    model, peft_model = peft_pair(tmp_path, targets)
    with torch.no_grad(), peft_model.disable_adapter():
        moved = float((model(TOKENS) - peft_model(input_ids=TOKENS).logits).abs().max())
    assert moved > 100 * TOL, "the adapters must change the logits, or the comparison shows nothing"
    assert gap(model, peft_model) < TOL
    merge_lora(model)
    peft_model.merge_adapter()
    assert all(layer.merged for layer in lora_layers(model).values())
    assert gap(model, peft_model) < TOL


def test_the_comparison_fails_when_a_row_order_is_wrong(tmp_path):
    """The test above can fail: copying B without the rotate-half permutation of q_proj breaks it."""
    model, peft_model = peft_pair(tmp_path, ("q_proj",))
    copy_adapters(model, peft_model, permute_rows=False)
    assert gap(model, peft_model) > 100 * TOL


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ALL_TARGETS], ids=["q-v", "all-linear"])
def test_trainable_counts_equal_peft(tmp_path, targets):
    model, peft_model = peft_pair(tmp_path, targets, r=3, alpha=5)
    trainable, total = peft_model.get_nb_trainable_parameters()
    assert trainable_parameters(model) == trainable
    assert sum(p.numel() for p in model.parameters()) == total
    expected = sum(3 * (layer.base.in_features + layer.base.out_features) for layer in lora_layers(model).values())
    assert trainable == expected  # r (D_in + D_out) per wrapped layer


def test_b_zero_at_init_leaves_the_logits_unchanged():
    model = build()
    with torch.no_grad():
        before = model(TOKENS)
    add_lora(model, ALL_TARGETS, r=4, alpha=8)
    layers = lora_layers(model)
    assert len(layers) == 2 * len(ALL_TARGETS)
    assert all(bool(layer.lora_A.abs().sum() > 0) and not layer.lora_B.any() for layer in layers.values())
    with torch.no_grad():
        assert torch.equal(model(TOKENS), before)


def test_a_starts_kaiming_uniform_like_peft():
    layer = LoRALinear(nn.Linear(48, 16), r=8, generator=torch.Generator().manual_seed(0))
    bound = 48 ** -0.5  # kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(D_in), 1/sqrt(D_in)), nn.Linear's and peft's
    assert float(layer.lora_A.detach().abs().max()) <= bound
    assert float(layer.lora_A.detach().abs().max()) > 0.9 * bound


def test_forward_is_the_formula_with_alpha_over_r():
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    layer = LoRALinear(base, r=2, alpha=3.0)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(4, 6)
    want = x @ base.weight.T + base.bias + (3.0 / 2) * x @ layer.lora_A.T @ layer.lora_B.T
    torch.testing.assert_close(layer(x), want)
    assert layer.scaling == 1.5 and layer.weight is base.weight and layer.bias is base.bias


def test_merge_then_unmerge_restores_the_base_weights():
    model = build()
    base = {k: v.clone() for k, v in model.state_dict().items()}
    add_lora(model, ALL_TARGETS, r=4, alpha=8, seed=0)
    randomise_b(model)
    merge_lora(model)
    layer = model.layers[0].self_attn.q_proj
    torch.testing.assert_close(layer.base.weight, base["layers.0.self_attn.q_proj.weight"] + layer.delta_weight())
    unmerge_lora(model)
    for name, layer in lora_layers(model).items():
        restored = layer.base.weight
        assert float((restored - base[f"{name}.weight"]).abs().max()) < 1e-6  # to rounding
        assert not layer.merged


def test_only_the_adapters_train_and_adam_keeps_two_numbers_each():
    model = build()
    frozen = {k: v.clone() for k, v in model.state_dict().items()}
    add_lora(model, ("q_proj", "v_proj"), r=2, alpha=4, seed=0)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-2)
    model.train()
    loss = model(TOKENS).logsumexp(-1).mean()
    loss.backward()
    optimizer.step()
    state = sum(t.numel() for s in optimizer.state.values() for k, t in s.items() if k != "step")
    assert state == adam_state_numbers(model) == 2 * trainable_parameters(model)
    for name, layer in lora_layers(model).items():
        assert torch.equal(layer.base.weight, frozen[f"{name}.weight"])
        assert layer.lora_B.abs().sum() > 0  # B moved off zero
    assert torch.equal(model.tok_emb.weight, frozen["tok_emb.weight"])


def test_merge_and_unload_gives_plain_linear_layers_and_the_same_logits():
    model = build()
    add_lora(model, ALL_TARGETS, r=4, alpha=8, seed=0)
    randomise_b(model)
    with torch.no_grad():
        before = model(TOKENS)
    merge_and_unload(model)
    assert not lora_layers(model)
    assert type(model.layers[1].ffn.down_proj) is nn.Linear
    with torch.no_grad():
        assert float((model(TOKENS) - before).abs().max()) < TOL


def test_linear_names_are_what_targets_may_name():
    assert linear_names(build()) == sorted(ALL_TARGETS + ("lm_head",))
    gpt2_like = m.DecoderOnlyLM(m.ModelConfig.tiny())
    assert linear_names(gpt2_like) == ["down_proj", "k_proj", "lm_head", "out_proj", "q_proj", "up_proj", "v_proj"]


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(r=0), ValueError, "r must be >= 1, got 0"),
    (dict(r=2.5), TypeError, "r must be an int, got float"),
    (dict(r=17), ValueError, "r must be <= min(in_features, out_features) of every target, got r=17"),
    (dict(alpha=0), ValueError, "alpha must be > 0, got 0"),
    (dict(alpha="16"), TypeError, "alpha must be a number, got str"),
    (dict(dropout=1.0), ValueError, "dropout must be in [0, 1), got 1.0"),
    (dict(targets="q_proj"), TypeError, "targets must be a list or tuple of layer names"),
    (dict(targets=()), ValueError, "targets must be a non-empty list"),
    (dict(targets=("q_proj", "query")), ValueError, "targets ['query'] name no nn.Linear"),
    (dict(targets=("o_proj",)), ValueError, "are ['down_proj', 'gate_proj', 'k_proj', 'lm_head', 'out_proj'"),
])
def test_add_lora_refuses_bad_arguments(kwargs, error, words):
    model = build(n_heads=2, n_kv_heads=1, d_model=32)  # k_proj/v_proj: 32 -> 16, so r <= 16
    kwargs = {"targets": ALL_TARGETS, **kwargs}
    with pytest.raises(error) as raised:
        add_lora(model, **kwargs)
    assert words in str(raised.value)
    assert not lora_layers(model) and all(p.requires_grad for p in model.parameters())  # nothing changed


def test_lora_state_is_checked():
    model = add_lora(build(), ("q_proj",))
    with pytest.raises(ValueError, match="already has LoRA layers"):
        add_lora(model, ("v_proj",))
    with pytest.raises(ValueError, match="not merged; there is nothing to unmerge"):
        unmerge_lora(model)
    merge_lora(model)
    with pytest.raises(ValueError, match="already merged"):
        merge_lora(model)
    with pytest.raises(ValueError, match="has no LoRA layers"):
        merge_lora(build())
    with pytest.raises(ValueError, match=r"r must be <= min\(in_features, out_features\) = 4 for this layer"):
        LoRALinear(nn.Linear(8, 4), r=5)
    with pytest.raises(TypeError, match="LoRALinear wraps an nn.Linear, got Conv1d"):
        LoRALinear(nn.Conv1d(4, 4, 1))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        add_lora("model")
    tied = m.DecoderOnlyLM(m.ModelConfig.tiny())  # lm_head.weight is tok_emb.weight
    with pytest.raises(ValueError, match=r"the weights of \['lm_head'\] are shared with another module"):
        add_lora(tied, ("q_proj", "lm_head"), r=2)
    assert not lora_layers(tied)
    untied = add_lora(build(), ("lm_head",), r=2)  # an untied head is an ordinary target
    assert list(lora_layers(untied)) == ["lm_head"]
