"""The routed mixture-of-experts layers against transformers' own MoE blocks (DeepSeek-V2/V3, GLM-4.5, MiniMax-M2,
gpt-oss, Llama 4), the correction bias and group limit on hand-made scores, bad options, parameter counts."""
import pytest
import torch
from torch.testing import assert_close

from minitfm.layers.routed_moe import FAMILIES, ExpertBank, RoutedMoE, from_transformers_state_dict, moe_params

D, E, F = 16, 8, 12  # d_model, experts, one expert's hidden size: all different, so a transposition fails


def transformers_block(family: str, **config):
    """A tiny transformers MoE block of ``family`` with seeded random weights (all of them, biases too)."""
    import transformers as tf  # requirements.txt installs it: a missing one fails, never skips
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Moe
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeMoE
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe
    from transformers.models.minimax_m2.modeling_minimax_m2 import MiniMaxM2SparseMoeBlock
    classes = {"deepseek_v2": (tf.DeepseekV2Config, DeepseekV2Moe), "deepseek_v3": (tf.DeepseekV3Config, DeepseekV3MoE),
               "glm4_moe": (tf.Glm4MoeConfig, Glm4MoeMoE), "minimax_m2": (tf.MiniMaxM2Config, MiniMaxM2SparseMoeBlock),
               "gpt_oss": (tf.GptOssConfig, GptOssMLP), "llama4": (tf.Llama4TextConfig, Llama4TextMoe)}
    config_class, block_class = classes[family]
    size = "intermediate_size" if family in ("minimax_m2", "gpt_oss", "llama4") else "moe_intermediate_size"
    config = config_class(hidden_size=D, num_attention_heads=4, num_key_value_heads=4,
                          num_experts_per_tok=config.pop("top_k", 2), **{size: F}, **config)
    if family == "deepseek_v2":
        config.num_experts = E
    else:
        config.num_local_experts = E
    config._experts_implementation = "eager"
    torch.manual_seed(0)
    block = block_class(config).double().eval()
    with torch.no_grad():
        for p in block.parameters():  # transformers leaves the experts uninitialised
            p.normal_(std=0.3)
    return block, config


def ours_for(block, config, family: str, **options) -> RoutedMoE:
    """A RoutedMoE with the family's choices and the block's sizes and weights."""
    top_k = config.num_experts_per_tok
    sizes = dict(d_model=D, n_experts=E, top_k=top_k, moe_intermediate_size=F)
    for name in ("n_shared_experts", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor",
                 "topk_method"):
        if family.startswith(("deepseek", "glm")) and getattr(config, name, None) is not None \
                and name not in FAMILIES[family]:  # DeepseekV2Config has a norm_topk_prob its block ignores
            options.setdefault(name, getattr(config, name))
    if family == "gpt_oss":
        options = dict(swiglu_alpha=config.swiglu_alpha, swiglu_limit=config.swiglu_limit) | options
    ours = RoutedMoE(**sizes, **{**FAMILIES[family], **options}).double()
    ours.load_state_dict(from_transformers_state_dict(block.state_dict(), family))
    return ours


def reference(block, family: str, x: torch.Tensor):
    """The block's output (B, T, D) and the experts its router chose, sorted, (N, k)."""
    tokens = x.reshape(-1, D)
    with torch.no_grad():
        out = block(x)
        if family in ("gpt_oss", "llama4"):
            out = out[0]
            logits = block.router(tokens)[1 if family == "llama4" else 0]
            indices = logits.topk(block.router.top_k, dim=-1).indices
        elif family == "minimax_m2":
            indices = block.gate(tokens, block.e_score_correction_bias)[2]
        else:
            indices = block.gate(tokens)[2]
    return out.reshape(x.shape), indices.sort(dim=-1).values


CASES = {  # family, its config, its options
    "deepseek_v2-greedy": ("deepseek_v2", dict(topk_method="greedy", n_shared_experts=2, routed_scaling_factor=1.5,
                                               n_group=1, topk_group=1)),
    "deepseek_v2-group_limited": ("deepseek_v2", dict(topk_method="group_limited_greedy", top_k=3, n_group=4,
                                                      topk_group=2, n_shared_experts=1)),
    "deepseek_v3": ("deepseek_v3", dict(top_k=3, n_group=4, topk_group=2, n_shared_experts=2, norm_topk_prob=True,
                                        routed_scaling_factor=2.5)),
    "deepseek_v3-no_norm": ("deepseek_v3", dict(top_k=2, n_group=2, topk_group=1, n_shared_experts=1,
                                                norm_topk_prob=False, routed_scaling_factor=1.0)),
    "glm4_moe": ("glm4_moe", dict(top_k=3, n_group=1, topk_group=1, n_shared_experts=1, norm_topk_prob=True,
                                  routed_scaling_factor=2.5)),
    "minimax_m2": ("minimax_m2", dict(top_k=3)),
    "gpt_oss": ("gpt_oss", dict(top_k=3)),
    "llama4-top1": ("llama4", dict(top_k=1)),
    "llama4-top2": ("llama4", dict(top_k=2)),
}


def set_bias(block, family):
    """A correction bias that moves choices: +0.6 on experts 1 and 6 (sigmoid scores lie in (0, 1))."""
    bias = block.gate.e_score_correction_bias if family != "minimax_m2" else block.e_score_correction_bias
    bias.copy_(torch.zeros(E).index_fill(0, torch.tensor([1, 6]), 0.6))


@pytest.mark.parametrize("case", list(CASES))
def test_matches_transformers_moe_block(case):
    family, config = CASES[case]
    block, hf_config = transformers_block(family, **config)
    if "e_score_correction_bias" in dict(block.named_buffers()) or family == "minimax_m2":
        set_bias(block, family)
    ours = ours_for(block, hf_config, family)
    torch.manual_seed(1)
    x = torch.randn(2, 9, D, dtype=torch.float64)
    expected, chosen = reference(block, family, x)
    with torch.no_grad():
        out, routing = ours(x)
    assert torch.equal(routing.indices.sort(dim=-1).values, chosen)
    # DeepSeek, GLM and MiniMax route in float32 whatever the input: about 1e-7 apart.
    assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["deepseek_v3", "glm4_moe", "minimax_m2"])
def test_the_correction_bias_changes_the_choice_not_the_weights(family):
    block, hf_config = transformers_block(family, **CASES[family][1])
    ours = ours_for(block, hf_config, family)
    x = torch.randn(2, 9, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, unbiased = ours(x)
        set_bias(block, family)
        ours.load_state_dict(from_transformers_state_dict(block.state_dict(), family))
        out, biased = ours(x)
    expected, chosen = reference(block, family, x)
    assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(biased.indices.sort(dim=-1).values, chosen)
    changed = (unbiased.indices.sort(-1).values != biased.indices.sort(-1).values).any(-1)
    assert changed.sum() >= 3, "the bias was meant to change several tokens' experts"
    assert_close(biased.probs, unbiased.probs)  # the scores do not see the bias
    weights = biased.probs.gather(1, biased.indices)  # ... and the weights are the unbiased scores of the chosen
    if ours.norm_topk_prob:
        weights = weights / weights.sum(-1, keepdim=True)
    assert_close(biased.weights, weights * ours.routed_scaling_factor)


def hand_router(n_experts=8, **options) -> RoutedMoE:
    """A sigmoid router whose logits are the tokens themselves (D = E, router weight = identity)."""
    moe = RoutedMoE(n_experts, n_experts, moe_intermediate_size=4, score_func="sigmoid", **options)
    with torch.no_grad():
        moe.router.weight.copy_(torch.eye(n_experts))
    return moe


def test_group_limit_keeps_the_groups_with_the_best_two_and_the_best_one():
    # groups {0,1} {2,3} {4,5} {6,7}: expert 0 is the best, but its group's second is poor
    logits = torch.tensor([[4.0, -4.0, 2.0, 1.8, 1.0, 1.5, -1.0, -1.0]])
    v3 = hand_router(top_k=2, topk_method="noaux_tc", n_group=4, topk_group=1)
    assert v3.route(logits).indices.sort().values.tolist() == [[2, 3]]  # the sum of its best two wins
    v2 = hand_router(top_k=2, topk_method="group_limited_greedy", n_group=4, topk_group=1)
    assert v2.route(logits).indices.sort().values.tolist() == [[0, 1]]  # the best one wins, then its poor partner
    greedy = hand_router(top_k=2, n_group=4, topk_group=4)  # every group kept: no limit
    assert greedy.route(logits).indices.sort().values.tolist() == [[0, 2]]


def test_gpt_oss_clamp_is_active_and_matches_transformers_with_large_inputs():
    block, hf_config = transformers_block("gpt_oss", top_k=2)
    ours = ours_for(block, hf_config, "gpt_oss")
    x = 8 * torch.randn(1, 6, D, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    gate_up = torch.einsum("nd,efd->nef", x.reshape(-1, D), ours.experts.gate_up_proj)
    assert (gate_up.abs() > hf_config.swiglu_limit).float().mean() > 0.2  # the limit cuts many values
    expected, _ = reference(block, "gpt_oss", x)
    with torch.no_grad():
        assert_close(ours(x)[0], expected, atol=1e-5, rtol=1e-5)
        unclamped = ours_for(block, hf_config, "gpt_oss", swiglu_limit=1e6)(x)[0]
    assert (unclamped - expected).abs().max() > 1.0


def test_llama4_weights_the_input_which_is_not_the_same_as_the_output():
    block, hf_config = transformers_block("llama4", top_k=1)
    x = torch.randn(2, 5, D, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    expected, _ = reference(block, "llama4", x)
    with torch.no_grad():
        on_output = ours_for(block, hf_config, "llama4", weights_on="output")(x)[0]
    assert (on_output - expected).abs().max() > 1e-2  # silu(w x W_g) (w x W_u) is not w silu(x W_g) (x W_u)


def test_half_precision_routes_in_float32_and_returns_the_input_dtype():
    torch.manual_seed(0)
    moe = RoutedMoE(D, E, 2, F, n_shared_experts=1, **FAMILIES["deepseek_v3"])
    x = torch.randn(1, 4, D)
    _, routing32 = moe(x)
    out, routing = moe.to(torch.bfloat16)(x.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16 and routing.probs.dtype == torch.float32
    assert_close(routing.probs, routing32.probs, atol=2e-2, rtol=0)  # bf16 weights, float32 arithmetic


def test_routing_reports_loads_and_a_balance_loss():
    torch.manual_seed(0)
    moe = RoutedMoE(D, E, 3, F, norm_topk_prob=True, **FAMILIES["deepseek_v3"])
    _, routing = moe(torch.randn(2, 10, D))
    assert routing.weights.shape == routing.indices.shape == (20, 3)
    assert_close(routing.expert_load.sum(), torch.tensor(1.0))
    assert_close(routing.expert_load, torch.bincount(routing.indices.flatten(), minlength=E) / 60)
    assert_close(routing.weights.sum(-1), torch.ones(20))  # norm_topk_prob, scaling factor 1


@pytest.mark.parametrize("options,match", [
    (dict(topk_method="noaux"), "topk_method"),
    (dict(score_func="relu"), "score_func"),
    (dict(n_group=3), "n_group must divide"),
    (dict(n_group=2, topk_group=3), "topk_group must be <= n_group"),
    (dict(n_group=4, topk_group=2), "topk_method 'greedy'"),
    (dict(topk_method="noaux_tc", n_group=8, topk_group=2, top_k=2), "n_group must leave >= 2 experts"),
    (dict(topk_method="noaux_tc", n_group=4, topk_group=1, top_k=3), "top_k=3 is more than"),
    (dict(top_k=9), "top_k must be <= n_experts"),
    (dict(activation="gelu"), "activation"),
    (dict(gate_up_layout="rows"), "gate_up_layout"),
    (dict(weights_on="both"), "weights_on"),
    (dict(routed_scaling_factor=0.0), "routed_scaling_factor"),
    (dict(swiglu_limit=-1.0), "swiglu_limit"),
    (dict(n_shared_experts=-1), "n_shared_experts"),
])
def test_bad_options_name_themselves(options, match):
    kwargs = dict(d_model=D, n_experts=E, top_k=2, moe_intermediate_size=F) | options
    with pytest.raises(ValueError, match=match):
        RoutedMoE(**kwargs)


def test_bad_family_and_flags():
    with pytest.raises(ValueError, match="family"):
        from_transformers_state_dict({}, "mixtral")
    with pytest.raises(TypeError, match="norm_topk_prob must be a bool"):
        RoutedMoE(D, E, 2, F, norm_topk_prob=1)
    with pytest.raises(ValueError, match="moe_intermediate_size must be >= 1"):
        ExpertBank(D, E, 0)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_parameter_counts_match_the_module_and_transformers(family):
    block, config = transformers_block(family, **CASES[next(c for c in CASES if c.startswith(family))][1])
    ours = ours_for(block, config, family)
    total, active = ours.parameter_counts()
    assert total == sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in block.parameters())
    shared = 0 if ours.shared_experts is None else sum(p.numel() for p in ours.shared_experts.parameters())
    one_expert = sum(p[0].numel() for p in ours.experts.parameters())
    router = sum(p.numel() for p in ours.router.parameters())
    assert active == router + ours.top_k * one_expert + shared < total


def test_moe_params_of_published_sizes():
    # DeepSeek-V3 (config.json: D 7168, 256 routed experts of F 2048, 1 shared, top-8): one MoE layer
    total, active = moe_params(7168, 256, 8, 2048, n_shared_experts=1)
    assert total == 7168 * 256 + 257 * 3 * 7168 * 2048
    assert active == 7168 * 256 + 9 * 3 * 7168 * 2048
    from transformers import DeepseekV3Config, GptOssConfig
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP
    with torch.device("meta"):  # full-size blocks without memory: only the shapes are counted
        v3 = DeepseekV3MoE(DeepseekV3Config())
        oss = GptOssMLP(GptOssConfig())  # gpt-oss-120b's sizes: D 2880, 128 experts of F 2880, top-4
    assert total == sum(p.numel() for p in v3.parameters())
    oss_total = moe_params(2880, 128, 4, 2880, router_bias=True, expert_bias=True)[0]
    assert oss_total == sum(p.numel() for p in oss.parameters())
