import io
import itertools
import time

import torch

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyBboxPatch, Rectangle  # noqa: E402

import minitfm  # noqa: E402
from minitfm.viz import diagrams  # noqa: E402

# Each diagram and words its labels must contain: the book's terms and the library's names.
KEY_LABELS = {
    "attention_diagram": ["q_proj", "k_proj", "v_proj", "softmax", r"K^\top", r"\sqrt{d_k}", "(T, T)", "(T, D)"],
    "mask_diagram": ["padding mask", "causal mask", "(B, 1, 1, T)", "(B, 1, T, T)", "<pad>", "\u2713", "\u2717"],
    "head_split_diagram": ["view", "transpose", "(B, T, H, Dh)", "(B, H, T, Dh)", "(B, T, D)", "out_proj"],
    "block_diagram": ["Post-LN", "Pre-LN", "norm", "FFN", "self-attention", "+", "final_norm"],
    "encoder_decoder_diagram": ["sqrt", "self-attention", "masked self-attention", "cross-attention", "FFN",
                                "final_norm", "lm_head", "tied", "(B, S, D)", "(B, T, V)"],
    "kv_cache_diagram": ["KVCache", "T_max", "(B, H_kv, T_max, Dh)", "(B, H_kv, 1, Dh)", "(B, H, 1, Dh)", "length",
                         "prefill", "decode", "q_proj", "never cached", "hidden state", "norm"],
}
NAMES = sorted(KEY_LABELS)


@pytest.fixture
def draw():
    """Call a diagram function and check it leaves exactly its own figure open; close it afterwards."""
    made = []

    def _draw(name):
        before = set(plt.get_fignums())
        fig = getattr(diagrams, name)()
        new = set(plt.get_fignums()) - before
        made.append(fig)
        assert new == {fig.number}, f"{name} left {len(new)} new pyplot figures open, expected its own one"
        return fig

    yield _draw
    for fig in made:
        plt.close(fig)


def _texts(fig):
    return [t for ax in fig.axes for t in ax.texts if t.get_text().strip()]


def _render(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def test_the_module_exports_six_diagrams_and_loads_lazily():
    assert minitfm.viz.diagrams is diagrams
    assert all(callable(getattr(diagrams, name)) and getattr(diagrams, name).__doc__ for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_diagram_is_a_figure_with_its_key_labels(draw, name):
    fig = draw(name)
    assert isinstance(fig, Figure) and len(fig.axes) >= 1
    text = "\n".join(t.get_text() for t in _texts(fig))
    missing = [label for label in KEY_LABELS[name] if label not in text]
    assert not missing, f"{name} lacks the labels {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_diagram_renders_fast_to_png_and_identically_each_time(draw, name):
    start = time.perf_counter()
    png = _render(draw(name))
    assert time.perf_counter() - start < 2.0  # about 0.1 s here; generous for a slow, shared machine
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    a, b = (draw(name).canvas for _ in range(2))
    a.draw(), b.draw()
    assert bytes(a.buffer_rgba()) == bytes(b.buffer_rgba())  # deterministic: no randomness in the drawing


@pytest.mark.parametrize("name", NAMES)
def test_diagram_size_and_fonts_suit_a_notebook(draw, name):
    fig = draw(name)
    width, height = fig.get_size_inches()
    assert 9 <= width <= 11 and 3.5 <= height <= 6.5
    small = [t.get_text() for t in _texts(fig) if t.get_fontsize() < 9]
    assert not small, f"{name} has text below 9 pt: {small}"


@pytest.mark.parametrize("name", NAMES)
def test_no_text_is_clipped_or_overlaps_other_text(draw, name):
    fig = draw(name)
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    clipped = [s for s, box in boxes if box.x0 < page.x0 or box.y0 < page.y0 or box.x1 > page.x1 or box.y1 > page.y1]
    assert not clipped, f"{name}: text outside the figure: {clipped}"
    overlapping = [(s, u) for (s, a), (u, b) in itertools.combinations(boxes, 2)
                   if a.overlaps(b) and a.intersection(a, b).width > 1 and a.intersection(a, b).height > 1]
    assert not overlapping, f"{name}: overlapping text: {overlapping}"


def test_mask_cells_read_without_colour():
    """Every mask cell holds a check mark or a cross, and hidden cells are hatched, so greyscale loses nothing."""
    fig = diagrams.mask_diagram()
    try:
        ax = fig.axes[0]
        cells = [p for p in ax.patches if type(p).__name__ == "Rectangle"]
        marks = [t.get_text() for t in ax.texts if t.get_text() in (diagrams.ALLOWED, diagrams.HIDDEN)]
        assert len(marks) == len(cells) > 0
        hatched = sum(bool(p.get_hatch()) for p in cells)
        assert hatched == marks.count(diagrams.HIDDEN) > 0
    finally:
        plt.close(fig)


def test_mask_cells_do_not_reuse_the_letter_of_the_length():
    """T is the length in (B, 1, 1, T): no cell, and no other label, may say T or F on its own (review D20)."""
    fig = diagrams.mask_diagram()
    try:
        alone = [t.get_text() for t in _texts(fig) if t.get_text().strip() in ("T", "F", "True", "False")]
        assert not alone, f"mask cells or labels that read as a bare letter: {alone}"
    finally:
        plt.close(fig)


def _drawn_grid(fig, left, right):
    """The shaded cells whose left edge lies in [left, right) inches, as rows (top first) of darkness,
    1 - the relative luminance of the cell's face colour."""
    cells = [p for p in fig.axes[0].patches if type(p).__name__ == "Rectangle" and left <= p.get_x() < right]
    rows = {}
    for p in cells:
        r, g, b, _ = p.get_facecolor()
        rows.setdefault(round(p.get_y(), 6), []).append((p.get_x(), 1 - (0.2126 * r + 0.7152 * g + 0.0722 * b)))
    return [[dark for _, dark in sorted(row)] for _, row in sorted(rows.items(), reverse=True)]


def test_attention_diagram_weights_are_the_row_softmax_of_its_scores():
    """Review C12: the weight grid must be a softmax of the score grid, so it keeps each row's order."""
    scores, weights = diagrams.attention_grids(4)
    torch.testing.assert_close(torch.tensor(weights), torch.softmax(4 * torch.tensor(scores), dim=-1))
    fig = diagrams.attention_diagram()
    try:
        drawn_scores, drawn_weights = _drawn_grid(fig, 5.0, 8.0), _drawn_grid(fig, 8.0, 10.0)
        assert len(drawn_scores) == len(drawn_weights) == 4 and all(len(r) == 4 for r in drawn_scores + drawn_weights)
        for i, (s, w) in enumerate(zip(drawn_scores, drawn_weights)):
            order_s = sorted(range(4), key=lambda j: s[j])
            order_w = sorted(range(4), key=lambda j: w[j])
            assert order_s == order_w, f"row {i}: darkest score at {order_s[-1]}, darkest weight at {order_w[-1]}"
            assert len(set(s)) == 4  # no ties, so the order is well defined
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_text_written_in_a_box_or_cell_fits_inside_it(draw, name):
    fig = draw(name)
    renderer = fig.canvas.get_renderer()
    shapes = [p for ax in fig.axes for p in ax.patches
              if isinstance(p, (FancyBboxPatch, Rectangle)) and p.get_fill()]  # boxes and cells, not frames
    spilled = []
    for text in _texts(fig):
        box = text.get_window_extent(renderer)
        anchor = text.get_transform().transform(text.get_position())
        holders = [p.get_window_extent(renderer) for p in shapes if p.get_window_extent(renderer).contains(*anchor)]
        if holders:
            holder = min(holders, key=lambda b: b.width * b.height)
            if box.x0 < holder.x0 or box.x1 > holder.x1 or box.y0 < holder.y0 or box.y1 > holder.y1:
                spilled.append(text.get_text())
    assert not spilled, f"{name}: text spills out of its box: {spilled}"
