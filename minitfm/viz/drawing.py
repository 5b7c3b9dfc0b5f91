"""The pen behind the book's diagrams (:mod:`minitfm.viz.diagrams`): boxes, arrows, grids and colours.

Every diagram is drawn on a canvas measured in inches from the bottom-left corner, with one palette: the
Okabe-Ito hues, lightened so that black text stays readable, and hatches so that heads differ in greyscale too.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path


FONT = 10  # labels; captions use FONT - 1, titles FONT + 2
INK = "#333333"
# kind -> (fill, edge): Okabe-Ito hues, the fills lightened so that black text stays readable on them.
KINDS = {
    "tensor": ("#F2F2F2", "#555555"),
    "linear": ("#CFE8F7", "#0072B2"),  # q_proj, k_proj, v_proj, out_proj, lm_head
    "attention": ("#FBE3B5", "#B57A00"),
    "norm": ("#C6EBDD", "#007A5A"),
    "ffn": ("#F3D7E7", "#A8568A"),
    "embed": ("#FDF3C0", "#9C8A00"),
    "cache": ("#D9D2F0", "#5A4A9C"),
}
HEAD_COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#CC79A7"]
HEAD_HATCHES = ["", "//", "..", "xx"]  # so that heads differ in greyscale too


def _canvas(width: float, height: float, title: str):
    """A pyplot figure whose one axis-free Axes is measured in inches from the bottom-left corner."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    ax.text(width / 2, height - 0.15, title, ha="center", va="top", fontsize=FONT + 2, weight="bold")
    return fig, ax


def _box(ax, x, y, w, h, text, kind="tensor", fontsize=FONT):
    """A rounded box centred at (x, y), filled by ``kind``, with centred ``text``."""
    face, edge = KINDS[kind]
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor=face, edgecolor=edge, linewidth=1.3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _note(ax, x, y, text, ha="center", va="top", **kw):
    """A caption in the smaller font."""
    ax.text(x, y, text, ha=ha, va=va, fontsize=FONT - 1, **kw)


def _arrow(ax, *points, label=None, at=0, dx=0.0, dy=0.08, ha="center", va="bottom", dashed=False, head=True):
    """An arrow through ``points`` (inches; two or more, joined by straight segments) ending at the last;
    ``label`` sits by the middle of segment ``at``, shifted by (dx, dy)."""
    path = Path(points, [Path.MOVETO] + [Path.LINETO] * (len(points) - 1))
    ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>" if head else "-", mutation_scale=12, color=INK,
                                 linewidth=1.2, linestyle="--" if dashed else "-"))
    if label:
        (x0, y0), (x1, y1) = points[at], points[at + 1]
        ax.text((x0 + x1) / 2 + dx, (y0 + y1) / 2 + dy, label, ha=ha, va=va, fontsize=FONT - 1)


ALLOWED, HIDDEN = "\u2713", "\u2717"  # what a mask cell holds: a check mark (True) or a ballot cross (False)


def _cell(ax, x, y, size, allowed=None, face="white", hatch=None, text=None, colour="black", boxed=False):
    """One square cell with its bottom-left corner at (x, y). ``allowed`` True/False draws a mask cell:
    filled, with a check mark, or white, hatched, with a cross. ``boxed`` puts the text on white, above a hatch."""
    if allowed is not None:
        face, hatch, text, colour = (("#0072B2", None, ALLOWED, "white") if allowed
                                     else ("white", "///", HIDDEN, "black"))
        boxed = not allowed
    ax.add_patch(Rectangle((x, y), size, size, facecolor=face, edgecolor=INK, hatch=hatch, linewidth=0.8))
    if text:
        ax.text(x + size / 2, y + size / 2, text, ha="center", va="center", color=colour,
                fontsize=FONT + 2 if allowed is not None else FONT - 1,  # a mark reads smaller than a letter
                weight="bold" if allowed is not None else "normal",
                bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none"} if boxed else None)


def _grid(ax, x0, top, size, values=None, shade=None):
    """A grid with its top-left corner at (x0, top): ``values`` (rows of True/False) draws mask cells,
    ``shade`` (rows of numbers in [0, 1]) draws orange levels, as a heatmap would."""
    rows = values if values is not None else shade
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            x, y = x0 + j * size, top - (i + 1) * size
            if values is not None:
                _cell(ax, x, y, size, allowed=bool(value))
            else:
                _cell(ax, x, y, size, face=plt.cm.Oranges(0.08 + 0.75 * value))


def _index_labels(ax, x0, top, size, n_rows, n_cols):
    """Row numbers left of a grid and column numbers above it."""
    for i in range(n_rows):
        _note(ax, x0 - 0.06, top - (i + 0.5) * size, str(i), ha="right", va="center")
    for j in range(n_cols):
        _note(ax, x0 + (j + 0.5) * size, top + 0.04, str(j), va="bottom")


def _frame(ax, x, y, w, h):
    """A dashed frame (bottom-left corner at (x, y)) around steps that repeat, such as a block."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.1", fill=False,
                                linestyle="--", edgecolor="#777777"))


def _plus(ax, x, y, r=0.13):
    """A residual addition: a circle with a plus."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor=INK, linewidth=1.2))
    ax.text(x, y, "+", ha="center", va="center", fontsize=FONT + 1)
