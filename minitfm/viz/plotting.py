"""Pure matplotlib plots for the book. Every function returns the ``Figure`` (and draws into ``ax``
when one is given, so plots compose into panels); none keeps global pyplot state.

Glossary: H heads, L layers, T_q/T_k queries/keys, T positions, D d_model, V vocabulary.

Colour: ``viridis`` everywhere (perceptually uniform, readable in grey and for colour-blind readers),
always with a colour bar. Attention weights are probabilities, so their scale is fixed to [0, 1]
unless ``vmax`` says otherwise: two heads then compare by colour.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from minitfm._checks import check_tensor
from minitfm.viz.explorer_data import check_labels, check_weights

CMAP = "viridis"


def _axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    plt.close(fig)  # the caller displays the returned figure; pyplot must not show it a second time
    return fig, ax


def _heatmap(ax, matrix, rows, cols, vmin, vmax, colorbar: bool = True):
    image = ax.imshow(matrix.numpy(), cmap=CMAP, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(cols)), cols, rotation=90 if max(map(len, cols), default=0) > 2 else 0)
    ax.set_yticks(range(len(rows)), rows)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return image


def plot_attention(weights: torch.Tensor, tokens_q=None, tokens_k=None, *, title: str | None = None,
                   vmax: float = 1.0, annotate: bool = False, ax=None):
    """Heatmap of one (T_q, T_k) attention map: row = query, column = key, labelled with the tokens."""
    check_tensor(weights, "weights", ndim=2, floating=True)
    weights = check_weights(weights, "weights")
    rows = check_labels(tokens_q, weights.shape[0], "tokens_q")
    cols = check_labels(tokens_k, weights.shape[1], "tokens_k")
    fig, ax = _axes(ax, (1.2 + 0.45 * len(cols), 0.9 + 0.4 * len(rows)))
    _heatmap(ax, weights, rows, cols, 0.0, vmax)
    if annotate:
        for (i, j), value in zip(torch.cartesian_prod(torch.arange(len(rows)), torch.arange(len(cols))).tolist(),
                                 weights.flatten().tolist()):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if value > 0.6 * vmax else "white")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title or "attention weights")
    return fig


def plot_attention_grid(layers: Sequence[torch.Tensor], tokens_q=None, tokens_k=None, *, batch_index: int = 0,
                        title: str | None = None, vmax: float = 1.0):
    """A grid of heads (columns) x layers (rows); ``layers`` is a list of (B, H, T_q, T_k) or (H, T_q, T_k)."""
    from minitfm.viz.explorer_data import attention_maps, pick_batch

    maps = [pick_batch(w, batch_index) for w in attention_maps(list(layers))["self"]]  # L x (H, T_q, T_k)
    n_layers, (n_heads, t_q, t_k) = len(maps), maps[0].shape
    rows, cols = check_labels(tokens_q, t_q, "tokens_q"), check_labels(tokens_k, t_k, "tokens_k")
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(0.6 + 2.0 * n_heads, 0.6 + 2.0 * n_layers),
                             squeeze=False, layout="constrained")
    plt.close(fig)
    for layer, heads in enumerate(maps):
        for head in range(n_heads):
            ax = axes[layer, head]
            image = _heatmap(ax, heads[head], rows, cols, 0.0, vmax, colorbar=False)
            ax.set_title(f"layer {layer} head {head}", fontsize=9)
            ax.tick_params(labelsize=7)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    fig.suptitle(title or "attention per layer (rows) and head (columns)")
    return fig


def plot_masks(masks: Mapping[str, torch.Tensor], tokens_q=None, tokens_k=None):
    """Boolean masks side by side (yellow = may attend, purple = blocked); each is (T_q, T_k) after
    dropping leading size-1 axes, e.g. a (1, T, T) causal mask."""
    if not masks:
        raise ValueError("masks must be a non-empty dict {title: boolean mask}")
    fig, axes = plt.subplots(1, len(masks), figsize=(0.5 + 3.2 * len(masks), 3.4), squeeze=False, layout="constrained")
    plt.close(fig)
    for ax, (name, mask) in zip(axes[0], masks.items()):
        check_tensor(mask, f"mask {name!r}")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask {name!r} must be boolean (True = may attend), got dtype {mask.dtype}")
        while mask.dim() > 2 and mask.shape[0] == 1:
            mask = mask[0]  # (1, ..., T_q, T_k) -> (..., T_q, T_k)
        check_tensor(mask, f"mask {name!r} (after dropping leading size-1 axes)", ndim=2)
        rows, cols = check_labels(tokens_q, mask.shape[0], "tokens_q"), check_labels(tokens_k, mask.shape[1], "tokens_k")
        _heatmap(ax, mask.float(), rows, cols, 0.0, 1.0, colorbar=False)
        ax.set_title(name)
        ax.set_xlabel("key")
    axes[0, 0].set_ylabel("query")
    return fig


def plot_positional_encoding(encodings: torch.Tensor, *, title: str | None = None, ax=None):
    """The (T, D) table of positional encodings: position down, dimension across."""
    check_tensor(encodings, "encodings", ndim=2, floating=True)
    encodings = check_weights(encodings, "encodings")
    fig, ax = _axes(ax, (6.0, 3.6))
    image = ax.imshow(encodings.numpy(), cmap=CMAP, aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="value")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(title or "positional encodings")
    return fig


def _lines(ax, curves: Mapping[str, Sequence[float]], x, name: str):
    if not curves:
        raise ValueError(f"{name} must be a non-empty dict {{label: values}}")
    for label, values in curves.items():
        # detached float32 CPU copy: matplotlib needs numpy, which refuses grad, GPU and bf16 tensors
        values = torch.as_tensor(values).detach().to("cpu", torch.float32).flatten()
        if values.numel() == 0:
            raise ValueError(f"{name}[{label!r}] is empty")
        xs = torch.arange(values.numel()) if x is None else torch.as_tensor(x).detach().cpu()
        if xs.numel() != values.numel():
            raise ValueError(f"{name}[{label!r}] has {values.numel()} values but x has {xs.numel()}")
        ax.plot(xs.numpy(), values.numpy(), label=str(label))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def plot_similarity_vs_distance(curves: Mapping[str, Sequence[float]], distances=None, *, ylabel: str = "similarity",
                                title: str | None = None, ax=None):
    """One line per scheme: how similar (or how penalised) two positions are as a function of distance."""
    fig, ax = _axes(ax, (6.0, 3.4))
    _lines(ax, curves, distances, "curves")
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("distance n - m (positions)")
    ax.set_ylabel(ylabel)
    ax.set_title(title or "similarity versus distance")
    return fig


def plot_lr_schedules(schedules: Mapping[str, Sequence[float]], *, title: str | None = None, ax=None):
    """Learning rate against optimiser step, one line per schedule (values for steps 1, 2, ...)."""
    fig, ax = _axes(ax, (6.0, 3.4))
    _lines(ax, schedules, None, "schedules")
    for line in ax.lines:
        line.set_xdata(line.get_xdata() + 1)  # schedules are listed from step 1
    ax.relim()
    ax.autoscale_view()
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(title or "learning-rate schedules")
    return fig


def plot_training_curves(curves: Mapping[str, Sequence[float]], *, xlabel: str = "step", ylabel: str = "loss",
                         log_y: bool = False, title: str | None = None, ax=None):
    """Training (or validation) curves, one line per run; NaN points leave a gap, as they should."""
    fig, ax = _axes(ax, (6.0, 3.4))
    _lines(ax, curves, None, "curves")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or "training curves")
    return fig


def plot_distributions(before: torch.Tensor, after: torch.Tensor, labels=None, *, top: int | None = 20,
                       title: str | None = None, ax=None):
    """Next-token probabilities before and after sampling processors, as paired bars.

    Bars are sorted by the ``before`` probability and limited to the ``top`` most likely tokens.
    """
    for name, p in (("before", before), ("after", after)):
        check_tensor(p, name, ndim=1, floating=True)
    before, after = check_weights(before, "before"), check_weights(after, "after")  # detached float32 CPU
    if before.shape != after.shape:
        raise ValueError(f"before and after must have the same shape (V,), got {tuple(before.shape)} and {tuple(after.shape)}")
    labels = check_labels(labels, before.shape[0], "labels")
    order = before.argsort(descending=True, stable=True)[:top]  # (V,) -> (min(top, V),)
    fig, ax = _axes(ax, (1.5 + 0.35 * len(order), 3.4))
    xs = torch.arange(len(order)).float()
    ax.bar((xs - 0.2).numpy(), before[order].numpy(), width=0.4, label="before", color="#9aa5b1")
    ax.bar((xs + 0.2).numpy(), after[order].numpy(), width=0.4, label="after", color="#21908d")
    ax.set_xticks(xs.numpy(), [labels[i] for i in order.tolist()], rotation=90)
    ax.set_ylabel("probability")
    ax.legend(fontsize=8)
    ax.set_title(title or "next-token distribution")
    return fig


def plot_score_histogram(scores: Mapping[str, torch.Tensor], *, bins: int = 40, title: str | None = None, ax=None):
    """Histograms of attention scores (for example scaled versus unscaled)."""
    fig, ax = _axes(ax, (5.0, 3.2))
    if not scores:
        raise ValueError("scores must be a non-empty dict {label: tensor}")
    for label, values in scores.items():
        check_tensor(values, f"scores[{label!r}]", floating=True)
        values = check_weights(values, f"scores[{label!r}]")
        ax.hist(values.flatten().numpy(), bins=bins, alpha=0.6, label=str(label))
    ax.set_xlabel("score q . k")
    ax.set_ylabel("count")
    ax.legend(fontsize=8)
    ax.set_title(title or "score distribution")
    return fig


def plot_grad_norms(runs: Mapping[str, Mapping[str, float]], *, title: str | None = None, ax=None):
    """One line per run: gradient norm (log scale) against layer, in model order from input to output."""
    if not runs:
        raise ValueError("runs must be a non-empty dict {run label: grad_norms(model)}")
    names = list(next(iter(runs.values())))
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.0, 0.9 + 0.22 * len(names)), layout="constrained")
        plt.close(fig)  # the caller displays the returned figure
    for label, norms in runs.items():
        if list(norms) != names:
            raise ValueError(f"every run must list the same layers; {label!r} differs from the first run")
        values = torch.tensor([norms[n] for n in names]).clamp_min(1e-12)  # log scale: show 0 at the bottom
        ax.plot(values.numpy(), range(len(names)), marker="o", label=str(label))
    ax.set_xscale("log")
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()  # input at the top, output at the bottom
    ax.set_xlabel("gradient norm (log scale)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title or "gradient norm per layer")
    return ax.figure
