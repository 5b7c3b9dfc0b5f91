"""The checkers of chapter 13 (split a fused c_attn, undo the rotate-half order) and of chapter 13b (the soft-cap, a
sliding-window causal mask) accept a correct function and name each typical mistake.

``CASES`` has the layout of ``tests/exercises/test_exercises.py``'s table (checker -> (correct, [(wrong, words)])),
so that table can take these entries too.
"""
import pytest
import torch

from minitfm import exercises as ex
from minitfm import pretrained as P
from minitfm.layers.masks import causal_mask, sliding_window_mask


def split_ok(weight, d_model):
    if weight.dim() == 1:
        return weight[:d_model], weight[d_model:2 * d_model], weight[2 * d_model:]
    w = weight.t()  # (D, 3D) stored (in, out) -> (3D, D) stored (out, in)
    return w[:d_model], w[d_model:2 * d_model], w[2 * d_model:]


def split_no_transpose(weight, d_model):
    return weight.split(d_model, dim=-1)


def split_wrong_dim(weight, d_model):
    if weight.dim() == 1:
        return weight.split(d_model)
    return [w.t() for w in weight.chunk(3, dim=0)]


def split_kqv(weight, d_model):
    q, k, v = split_ok(weight, d_model)
    return k, q, v


def split_weight_only(weight, d_model):
    return [w.t() for w in weight.split(d_model, dim=1)]  # fails on the (3D,) bias


def rotate_ok(weight, n_heads):
    rows = weight.shape[0]
    d_head = rows // n_heads
    half = d_head // 2
    order = [j for i in range(half) for j in (i, i + half)]  # [0, h, 1, h + 1, ...]
    heads = weight.reshape(n_heads, d_head, *weight.shape[1:])
    return heads[:, order].reshape(weight.shape)


def rotate_whole(weight, n_heads):
    return rotate_ok(weight, 1)


def rotate_inverse(weight, n_heads):
    d_head = weight.shape[0] // n_heads
    order = [i // 2 + (i % 2) * d_head // 2 for i in range(d_head)]  # [0, 2, 4, ..., 1, 3, ...]
    inverse = torch.argsort(torch.tensor(order))
    return weight.reshape(n_heads, d_head, *weight.shape[1:])[:, inverse].reshape(weight.shape)


def rotate_columns(weight, n_heads):
    if weight.dim() == 1:
        return rotate_ok(weight, n_heads)
    return rotate_ok(weight.t(), n_heads).t()


def rotate_in_place(weight, n_heads):
    weight.copy_(rotate_ok(weight, n_heads))
    return weight


# ---- chapter 13b: the soft-cap and the sliding window
def softcap_ok(x, cap):
    return cap * torch.tanh(x / cap)


def window_ok(t_q, t_k, window):
    i = torch.arange(t_k - t_q, t_k)[:, None]  # the queries' absolute positions
    j = torch.arange(t_k)[None, :]
    return (j <= i) & (j > i - window)


CASES = {
    "check_split_fused_qkv": (split_ok, [
        (split_no_transpose, "you forgot the transpose"),
        (split_wrong_dim, "you split along the wrong dim"),
        (split_kqv, r"wrong order \(k, q, v where q, k, v was expected\)"),
        (split_weight_only, r"case 3 of 5 fails \(the bias"),
    ]),
    "check_from_rotate_half": (rotate_ok, [
        (rotate_whole, "you permuted the whole matrix as one head"),
        (rotate_inverse, "you interleaved the wrong way"),
        (rotate_columns, "you permuted the columns instead of the rows"),
        (lambda weight, n_heads: weight.clone(), "your answer is the weight unchanged"),
        (rotate_in_place, "changed its input `weight` in place"),
    ]),
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
    assert all(callable(getattr(ex, name)) for name in CASES)
    assert set(CASES) <= set(ex.CHECKERS)


# Accepting the right implementation and naming each wrong one run in tests/exercises/test_exercises.py, which adds CASES
# to its table; here only what is particular to these two checkers.


def test_accepts_the_librarys_own_functions():
    assert ex.check_split_fused_qkv(P.split_fused_qkv, verbose=False).passed
    assert ex.check_from_rotate_half(P.from_rotate_half, verbose=False).passed


def test_every_wrong_order_of_q_k_v_is_named():
    import itertools
    for order in itertools.permutations(range(3)):
        if order == (0, 1, 2):
            continue
        result = ex.check_split_fused_qkv(lambda w, d, o=order: [split_ok(w, d)[j] for j in o], verbose=False)
        names = ", ".join("qkv"[j] for j in order)
        assert not result.passed and f"wrong order ({names} where q, k, v was expected)" in result.message


def test_the_cases_tell_the_inverse_permutation_from_the_right_one():
    """Dh = 4 is its own inverse ([0, 2, 1, 3]); every case must use a head size where the two differ."""
    for d_head in (6, 8):
        perm = P.rotate_half_permutation(d_head)
        assert not torch.equal(perm, torch.argsort(perm))
    assert torch.equal(P.rotate_half_permutation(4), torch.argsort(P.rotate_half_permutation(4)))


def test_a_leading_axis_of_one_is_accepted():
    assert ex.check_sliding_window_mask(lambda q, k, w: window_ok(q, k, w)[None], verbose=False).passed


def test_accepts_the_librarys_masks():
    assert ex.check_sliding_window_mask(lambda q, k, w: causal_mask(q, k)[0] & sliding_window_mask(q, k, w),
                                        verbose=False).passed

# The generic checks (each wrong implementation rejected with its message, a stub reported as not implemented) run
# over these CASES in tests/exercises/test_exercises.py, which adds them to its table.
