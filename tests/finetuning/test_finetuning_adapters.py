"""LoRA adapters saved apart from the base: a small file that gives back the tuned model on the same base."""
from __future__ import annotations

import pytest
import torch

import minitfm as m
from minitfm.finetuning import (adapter_config, add_lora, load_adapters, lora_layers, lora_state_dict, merge_lora,
                                save_adapters)

TOKENS = torch.randint(0, 40, (2, 10), generator=torch.Generator().manual_seed(0))


def base(seed=0, **overrides) -> m.DecoderOnlyLM:
    torch.manual_seed(seed)
    config = m.ModelConfig.small_lm(vocab_size=40, **{**dict(d_model=32, n_layers=2, max_seq_len=32), **overrides})
    return m.DecoderOnlyLM(config).eval()


def tuned(seed=0) -> m.DecoderOnlyLM:
    model = add_lora(base(seed), ("q_proj", "v_proj", "down_proj"), r=4, alpha=8, seed=1)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for layer in lora_layers(model).values():
            layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=g) * 0.2)
    return model


def test_adapters_hold_only_a_and_b():
    model = tuned()
    state = lora_state_dict(model)
    assert len(state) == 2 * 3 * 2  # A and B of 3 targets in 2 layers
    assert all(k.endswith((".lora_A", ".lora_B")) for k in state)
    assert state["layers.1.self_attn.q_proj.lora_A"].shape == (4, 32)
    assert state["layers.1.ffn.down_proj.lora_B"].shape == (32, 4)
    assert sum(t.numel() for t in state.values()) < sum(p.numel() for p in model.parameters()) / 10
    assert adapter_config(model) == {"targets": ["down_proj", "q_proj", "v_proj"], "r": 4, "alpha": 8, "dropout": 0.0}


def test_saved_adapters_on_a_fresh_base_give_the_tuned_logits(tmp_path):
    model = tuned()
    with torch.no_grad():
        want = model(TOKENS)
    save_adapters(model, tmp_path / "adapters.pt")
    fresh = base()  # the same base weights (same seed), without LoRA
    with torch.no_grad():
        assert float((fresh(TOKENS) - want).abs().max()) > 1e-3  # the adapters matter
    load_adapters(fresh, tmp_path / "adapters.pt")
    with torch.no_grad():
        assert torch.equal(fresh(TOKENS), want)
    assert torch.load(tmp_path / "adapters.pt", weights_only=True)["config"]["r"] == 4  # plain values only


def test_loading_adapters_leaves_the_global_random_stream_alone(tmp_path):
    """Library review L7: A is overwritten by the saved one, so drawing it must not move the caller's RNG."""
    save_adapters(tuned(), tmp_path / "adapters.pt")
    fresh = base()
    torch.manual_seed(123)
    want = torch.rand(4)
    torch.manual_seed(123)
    load_adapters(fresh, tmp_path / "adapters.pt")
    assert torch.equal(torch.rand(4), want)


def test_adapters_that_do_not_fit_are_refused_and_the_model_is_left_alone():
    adapters = {"config": adapter_config(tuned()), "state": lora_state_dict(tuned())}
    wider = base(d_model=48)
    with pytest.raises(ValueError, match="do not fit this model: .*wrong shape"):
        load_adapters(wider, adapters)
    assert not lora_layers(wider) and all(p.requires_grad for p in wider.parameters())
    short = {"config": adapters["config"], "state": dict(list(adapters["state"].items())[1:])}
    with pytest.raises(ValueError, match="missing"):
        load_adapters(base(), short)
    with pytest.raises(ValueError, match="must hold 'config' and 'state'"):
        load_adapters(base(), adapters["state"])
    with pytest.raises(TypeError, match="adapters must be a file path or the dict"):
        load_adapters(base(), 3)
    with pytest.raises(ValueError, match="already has LoRA layers"):
        load_adapters(tuned(), adapters)


def test_merged_adapters_are_not_saved(tmp_path):
    model = tuned()
    merge_lora(model)
    with pytest.raises(ValueError, match="unmerge_lora"):
        save_adapters(model, tmp_path / "a.pt")
