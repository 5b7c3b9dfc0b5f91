"""Chapters 15 and 16's diagrams: the LoRA update beside a frozen layer, a chat's token spans with its loss mask, DPO's
pairwise objective and one GRPO step.

Glossary: D_in, D_out a linear layer's widths, r the LoRA rank, alpha its scale numerator.

Drawn in the style of :mod:`minitfm.viz.diagrams` (same pen, same palette, every box says what it is in words);
each function returns an open ``matplotlib.figure.Figure``.
"""
from __future__ import annotations

import math

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


def dpo_loss_curve(log_ratio_differences, beta: float) -> list:
    """-log sigma(beta * d) for each d: the DPO loss of one pair as a function of d, the policy's log-ratio of
    the chosen reply minus that of the rejected one (what :func:`dpo_diagram` plots; ln 2 at d = 0)."""
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    return [math.log1p(math.exp(-beta * d)) if beta * d > -30 else -beta * d for d in log_ratio_differences]


def dpo_diagram(betas=(0.1, 1.0)):
    """DPO's pairwise objective: one prompt, a chosen and a rejected reply, each scored by the policy and the
    frozen reference (log-probabilities summed over the reply's tokens), the two log-ratios, their difference d
    times beta (the margin), and the loss -log sigma(margin); beside it the loss against d for each of ``betas``
    (:func:`dpo_loss_curve`): ln 2 at d = 0, and a larger beta makes the same d cost less sooner, so it needs a
    smaller step from the reference."""
    fig, ax = _canvas(11.0, 4.6, "DPO: one preference pair, one loss")
    _box(ax, 0.85, 2.3, 1.3, 0.55, "prompt x\n\"51 plus 13?\"")
    _box(ax, 2.75, 3.3, 1.5, 0.55, "chosen y_w: \"64\"\n(verified)", "norm")
    _box(ax, 2.75, 1.3, 1.5, 0.55, "rejected y_l: \"62\"\n(wrong)", "ffn")
    _arrow(ax, (1.5, 2.3), (1.75, 2.3), (1.75, 3.3), (2.0, 3.3))
    _arrow(ax, (1.75, 2.3), (1.75, 1.3), (2.0, 1.3))
    for y, side in ((3.3, "w"), (1.3, "l")):
        _box(ax, 4.95, y, 2.3, 0.7, f"log pi(y_{side}|x) - log pi_ref(y_{side}|x)\nsums over the reply's tokens",
             "linear", fontsize=FONT - 1)
        _arrow(ax, (3.5, y), (3.8, y))
    _note(ax, 4.95, 2.55, "pi: the policy (trained)\npi_ref: the model before (frozen)", va="center")
    _box(ax, 7.0, 2.3, 1.45, 0.75, "margin =\nbeta x (top - bottom)", "attention", fontsize=FONT - 1)
    _arrow(ax, (6.1, 3.3), (6.2, 3.3), (6.2, 2.45), (6.28, 2.45))
    _arrow(ax, (6.1, 1.3), (6.2, 1.3), (6.2, 2.15), (6.28, 2.15))
    _box(ax, 7.0, 0.9, 1.45, 0.55, "loss =\n-log sigma(margin)", "attention", fontsize=FONT - 1)
    _arrow(ax, (7.0, 1.92), (7.0, 1.18))
    _note(ax, 4.3, 0.45, "only the margin is trained: both log-probabilities may fall, the rejected one faster",
          va="center")
    inset = fig.add_axes((0.755, 0.16, 0.23, 0.62))
    d = [x / 10 for x in range(-100, 101)]
    for beta, style in zip(betas, ("-", "--", ":")):
        inset.plot(d, dpo_loss_curve(d, beta), style, color=INK, label=f"beta = {beta:g}")
    inset.axhline(math.log(2), color="#999999", linewidth=0.8)
    inset.annotate("ln 2 at step 0", (0, math.log(2)), (1.5, 2.2), fontsize=FONT - 2,
                   arrowprops={"arrowstyle": "-", "color": "#999999"})
    inset.set_xlabel("d = log-ratio of y_w - log-ratio of y_l", fontsize=FONT - 2)
    inset.set_ylabel("loss", fontsize=FONT - 2)
    inset.tick_params(labelsize=FONT - 2)
    inset.legend(fontsize=FONT - 2, frameon=False, loc="upper right")
    return fig


def group_advantages_of(rewards, eps: float = 1e-4) -> list:
    """One group's advantages, (r - mean) / (std + eps) with the unbiased std (what the GRPO diagram prints; the
    library's :func:`minitfm.preferences.grpo.group_advantages` computes the same, tested)."""
    if len(rewards) < 2:
        raise ValueError(f"a group needs at least 2 rewards, got {len(rewards)}")
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
    return [(r - mean) / (std + eps) for r in rewards]


def grpo_diagram(replies=("85", "85", "75", "86", "85", "8"), answer="85", wrong_group=("84", "86", "75", "8")):
    """One GRPO step for one prompt: the policy samples a group of replies, a program scores each (1 if it is
    ``answer``), each reply's advantage is its reward minus the group's mean over the group's std
    (:func:`group_advantages_of`, printed in its cell, shaded by its sign), and the loss pushes up the log-probability
    of every token of a reply with A > 0 and down those with A < 0. A second group, ``wrong_group``, all wrong,
    has advantages 0 everywhere: it teaches nothing."""
    rewards = [float(r == answer) for r in replies]
    fig, ax = _canvas(11.0, 5.0, "One GRPO step: sample a group, score it, compare each reply with its group")
    _box(ax, 0.85, 3.0, 1.3, 0.55, "prompt x\n\"47 + 38?\"")
    _box(ax, 2.45, 3.0, 1.3, 0.55, "policy pi\nsamples G", "linear")
    _arrow(ax, (1.5, 3.0), (1.8, 3.0))
    size, x0 = 0.62, 4.3
    rows = (("reply", list(replies)), ("reward r", [f"{r:g}" for r in rewards]),
            ("advantage A", [f"{a:+.2f}" for a in group_advantages_of(rewards)]))
    for k, (name, values) in enumerate(rows):
        y = 3.55 - k * 0.75
        _note(ax, x0 - 0.08, y + size / 2, name, ha="right", va="center")
        for j, text in enumerate(values):
            face = "white"
            if k == 2:
                a = group_advantages_of(rewards)[j]
                face = KINDS["linear"][0] if a > 0 else KINDS["ffn"][0] if a < 0 else "white"
            _cell(ax, x0 + j * size, y, size, face=face, text=text)
    _arrow(ax, (3.1, 3.0), (3.3, 3.0), (3.3, 4.4), (x0 + 3 * size, 4.4), (x0 + 3 * size, 4.19))
    x1 = x0 + len(replies) * size
    _note(ax, x1 + 0.15, 3.86, "a program checks\neach reply", ha="left", va="center")
    _note(ax, x1 + 0.15, 3.11, f"mean {sum(rewards) / len(rewards):.2f}", ha="left", va="center")
    _note(ax, x1 + 0.15, 2.36, "(r - mean) / (std + 1e-4)", ha="left", va="center")
    _box(ax, x0 + 3 * size, 1.25, 4.2, 0.8, "loss: -A x log pi(token), every token of a reply sharing its A\n"
         "(clipped ratio as in PPO; + beta x KL to pi_ref if beta > 0)\nthen one Adam step", "attention",
         fontsize=FONT - 1)
    _arrow(ax, (x0 + 3 * size, 2.05), (x0 + 3 * size, 1.65))
    _note(ax, x0 + 3 * size, 0.5, "blue: A > 0, made more likely; pink: A < 0, made less likely", va="center")
    wrong = [float(r == answer) for r in wrong_group]
    x2 = 8.3
    _note(ax, x2 + len(wrong_group) * size / 2, 1.85, "another group, all wrong:", va="bottom")
    for j, (text, a) in enumerate(zip(wrong_group, group_advantages_of(wrong))):
        _cell(ax, x2 + j * size, 1.15, size, text=text)
        _cell(ax, x2 + j * size, 1.15 - size, size, text=f"{a:+.0f}")
    _note(ax, x2 + len(wrong_group) * size / 2, 0.38, "A = 0 everywhere: it teaches nothing")
    return fig
