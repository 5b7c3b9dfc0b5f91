import math
from functools import partial
from unittest import mock

import pytest
import torch
from torch import nn

from minitfm.config import ModelConfig
from minitfm.data import CopyTask
import minitfm.models as models_module
from minitfm.models import DecoderOnlyLM, EncoderDecoder
from minitfm.training.debugging import (NonFiniteFinder, attention_entropy, check_causality, grad_norms,
                                        overfit_one_batch)
from minitfm.viz.plotting import plot_grad_norms


def leaky_causal_mask(t_q, t_k=None, device=None):
    """The bug: every query may attend to every key, the future included."""
    return torch.ones(1, t_q, t_q if t_k is None else t_k, dtype=torch.bool, device=device)


def test_overfit_one_batch_memorises_and_leaves_the_model_untouched():
    torch.manual_seed(0)
    task = CopyTask(n_symbols=6, min_len=3, max_len=4)
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=task.vocab_size, n_layers=1, dropout=0.1))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    losses = overfit_one_batch(model, task.batch(4, torch.Generator().manual_seed(0)), steps=40, lr=1e-2)
    assert len(losses) == 40
    assert losses[0] > 1.5 and losses[-1] < 0.05  # starts near log(V), ends memorised
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.training  # mode restored


def test_overfit_fails_when_only_a_bias_can_learn():
    torch.manual_seed(0)
    task = CopyTask(n_symbols=6, min_len=4, max_len=4)
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=task.vocab_size, n_layers=1))
    for p in model.parameters():
        p.requires_grad_(False)
    model.final_norm.bias.requires_grad_(True)  # a per-model constant shift of the logits: unigram at best
    losses = overfit_one_batch(model, task.batch(8, torch.Generator().manual_seed(0)), steps=40, lr=1e-2)
    assert losses[-1] > 1.0


def test_nonfinite_finder_names_exactly_the_poisoned_module():
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(n_layers=3))
    tokens = torch.randint(0, 16, (2, 6))
    with torch.no_grad():
        model.layers[1].ffn.up_proj.bias[3] = float("nan")
    with NonFiniteFinder(model) as finder:
        model(tokens)
    assert finder.first == "layers.1.ffn.up_proj"
    assert finder.first_inputs_finite is True
    assert finder.forward_hits[1][1] is False  # everything after it only inherited the NaN


def test_nonfinite_finder_is_silent_on_a_healthy_model_and_removes_its_hooks():
    model = DecoderOnlyLM(ModelConfig.tiny())
    with NonFiniteFinder(model, backward=True) as finder:
        model(torch.randint(0, 16, (2, 5))).sum().backward()
    assert finder.first is None and finder.first_backward is None
    assert all(not m._forward_hooks for m in model.modules())


def test_nonfinite_finder_backward_names_the_module_whose_gradient_breaks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Linear(4, 1))
    with torch.no_grad():
        model[3].weight[0, 1] = float("inf")  # layer 3's output is Inf, and so is the gradient it sends back
    with NonFiniteFinder(model, backward=True) as finder:
        model(torch.randn(3, 4)).sum().backward()
    assert finder.first == "3" and finder.first_inputs_finite
    assert finder.first_backward == "2"  # the first output gradient (backward order) that is not finite
    assert finder.backward_hits[:2] == ["2", "1"]


def test_grad_norms_cover_every_parameterised_module_and_match_manual_norms():
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny())
    src, tgt = torch.randint(3, 16, (2, 5)), torch.randint(3, 16, (2, 4))
    model(src, tgt).logsumexp(-1).mean().backward()
    norms = grad_norms(model)
    owners = {n for n, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))}
    assert set(norms) == owners - {"lm_head"}  # the tied head is the embedding: counted once
    q = model.encoder[0].self_attn.q_proj
    manual = math.sqrt(q.weight.grad.pow(2).sum() + q.bias.grad.pow(2).sum())
    assert norms["encoder.0.self_attn.q_proj"] == pytest.approx(manual, rel=1e-5)
    total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    assert math.sqrt(sum(v ** 2 for v in norms.values())) == pytest.approx(float(total), rel=1e-5)


def test_grad_norms_report_zero_for_a_layer_cut_off_from_the_loss():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    model[1](torch.randn(2, 3)).sum().backward()  # layer 0 never ran
    norms = grad_norms(model)
    assert norms["0"] == 0.0 and norms["1"] > 0


def test_plot_grad_norms_draws_one_line_per_run_and_rejects_mismatched_layers():
    fig = plot_grad_norms({"a": {"x": 1.0, "y": 0.0}, "b": {"x": 2.0, "y": 3.0}})
    assert len(fig.axes[0].lines) == 2
    with pytest.raises(ValueError, match="same layers"):
        plot_grad_norms({"a": {"x": 1.0}, "b": {"z": 1.0}})
    with pytest.raises(ValueError, match="non-empty"):
        plot_grad_norms({})


def test_causality_check_passes_a_correct_model_and_flags_a_leaking_mask():
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny()).eval()
    tokens = torch.randint(0, 16, (2, 7))
    assert check_causality(model, tokens, 16).ok
    with mock.patch.object(models_module, "causal_mask", leaky_causal_mask):
        report = check_causality(model, tokens, 16)
    assert not report.ok
    assert report.leaking == list(range(6))  # every position sees the future
    assert min(report.max_change) > 1e-3


def test_causality_check_works_for_an_encoder_decoder_and_for_any_function():
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny()).eval()
    src, tgt = torch.randint(3, 16, (2, 5)), torch.randint(3, 16, (2, 6))
    assert check_causality(lambda t: model(src, t), tgt, 16).ok
    cumulative = check_causality(lambda t: t.float().cumsum(1)[..., None], tgt, 16)
    assert cumulative.ok
    mean = check_causality(lambda t: t.float().mean(1, keepdim=True).expand(-1, t.shape[1])[..., None], tgt, 16)
    assert mean.leaking == list(range(5))
    # a small leak still counts: 1e-4 of the last token, 10x the default atol (1e-5), and within atol=1e-3
    def small(t):
        return (t.float().cumsum(1) + 1e-4 * t[:, -1:].float())[..., None]
    assert check_causality(small, tgt, 16).leaking == list(range(5))
    assert check_causality(small, tgt, 16, atol=1e-3).ok
    with pytest.raises(ValueError, match="must return"):
        check_causality(lambda t: t.float().sum(1), tgt, 16)


def test_attention_entropy_hand_values():
    uniform = torch.full((1, 2, 3, 4), 0.25)
    one_hot = torch.zeros(1, 2, 3, 4)
    one_hot[..., 0] = 1.0
    result = attention_entropy([uniform, one_hot])
    assert list(result) == ["self"] and result["self"].shape == (2, 2)
    torch.testing.assert_close(result["self"][0], torch.full((2,), math.log(4)))
    torch.testing.assert_close(result["self"][1], torch.zeros(2))


def test_attention_entropy_from_intermediates_drops_without_the_sqrt_dk_scale():
    from minitfm.layers.attention import scaled_dot_product_attention
    import minitfm.layers.multihead as mh

    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(d_model=64, n_heads=1)).eval()
    src, tgt = torch.randint(3, 16, (2, 8)), torch.randint(3, 16, (2, 8))
    scaled = attention_entropy(model(src, tgt, return_intermediates=True)[1])
    with mock.patch.object(mh, "scaled_dot_product_attention", partial(scaled_dot_product_attention, scale=1.0)):
        unscaled = attention_entropy(model(src, tgt, return_intermediates=True)[1])
    assert set(scaled) == {"encoder_self", "decoder_self", "cross"}
    assert scaled["encoder_self"].shape == (2, 1)
    assert (unscaled["encoder_self"] < scaled["encoder_self"]).all()
