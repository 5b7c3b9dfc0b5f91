"""The checkers of chapter 13b (Gemma 2's soft-cap, a sliding-window causal mask) accept a correct function and name
each typical mistake.

``CASES`` has the layout of ``tests/exercises/test_exercises.py``'s table (checker -> (correct, [(wrong, words)])),
which adds these entries to its generic checks.
"""
import torch

from minitfm import exercises as ex
from minitfm.layers.masks import causal_mask, sliding_window_mask


def softcap_ok(x, cap):
    return cap * torch.tanh(x / cap)


def window_ok(t_q, t_k, window):
    i = torch.arange(t_k - t_q, t_k)[:, None]  # the queries' absolute positions
    j = torch.arange(t_k)[None, :]
    return (j <= i) & (j > i - window)


CASES = {
    "check_softcap": (softcap_ok, [
        (lambda x, cap: x.clamp(-cap, cap), "you clamped"),
        (lambda x, cap: cap * torch.tanh(x), "forgot to divide by the cap"),
        (lambda x, cap: torch.tanh(x / cap), "forgot to multiply by the cap"),
        (lambda x, cap: softcap_ok(x.float(), cap), r"case 4 of 5 fails \(float64.*\n.*wrong dtype"),
    ]),
    "check_sliding_window_mask": (window_ok, [
        (lambda q, k, w: window_ok(q, k, w + 1), "yours sees one key more"),
        (lambda q, k, w: window_ok(q, k, w - 1) if w > 1 else window_ok(q, k, 1) & False, "yours sees one key fewer"),
        (lambda q, k, w: sliding_window_mask(q, k, w), "see the future"),
        (lambda q, k, w: causal_mask(q, k)[0], "the causal mask alone"),
        (lambda q, k, w: window_ok(k, k, w)[:q], "aligned top-left"),
        (lambda q, k, w: window_ok(q, k, w).float(), "expected torch.bool"),
    ]),
}


def test_the_checkers_are_importable_from_minitfm_exercises():
    assert set(CASES) <= set(ex.CHECKERS)


def test_a_leading_axis_of_one_is_accepted():
    assert ex.check_sliding_window_mask(lambda q, k, w: window_ok(q, k, w)[None], verbose=False).passed


def test_accepts_the_librarys_masks():
    assert ex.check_sliding_window_mask(lambda q, k, w: causal_mask(q, k)[0] & sliding_window_mask(q, k, w),
                                        verbose=False).passed
