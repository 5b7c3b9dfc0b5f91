"""Diagrams of the book's concepts, drawn by matplotlib code (no image files, no network).

Glossary: B batch, T length (T_max a KV cache's capacity), S source length, D d_model, H heads,
Dh = D / H head dimension, d_k the key (and query) width of one attention, V vocab_size, N blocks.

Each function returns a ``matplotlib.figure.Figure`` that is open in pyplot, so a notebook shows it with
``fig = minitfm.diagrams.attention_diagram()`` then ``plt.show()``; elsewhere ``plt.close(fig)`` when done.
The drawings are deterministic and use matplotlib's default font only.

Style: one canvas measured in inches (x right, y up), rounded boxes whose fill names the kind of step
(Okabe-Ito colours, safe for colour-blind readers, and every box is also labelled in words), arrows for
data flow. Mask cells carry "T"/"F" and a hatch as well as a colour, so they read in greyscale.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

FONT = 10
# Okabe-Ito hues, lightened for fills (text stays black on them); edges in the full hue.
KINDS = {
    "tensor": ("#F2F2F2", "#555555"),
    "linear": ("#CFE8F7", "#0072B2"),  # projections: q_proj, k_proj, v_proj, out_proj, lm_head
    "attention": ("#FBE3B5", "#B57A00"),
    "norm": ("#C6EBDD", "#007A5A"),
    "ffn": ("#F3D7E7", "#A8568A"),
    "cache": ("#D9D2F0", "#5A4A9C"),
    "embed": ("#FDF3C0", "#9C8A00"),
}
HEAD_COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#CC79A7"]  # one per head
HEAD_HATCHES = ["", "//", "..", "xx"]  # so heads differ in greyscale too


def _canvas(width: float, height: float, title: str | None = None):
    """A figure whose single, axis-free Axes is measured in inches from the bottom-left corner."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    if title:
        ax.text(width / 2, height - 0.2, title, ha="center", va="top", fontsize=FONT + 2, weight="bold")
    return fig, ax


def _box(ax, x, y, w, h, text, kind="tensor", fontsize=FONT, **text_kw):
    """A rounded box centred at (x, y), filled by ``kind``, with centred ``text``."""
    face, edge = KINDS[kind]
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, linewidth=1.3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **text_kw)


def _arrow(ax, start, end, label=None, label_side="above", dashed=False, fontsize=FONT - 1, colour="#333333"):
    """An arrow from ``start`` to ``end`` (points in inches), optionally labelled at its middle."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=colour,
                                 linewidth=1.2, linestyle="--" if dashed else "-", shrinkA=0, shrinkB=0))
    if label:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        offset = {"above": (0, 0.08, "bottom"), "below": (0, -0.08, "top")}[label_side]
        ax.text(mx + offset[0], my + offset[1], label, ha="center", va=offset[2], fontsize=fontsize)


def _grid(ax, x0, y0, cell, rows, cols, values=None, shade=None, fontsize=FONT - 1):
    """A rows x cols grid with its top-left corner at (x0, y0). ``values[i][j]`` True/False draws a mask
    cell (filled + "T", or hatched + "F"); ``shade[i][j]`` in [0, 1] draws a grey level instead."""
    for i in range(rows):
        for j in range(cols):
            x, y = x0 + j * cell, y0 - (i + 1) * cell
            if values is not None:
                allowed = bool(values[i][j])
                ax.add_patch(Rectangle((x, y), cell, cell, facecolor="#0072B2" if allowed else "white",
                                       edgecolor="#333333", hatch=None if allowed else "///", linewidth=0.8))
                ax.text(x + cell / 2, y + cell / 2, "T" if allowed else "F", ha="center", va="center",
                        fontsize=fontsize, color="white" if allowed else "black", weight="bold")
            else:
                level = 0.0 if shade is None else shade[i][j]
                ax.add_patch(Rectangle((x, y), cell, cell, facecolor=plt.cm.Oranges(0.1 + 0.8 * level),
                                       edgecolor="#333333", linewidth=0.8))


def _plus(ax, x, y, r=0.14):
    """A residual addition: a circle with a plus."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor="#333333", linewidth=1.2))
    ax.text(x, y, "+", ha="center", va="center", fontsize=FONT + 2)


def attention_diagram():
    """Scaled dot-product attention: X -> Q, K, V -> scores Q K^T / sqrt(d_k) (T, T) -> softmax per row
    -> weights @ V -> output, with the shape of every tensor."""
    fig, ax = _canvas(10, 4.6, "Scaled dot-product attention (one head)")
    _box(ax, 0.6, 2.3, 0.95, 0.7, "X\n(T, D)")
    for y, name, out in ((3.5, "q_proj", "Q  (T, d_k)"), (2.3, "k_proj", "K  (T, d_k)"), (1.0, "v_proj", "V  (T, d_v)")):
        _arrow(ax, (1.08, 2.3), (1.75, y))
        _box(ax, 2.3, y, 1.1, 0.5, name, "linear")
        _arrow(ax, (2.85, y), (3.2, y))
        _box(ax, 3.85, y, 1.3, 0.5, out)
    cell, rows = 0.28, 4
    _grid(ax, 5.0, 3.55, cell, rows, rows, shade=[[(i * 3 + j * 5) % 7 / 6 for j in range(rows)] for i in range(rows)])
    ax.text(5.56, 3.62, r"scores = $QK^\top/\sqrt{d_k}$", ha="center", va="bottom", fontsize=FONT)
    ax.text(5.56, 2.35, "(T, T): row = query,\ncolumn = key", ha="center", va="top", fontsize=FONT - 1)
    _arrow(ax, (4.5, 3.5), (4.95, 3.2))
    _arrow(ax, (4.5, 2.3), (4.95, 2.8), r"$K^\top$", "below")
    _arrow(ax, (6.2, 3.0), (7.3, 3.0), "softmax\n(each row)")
    _grid(ax, 7.4, 3.55, cell, rows, rows, shade=[[1.0 if j == (i + 1) % rows else 0.2 for j in range(rows)] for i in range(rows)])
    ax.text(7.96, 3.62, "weights", ha="center", va="bottom", fontsize=FONT)
    ax.text(7.96, 2.35, "(T, T): each row\nsums to 1", ha="center", va="top", fontsize=FONT - 1)
    _arrow(ax, (4.5, 1.0), (7.35, 1.0))
    _arrow(ax, (7.96, 1.75), (7.96, 1.3))
    _box(ax, 7.96, 1.0, 1.2, 0.5, "weights @ V", "attention")
    _arrow(ax, (8.56, 1.0), (8.95, 1.0))
    _box(ax, 9.45, 1.0, 0.95, 0.7, "output\n(T, d_v)")
    return fig


def mask_diagram():
    """Boolean masks (True = may attend): a padding mask (B, 1, 1, T), a causal mask (1, T, T) and their
    logical and (B, 1, T, T), shown for a batch of two sequences whose first ends in two pads."""
    fig, ax = _canvas(10, 4.4, "Masks: True = may attend, False = hidden")
    tokens = [["the", "cat", "sat", "<pad>", "<pad>"], ["a", "dog", "ran", "far", "off"]]
    pad = [[tok != "<pad>" for tok in seq] for seq in tokens]
    t, cell = 5, 0.36
    ax.text(1.5, 3.75, "padding mask (B, 1, 1, T)", ha="center", fontsize=FONT)
    _grid(ax, 0.6, 3.2, cell, 2, t, values=pad)
    for b, seq in enumerate(tokens):
        ax.text(0.55, 3.2 - (b + 0.5) * cell, f"seq {b}", ha="right", va="center", fontsize=FONT - 1)
        ax.text(0.6 + 2.5 * cell, 3.2 - 2 * cell - 0.1 - 0.22 * b, " ".join(seq), ha="center", va="top",
                fontsize=FONT - 1)
    ax.text(3.0, 2.5, "&", ha="center", va="center", fontsize=FONT + 8)
    ax.text(4.45, 3.75, "causal mask (1, T, T)", ha="center", fontsize=FONT)
    _grid(ax, 3.55, 3.55, cell, t, t, values=[[j <= i for j in range(t)] for i in range(t)])
    ax.text(4.45, 1.55, "row = query, column = key", ha="center", va="top", fontsize=FONT - 1)
    ax.text(6.0, 2.5, "=", ha="center", va="center", fontsize=FONT + 8)
    ax.text(7.5, 3.75, "combined (B, 1, T, T), seq 0", ha="center", fontsize=FONT)
    _grid(ax, 6.6, 3.55, cell, t, t, values=[[j <= i and pad[0][j] for j in range(t)] for i in range(t)])
    ax.text(7.5, 1.55, "no query sees the future\nor a pad", ha="center", va="top", fontsize=FONT - 1)
    return fig


def head_split_diagram():
    """Multi-head attention's reshapes: (B, T, D) -> view (B, T, H, Dh) -> transpose (B, H, T, Dh) ->
    attention per head -> transpose back and merge (B, T, D) -> out_proj (W_O), which mixes the heads."""
    fig, ax = _canvas(10, 4.6, "Splitting into heads and merging them (H = 4)")
    h, dh, tall = 4, 0.3, 0.9

    def bar(x, y, split, label):
        for i in range(h):
            face = HEAD_COLOURS[i] if split else "#BBBBBB"
            ax.add_patch(Rectangle((x + i * dh, y - tall / 2), dh, tall, facecolor=face, edgecolor="#333333",
                                   hatch=HEAD_HATCHES[i] if split else None, linewidth=0.8))
        ax.text(x + h * dh / 2, y - tall / 2 - 0.1, label, ha="center", va="top", fontsize=FONT - 1)

    bar(0.3, 2.6, False, "q = q_proj(x)\n(B, T, D)")
    _arrow(ax, (1.55, 2.6), (2.05, 2.6), "view")
    bar(2.1, 2.6, True, "(B, T, H, Dh)")
    _arrow(ax, (3.35, 2.6), (3.85, 2.6), "transpose(1, 2)")
    for i in range(h):
        y = 3.5 - i * 0.6
        ax.add_patch(Rectangle((4.0, y - 0.22), dh, 0.44, facecolor=HEAD_COLOURS[i], hatch=HEAD_HATCHES[i],
                               edgecolor="#333333", linewidth=0.8))
        ax.text(3.95, y, f"head {i}", ha="right", va="center", fontsize=FONT - 1)
        _arrow(ax, (4.35, y), (4.85, y))
    ax.text(4.15, 1.3, "(B, H, T, Dh)", ha="center", va="top", fontsize=FONT - 1)
    _box(ax, 5.6, 2.6, 1.4, 2.4, "attention\nper head:\neach head\nhas its own\n(T, T) weights", "attention")
    _arrow(ax, (6.35, 2.6), (6.85, 2.6), "transpose,\nmerge")
    bar(6.9, 2.6, True, "(B, T, D)\nheads side by side")
    _arrow(ax, (8.15, 2.6), (8.55, 2.6))
    _box(ax, 9.2, 2.6, 1.1, 0.6, "out_proj\n(W_O)", "linear")
    ax.text(9.2, 2.1, "(B, T, D): mixes\nthe heads", ha="center", va="top", fontsize=FONT - 1)
    return fig


def block_diagram():
    """A Post-LN block (the original paper) beside a Pre-LN block (modern), read bottom to top: where the
    norm sits, the residual additions, and the final norm that a Pre-LN stack needs."""
    fig, ax = _canvas(10, 6.0, "Post-LN and Pre-LN blocks (read bottom to top)")
    post = [("self-attention", "attention"), ("+", None), ("norm", "norm"), ("FFN", "ffn"), ("+", None),
            ("norm", "norm")]
    pre = [("norm", "norm"), ("self-attention", "attention"), ("+", None), ("norm", "norm"), ("FFN", "ffn"),
           ("+", None), ("final_norm", "norm")]
    for x, steps, title in ((2.5, post, "Post-LN: x = norm(x + sublayer(x))"),
                            (7.5, pre, "Pre-LN: x = x + sublayer(norm(x))")):
        ax.text(x, 5.5, title, ha="center", fontsize=FONT)
        y = 0.5
        _box(ax, x, y, 1.0, 0.36, "x (B, T, D)")
        for name, kind in steps:
            _arrow(ax, (x, y + 0.2), (x, y + 0.38))
            y += 0.58
            if kind is None:
                _plus(ax, x, y)
            else:
                _box(ax, x, y, 1.6, 0.4, name, kind)
        _arrow(ax, (x, y + 0.2), (x, y + 0.45))
        ax.text(x, y + 0.5, "output", ha="center", va="bottom", fontsize=FONT)
    return fig


def encoder_decoder_diagram():
    """The encoder-decoder Transformer: embeddings scaled by sqrt(d_model) plus positions, N encoder
    blocks, N decoder blocks that attend to the encoder output, final norm, and the tied output head."""
    fig, ax = _canvas(10, 6.0, "The encoder-decoder Transformer (read bottom to top)")
    enc = [("tok_emb x sqrt(D) + positions", "embed"), ("self-attention", "attention"), ("FFN", "ffn"),
           ("encoder_norm (Pre-LN)", "norm")]
    dec = [("tok_emb x sqrt(D) + positions", "embed"), ("masked self-attention", "attention"),
           ("cross-attention", "attention"), ("FFN", "ffn"), ("final_norm (Pre-LN)", "norm"),
           ("lm_head (tied to tok_emb)", "linear")]
    for x, steps, bottom, top in ((2.5, enc, "src (B, S)", "memory (B, S, D)"),
                                  (7.5, dec, "tgt_in (B, T)", "logits (B, T, V)")):
        y = 0.4
        _box(ax, x, y, 1.6, 0.36, bottom)
        for name, kind in steps:
            _arrow(ax, (x, y + 0.2), (x, y + 0.45))
            y += 0.7
            _box(ax, x, y, 2.6, 0.44, name, kind)
        _arrow(ax, (x, y + 0.24), (x, y + 0.45))
        _box(ax, x, y + 0.65, 1.8, 0.36, top)
    _arrow(ax, (3.4, 3.45), (6.2, 2.5), "memory: keys, values")
    return fig


def kv_cache_diagram():
    """A KVCache at work: prefill writes the prompt's keys and values into preallocated buffers
    (B, H, T_max, Dh); each decode step computes q, k, v for one new token, writes k and v at the length
    pointer, and attends q against the filled part. Q is never cached."""
    fig, ax = _canvas(10, 4.8, "KV cache: prefill, then one decode step (per layer)")
    t_max, cell, x0 = 10, 0.42, 4.2
    for row, (label, filled, new) in enumerate((("after prefill (prompt of 4)", 4, None),
                                                 ("after decode step", 4, 4))):
        top = 3.9 - row * 2.0
        ax.text(0.2, top - 0.1, label, ha="left", va="center", fontsize=FONT, weight="bold")
        for k, name in enumerate(("KVCache.k", "KVCache.v")):
            y = top - 0.35 - k * (cell + 0.12)
            ax.text(x0 - 0.1, y - cell / 2, name, ha="right", va="center", fontsize=FONT - 1)
            for j in range(t_max):
                written = j < filled or j == new
                ax.add_patch(Rectangle((x0 + j * cell, y - cell), cell, cell, linewidth=0.8, edgecolor="#333333",
                                       facecolor=KINDS["cache"][0] if written else "white",
                                       hatch="xx" if j == new else None))
        length = filled + (new is not None)
        _arrow(ax, (x0 + length * cell, top + 0.05), (x0 + length * cell, top - 0.3), f"length = {length}")
    ax.text(x0 + t_max * cell / 2, 0.25, "buffers (B, H, T_max, Dh), preallocated; q_proj's q is never cached",
            ha="center", fontsize=FONT - 1)
    return fig
