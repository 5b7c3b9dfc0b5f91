"""RoPE frequency scaling for long contexts: Llama 3's per-band rescaling and YaRN.

Glossary: Dh head dimension, theta_i = base^(-2i/Dh) the i-th rotation frequency (i = 0 .. Dh/2 - 1),
lambda_i = 2 pi / theta_i its wavelength in positions, L the context length the model was pretrained for.

Position interpolation (``RotaryEmbedding(scale=s)``) divides every frequency by s. Both methods here
divide only the *slow* frequencies, whose wavelengths are longer than the pretraining context (the model
never saw them turn a full circle), and keep the fast ones, which encode local order:

- ``"llama3"`` (Llama 3.1): lambda_i < L / high_freq_factor: kept; lambda_i > L / low_freq_factor: divided
  by ``factor``; in between, a linear blend in L / lambda_i.
- ``"yarn"`` (Peng et al., 2023): the same idea with a ramp over dimension indices set by ``beta_fast`` and
  ``beta_slow`` (rotations per L positions), plus an *attention factor* 0.1 ln(factor) + 1 that multiplies
  the rotated queries and keys (so the scores grow by its square), as the paper's "temperature".

The functions are written as ``transformers``' ``_compute_llama3_parameters`` and ``_compute_yarn_parameters``
write them, so a loaded checkpoint's frequencies agree to the bit (``tests/layers/test_rope_scaling.py``
compares them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from minitfm._checks import check_choice, check_number, check_positive_int, coerce_dataclass

SCALINGS = ("llama3", "yarn")


@dataclass(frozen=True)
class RopeScaling:
    """How RoPE's frequencies are rescaled for a longer context than the model was pretrained on.

    Args:
        kind: ``"llama3"`` or ``"yarn"``.
        factor: how many times longer the new context is.
        original_max_len: L, the pretraining context.
        low_freq_factor, high_freq_factor: Llama 3's band edges (wavelengths L / low and L / high).
        beta_fast, beta_slow: YaRN's ramp edges, in rotations over L positions.
        attention_factor: YaRN's multiplier of q and k; ``None`` = 0.1 ln(factor) + 1 (or the ratio that
            ``mscale``/``mscale_all_dim`` give, as DeepSeek's configs set them).
        mscale, mscale_all_dim: YaRN's optional terms of the default attention factor.
        truncate: YaRN rounds the ramp's edges to whole dimensions (``True`` in the paper's code).
    """

    kind: str
    factor: float
    original_max_len: int
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: Optional[float] = None
    mscale: Optional[float] = None
    mscale_all_dim: Optional[float] = None
    truncate: bool = True

    def __post_init__(self):
        check_choice(self.kind, "rope_scaling.kind", SCALINGS)
        check_number(self.factor, "rope_scaling.factor", low=0.0, low_open=True)
        check_positive_int(self.original_max_len, "rope_scaling.original_max_len")
        for name in ("low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow"):
            check_number(getattr(self, name), f"rope_scaling.{name}", low=0.0, low_open=True)
        for name in ("attention_factor", "mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                check_number(getattr(self, name), f"rope_scaling.{name}", low=0.0, low_open=True)
        if self.kind == "llama3" and self.low_freq_factor >= self.high_freq_factor:
            raise ValueError(f"rope_scaling: llama3 needs low_freq_factor < high_freq_factor, got "
                             f"{self.low_freq_factor} and {self.high_freq_factor}")
        if not isinstance(self.truncate, bool):
            raise TypeError(f"rope_scaling.truncate must be a bool, got {type(self.truncate).__name__}")

    @classmethod
    def coerce(cls, value) -> "RopeScaling | None":
        """``value`` as a RopeScaling: itself, ``None``, or the dict ``dataclasses.asdict`` made of one."""
        return coerce_dataclass(cls, value, "rope_scaling")

    def attention_scale(self) -> float:
        """The factor that multiplies rotated queries and keys: 1 for llama3, YaRN's temperature for yarn."""
        if self.kind != "yarn":
            return 1.0
        if self.attention_factor is not None:
            return float(self.attention_factor)

        def m(scale, mscale=1.0):
            return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

        if self.mscale and self.mscale_all_dim:
            return float(m(self.factor, self.mscale) / m(self.factor, self.mscale_all_dim))
        return m(self.factor)


def llama3_inv_freq(inv_freq: torch.Tensor, s: RopeScaling) -> torch.Tensor:
    """(Dh/2,) frequencies -> Llama 3's: slow ones divided by ``factor``, fast ones kept, a blend between."""
    low_wavelen, high_wavelen = s.original_max_len / s.low_freq_factor, s.original_max_len / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (s.original_max_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def yarn_inv_freq(d_head: int, base: float, s: RopeScaling) -> torch.Tensor:
    """(Dh/2,) YaRN frequencies: interpolated (divided by ``factor``) below the ramp, kept above it."""
    pos_freqs = base ** (torch.arange(0, d_head, 2).to(dtype=torch.float) / d_head)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (s.factor * pos_freqs)

    def correction_dim(rotations):  # the dimension whose wavelength turns `rotations` times over L positions
        return (d_head * math.log(s.original_max_len / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_head - 1)
    if low == high:
        high += 0.001  # no zero-width ramp
    ramp = torch.clamp((torch.arange(d_head // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    keep = 1 - ramp  # 1: extrapolate (keep theta_i), 0: interpolate
    return interpolation * (1 - keep) + extrapolation * keep


def scaled_inv_freq(d_head: int, base: float, scaling: RopeScaling) -> torch.Tensor:
    """The (Dh/2,) float32 frequencies of RoPE with ``scaling``, computed as the published implementations do."""
    if scaling.kind == "yarn":
        return yarn_inv_freq(d_head, base, scaling)
    exponents = torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head
    return llama3_inv_freq(1.0 / (base ** exponents), scaling)
