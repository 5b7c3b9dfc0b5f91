import pytest
import torch
from torch.testing import assert_close
from torch.utils.flop_counter import FlopCounterMode

from minitfm.layers.multihead import MultiHeadAttention
from minitfm.vision.windows import (
                                    WindowAttention, attention_flops, cyclic_shift, shift_regions, shifted_window_mask,
                                    window_merge, window_partition,
                                    )


def test_partition_shape_content_and_merge_round_trip():
    x = torch.randn(2, 8, 12, 3)
    windows = window_partition(x, 4)
    assert windows.shape == (2 * 6, 16, 3)
    # window 4 of image 1 is grid row 1, column 1: rows 4-7, columns 4-7
    assert_close(windows[6 + 4], x[1, 4:8, 4:8].reshape(16, 3))
    assert torch.equal(window_merge(windows, 4, 8, 12), x)


def test_cyclic_shift_is_undone_by_negative_shift():
    x = torch.randn(1, 6, 6, 2)
    shifted = cyclic_shift(x, 2)
    assert_close(shifted[0, 0, 0], x[0, 2, 2])
    assert torch.equal(cyclic_shift(shifted, -2), x)


def brute_force_shifted_mask(h, w, m, s):
    """Token pairs in the same window of the rolled grid may attend iff they were neighbours
    (no wrap-around) before the roll: their original rows are on the same side of the wrap, same for
    columns."""
    def side(index, size):  # 0: was already here, 1: wrapped around from the top/left edge
        return int(index >= size - s)

    mask = torch.zeros((h // m) * (w // m), m * m, m * m, dtype=torch.bool)
    for wi in range(h // m):
        for wj in range(w // m):
            cells = [(wi * m + a, wj * m + b) for a in range(m) for b in range(m)]
            for p, (r1, c1) in enumerate(cells):
                for q, (r2, c2) in enumerate(cells):
                    mask[wi * (w // m) + wj, p, q] = side(r1, h) == side(r2, h) and side(c1, w) == side(c2, w)
    return mask


@pytest.mark.parametrize("h, w, m, s", [(8, 8, 4, 2), (6, 9, 3, 1), (8, 4, 4, 3)])
def test_shifted_mask_blocks_exactly_cross_region_pairs(h, w, m, s):
    assert torch.equal(shifted_window_mask(h, w, m, s), brute_force_shifted_mask(h, w, m, s))


def test_no_shift_means_no_mask():
    assert shifted_window_mask(8, 8, 4, 0).all()
    assert shift_regions(8, 8, 4, 0).unique().numel() == 1


def test_one_window_equals_global_attention():
    wattn = WindowAttention(16, 4, window_size=4)
    x = torch.randn(2, 4, 4, 16)
    out, _ = wattn(x)
    ref, _ = wattn.attn(x.reshape(2, 16, 16))
    assert_close(out, ref.reshape(2, 4, 4, 16))


def test_windowed_attention_equals_global_attention_with_block_mask():
    """Shifted-window attention == global attention over the original grid where a pair may attend
    iff, after the roll, both tokens share a window and a region."""
    h = w = 8
    m, s = 4, 2
    wattn = WindowAttention(8, 2, window_size=m, shift=s)
    x = torch.randn(2, h, w, 8)
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    rolled_r, rolled_c = (rows - s) % h, (cols - s) % w  # position of each original token after the roll
    window_id = ((rolled_r // m) * (w // m) + rolled_c // m).flatten()
    region = shift_regions(h, w, m, s)[rolled_r, rolled_c].flatten()
    allowed = (window_id[:, None] == window_id[None]) & (region[:, None] == region[None])
    ref, _ = wattn.attn(x.reshape(2, h * w, 8), mask=allowed)
    out, weights = wattn(x, need_weights=True)
    assert_close(out, ref.reshape(2, h, w, 8))
    assert weights.shape == (2 * 4, 2, 16, 16)


def test_attention_flops_match_counted_matmuls():
    d = 8
    with FlopCounterMode(display=False) as counter:
        WindowAttention(d, 2, window_size=4, shift=2)(torch.randn(1, 8, 8, d))
    assert counter.get_total_flops() == attention_flops(8, 8, d, window_size=4)
    with FlopCounterMode(display=False) as counter:
        MultiHeadAttention(d, 2)(torch.randn(1, 64, d))
    assert counter.get_total_flops() == attention_flops(8, 8, d)


def test_flops_scale_quadratic_vs_linear():
    def attention_part(side, window=None):
        return attention_flops(side, side, 4, window) - 2 * 4 * side * side * 16
    assert attention_part(16) == 16 * attention_part(8)  # 4x tokens -> 16x
    assert attention_part(16, 4) == 4 * attention_part(8, 4)  # 4x tokens -> 4x


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="divisible by window_size=3"):
        window_partition(torch.randn(1, 8, 8, 2), 3)
    with pytest.raises(ValueError, match=r"shift must be an int in \[0, window_size=4\), got 4"):
        WindowAttention(8, 2, window_size=4, shift=4)
    with pytest.raises(ValueError, match=r"windows must have shape \(B \* 4, 16, D\)"):
        window_merge(torch.randn(3, 16, 2), 4, 8, 8)
    with pytest.raises(ValueError, match="must have 4 dimensions"):
        WindowAttention(8, 2, 4)(torch.randn(2, 16, 8))
