"""Diagrams of the book's concepts, drawn by matplotlib code (no image files, no network).

Glossary: B batch, T length (T_max a KV cache's capacity, P a prompt's length), S source length,
D d_model, H heads, H_kv key/value heads (= H without grouped-query attention), Dh = D / H head dimension,
d_k and d_v the key and value widths of one attention, V vocab_size, N blocks.

Each function returns a ``matplotlib.figure.Figure`` that is open in pyplot, so a notebook shows it with
``fig = minitfm.viz.diagrams.attention_diagram()`` then ``plt.show()`` (assign it: a bare call as a cell's last
line would show it twice, once as the cell's value); elsewhere ``plt.close(fig)`` when done.
The drawings are deterministic, take a fraction of a second and use matplotlib's default font only.

Style, shared by all six: one canvas measured in inches (x to the right, y up); rounded boxes whose fill
names the kind of step (Okabe-Ito hues, safe for colour-blind readers, and every box also says what it
is in words); arrows for data flow; grey for tensors. Mask cells hold a check mark (True, may attend) or
a cross (False, hidden), not the letters T and F (T is the length), and hidden cells are hatched; heads
differ by hatch as well as colour, so every figure also reads in greyscale.
"""
from __future__ import annotations

import math

from matplotlib.patches import Circle, Rectangle

from minitfm.viz.drawing import (ALLOWED, FONT, HEAD_COLOURS, HEAD_HATCHES, HIDDEN, INK, KINDS, _arrow, _box, _canvas,
                                 _cell, _frame, _grid, _index_labels, _note, _plus)

def attention_grids(n: int = 4):
    """The two (n, n) grids the attention diagram shades: made-up scores in [0, 1] (no ties within a row),
    and the weights that a row softmax gives them, softmax(4 * score), so the drawing cannot show an order
    that softmax could not produce. Returns (scores, weights) as lists of rows."""
    scores = [[(3 * i + 5 * j) % 7 / 6 for j in range(n)] for i in range(n)]
    weights = []
    for row in scores:
        e = [math.exp(4 * s) for s in row]
        weights.append([v / sum(e) for v in e])
    return scores, weights


def attention_diagram():
    """Scaled dot-product attention, one head: X (T, D) -> q_proj, k_proj, v_proj -> Q, K (T, d_k) and
    V (T, d_v) -> scores Q K^T / sqrt(d_k) (T, T) -> softmax of each row -> weights (T, T) -> weights @ V
    -> output (T, d_v). The score grid is made up; the weight grid is its row softmax (``attention_grids``),
    each cell shaded by its weight, so the darkest score of a row is always that row's darkest weight."""
    fig, ax = _canvas(10, 4.4, "Scaled dot-product attention (one head)")
    _box(ax, 0.55, 2.3, 0.9, 0.7, "X\n(T, D)")
    for y, proj, name in ((3.3, "q_proj", "Q  (T, d_k)"), (2.3, "k_proj", "K  (T, d_k)"),
                          (0.9, "v_proj", "V  (T, d_v)")):
        _arrow(ax, (1.0, 2.3), (1.375, y))
        _box(ax, 1.85, y, 0.95, 0.45, proj, "linear")
        _arrow(ax, (2.325, y), (2.625, y))
        _box(ax, 3.2, y, 1.15, 0.45, name)
    _box(ax, 4.75, 2.8, 1.25, 0.6, r"$QK^\top/\sqrt{d_k}$", "attention")
    _arrow(ax, (3.775, 3.3), (4.125, 3.0))
    _arrow(ax, (3.775, 2.3), (4.125, 2.6))
    size, (scores, weights) = 0.26, attention_grids(4)
    _grid(ax, 5.7, 2.8 + 2 * size, size, shade=scores)
    _note(ax, 6.22, 2.8 + 2 * size + 0.06, "scores (T, T)", va="bottom")
    _note(ax, 6.22, 2.8 - 2 * size - 0.06, "row = query,\ncolumn = key")
    _arrow(ax, (5.375, 2.8), (5.7, 2.8))
    _box(ax, 7.5, 2.8, 0.95, 0.6, "softmax\n(each row)", "attention")
    _note(ax, 7.5, 2.4, "a mask sets hidden\nscores to -inf\nbefore the softmax")
    _arrow(ax, (6.74, 2.8), (7.025, 2.8))
    _arrow(ax, (7.975, 2.8), (8.3, 2.8))
    _grid(ax, 8.3, 2.8 + 2 * size, size, shade=weights)  # the row softmax of the scores, shaded by its value
    _note(ax, 8.82, 2.8 + 2 * size + 0.06, "weights (T, T)", va="bottom")
    _note(ax, 8.82, 2.8 - 2 * size - 0.06, "each row\nsums to 1")
    _arrow(ax, (3.775, 0.9), (6.9, 0.9))
    _arrow(ax, (8.82, 1.88), (8.82, 1.6), (7.5, 1.6), (7.5, 1.125))
    _box(ax, 7.5, 0.9, 1.2, 0.45, "weights @ V", "attention")
    _arrow(ax, (8.1, 0.9), (8.7, 0.9))
    _box(ax, 9.25, 0.9, 1.0, 0.7, "output\n(T, d_v)")
    return fig


def mask_diagram():
    """Boolean masks, True = may attend: a padding mask (B, 1, 1, T) for a batch of two whose first
    sequence ends in two pads, a causal mask (1, T, T), and their logical and, which broadcasts to
    (B, 1, T, T) (shown for sequence 0)."""
    fig, ax = _canvas(10, 4.1, f"Masks: True ({ALLOWED}) = may attend, False ({HIDDEN}) = hidden")
    tokens = [["the", "cat", "sat", "<pad>", "<pad>"], ["a", "dog", "ran", "far", "off"]]
    pad = [[token != "<pad>" for token in seq] for seq in tokens]
    t, size, top = 5, 0.38, 3.05
    ax.text(1.6, top + 0.4, "padding mask (B, 1, 1, T)", ha="center", fontsize=FONT)
    _grid(ax, 0.65, top - 0.8, size, values=pad)
    _index_labels(ax, 0.65, top - 0.8, size, 0, t)
    for b, seq in enumerate(tokens):
        _note(ax, 0.58, top - 0.8 - (b + 0.5) * size, f"seq {b}", ha="right", va="center")
        _note(ax, 1.6, top - 0.9 - 2 * size - 0.25 * b, f"seq {b}: " + " ".join(seq))
    ax.text(3.1, top - 2.5 * size, "&", ha="center", va="center", fontsize=FONT + 8)
    for x0, title, values in ((3.75, "causal mask (1, T, T)", [[j <= i for j in range(t)] for i in range(t)]),
                              (6.95, "combined (B, 1, T, T), seq 0", [[j <= i and pad[0][j] for j in range(t)]
                                                                     for i in range(t)])):
        ax.text(x0 + t * size / 2, top + 0.4, title, ha="center", fontsize=FONT)
        _grid(ax, x0, top, size, values=values)
        _index_labels(ax, x0, top, size, t, t)
        _note(ax, x0 + t * size / 2, top - t * size - 0.08, "row = query i, column = key j")
    ax.text(6.3, top - 2.5 * size, "=", ha="center", va="center", fontsize=FONT + 8)
    _note(ax, 5.0, top - 2.4, "Broadcasting: (B, 1, 1, T) & (1, T, T) → (B, 1, T, T). Each sequence's pad pattern is "
          "repeated for every query,\nthe causal triangle for every sequence. "
          f"A hidden ({HIDDEN}) score becomes -inf before the softmax, so its weight is 0. (B batch, T length)")
    return fig


def _head_bar(ax, x, y, width, height, split, label):
    """A (T, D) matrix drawn as a bar of H column blocks: coloured per head when ``split``, else grey."""
    for i in range(len(HEAD_COLOURS)):
        ax.add_patch(Rectangle((x + i * width, y - height / 2), width, height, linewidth=0.8, edgecolor=INK,
                               facecolor=HEAD_COLOURS[i] if split else "#BBBBBB",
                               hatch=HEAD_HATCHES[i] if split else None))
    _note(ax, x + 2 * width, y - height / 2 - 0.1, label)


def _head_stack(ax, x, width, ys, height, label):
    """(B, H, T, Dh): one (T, Dh) block per head, stacked, each in its head's colour and hatch."""
    for i, y in enumerate(ys):
        ax.add_patch(Rectangle((x, y - height / 2), width, height, facecolor=HEAD_COLOURS[i], linewidth=0.8,
                               hatch=HEAD_HATCHES[i], edgecolor=INK))
    _note(ax, x + width / 2, ys[-1] - height / 2 - 0.1, label)


def head_split_diagram():
    """Multi-head attention's reshapes, for H = 4: q_proj(x) (B, T, D) -> view (B, T, H, Dh) ->
    transpose(1, 2) (B, H, T, Dh) -> attention in each head alone -> transpose(1, 2) and reshape back to
    (B, T, D), the heads side by side -> out_proj (W_O), whose every output mixes all the heads."""
    fig, ax = _canvas(10, 4.6, "Splitting D into H heads and merging them (H = 4)")
    w, tall, mid = 0.2, 0.6, 2.3
    ys = [mid + 1.5 * 0.75 - i * 0.75 for i in range(4)]
    _head_bar(ax, 0.3, mid, w, tall, False, "q_proj(x)\n(B, T, D)")
    _note(ax, 0.7, mid + tall / 2 + 0.05, "D", va="bottom")
    _arrow(ax, (1.15, mid), (1.6, mid), label="view")
    _head_bar(ax, 1.65, mid, w, tall, True, "(B, T, H, Dh)")
    _note(ax, 1.75, mid + tall / 2 + 0.05, "Dh", va="bottom")
    _arrow(ax, (2.5, mid), (3.1, mid), label="transpose\n(1, 2)")
    _head_stack(ax, 3.2, w, ys, tall, "(B, H, T, Dh)")
    _box(ax, 4.5, mid, 1.5, 3.0, "", "attention")
    for i, y in enumerate(ys):
        _arrow(ax, (3.45, y), (3.7, y))
        ax.text(4.5, y, f"head {i}\n" + r"softmax$(qk^\top/\sqrt{D_h})\,v$", ha="center", va="center",
                fontsize=FONT - 1)
        _arrow(ax, (5.3, y), (5.55, y))
    _head_stack(ax, 5.6, w, ys, tall, "(B, H, T, Dh)")
    _arrow(ax, (5.85, mid), (6.75, mid), label="transpose\n(1, 2),\nreshape")
    _head_bar(ax, 6.8, mid, w, tall, True, "(B, T, D)\nheads side\nby side")
    _arrow(ax, (7.65, mid), (7.95, mid))
    _box(ax, 8.4, mid, 0.85, 0.6, "out_proj\n(W_O)", "linear")
    _arrow(ax, (8.85, mid), (9.05, mid))
    _head_bar(ax, 9.1, mid, w, tall, False, "(B, T, D)\nheads\nmixed")
    _note(ax, 5.0, 0.4, "Each head attends alone, with its own (T, T) weights. k = k_proj(x) and v = v_proj(x) "
          "are split the same way;\nD = H × Dh, so splitting adds no parameters; out_proj mixes what the heads "
          "found.")
    return fig


def _sublayer_stack(ax, x, steps, residuals, y0=0.45, gap=0.58, side=1.1):
    """Draw ``steps`` ((label, kind); kind None is a residual "+") bottom to top at x, above an input box
    at y0; each (i, j) in ``residuals`` is a skip path from the arrow into step i to the "+" of step j.
    Returns the y of each step."""
    ys = [y0 + 0.15 + gap * (k + 1) for k in range(len(steps))]  # a longer first arrow: room for a branch
    half = [0.13 if kind is None else 0.19 for _, kind in steps]
    tops = [y0 + 0.17] + [y + h for y, h in zip(ys, half)]  # where the arrow into each step starts
    _box(ax, x, y0, 1.05, 0.34, "x (B, T, D)")
    for k, ((label, kind), y) in enumerate(zip(steps, ys)):
        _arrow(ax, (x, tops[k]), (x, y - half[k]))
        _plus(ax, x, y) if kind is None else _box(ax, x, y, 1.6, 0.38, label, kind)
    for i, j in residuals:
        yb = tops[i] + 0.12
        ax.add_patch(Circle((x, yb), 0.035, color=INK))
        _arrow(ax, (x, yb), (x + side, yb), (x + side, ys[j]), (x + 0.13, ys[j]))
    return ys


def block_diagram():
    """A Post-LN block (the original paper) beside a Pre-LN block (modern), each read bottom to top:
    Post-LN adds the residual then normalises, x = norm(x + sublayer(x)); Pre-LN normalises the sublayer's
    input only, x = x + sublayer(norm(x)), and a Pre-LN stack ends with one final_norm."""
    fig, ax = _canvas(10, 6.0, "Post-LN and Pre-LN blocks (read bottom to top; norm = LayerNorm or RMSNorm)")
    attn, ffn, norm, add = ("self-attention", "attention"), ("FFN", "ffn"), ("norm", "norm"), ("+", None)
    columns = ((1.9, [attn, add, norm, ffn, add, norm], [(0, 1), (3, 4)],
                "no final norm:\nthe last block\nalready ends\nin a norm",
                "Post-LN (original):  x = norm(x + sublayer(x))"),
               (6.6, [norm, attn, add, norm, ffn, add, ("final_norm", "norm")], [(0, 2), (3, 5)],
                "final_norm: the\nresidual sum is\nnever normalised\ninside the blocks",
                "Pre-LN (modern):  x = x + sublayer(norm(x))"))
    for x, steps, residuals, note, formula in columns:
        ys = _sublayer_stack(ax, x, steps, residuals)
        top = ys[-1] if steps[-1][0] != "final_norm" else ys[-2]
        _frame(ax, x - 1.0, 0.67, 2.4, top + 0.27 - 0.67)
        _note(ax, x - 1.07, 0.75, "one block,\nrepeated\nN times", ha="right", va="bottom")
        _arrow(ax, (x, ys[-1] + 0.19), (x, ys[-1] + 0.45))
        _note(ax, x, ys[-1] + 0.5, "output (B, T, D)", va="bottom")
        _note(ax, x + 1.5, ys[-1] + 0.19, note, ha="left")
        ax.text(x + 0.2, 5.45, formula, ha="center", fontsize=FONT)
    _note(ax, 5.0, 0.05, "The lines on the right are the residual paths: each sublayer's output is added to its "
          "input.", va="bottom")
    return fig


def encoder_decoder_diagram():
    """The encoder-decoder Transformer, read bottom to top: tok_emb x sqrt(D) + positions; N encoder blocks
    (self-attention, FFN) -> encoder_norm -> memory (B, S, D); N decoder blocks (masked self-attention,
    cross-attention whose keys and values come from memory, FFN) -> final_norm -> lm_head, tied to tok_emb,
    -> logits (B, T, V). The norms after the stacks exist in Pre-LN models only."""
    fig, ax = _canvas(10, 6.2, "The encoder-decoder Transformer (read bottom to top)")
    enc = [("tok_emb(src) × sqrt(d_model)\n+ positions → (B, S, D)", "embed"),
           ("self-attention (padding mask)", "attention"), ("FFN", "ffn"), ("encoder_norm (Pre-LN only)", "norm"),
           ("memory (B, S, D)", "tensor")]
    dec = [("tok_emb(tgt_in) × sqrt(d_model)\n+ positions → (B, T, D)", "embed"),
           ("masked self-attention (causal)", "attention"), ("cross-attention", "attention"), ("FFN", "ffn"),
           ("final_norm (Pre-LN only)", "norm"), ("lm_head (V, D)", "linear"), ("logits (B, T, V)", "tensor")]
    ys = {}
    columns = ((2.2, enc, "src (B, S)", "EncoderBlock", 2), (6.9, dec, "tgt_in (B, T)", "DecoderBlock", 3))
    for x, steps, bottom, block, n in columns:  # n: sublayers per block
        ys[x] = [0.5 + 0.66 * k + (0.25 if k > n + 1 else 0) for k in range(len(steps) + 1)]  # room for a label
        for k, (label, kind) in enumerate([(bottom, "tensor")] + steps):
            high = 0.52 if kind == "embed" else 0.4
            _box(ax, x, ys[x][k], 1.7 if kind == "tensor" else 2.9, high, label, kind)
            if k:
                _arrow(ax, (x, ys[x][k - 1] + (0.26 if k == 2 else 0.2)), (x, ys[x][k] - high / 2))
        low, top = ys[x][2] - 0.3, ys[x][n + 1] + 0.47  # around the block's n sublayers
        _frame(ax, x - 1.65, low, 3.3, top - low)
        _note(ax, x - 1.57, top - 0.04, f"N × {block}", ha="left", weight="bold")
    memory, cross = ys[2.2][-1], ys[6.9][3]
    _arrow(ax, (3.05, memory), (5.12, memory), (5.12, cross), (5.45, cross))
    _note(ax, 3.9, memory - 0.12, "memory gives\nthe keys and\nvalues of every\ncross-attention;\nqueries come\n"
          "from the decoder", ha="left")
    _arrow(ax, (8.35, ys[6.9][1]), (8.75, ys[6.9][1]), (8.75, ys[6.9][6]), (8.35, ys[6.9][6]), dashed=True, head=False)
    _note(ax, 8.82, (ys[6.9][1] + ys[6.9][6]) / 2, "tied: lm_head\nreuses the\n(V, D) matrix\nof tok_emb", ha="left",
          va="center")
    _note(ax, 5.0, 0.05, "One tok_emb serves source and target. Each sublayer has its residual and norm, as in "
          "the block diagram.", va="bottom")
    return fig


def _cache_rows(ax, x0, top, size, t_max, filled, new=None, names=True):
    """KVCache.k above KVCache.v: t_max cells each, the first ``filled`` written (k0, k1, ...), cell ``new``
    hatched as just written. Returns the y of the middle of each row."""
    rows = []
    for r, name in enumerate(("k", "v")):
        y = top - (r + 1) * size - r * 0.08
        if names:
            _note(ax, x0 - 0.08, y + size / 2, f"KVCache.{name}", ha="right", va="center")
        for j in range(t_max):
            written = j < filled or j == new
            _cell(ax, x0 + j * size, y, size, face=KINDS["cache"][0] if written else "white",
                  hatch="//" if j == new else None, text=f"{name}{j}" if written else None, boxed=j == new)
        rows.append(y + size / 2)
    return rows


def _pointer(ax, x, top, bottom, text):
    """The cache's length pointer: a dashed line at a cell boundary, labelled underneath."""
    ax.plot([x, x], [bottom, top], color="#B00000", linewidth=1.6, linestyle="--")
    _note(ax, x + 0.05, bottom - 0.02, text, ha="left", color="#B00000")


def kv_cache_diagram():
    """A KVCache during generation, in one attention layer: prefill writes the prompt's keys and values into
    buffers preallocated at (B, H_kv, T_max, Dh) and sets the length pointer; each decode step computes q, k, v
    from the new token's hidden state x at this layer (the block's normalised input in Pre-LN, not the token's
    embedding), writes k and v at the pointer, moves it on, and lets q attend to the filled part.
    Q is never cached."""
    fig, ax = _canvas(10, 5.8, "KV cache: prefill, then a decode step (one layer's self-attention)")
    x0, size, t_max = 3.2, 0.5, 8
    ax.plot([x0, x0, x0 + t_max * size, x0 + t_max * size], [5.0, 5.08, 5.08, 5.0], color=INK, linewidth=1)
    _note(ax, x0 + t_max * size / 2, 5.12, "T_max positions, allocated once", va="bottom")
    ax.text(0.15, 4.95, "1. prefill", fontsize=FONT, weight="bold", va="top")
    _note(ax, 0.15, 4.65, "the prompt's P = 4 tokens\nin one forward pass: the\nk_proj, v_proj of each,\n"
          "written at 0 .. P - 1", ha="left")
    _cache_rows(ax, x0, 4.95, size, t_max, filled=4)
    _pointer(ax, x0 + 4 * size, 5.0, 3.75, "length = 4")
    _note(ax, 7.4, 4.9, "KVCache: k and v buffers of\nshape (B, H_kv, T_max, Dh) and\na length pointer; one per "
          "layer\n(LayerCache.self_attn)", ha="left")
    ax.text(0.15, 3.25, "2. decode step", fontsize=FONT, weight="bold", va="top")
    k_row, v_row = _cache_rows(ax, x0, 2.6, size, t_max, filled=4, new=4, names=False)
    _pointer(ax, x0 + 5 * size, 2.68, 1.45, "length = 5")
    _box(ax, 1.45, 1.85, 2.1, 1.0, "attention: q against\nk[:, :, :length],\nv[:, :, :length]", "attention")
    _arrow(ax, (x0, k_row), (2.5, 2.05))
    _arrow(ax, (x0, v_row), (2.5, 1.65))
    tx, cell4 = 9.35, x0 + 4.5 * size
    _box(ax, tx, 1.85, 1.1, 1.06, "x (B, 1, D):\nnew token's\nhidden state,\nafter this\nblock's norm")
    _box(ax, cell4 - 0.25, 3.0, 0.85, 0.34, "k_proj", "linear")
    _box(ax, cell4 - 0.25, 0.85, 0.85, 0.34, "v_proj", "linear")
    _box(ax, 7.7, 0.45, 0.85, 0.34, "q_proj", "linear")
    _arrow(ax, (tx, 2.38), (tx, 3.0), (cell4 + 0.175, 3.0))
    _arrow(ax, (tx, 1.32), (tx, 0.85), (cell4 + 0.175, 0.85))
    _arrow(ax, (tx, 0.85), (tx, 0.45), (8.125, 0.45))
    _arrow(ax, (cell4, 2.83), (cell4, 2.6))
    _arrow(ax, (cell4, 1.02), (cell4, v_row - size / 2))
    _arrow(ax, (7.275, 0.45), (1.45, 0.45), (1.45, 1.35), label="q (B, H, 1, Dh): used in this step, never cached",
           dx=0.4)
    _note(ax, 7.35, 2.55, "the new k, v\n(B, H_kv, 1, Dh)\ngo in at length,\nthen length += 1", ha="left")
    return fig
