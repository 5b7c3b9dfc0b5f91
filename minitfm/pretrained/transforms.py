"""The transformations of one published tensor on its way into minitfm and back, and the :class:`Rule` that names one.

Glossary: D d_model, H heads, Dh head dimension.

GPT-2 fuses q, k and v into one Conv1D (:func:`split_fused_qkv`, :func:`fuse_qkv`); every RoPE checkpoint since
Llama rotates halves where minitfm rotates adjacent pairs (:func:`from_rotate_half`, :func:`to_rotate_half`);
Phi-3 stacks q, k, v and gate, up as rows (:func:`split_rows`). :mod:`minitfm.pretrained.weights` builds the
key map of each family from these.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch


def split_fused_qkv(weight: torch.Tensor, d_model: int) -> list[torch.Tensor]:
    """GPT-2's c_attn (Conv1D, (D, 3D), or its (3D,) bias) -> q, k, v as nn.Linear weights ((D, D)) or biases.

    ValueError for any other shape (a fused q|k|v of grouped-query attention, (D, D + 2 D_kv), is not GPT-2's)."""
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
        raise ValueError(f"d_model must be an int >= 1, got {d_model!r}")
    want = (3 * d_model,) if weight.dim() == 1 else (d_model, 3 * d_model)
    if tuple(weight.shape) != want:
        raise ValueError(f"GPT-2's c_attn holds q, k and v of width d_model={d_model} side by side: expected shape "
                         f"{want}, got {tuple(weight.shape)}")
    if weight.dim() == 1:
        return list(weight.split(d_model))  # (3D,) -> 3 x (D,)
    return [w.t().contiguous() for w in weight.split(d_model, dim=1)]  # (D, 3D) -> 3 x (D_in, D) -> (D, D_in)


def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`split_fused_qkv`; ValueError unless q, k and v have one shape (D, D) or (D,)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    shapes = [tuple(t.shape) for t in (q, k, v)]
    if len(set(shapes)) != 1 or len(shapes[0]) not in (1, 2) or (len(shapes[0]) == 2 and shapes[0][0] != shapes[0][1]):
        raise ValueError(f"GPT-2's c_attn fuses three (D, D) projections (or (D,) biases), got q {shapes[0]}, "
                         f"k {shapes[1]}, v {shapes[2]} (grouped-query attention has no GPT-2 layout)")
    if q.dim() == 1:
        return torch.cat([q, k, v])
    return torch.cat([q.t(), k.t(), v.t()], dim=1).contiguous()


def rotate_half_permutation(d_head: int) -> torch.Tensor:
    """Row order that turns a rotate-half head (pairs (i, i + Dh/2)) into adjacent pairs (2i, 2i + 1).

    minitfm's row 2i is the published row i and its row 2i + 1 the published row i + Dh/2: both then turn
    with frequency i, so every rotation, and every score q . k, is unchanged."""
    if isinstance(d_head, bool) or not isinstance(d_head, int) or d_head < 2 or d_head % 2:
        raise ValueError(f"d_head must be an even int >= 2 (RoPE turns pairs), got {d_head!r}")
    half = d_head // 2
    return torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).flatten()  # [0, h, 1, h+1, ...]


def _head_width(weight: torch.Tensor, n_heads: int) -> int:
    """Dh of a q_proj/k_proj weight (rows = n_heads * Dh) or bias; ValueError unless Dh is a whole even number."""
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    rows = weight.shape[0] if weight.dim() else 0
    if weight.dim() not in (1, 2) or rows == 0 or rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(f"a q_proj/k_proj weight (or bias) has n_heads * Dh rows with an even head width Dh: "
                         f"shape {tuple(weight.shape)} is not {n_heads} heads of an even width")
    return rows // n_heads


def _head_permutation(d_head: int, rope_dims: int | None) -> torch.Tensor:
    """rotate_half_permutation over the first ``rope_dims`` rows of a head (partial RoPE), the rest in place."""
    if rope_dims is None or rope_dims == d_head:
        return rotate_half_permutation(d_head)
    if not 2 <= rope_dims <= d_head:
        raise ValueError(f"rope_dims must be in [2, Dh={d_head}], got {rope_dims}")
    return torch.cat([rotate_half_permutation(rope_dims), torch.arange(rope_dims, d_head)])


def from_rotate_half(weight: torch.Tensor, n_heads: int, rope_dims: int | None = None) -> torch.Tensor:
    """q_proj/k_proj rows (or bias) of a rotate-half checkpoint, reordered for minitfm's adjacent pairs; with
    ``rope_dims`` (partial RoPE) only the first ``rope_dims`` rows of each head turn, and move."""
    d_head = _head_width(weight, n_heads)
    perm = _head_permutation(d_head, rope_dims).to(weight.device)
    return weight.reshape(n_heads, d_head, *weight.shape[1:])[:, perm].reshape(weight.shape).contiguous()


def to_rotate_half(weight: torch.Tensor, n_heads: int, rope_dims: int | None = None) -> torch.Tensor:
    """The inverse of :func:`from_rotate_half`."""
    d_head = _head_width(weight, n_heads)
    inverse = torch.argsort(_head_permutation(d_head, rope_dims)).to(weight.device)
    return weight.reshape(n_heads, d_head, *weight.shape[1:])[:, inverse].reshape(weight.shape).contiguous()


@dataclass(frozen=True)
class Rule:
    """One published tensor: where it goes in minitfm and how it is transformed there and back."""

    hf_key: str
    minitfm_keys: tuple[str, ...]
    how: str  # what the chapter's table shows
    forward: Callable  # published tensor -> list of tensors, one per minitfm key (what to_minitfm applies)
    inverse: Callable  # list of minitfm tensors -> the published tensor (what to_hf applies)
    hf_shape: Optional[tuple] = None  # the published tensor's shape for this config (filled in by key_map)


def _copy(hf_key: str, key: str) -> Rule:
    return Rule(hf_key, (key,), "copy", lambda t: [t], lambda ts: ts[0])


def _transposed(hf_key: str, key: str) -> Rule:
    return Rule(hf_key, (key,), "transpose", lambda t: [t.t().contiguous()], lambda ts: ts[0].t().contiguous())


def split_rows(sizes: tuple[int, ...], permute: tuple = ()) -> tuple[Callable, Callable]:
    """(forward, inverse) for a tensor whose rows stack several projections (Phi-3's qkv_proj, gate_up_proj):
    forward splits it into ``sizes`` rows and applies ``permute[i]`` (a function, or None) to part i; inverse
    undoes both and stacks the parts again."""
    permute = tuple(permute) + (None,) * (len(sizes) - len(permute))

    def forward(t):
        return [p[0](x) if p else x for x, p in zip(t.split(list(sizes)), permute)]

    def inverse(ts):
        return torch.cat([p[1](x) if p else x for x, p in zip(ts, permute)]).contiguous()

    return forward, inverse
