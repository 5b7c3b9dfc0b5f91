import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from minitfm.layers.positional import sinusoidal_encoding  # noqa: E402
from minitfm.viz import plotting  # noqa: E402


def _ticklabels(axis):
    return [t.get_text() for t in axis.get_ticklabels()]


def test_plot_attention_draws_weights_with_token_labels():
    weights = torch.rand(3, 4).softmax(-1)
    fig = plotting.plot_attention(weights, ["a", "b", "c"], ["w", "x", "y", "z"], title="head 0")
    ax = fig.axes[0]
    torch.testing.assert_close(torch.as_tensor(ax.images[0].get_array()), weights)
    assert _ticklabels(ax.yaxis) == ["a", "b", "c"]
    assert _ticklabels(ax.xaxis) == ["w", "x", "y", "z"]
    assert ax.get_title() == "head 0"
    assert ax.images[0].get_clim() == (0.0, 1.0)  # probabilities on a fixed scale
    assert len(fig.axes) == 2  # the heatmap and its colour bar


def test_plot_attention_annotate_writes_each_value():
    fig = plotting.plot_attention(torch.tensor([[0.25, 0.75]]), annotate=True)
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.25", "0.75"]


@pytest.mark.parametrize("weights, tokens_q, tokens_k, error, match", [
    (torch.rand(3, 4), ["a", "b"], None, ValueError, "tokens_q has 2 labels but the tensor has 3"),
    (torch.rand(3, 4), None, list("abc"), ValueError, "tokens_k has 3 labels but the tensor has 4"),
    (torch.rand(0, 4), None, None, ValueError, "empty"),
    (torch.tensor([[0.5, float("nan")]]), None, None, ValueError, "1 NaN/Inf"),
    (torch.rand(2, 3, 4), None, None, ValueError, "must have 2 dimensions"),
    (torch.ones(2, 2, dtype=torch.long), None, None, TypeError, "floating-point"),
])
def test_plot_attention_rejects_bad_input(weights, tokens_q, tokens_k, error, match):
    with pytest.raises(error, match=match):
        plotting.plot_attention(weights, tokens_q, tokens_k)


def test_plot_attention_grid_has_one_panel_per_layer_and_head():
    layers = [torch.rand(2, 3, 4, 4).softmax(-1) for _ in range(2)]  # L=2 x (B=2, H=3, T, T)
    fig = plotting.plot_attention_grid(layers, list("abcd"), list("abcd"), batch_index=1)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 6
    torch.testing.assert_close(torch.as_tensor(panels[5].images[0].get_array()), layers[1][1, 2])
    assert panels[5].get_title() == "layer 1 head 2"
    with pytest.raises(ValueError, match="batch_index must be in"):
        plotting.plot_attention_grid(layers, batch_index=2)


def test_plot_masks_shows_each_mask_as_zeros_and_ones():
    causal = torch.ones(3, 3, dtype=torch.bool).tril()[None]  # (1, T, T)
    fig = plotting.plot_masks({"causal": causal, "none": torch.ones(3, 3, dtype=torch.bool)}, list("abc"), list("abc"))
    first = torch.as_tensor(fig.axes[0].images[0].get_array())
    assert torch.equal(first, causal[0].float())
    assert [ax.get_title() for ax in fig.axes] == ["causal", "none"]
    with pytest.raises(TypeError, match="must be boolean"):
        plotting.plot_masks({"bad": torch.ones(2, 2)})


def test_plot_positional_encoding_shows_the_table():
    pe = sinusoidal_encoding(torch.arange(10), 8)
    ax = plotting.plot_positional_encoding(pe).axes[0]
    torch.testing.assert_close(torch.as_tensor(ax.images[0].get_array()), pe)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("dimension", "position")


def test_line_plots_draw_each_curve_with_its_label():
    sim = plotting.plot_similarity_vs_distance({"a": [1.0, 0.5, 0.2]}, distances=[-1, 0, 1]).axes[0]
    assert sim.lines[0].get_xdata().tolist() == [-1, 0, 1]
    lr = plotting.plot_lr_schedules({"noam": [0.1, 0.2, 0.15], "cosine": [0.3, 0.2, 0.1]}).axes[0]
    assert [line.get_label() for line in lr.lines] == ["noam", "cosine"]
    assert lr.lines[0].get_xdata().tolist() == [1, 2, 3]  # schedules start at step 1
    curves = plotting.plot_training_curves({"run": [3.0, 2.0, math.nan, 1.0]}, log_y=True).axes[0]
    assert curves.get_yscale() == "log"
    assert math.isnan(curves.lines[0].get_ydata()[2])
    with pytest.raises(ValueError, match=r"has 2 values but x has 3"):
        plotting.plot_similarity_vs_distance({"a": [1.0, 0.5]}, distances=[0, 1, 2])
    with pytest.raises(ValueError, match="non-empty"):
        plotting.plot_training_curves({})


def test_plot_distributions_sorts_by_before_and_pairs_bars():
    before = torch.tensor([0.1, 0.6, 0.3])
    after = torch.tensor([0.0, 0.8, 0.2])
    ax = plotting.plot_distributions(before, after, ["a", "b", "c"]).axes[0]
    assert _ticklabels(ax.xaxis) == ["b", "c", "a"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.6, 0.3, 0.1, 0.8, 0.2, 0.0])
    with pytest.raises(ValueError, match="same shape"):
        plotting.plot_distributions(before, after[:2])


def test_plot_score_histogram_counts_every_score():
    scores = torch.randn(100)
    ax = plotting.plot_score_histogram({"scaled": scores}, bins=10).axes[0]
    assert sum(p.get_height() for p in ax.patches) == 100


def test_plots_accept_tensors_that_require_grad_or_are_bfloat16():
    # softmax of a model's logits outside no_grad, or a bf16 model's output: plot them as they are
    logits = torch.tensor([2.0, 1.0, 0.0], requires_grad=True)
    before = logits.softmax(-1)
    after = (logits / 0.5).softmax(-1).bfloat16()
    fig = plotting.plot_distributions(before, after, ["a", "b", "c"])
    heights = [patch.get_height() for patch in fig.axes[0].patches]
    assert heights[:3] == pytest.approx(before.tolist())
    loss = torch.linspace(2.0, 1.0, 5, requires_grad=True) * 1.0
    fig = plotting.plot_training_curves({"run": loss})
    assert fig.axes[0].lines[0].get_ydata().tolist() == pytest.approx(loss.tolist())
