"""Live explorers: ipywidgets controls over the pure plotting functions (needs a running kernel).

Each explorer is an ``Explorer``: ``controls`` (name -> widget), ``readout`` (one line of text),
``output`` (the figure) and, after every change, ``figure`` and ``data`` (the tensors drawn), so tests
and notebooks can drive it: ``ex.controls["d_k"].value = 256`` re-renders at once.

For the static book page use ``minitfm.viz.static_explorers``: the same five explorers without a kernel.
Glossary: B batch, H heads, L layers, T_q/T_k queries/keys, T positions, D d_model, V vocabulary.
"""
from __future__ import annotations

import base64
import html
import io
import math
from typing import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython import get_ipython
from IPython.display import HTML, clear_output, display

from minitfm._checks import check_positive_int
from minitfm.viz import explorer_data as xd
from minitfm.viz import plotting

D_K_VALUES = [2 ** i for i in range(11)]  # 1 .. 1024


class Explorer:
    """Controls + a readout + an output area, redrawn by ``draw(**values) -> (figure, data)``."""

    def __init__(self, controls: dict[str, widgets.Widget], draw: Callable, readout: Callable[[dict], str]):
        self.controls, self._draw, self._readout = controls, draw, readout
        self.readout = widgets.Label(layout=widgets.Layout(width="100%"))
        self.output = widgets.Output()
        row = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([row, self.readout, self.output])
        self.figure, self.data, self.renders = None, None, 0
        for control in controls.values():
            control.observe(lambda change: self.render(), names="value")
        self.render()

    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def render(self) -> None:
        values = self.values()
        self.figure, self.data = self._draw(**values)
        self.readout.value = self._readout(self.data)
        self.renders += 1
        if get_ipython() is not None:  # outside a kernel (tests) there is nowhere to draw
            with self.output:
                clear_output(wait=True)
                display(figure_html(self.figure, alt=self.readout.value))


def figure_html(figure, alt: str) -> HTML:
    """A matplotlib figure as an ``<img>`` with alt text, so screen readers (and the static book page,
    which shows the saved widget state) get a description of what the plot shows."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return HTML(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">')

    def _ipython_display_(self) -> None:
        display(self.widget)


def _panels(n: int, width: float = 4.2, height: float = 3.4):
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), layout="constrained")
    plt.close(fig)
    return fig, axes


def attention_explorer(weights, tokens_q=None, tokens_k=None, *, batch_index: int = 0) -> Explorer:
    """Browse attention maps by kind, layer and head.

    Args:
        weights: ``{kind: [(B, H, T_q, T_k) per layer]}`` (kinds ``encoder_self``, ``decoder_self``,
            ``cross``, ...), a plain list of layers, or a model's intermediates (anything with ``attentions``).
        tokens_q: query-side (decoder) token labels; tokens_k: key-side (encoder) token labels.
    """
    maps = xd.attention_maps(weights)
    labels = xd.label_sets(maps, tokens_q, tokens_k)
    for layers in maps.values():
        xd.pick_batch(layers[0], batch_index)
    first = next(iter(maps))
    controls = {
        "kind": widgets.Dropdown(options=[(xd.KIND_TITLES.get(k, k), k) for k in maps], value=first, description="kind"),
        "layer": widgets.IntSlider(0, 0, len(maps[first]) - 1, description="layer"),
        "head": widgets.IntSlider(0, 0, maps[first][0].shape[1] - 1, description="head"),
    }

    def draw(kind, layer, head):
        controls["layer"].max = len(maps[kind]) - 1  # kinds may have different depths
        layer = min(layer, len(maps[kind]) - 1)
        w = maps[kind][layer][batch_index, head]  # (B, H, T_q, T_k) -> (T_q, T_k)
        rows, cols = labels[kind]
        fig = plotting.plot_attention(w, rows, cols, title=f"{xd.KIND_TITLES.get(kind, kind)}, layer {layer}, head {head}")
        return fig, {"weights": w, "text": xd.attention_readout(kind, layer, head, w, rows, cols)}

    return Explorer(controls, draw, lambda data: data["text"])


def scaling_explorer(seq_len: int = 8, seed: int = 0) -> Explorer:
    """d_k and scaled/unscaled -> score histogram, attention heatmap and row entropies of random q, k."""
    controls = {
        "d_k": widgets.SelectionSlider(options=D_K_VALUES, value=64, description="d_k"),
        "scaled": widgets.ToggleButtons(options=[("scaled", True), ("unscaled", False)], value=True),
    }

    def draw(d_k, scaled):
        data = xd.scaling_data(d_k, scaled, seq_len=seq_len, seed=seed)
        fig, axes = _panels(3)
        plotting.plot_score_histogram({"q . k" + (" / √d_k" if scaled else ""): data["scores"]}, ax=axes[0])
        plotting.plot_attention(data["weights"], title="softmax of the scores", ax=axes[1])
        axes[2].bar(range(seq_len), data["entropy"].numpy(), color="#3b528b")
        axes[2].axhline(float(math.log(seq_len)), color="grey", ls="--", label="uniform")
        axes[2].set(xlabel="query", ylabel="entropy (nats)", title="row entropy", ylim=(0, 1.1 * math.log(seq_len)))
        axes[2].legend(fontsize=8)
        return fig, {**data, "text": xd.scaling_readout(d_k, scaled, data)}

    return Explorer(controls, draw, lambda data: data["text"])


def mask_explorer(tokens=None, labels=None, pad_id: int = 0) -> Explorer:
    """Padding, causal or both on a padded (B, T) batch: the mask and the weights it gives equal scores."""
    tokens, labels, pad_id = xd.mask_batch(tokens, labels, pad_id)
    controls = {
        "kind": widgets.Dropdown(options=list(xd.MASK_KINDS), value="both", description="mask"),
        "sequence": widgets.IntSlider(0, 0, tokens.shape[0] - 1, description="sequence"),
    }

    def draw(kind, sequence):
        data = xd.mask_data(tokens, pad_id, kind)
        mask, weights = data["mask"][sequence], data["weights"][sequence]  # (B, T, T) -> (T, T)
        row = labels[sequence]
        fig, axes = _panels(2)
        plotting.plot_attention(mask.float(), row, row, title=f"{kind} mask (1 = may attend)", ax=axes[0])
        plotting.plot_attention(weights, row, row, title="weights for equal scores", ax=axes[1])
        return fig, {"mask": mask, "weights": weights, "text": xd.mask_readout(kind, sequence, row, mask)}

    return Explorer(controls, draw, lambda data: data["text"])


def positional_explorer(max_len: int = 24, d_model: int = 16, seed: int = 0) -> Explorer:
    """Scheme, dimension pair and position -> the encoding table, one pair's curves, similarity by distance."""
    check_positive_int(max_len, "max_len")
    check_positive_int(d_model, "d_model")
    controls = {
        "scheme": widgets.Dropdown(options=list(xd.POSITIONAL_SCHEMES), value="sinusoidal", description="scheme"),
        "pair": widgets.IntSlider(0, 0, d_model // 2 - 1, description="dim pair"),
        "position": widgets.IntSlider(max_len // 2, 0, max_len - 1, description="position"),
    }

    def draw(scheme, pair, position):
        table = xd.positional_table(scheme, max_len, d_model, seed)
        similarity = xd.positional_similarity(scheme, max_len, d_model, position, seed)
        fig, axes = _panels(3)
        plotting.plot_positional_encoding(table, title=f"{scheme}: position x dimension", ax=axes[0])
        axes[0].axvspan(2 * pair - 0.5, 2 * pair + 1.5, color="white", fill=False, lw=1.5)
        axes[0].axhline(position, color="white", lw=1.0)
        curves = {f"dim {2 * pair}": table[:, 2 * pair], f"dim {2 * pair + 1}": table[:, 2 * pair + 1]}
        plotting.plot_training_curves(curves, xlabel="position", ylabel="value", title=f"pair {pair}", ax=axes[1])
        axes[1].axvline(position, color="grey", ls="--")
        distances = [n - position for n in range(max_len)]
        plotting.plot_similarity_vs_distance({scheme: similarity}, distances,
                                             title=f"relation to position {position}", ax=axes[2])
        text = xd.positional_readout(scheme, pair, position, table, similarity)
        return fig, {"table": table, "similarity": similarity, "text": text}

    return Explorer(controls, draw, lambda data: data["text"])


def sampling_explorer(logits=None, labels=None, history=None) -> Explorer:
    """Temperature, top-k, top-p and repetition penalty -> the next-token distribution before and after.

    Args:
        logits: (V,) next-token logits (default: a small built-in example).
        labels: V token strings. history: (T,) token ids already generated (for the penalty).
    """
    if logits is None:
        logits, labels, history = xd.example_logits()
    history = torch.zeros(0, dtype=torch.long) if history is None else history
    labels = xd.check_labels(labels, logits.shape[-1], "labels")
    controls = {
        "temperature": widgets.FloatSlider(1.0, min=0.1, max=2.0, step=0.05, description="temperature"),
        "top_k": widgets.IntSlider(0, 0, logits.shape[-1], description="top-k (0 off)"),
        "top_p": widgets.FloatSlider(1.0, min=0.05, max=1.0, step=0.05, description="top-p"),
        "penalty": widgets.FloatSlider(1.0, min=1.0, max=3.0, step=0.05, description="rep. penalty"),
    }

    def draw(temperature, top_k, top_p, penalty):
        data = xd.sampling_data(logits, history, temperature, top_k, top_p, penalty)
        fig = plotting.plot_distributions(data["before"], data["after"], labels, top=None,
                                          title="next-token probability before (grey) and after (green)")
        return fig, {**data, "text": xd.sampling_readout(data["before"], data["after"], labels)}

    return Explorer(controls, draw, lambda data: data["text"])
