"""Chapter 15's diagrams: the LoRA update beside a frozen layer, and a chat's token spans with its loss mask.

Glossary: D_in, D_out a linear layer's widths, r the LoRA rank, alpha its scale numerator.

Drawn in the style of :mod:`minitfm.viz.diagrams` (same pen, same palette, every box says what it is in words);
each function returns an open ``matplotlib.figure.Figure``.
"""
from __future__ import annotations

from minitfm.finetuning.chat import IGNORE_INDEX
from minitfm.viz.drawing import FONT, INK, KINDS, _arrow, _box, _canvas, _cell, _note, _plus

TURN_FACES = {"system": "#EEEEEE", "user": KINDS["linear"][0], "assistant": KINDS["attention"][0]}


def lora_diagram():
    """y = W x + (alpha / r) B A x: the frozen weight W (D_out, D_in) on one path, the trainable A (r, D_in) and
    B (D_out, r) on the other, B starting at zero so the model is unchanged at step 0; after training B A can
    be merged into W, and the layer costs nothing extra at inference."""
    fig, ax = _canvas(9.6, 4.6, "LoRA: a frozen layer plus a trainable low-rank update")
    _box(ax, 0.9, 2.2, 1.3, 0.55, "x (.., D_in)")
    _box(ax, 4.0, 3.3, 2.3, 0.75, "W (D_out, D_in)\nfrozen: no gradient,\nno Adam state", "linear")
    _box(ax, 3.0, 1.1, 1.6, 0.7, "A (r, D_in)\nrandom at start", "ffn")
    _box(ax, 5.3, 1.1, 1.6, 0.7, "B (D_out, r)\nzero at start", "ffn")
    _box(ax, 6.85, 1.1, 0.9, 0.5, "x alpha / r", "norm")
    _plus(ax, 7.6, 2.2)
    _box(ax, 8.75, 2.2, 1.2, 0.55, "y (.., D_out)")
    _arrow(ax, (1.55, 2.2), (1.9, 2.2), (1.9, 3.3), (2.85, 3.3))
    _arrow(ax, (1.9, 2.2), (1.9, 1.1), (2.2, 1.1))
    _arrow(ax, (3.8, 1.1), (4.5, 1.1), label="(.., r)", dy=0.06)
    _arrow(ax, (6.1, 1.1), (6.4, 1.1))
    _arrow(ax, (7.3, 1.1), (7.6, 1.1), (7.6, 2.07))
    _arrow(ax, (5.15, 3.3), (7.6, 3.3), (7.6, 2.33))
    _arrow(ax, (7.73, 2.2), (8.15, 2.2))
    _note(ax, 4.15, 0.55, "trainable: r (D_in + D_out) numbers instead of D_in D_out; "
          "merge: W <- W + (alpha / r) B A", va="top")
    ax.text(4.0, 4.0, "the pretrained path", ha="center", fontsize=FONT - 1, color=INK)
    return fig


def chat_template_diagram(tokens, roles, labels):
    """One row of cells per rendered conversation: each token (its text, special tokens in bold), shaded by the
    turn it belongs to, and under it the label the loss sees (its id, or -100 hatched where the loss ignores it).

    ``tokens`` are the pieces' texts, ``roles`` each token's turn (``"system"``, ``"user"``, ``"assistant"`` or
    ``None`` for a token outside every turn), ``labels`` the ids or -100 (``RenderedChat.labels``)."""
    if not (len(tokens) == len(roles) == len(labels)) or not tokens:
        raise ValueError(f"tokens, roles and labels must have one entry per token, got {len(tokens)}, "
                         f"{len(roles)}, {len(labels)}")
    size = min(0.95, 13.0 / len(tokens))
    fig, ax = _canvas(max(7.0, 1.6 + size * len(tokens)), 2.9, "A chat as tokens: turns and the loss mask")
    x0 = 1.3
    _note(ax, x0 - 0.1, 1.95, "token", ha="right", va="center")
    _note(ax, x0 - 0.1, 1.0, "label", ha="right", va="center")
    for j, (token, role, label) in enumerate(zip(tokens, roles, labels)):
        x = x0 + j * size
        face = TURN_FACES.get(role, "white")
        _cell(ax, x, 1.95 - size / 2, size, face=face)
        ax.text(x + size / 2, 1.95, token, ha="center", va="center", fontsize=FONT - 3 if len(token) > 9 else FONT - 1,
                weight="bold" if token.startswith("<|") else "normal")
        ignored = int(label) == IGNORE_INDEX
        _cell(ax, x, 1.0 - size / 2, size, face="white" if ignored else KINDS["attention"][0],
              hatch="///" if ignored else None, text=str(int(label)), boxed=ignored)
    _note(ax, x0, 0.42, "shade: system (grey), user (blue), assistant (orange)\nhatched label -100: not in the loss; "
          "the loss learns the assistant's words and its <|end|>", ha="left")
    return fig
