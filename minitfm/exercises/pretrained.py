"""Checkers for loading a published checkpoint: split GPT-2's fused c_attn, undo Llama's rotate-half order (chapter
13); and what today's open decoders changed (chapter 13b): Gemma 2's soft-cap and a sliding-window causal mask.

Glossary: D d_model, H heads (of q, or of k and v), Dh = rows per head, D_in the input width of a projection.
The expected answers are :func:`minitfm.pretrained.split_fused_qkv` and :func:`minitfm.pretrained.from_rotate_half`;
``c * tanh(x / c)``, the cap of :func:`minitfm.layers.attention.scaled_dot_product_attention`; and
:func:`minitfm.layers.masks.sliding_window_mask` combined with :func:`minitfm.layers.masks.causal_mask` (W: a query
sees itself and the W - 1 keys before it; the queries are the last T_q of the T_k positions, as with a KV cache).
"""
from __future__ import annotations

import itertools

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.layers import masks
from minitfm.pretrained import weights as lib

QKV = ("q", "k", "v")


def _safe(answer):
    """A mistake's answer, or None where that mistake cannot even be made on this case (so it never matches)."""
    def safe(inputs):
        try:
            return answer(inputs)
        except Exception:
            return None
    return safe


def _wrong_order_mistakes():
    """One mistake per wrong order of q, k, v (the five other permutations of the three parts)."""
    mistakes = []
    for order in itertools.permutations(range(3)):
        if order == (0, 1, 2):
            continue
        names = ", ".join(QKV[i] for i in order)
        mistakes.append(Mistake(
            f"your three parts come out in the wrong order ({names} where q, k, v was expected): c_attn holds "
            "q in its first D outputs, then k, then v",
            _safe(lambda i, o=order: [lib.split_fused_qkv(i["weight"], i["d_model"])[j] for j in o])))
    return mistakes


WRONG_DIM = ("you split along the wrong dim: c_attn's weight is (D, 3D), stored (in, out), and q, k, v are the "
             "three blocks of D of its OUTPUTS, its columns: split dim 1 (or transpose to (3D, D) first, then "
             "split dim 0)")


def _split_mistakes():
    weight, d = (lambda i: i["weight"]), (lambda i: i["d_model"])
    return [
        Mistake("you forgot the transpose: GPT-2's Conv1D stores a weight as (in, out), so each (D, D) block of "
                "c_attn is (in, out) too; nn.Linear wants (out, in), the block transposed",
                _safe(lambda i: list(weight(i).split(d(i), dim=1)))),
        Mistake(WRONG_DIM, _safe(lambda i: [p.t() for p in weight(i).chunk(3, dim=0)])),
        Mistake(WRONG_DIM, _safe(lambda i: list(weight(i).chunk(3, dim=0)))),
        Mistake(WRONG_DIM, _safe(lambda i: list(weight(i).split(d(i), dim=0)))),
        Mistake(WRONG_DIM, _safe(lambda i: [p.t() for p in weight(i).split(d(i), dim=0)])),
        Mistake("you split along the wrong dim: after the transpose the weight is (3D, D), and q, k, v are its "
                "three blocks of D ROWS (dim 0)", _safe(lambda i: list(weight(i).t().chunk(3, dim=1)))),
        *_wrong_order_mistakes(),
    ]


def check_split_fused_qkv(split_fused_qkv, verbose: bool = True) -> CheckResult:
    """Check ``split_fused_qkv(weight, d_model) -> (q, k, v)``.

    ``weight`` is GPT-2's ``attn.c_attn.weight``, a Conv1D weight of shape (D, 3D) stored (in, out), or its
    bias of shape (3D,). Return the three parts as ``nn.Linear`` wants them: weights (D, D) stored
    (out, in), or biases (D,), in the order q, k, v.
    """
    mistakes = _split_mistakes()

    def case(what, d, seed, bias=False, strided=False):
        def make():
            if bias:
                weight = randn(3 * d, seed=seed)
            elif strided:
                weight = randn(3 * d, d, seed=seed).t()  # (D, 3D), not contiguous: a transposed view
            else:
                weight = randn(d, 3 * d, seed=seed)
            return {"weight": weight, "d_model": d}
        inputs = make()
        return Case(what, make, lib.split_fused_qkv(inputs["weight"], d), mistakes)

    cases = [
        case("a weight with D=4: (4, 12), stored (in, out)", 4, seed=1),
        case("a weight with D=6: (6, 18)", 6, seed=2),
        case("the bias, (3D,) = (12,)", 4, seed=3, bias=True),
        case("a weight that is a transposed view (not contiguous), D=6", 6, seed=4, strided=True),
        case("D=2: (2, 6)", 2, seed=5),
    ]
    return run_cases("check_split_fused_qkv", split_fused_qkv, cases, verbose=verbose)


# ---- the rotate-half permutation ---------------------------------------------------------------------------

def _per_head(weight, n_heads, perm_of, *, dim=0):
    """Reorder the rows (dim 0) or the columns (dim 1) inside every block of ``size // n_heads``."""
    if dim == 1:
        return _per_head(weight.t(), n_heads, perm_of).t()
    rows = weight.shape[0]
    perm = perm_of(rows // n_heads)
    return weight.reshape(n_heads, rows // n_heads, *weight.shape[1:])[:, perm].reshape(weight.shape)


def _inverse(d_head):
    return torch.argsort(lib.rotate_half_permutation(d_head))


def _rotate_mistakes():
    return [
        Mistake("you permuted the whole matrix as one head: the rotate-half order repeats inside EVERY head "
                "(rows h * Dh .. (h + 1) * Dh - 1), so reshape to (n_heads, Dh, ...) and reorder each head's rows",
                _safe(lambda i: i["weight"][lib.rotate_half_permutation(i["weight"].shape[0])])),
        Mistake("you interleaved the wrong way (the inverse permutation, which goes from minitfm's adjacent pairs "
                "back to halves): minitfm's row 2i must be the checkpoint's row i and its row 2i + 1 the "
                "checkpoint's row i + Dh/2, so the new order is [0, Dh/2, 1, Dh/2 + 1, ...]",
                _safe(lambda i: _per_head(i["weight"], i["n_heads"], _inverse))),
        Mistake("you permuted the columns instead of the rows: a projection's OUTPUTS (rows of an nn.Linear "
                "weight, (out, in)) are what RoPE rotates; its inputs stay where they are",
                _safe(lambda i: _per_head(i["weight"], i["n_heads"], lib.rotate_half_permutation, dim=1))),
        Mistake("your answer is the weight unchanged: the rows of every head must be reordered "
                "[0, Dh/2, 1, Dh/2 + 1, ...] so that minitfm's adjacent pairs are the checkpoint's halves",
                lambda i: i["weight"]),
    ]


def check_from_rotate_half(from_rotate_half, verbose: bool = True) -> CheckResult:
    """Check ``from_rotate_half(weight, n_heads) -> tensor`` of the same shape.

    ``weight`` is a q_proj or k_proj weight (H * Dh, D_in) of a Llama checkpoint (or its bias, (H * Dh,)),
    whose RoPE rotates the pairs (i, i + Dh/2) of every head. Return it with the rows of every head reordered
    for minitfm's adjacent pairs (2i, 2i + 1): inside each head, new row 2i = old row i and new row 2i + 1 =
    old row i + Dh/2, i.e. the order [0, Dh/2, 1, Dh/2 + 1, ...].
    """
    mistakes = _rotate_mistakes()

    def case(what, heads, d_head, d_in, seed):
        def make():
            shape = (heads * d_head,) if d_in is None else (heads * d_head, d_in)
            return {"weight": randn(*shape, seed=seed), "n_heads": heads}
        return Case(what, make, lib.from_rotate_half(make()["weight"], heads), mistakes)

    cases = [
        case("q_proj with 2 heads of Dh=8: (16, 16)", 2, 8, 16, seed=1),
        case("k_proj of grouped-query attention, 2 heads of Dh=8, D_in=32: (16, 32)", 2, 8, 32, seed=2),
        case("one head of Dh=6: (6, 5)", 1, 6, 5, seed=3),
        case("a bias, 4 heads of Dh=6: (24,)", 4, 6, None, seed=4),
        case("3 heads of Dh=8, D_in=24: (24, 24)", 3, 8, 24, seed=5),
    ]
    return run_cases("check_from_rotate_half", from_rotate_half, cases, verbose=verbose)


# ---- chapter 13b: the soft-cap and the sliding window ----------------------------------------------------------


def _softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    return cap * torch.tanh(x / cap)


def check_softcap(softcap, verbose: bool = True) -> CheckResult:
    """Check ``softcap(x, cap) -> tensor`` of ``x``'s shape and dtype: ``cap * tanh(x / cap)``, the identity for
    ``|x|`` much smaller than ``cap`` and never outside ``(-cap, cap)``."""
    mistakes = [
        Mistake("you clamped: a soft-cap is smooth, cap * tanh(x / cap), not a hard clip to [-cap, cap]",
                lambda i: i["x"].clamp(-i["cap"], i["cap"])),
        Mistake("you forgot to divide by the cap inside the tanh: cap * tanh(x) saturates at |x| of about 1, "
                "whatever the cap", lambda i: i["cap"] * torch.tanh(i["x"])),
        Mistake("you forgot to multiply by the cap outside the tanh: tanh(x / cap) lies in (-1, 1), so the capped "
                "values lose their scale", lambda i: torch.tanh(i["x"] / i["cap"])),
        Mistake("you multiplied inside and divided outside: the cap is cap * tanh(x / cap)",
                lambda i: torch.tanh(i["x"] * i["cap"]) / i["cap"]),
    ]

    def case(what, shape, cap, scale, seed, dtype=torch.float32):
        def make():
            return {"x": randn(*shape, seed=seed, dtype=dtype) * scale, "cap": cap}
        return Case(what, make, _softcap(make()["x"], cap), mistakes)

    cases = [
        case("scores of order 1 with Gemma 2's attention cap 50: almost unchanged", (2, 4, 5, 5), 50.0, 1.0, seed=1),
        case("logits of order 100 with the final cap 30: squashed towards +-30", (3, 11), 30.0, 100.0, seed=2),
        case("a cap of 1 on numbers of order 3", (7,), 1.0, 3.0, seed=3),
        case("float64 scores, cap 5", (4, 4), 5.0, 10.0, seed=4, dtype=torch.float64),
        case("one number, cap 2", (1,), 2.0, 0.5, seed=5),
    ]
    return run_cases("check_softcap", softcap, cases, verbose=verbose)


def _window(t_q: int, t_k: int, w: int) -> torch.Tensor:
    return masks.causal_mask(t_q, t_k)[0] & masks.sliding_window_mask(t_q, t_k, w)


def check_sliding_window_mask(sliding_window_causal_mask, verbose: bool = True) -> CheckResult:
    """Check ``sliding_window_causal_mask(t_q, t_k, window) -> (T_q, T_k) bool`` (a leading axis of size 1 is fine).

    ``True`` where query i may attend to key j: j is not in its future (causal) and is one of the ``window``
    latest keys counting the query itself, i.e. ``i' - window < j <= i'`` with ``i' = i + (T_k - T_q)`` the
    query's absolute position (the queries are the last T_q of T_k positions, as with a KV cache)."""
    cases = []
    for t_q, t_k, w, what in ((6, 6, 3, "6 x 6 with W=3"), (5, 5, 1, "W=1: each query sees only itself"),
                              (4, 4, 9, "W=9 larger than the sequence: the causal mask alone"),
                              (2, 8, 3, "2 new queries over 8 keys (a KV cache), W=3"),
                              (1, 10, 4, "one decode step over 10 keys, W=4"), (7, 7, 7, "W=T=7")):
        ref = _window(t_q, t_k, w)
        mistakes = [
            Mistake("True and False are swapped: True must mean 'may attend'", lambda _, r=ref: ~r),
            Mistake("off by one: a window of W keys counts the query itself, so query i sees keys i - W + 1 .. i; "
                    "yours sees one key more", lambda _, q=t_q, k=t_k, w=w: _window(q, k, w + 1)),
            Mistake("off by one: a window of W keys counts the query itself, so query i sees keys i - W + 1 .. i; "
                    "yours sees one key fewer", lambda _, q=t_q, k=t_k, w=w: _window(q, k, max(w - 1, 1))
                    if w > 1 else torch.zeros(q, k, dtype=torch.bool)),
            Mistake("your mask lets queries see the future: combine the window with the causal mask",
                    lambda _, q=t_q, k=t_k, w=w: masks.sliding_window_mask(q, k, w)),
            Mistake("your mask is the causal mask alone: keys more than W - 1 positions back must be hidden",
                    lambda _, q=t_q, k=t_k: masks.causal_mask(q, k)[0]),
            Mistake("your mask is aligned top-left: with T_k > T_q the queries are the LAST T_q positions",
                    lambda _, q=t_q, k=t_k, w=w: _window(k, k, w)[:q]),
        ]
        mistakes = [m for m in mistakes if not torch.equal(m.answer({}), ref)]  # never a "mistake" equal to the answer
        cases.append(Case(what, lambda q=t_q, k=t_k, w=w: {"t_q": q, "t_k": k, "window": w}, ref, mistakes,
                          normalize=lambda m: m[0] if isinstance(m, torch.Tensor) and m.dim() == 3 and m.shape[0] == 1
                          else m))
    return run_cases("check_sliding_window_mask", sliding_window_causal_mask, cases, verbose=verbose)
