import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from minitfm.viz import explorers  # noqa: E402
from minitfm.viz.explorer_data import to_layer_list  # noqa: E402


def _image(explorer, panel=0):
    return torch.as_tensor(explorer.figure.axes[panel].images[0].get_array())


def _weights():
    torch.manual_seed(0)
    return {"encoder_self": [torch.rand(1, 2, 3, 3).softmax(-1) for _ in range(2)],
            "cross": [torch.rand(1, 2, 4, 3).softmax(-1) for _ in range(3)]}


def test_attention_explorer_switches_kind_layer_and_head():
    weights = _weights()
    ex = explorers.attention_explorer(weights, ["<bos>", "a", "b", "c"], ["x", "y", "z"])
    torch.testing.assert_close(_image(ex), weights["encoder_self"][0][0, 0])
    ex.controls["head"].value = 1
    torch.testing.assert_close(_image(ex), weights["encoder_self"][0][0, 1])
    ex.controls["kind"].value = "cross"
    assert ex.controls["layer"].max == 2  # cross has three layers
    ex.controls["layer"].value = 2
    torch.testing.assert_close(_image(ex), weights["cross"][2][0, 1])
    assert [t.get_text() for t in ex.figure.axes[0].get_yticklabels()] == ["<bos>", "a", "b", "c"]
    assert ex.readout.value.startswith("cross-attention · layer 2 · head 1")
    assert ex.renders == 4


def test_attention_explorer_accepts_model_intermediates():
    from minitfm.models import Intermediates

    inter = Intermediates(decoder_self=[torch.rand(1, 2, 3, 3).softmax(-1)])
    ex = explorers.attention_explorer(inter, list("abc"))
    assert list(ex.controls["kind"].options) == [("decoder self-attention", "decoder_self")]
    torch.testing.assert_close(_image(ex), inter.decoder_self[0][0, 0])


def test_attention_explorer_rejects_bad_input():
    with pytest.raises(ValueError, match="labels of 'encoder_self' has 2 labels but the tensor has 3"):
        explorers.attention_explorer(_weights(), list("abcd"), ["x", "y"])
    with pytest.raises(ValueError, match="NaN/Inf"):
        explorers.attention_explorer([torch.full((1, 1, 2, 2), float("nan"))])
    with pytest.raises(ValueError, match="empty"):
        explorers.attention_explorer([torch.rand(1, 1, 0, 2)])
    with pytest.raises(ValueError, match="same shape"):
        explorers.attention_explorer([torch.rand(1, 1, 2, 2), torch.rand(1, 1, 3, 3)])
    with pytest.raises(TypeError, match="non-empty dict"):
        explorers.attention_explorer({})


def test_to_layer_list_gives_bertviz_shapes():
    weights = _weights()
    layers = to_layer_list(weights, "cross")
    assert [tuple(w.shape) for w in layers] == [(1, 2, 4, 3)] * 3
    assert to_layer_list([torch.rand(2, 3, 3)])[0].shape == (1, 2, 3, 3)  # (H, T, T) gains a batch axis
    with pytest.raises(ValueError, match="several kinds"):
        to_layer_list(weights)
    with pytest.raises(ValueError, match="kind must be one of"):
        to_layer_list(weights, "decoder_self")


def test_scaling_explorer_without_scale_saturates():
    ex = explorers.scaling_explorer()
    scaled_entropy = float(ex.data["entropy"].mean())
    old = _image(ex, 1)
    ex.controls["scaled"].value = False
    ex.controls["d_k"].value = 1024
    assert not torch.equal(_image(ex, 1), old)
    assert float(ex.data["entropy"].mean()) < 0.5 * scaled_entropy  # near one-hot without the scale
    assert float(ex.data["scores"].std()) == pytest.approx(32.0, rel=0.1)  # std sqrt(d_k)
    assert "unscaled" in ex.readout.value


def test_mask_explorer_changes_mask_with_kind_and_sequence():
    ex = explorers.mask_explorer()
    both = _image(ex)
    assert torch.equal(both, torch.tril(both))  # causal part
    ex.controls["kind"].value = "padding"
    padding = _image(ex)
    assert padding[0].tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]  # "the cat sat" + 3 pads, every query
    ex.controls["sequence"].value = 2
    assert _image(ex).sum() == 36  # the longest sentence has no padding
    torch.testing.assert_close(ex.data["weights"].sum(-1), torch.ones(6))


def test_positional_explorer_changes_scheme_pair_and_position():
    ex = explorers.positional_explorer(max_len=12, d_model=8)
    sin_table = _image(ex)
    ex.controls["scheme"].value = "rope"
    assert not torch.equal(_image(ex), sin_table)
    old_curve = ex.figure.axes[2].lines[0].get_ydata().copy()
    ex.controls["position"].value = 3
    at_3 = ex.data["similarity"]
    assert not (ex.figure.axes[2].lines[0].get_ydata() == old_curve).all()
    ex.controls["position"].value = 4
    torch.testing.assert_close(ex.data["similarity"][1:], at_3[:-1])  # RoPE: the score depends on n - m only
    ex.controls["scheme"].value = "sinusoidal"
    assert float(ex.data["similarity"][4]) == pytest.approx(1.0)  # cosine similarity with itself
    ex.controls["pair"].value = 2
    assert ex.figure.axes[1].lines[0].get_label() == "dim 4"


def test_sampling_explorer_applies_processors():
    ex = explorers.sampling_explorer()
    torch.testing.assert_close(ex.data["after"], ex.data["before"])  # everything off
    ex.controls["top_k"].value = 2
    assert int((ex.data["after"] > 0).sum()) == 2
    assert ex.readout.value.startswith("kept 2 of 16 tokens")
    before_penalty = ex.data["after"].clone()
    ex.controls["penalty"].value = 3.0  # 'the' (already in the text) loses to 'floor'
    assert not torch.equal(ex.data["after"], before_penalty)
    heights = [p.get_height() for p in ex.figure.axes[0].patches]
    assert heights[16:18] == pytest.approx(ex.data["after"][ex.data["before"].argsort(descending=True)][:2].tolist())


def test_live_explorer_figures_carry_alt_text():
    import base64

    import matplotlib.pyplot as plt

    from minitfm.viz.explorers import figure_html

    fig = plt.figure()
    plt.plot([0, 1])
    html = figure_html(fig, alt='weights of "head 0" <layer 1>').data
    plt.close(fig)
    assert html.startswith('<img alt="weights of &quot;head 0&quot; &lt;layer 1&gt;" src="data:image/png;base64,')
    png = base64.b64decode(html.split("base64,")[1].rstrip('">'))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_positional_readout_names_both_neighbours_where_sinusoidal_similarity_ties():
    """Sinusoidal similarity depends on the distance alone: p - 1 and p + 1 tie exactly, so an argmax would name
    one of them by float rounding, which differs between CPUs (issue 45); the readout names both, on any machine."""
    from minitfm.viz.explorer_data import positional_readout, positional_similarity, positional_table

    table = positional_table("sinusoidal", 24, 16)
    for position in range(1, 23):
        similarity = positional_similarity("sinusoidal", 24, 16, position)
        for noise in (1e-7, -1e-7):  # another CPU's last bit, either way
            nudged = similarity.clone()
            nudged[position + 1] += noise
            assert f"most similar other positions: {position - 1} and {position + 1} (0.94)" in positional_readout(
                "sinusoidal", 0, position, table, nudged)
    at_0 = positional_readout("sinusoidal", 0, 0, table, positional_similarity("sinusoidal", 24, 16, 0))
    assert at_0.endswith("most similar other position: 1 (0.94)")  # one neighbour: one position
    rope = positional_readout("rope", 0, 5, table, positional_similarity("rope", 24, 16, 5))
    assert "most similar other position: " in rope  # no tie for a random q, k pair: one position
