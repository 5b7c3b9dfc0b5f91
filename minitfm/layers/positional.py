"""Positional information: sinusoidal, learned, rotary (RoPE) and ALiBi.

Glossary: B batch, T length, D d_model, H heads, Dh head dimension, T_q/T_k queries/keys.

Sinusoidal and learned encodings are *added* to the token embeddings. RoPE *rotates* queries and keys
inside attention. ALiBi adds a per-head distance penalty to the attention scores. Positions are plain
integer tensors so that a KV cache can pass ``offset = cache length``.

RoPE pairing convention: this library rotates **adjacent pairs** (x0, x1), (x2, x3), ... as in the
original RoFormer paper. Many codebases (GPT-NeoX, Llama in Hugging Face) rotate the two *halves*
(x_i, x_{i + Dh/2}) instead; both give scores that depend only on m - n, but their weights are not
interchangeable without permuting the projection columns.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from minitfm._checks import check_number, check_positive_int, check_tensor, inputs_trusted
from minitfm.layers.rope_scaling import RopeScaling, scaled_inv_freq


def _positions(positions, seq_len: int | None, offset: int, device) -> torch.Tensor:
    if positions is None:
        if seq_len is None:
            raise ValueError("give either seq_len (positions offset..offset+seq_len-1) or a positions tensor")
        check_number(seq_len, "seq_len", low=0, integer=True)
        check_number(offset, "offset", integer=True)  # a negative offset is reported as a negative position
        return torch.arange(offset, offset + seq_len, device=device)
    check_tensor(positions, "positions", ndim=(1, 2))
    if positions.is_floating_point() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integer indices, got dtype {positions.dtype}")
    return positions


def _check_table_positions(pos: torch.Tensor) -> None:
    """Tables are indexed by position: a negative index would silently read from the table's end."""
    if pos.numel() and int(pos.min()) < 0:
        raise ValueError(f"positions must be >= 0, got {int(pos.min())}")


def sinusoidal_encoding(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """The paper's table: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same angle).

    Args:
        positions: (T,) or (B, T) integer positions.
        d_model: D, must be even.

    Returns:
        (..., T, D) float32 encodings.
    """
    check_tensor(positions, "positions")
    check_positive_int(d_model, "d_model")
    if d_model % 2:
        raise ValueError(f"sinusoidal encoding needs an even d_model (sin/cos pairs), got {d_model}")
    # 10000^(-2i/D) computed as exp(-2i * ln(10000) / D): the same number, without a huge power.
    inv_freq = torch.exp(torch.arange(0, d_model, 2, device=positions.device) * (-math.log(10000.0) / d_model))
    angles = positions.float()[..., None] * inv_freq  # (..., T) -> (..., T, D/2)
    pe = torch.empty(*angles.shape[:-1], d_model, device=positions.device)
    pe[..., 0::2] = torch.sin(angles)
    pe[..., 1::2] = torch.cos(angles)
    return pe


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sin/cos encodings, kept as a (non-trainable) buffer that grows on demand: any length works.

    ``forward(seq_len, offset=0)`` or ``forward(positions=...)`` returns (T, D) or (B, T, D) encodings
    to add to the embeddings.
    """

    def __init__(self, d_model: int, max_seq_len: int = 512):
        super().__init__()
        check_positive_int(max_seq_len, "max_seq_len")
        self.d_model = d_model
        self.register_buffer("table", sinusoidal_encoding(torch.arange(max_seq_len), d_model), persistent=False)

    def forward(self, seq_len: int | None = None, offset: int = 0, positions: torch.Tensor | None = None):
        pos = _positions(positions, seq_len, offset, self.table.device)
        _check_table_positions(pos)
        needed = int(pos.max()) + 1 if pos.numel() else 0
        if needed > self.table.shape[0]:  # extend instead of failing: the formula works for any position
            table = sinusoidal_encoding(torch.arange(needed, device=self.table.device), self.d_model)
            self.table = table.to(self.table.dtype)  # keep the dtype of a model cast with .half()
        return self.table[pos]


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position (BERT, GPT-2). It has a hard limit: positions >= max_seq_len have
    no vector, so such a model cannot run on longer inputs at all.
    """

    def __init__(self, max_seq_len: int, d_model: int):
        super().__init__()
        check_positive_int(max_seq_len, "max_seq_len")
        self.max_seq_len = max_seq_len
        self.emb = nn.Embedding(max_seq_len, d_model)
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, seq_len: int | None = None, offset: int = 0, positions: torch.Tensor | None = None):
        pos = _positions(positions, seq_len, offset, self.emb.weight.device)
        _check_table_positions(pos)
        if pos.numel() and int(pos.max()) >= self.max_seq_len:
            raise ValueError(
                f"learned positional embedding covers positions 0..{self.max_seq_len - 1} "
                f"(max_seq_len={self.max_seq_len}), got position {int(pos.max())}; "
                "learned positions cannot extrapolate - use a shorter input or another scheme"
            )
        return self.emb(pos)


class RotaryEmbedding(nn.Module):
    """RoPE: rotate each adjacent pair (x_{2i}, x_{2i+1}) of a query/key by the angle pos * theta_i,
    with theta_i = base^(-2i/Dh). The score q_m . k_n then depends on positions only through m - n.

    Args:
        d_head: Dh, must be even.
        base: 10000 in the paper; larger bases rotate more slowly.
        scale: position interpolation factor: positions are divided by ``scale`` so a model trained at
            length L sees positions of a ``scale * L`` input inside its trained range.
        scaling: a :class:`~minitfm.layers.rope_scaling.RopeScaling` (Llama 3's or YaRN's per-frequency
            rescaling) instead of ``scale``; YaRN's attention factor then multiplies the rotated vectors.
    """

    def __init__(self, d_head: int, base: float = 10000.0, scale: float = 1.0, scaling: RopeScaling | None = None):
        super().__init__()
        check_positive_int(d_head, "d_head")
        if d_head % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions, so d_head must be even, got {d_head}")
        if scaling is not None and not isinstance(scaling, RopeScaling):
            raise TypeError(f"scaling must be a RopeScaling or None, got {type(scaling).__name__}")
        if scaling is not None and scale != 1.0:
            raise ValueError(f"give either scale (position interpolation) or scaling ({scaling.kind}), not both")
        self.d_head, self.scaling = d_head, scaling
        self.magnitude = 1.0 if scaling is None else scaling.attention_scale()  # YaRN's factor on q and k
        self._base = self._scale = 1.0
        self.register_buffer("inv_freq", None, persistent=False)
        self.base, self.scale = base, scale  # each assignment computes inv_freq

    @property
    def base(self) -> float:
        return self._base

    @base.setter
    def base(self, value: float) -> None:
        check_number(value, "RoPE base", low=0.0, low_open=True)
        self._base = value
        self._refresh_inv_freq()

    @property
    def scale(self) -> float:
        return self._scale

    @scale.setter
    def scale(self, value: float) -> None:
        check_number(value, "RoPE scale", low=0.0, low_open=True)
        self._scale = value
        self._refresh_inv_freq()

    def _refresh_inv_freq(self) -> None:
        """The frequencies follow ``base`` and ``scale``: setting either (``model.rope.scale = 2.0`` on a trained
        model) recomputes them, on the device they were on."""
        old = self.inv_freq
        self.inv_freq = self.float32_inv_freq() if old is None else self.float32_inv_freq().to(old.device)

    def float32_inv_freq(self) -> torch.Tensor:
        """theta_i / scale for i = 0 .. Dh/2 - 1, in float32, written as the published implementations write
        it (1 / base^(2i/Dh), then divided by the interpolation factor): base^(-2i/Dh) or dividing the
        positions instead is the same number in exact arithmetic but differs in the last bit for some i, and
        over a few dozen positions that moves a loaded checkpoint's logits by about 1e-5. With ``scaling``, the
        Llama 3 or YaRN frequencies (:func:`~minitfm.layers.rope_scaling.scaled_inv_freq`)."""
        if self.scaling is not None:
            return scaled_inv_freq(self.d_head, self.base, self.scaling)
        exponents = torch.arange(0, self.d_head, 2, dtype=torch.int64).float() / self.d_head
        return 1.0 / (self.base ** exponents) / self.scale  # (Dh/2,)

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """(T,) or (B, T) positions -> (..., T, Dh/2) rotation angles, always in float32."""
        inv_freq = self.inv_freq
        if inv_freq.dtype != torch.float32:
            # model.half() / .to(bfloat16) rounds buffers too; theta_i with 8 bits of mantissa makes the
            # angle pos * theta_i wrong by radians at large positions, so recompute it in float32.
            inv_freq = self.float32_inv_freq().to(inv_freq.device)
        return positions.float()[..., None] * inv_freq  # inv_freq holds theta_i / scale

    def complex_rotation(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(T,) or (B, T) positions -> (..., T, Dh/2) rotations ``cos + i sin`` for float32 (complex64) or
        float64 (complex128) inputs; multiplying a pair x0 + i x1 by one rotates it."""
        ang = self.angles(positions)
        return torch.polar(torch.full_like(ang, self.magnitude), ang).to(torch.complex64 if dtype == torch.float32 else torch.complex128)

    def _rotation(self, pos: torch.Tensor, x: torch.Tensor):
        """The rotation at ``pos``, broadcastable against x: ``cos + i sin`` as one complex tensor for
        float32/float64 inputs, a ``(cos, sin)`` pair for float16/bfloat16 (bfloat16 has no complex type).

        A model rotates the queries and keys of every layer at the same positions, so the last result
        is kept and reused while the same (unchanged) positions tensor comes back.
        """
        # An in-place change of the positions bumps their version counter; inference tensors have none,
        # so for them compare the values (one cheap comparison against five operations saved).
        # A rotation made under inference_mode cannot be saved for a later backward pass: key on the mode too.
        key = (pos, None if pos.is_inference() else pos._version, x.dtype, x.dim(), x.device,
               torch.is_inference_mode_enabled())
        memo = getattr(self, "_memo", None)
        if memo is not None and memo[0][0] is pos and memo[0][1:] == key[1:]:
            if key[1] is not None or torch.equal(pos, memo[2]):
                return memo[1]
        heads = pos.dim() == 2 and x.dim() == 4  # (B, T, Dh/2) -> (B, 1, T, Dh/2), shared by all heads
        if x.dtype in (torch.float32, torch.float64):
            rotation = self.complex_rotation(pos, x.dtype)
            rotation = rotation[:, None] if heads else rotation
        else:
            ang = self.angles(pos)  # (T, Dh/2) or (B, T, Dh/2)
            ang = ang[:, None] if heads else ang
            rotation = (ang.cos() * self.magnitude).to(x.dtype), (ang.sin() * self.magnitude).to(x.dtype)
        self._memo = (key, rotation, pos.clone() if key[1] is None else None)
        return rotation

    @staticmethod
    def _check_positions(pos: torch.Tensor, x: torch.Tensor) -> None:
        # Broadcasting would hide a mismatch: one position for T tokens rotates them all alike.
        if pos.shape[-1] != x.shape[-2]:
            raise ValueError(f"positions must have T={x.shape[-2]} entries (one per token of x "
                             f"{tuple(x.shape)}), got {tuple(pos.shape)}")
        if pos.dim() == 2 and x.dim() == 4 and pos.shape[0] not in (1, x.shape[0]):
            raise ValueError(f"positions (B, T) must have B=1 or B={x.shape[0]} like x {tuple(x.shape)}, "
                             f"got {tuple(pos.shape)}")

    def forward(self, x: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Rotate x of shape (B, H, T, Dh) (or (..., T, Dh)); positions are ``offset + arange(T)``
        unless given as (T,) or (B, T)."""
        if not inputs_trusted():
            check_tensor(x, "x", floating=True)
            if x.dim() < 2 or x.shape[-1] != self.d_head:
                raise ValueError(f"RoPE expects (..., T, Dh={self.d_head}), got {tuple(x.shape)}")
        pos = _positions(positions, x.shape[-2], offset, x.device)
        if not inputs_trusted():
            self._check_positions(pos, x)
        rotation = self._rotation(pos, x)
        x_pairs = x.unflatten(-1, (-1, 2))  # (..., T, Dh) -> (..., T, Dh/2, 2)
        if isinstance(rotation, torch.Tensor) and _complex_viewable(x_pairs):
            # Each pair (x0, x1) is the complex number x0 + i x1; multiplying by cos + i sin rotates it:
            # (x0 cos - x1 sin) + i (x0 sin + x1 cos). One multiplication instead of six operations.
            rotated = torch.view_as_real(torch.view_as_complex(x_pairs) * rotation)
        else:
            cos, sin = (rotation.real, rotation.imag) if isinstance(rotation, torch.Tensor) else rotation
            x0, x1 = x_pairs[..., 0], x_pairs[..., 1]
            rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return rotated.flatten(-2)  # (..., T, Dh/2, 2) -> (..., T, Dh)


def _complex_viewable(pairs: torch.Tensor) -> bool:
    """Whether ``torch.view_as_complex`` can view (..., 2) ``pairs`` without a copy (even strides and offset)."""
    return pairs.stride(-1) == 1 and pairs.storage_offset() % 2 == 0 and all(st % 2 == 0 for st in pairs.stride()[:-1])


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes: the geometric sequence 2^(-8/n), 2^(-16/n), ... for n a power of two.

    For other head counts the paper takes the slopes of the closest smaller power of two, p, and fills
    the remaining n - p heads with every other slope of 2p.
    """
    check_positive_int(n_heads, "n_heads")

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    p = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = power_of_two(p) + power_of_two(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes)


def alibi_bias(n_heads: int, t_q: int, t_k: int | None = None, device=None) -> torch.Tensor:
    """The additive ALiBi bias -slope_h * |i - j| for T_q queries over T_k keys.

    Queries are the last T_q positions (aligned bottom-right like the causal mask, so a KV cache works).

    Returns:
        (1, H, T_q, T_k) float32 bias to add to the attention scores.
    """
    t_k = t_q if t_k is None else t_k
    check_positive_int(t_q, "t_q")
    check_positive_int(t_k, "t_k")
    if t_k < t_q:
        raise ValueError(f"alibi_bias needs t_k >= t_q (queries are the last t_q positions), got t_q={t_q}, t_k={t_k}")
    q_pos = torch.arange(t_k - t_q, t_k, device=device)[:, None]
    k_pos = torch.arange(t_k, device=device)[None, :]
    distance = (q_pos - k_pos).abs().float()  # (T_q, T_k)
    bias = -alibi_slopes(n_heads).to(device)[:, None, None] * distance  # (H, T_q, T_k)
    return bias[None]  # (H, T_q, T_k) -> (1, H, T_q, T_k)
