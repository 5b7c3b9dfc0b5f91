"""Parameter counts of every open decoder family (issue 38): the closed form (minitfm.params.estimate_params) equals
the exact count of the minitfm model loaded from each family's tiny checkpoint, and both equal transformers' count
(a tied matrix counted once); for nine published models' config.json (minitfm.pretrained.published) the closed form
equals transformers' count of the full-size model built on the meta device (no memory, no download). A mixture of
experts' active count (minitfm.params.active_params) is checked against transformers' stored experts too.
"""
from __future__ import annotations

import pytest
import torch

from minitfm import pretrained as P
from minitfm.params import active_params, count_params, estimate_params
from minitfm.pretrained.published import PUBLISHED, STATED
from test_families import FAMILIES, hf_model, transformers  # the tiny checkpoints of tests/pretrained

MOE_FAMILIES = ("mixtral", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "glm4_moe", "minimax_m2", "llama4_text", "qwen3_next")


def transformers_counts(model, config) -> tuple[int, int]:
    """(total, active per token) of a transformers model: every parameter once, less the E - k unpicked experts'
    share of the stored experts (transformers stores a layer's experts as stacked tensors under ``.experts.``)."""
    total = sum(p.numel() for p in model.parameters())
    if config.n_experts is None:
        return total, total
    experts = sum(p.numel() for name, p in model.named_parameters() if ".experts." in name)
    unused, rest = divmod(experts * (config.n_experts - config.experts_per_token), config.n_experts)
    assert rest == 0 and experts > 0
    return total, total - unused


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_formula_minitfm_and_transformers_count_every_family_alike(name, tmp_path):
    hf = hf_model(name)
    hf.save_pretrained(tmp_path)
    model = P.load(tmp_path)
    config = P.config_from_hf(P.read_config(tmp_path))
    counts = count_params(model)
    assert counts == estimate_params(config)
    assert (counts["total"], active_params(config)) == transformers_counts(hf, config)
    assert (config.n_experts is not None) == (name in MOE_FAMILIES)  # the active count is tested where it differs


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_the_formula_counts_the_published_models_as_transformers_builds_them(name):
    hf_config = PUBLISHED[name]
    config = P.config_from_hf(hf_config)
    with torch.device("meta"):  # shapes without storage: Mixtral's 46.7B parameters in no memory
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**hf_config))
    assert type(model).__name__ == hf_config["architectures"][0]
    assert (estimate_params(config)["total"], active_params(config)) == transformers_counts(model, config)


def test_the_counts_agree_with_what_the_authors_state():
    """Within 3 %: the stated counts are rounded (Llama 3.2 1B's 1.236B written 1.23B, Mistral 7B's 7.24B 7.3B)."""
    assert set(STATED) <= set(PUBLISHED)
    for name, (total, active) in STATED.items():
        config = P.config_from_hf(PUBLISHED[name])
        assert (active is None) == (config.n_experts is None), name
        assert abs(estimate_params(config)["total"] / 1e9 / total - 1) < 0.03, name
        assert active is None or abs(active_params(config) / 1e9 / active - 1) < 0.03, name
