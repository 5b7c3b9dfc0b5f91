"""The lean decode step's pieces for one layer (:mod:`minitfm.generation.lean_decode` is the step itself).

A :class:`_Layer` is one ``DecoderBlock`` arranged for a decode step: q, k and v (and a gated FFN's gate and up)
copied into one (in, out) matrix each, a pre-LN RMSNorm's gain folded into the product after it, the other
matrices views of the module's own; :class:`_Norm` computes a norm on (B, D) rows with the module's parameters as
they are now; :func:`_signature` is what a copied tensor is compared by at every call, so a decoder knows when the
model it copied from has changed.

Glossary: B batch, D d_model, H query heads, H_kv key/value heads, Dh head dimension, F FFN hidden size.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitfm.layers.blocks import DecoderBlock
from minitfm.layers.feedforward import GeGLU, SwiGLU
from minitfm.layers.norms import OffsetRMSNorm, RMSNorm

_PROBES: dict = {}  # (in, dtype, device) -> the fixed random (in,) probe of the copied matrices' signatures


def _signature(t: torch.Tensor) -> torch.Tensor:
    """What a copied tensor is compared by at every call: a vector itself (a copy), a (out, in) matrix as its product
    with a fixed random (in,) probe, one read of the matrix (a matrix-vector product streams it; with two probes,
    MKL's path was 4x slower): a write that moves, swaps or changes any weight changes some row's product (unless it
    rounds to the same float32 number)."""
    t = t.detach()
    if t.dim() < 2:
        return t.clone()
    key = (t.shape[-1], t.dtype, t.device)
    if key not in _PROBES:  # a private generator: the caller's random stream is left alone
        probe = torch.randn(t.shape[-1], generator=torch.Generator().manual_seed(12345), dtype=torch.float64)
        _PROBES[key] = probe.to(dtype=t.dtype, device=t.device)
    return torch.mv(t.reshape(-1, t.shape[-1]), _PROBES[key])

def _stacked(*linears: nn.Linear, gain: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One (in, sum of outs) matrix (and bias) for several nn.Linear that read the same input: ``x @ W`` then
    computes all of their outputs at once; row i times ``gain[i]`` if given (a norm's gain, folded in). A copy, in
    (in, out) layout, the transpose of nn.Linear's (out, in): it streams down W's rows into an output that stays in
    the cache (on a 2-core EPYC, one thread, about 20 GB/s against 15 GB/s for ``F.linear``). One nn.Linear without
    a gain is not copied: its own weight, viewed transposed, and its own bias."""
    if len(linears) == 1 and gain is None:
        return linears[0].weight.t(), linears[0].bias  # views of the module's tensors: nothing copied
    weight = torch.cat([lin.weight.t() for lin in linears], dim=1)  # (in, sum of outs), contiguous
    if gain is not None:
        weight.mul_(gain[:, None])  # norm(x) @ W = (x * s * g) @ W = s * (x @ (g W)), s = 1 / rms(x) per row
    if all(lin.bias is None for lin in linears):
        return weight, None
    bias = torch.cat([lin.weight.new_zeros(lin.out_features) if lin.bias is None else lin.bias for lin in linears])
    return weight, bias


def _project(x: torch.Tensor, weight_in_out: torch.Tensor, bias: torch.Tensor | None,
             residual: torch.Tensor | None = None) -> torch.Tensor:
    """(B, in) @ (in, out) (+ bias) (+ residual, added by the product itself) -> (B, out)."""
    if residual is None:
        return torch.mm(x, weight_in_out) if bias is None else torch.addmm(bias, x, weight_in_out)
    out = torch.addmm(residual, x, weight_in_out)  # residual + x @ W: one operation fewer than a product and a sum
    return out if bias is None else out + bias


class _Norm:
    """``norm`` (LayerNorm, RMSNorm or Identity) on (B, D) rows, with the module's ``eps`` and parameters now."""

    def __init__(self, norm: nn.Module):
        self.module, self.kind, self.rms = norm, type(norm), type(norm) in (RMSNorm, OffsetRMSNorm)
        self.weight, self.bias = getattr(norm, "weight", None), getattr(norm, "bias", None)
        self.eps = None  # RMSNorm's eps, and as (1, 1, 1) and (1, 1) tensors: remade when the module's changes

    def mean_square(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, 1, W) rows -> (N, 1, 1) mean(x^2) + eps as one batched product eps + (x . x) / W ((1, W) -> (1, 1)): the
        cheapest for one token per row (mean() and F.rms_norm take several operations); in x's dtype, as RMSNorm."""
        if self.module.eps != self.eps:
            self.eps = self.module.eps
            self.eps_tensor = torch.full((1, 1, 1), self.eps, dtype=self.weight.dtype, device=self.weight.device)
            self.eps_row = self.eps_tensor[0]
        if rows.dim() == 2:
            return torch.addmm(self.eps_row, rows, rows.t(), alpha=1.0 / rows.shape[-1])
        return torch.baddbmm(self.eps_tensor, rows, rows.mT, alpha=1.0 / rows.shape[-1])

    def inv_rms(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D) -> (B, 1): 1 / sqrt(mean(x^2) + eps), from a (1, D) row or (B, 1, D) rows."""
        return (self.mean_square(x) if x.shape[0] == 1 else self.mean_square(x.unsqueeze(1)).view(-1, 1)).rsqrt_()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        kind = self.kind
        if self.rms:
            return x * self.inv_rms(x) * (self.weight if kind is RMSNorm else 1.0 + self.weight)
        if kind is nn.LayerNorm:
            return F.layer_norm(x, self.module.normalized_shape, self.weight, self.bias, self.module.eps)
        return x  # nn.Identity: the final "norm" of a Post-LN model, the input "norm" of OLMo 2's sublayers

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """A QK-norm (an RMSNorm) over the last axis of x, computed as the module computes it."""
        normed = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.module.eps)
        return normed * (self.weight if self.kind is RMSNorm else 1.0 + self.weight)


class _Layer:
    """One DecoderBlock arranged for a decode step: q, k, v (and gate, up) copied and stacked, a pre-LN RMSNorm's gain
    folded into the product after it (for ``norm_first`` as it was then); the other matrices are views of the
    module's own, and the rest is read from the modules every step. ``sources`` are the parameters copied from, and
    ``signatures`` what they were when copied (:func:`_signature`)."""

    def __init__(self, block: DecoderBlock, window: int | None, rope: str | None):
        self.block, self.ffn, self.window, self.rope = block, block.ffn, window, rope  # rope: "global", "local", None
        self.norm_first = block.norm_first
        self.attn_norm, self.ffn_norm = _Norm(block.attn_norm), _Norm(block.ffn_norm)
        self.attn_out_norm, self.ffn_out_norm = (None if n is None else _Norm(n)
                                                 for n in (block.attn_out_norm, block.ffn_out_norm))
        attn, ffn = block.self_attn, block.ffn
        self.attn, self.qk_norm = attn, attn.qk_norm  # scale and softcap are read from attn at every step
        self.q_norm, self.k_norm = (None if n is None else _Norm(n) for n in (attn.q_norm, attn.k_norm))
        self.qk_gain = None  # QK-norm per head: (H + H_kv, 1, Dh), each query head's gain then each key head's
        if attn.qk_norm == "head":
            self.qk_gain = torch.cat([attn.q_norm.gain().expand(attn.n_heads, -1),
                                      attn.k_norm.gain().expand(attn.n_kv_heads, -1)]).unsqueeze(1)
        gains = [n.module.gain() if self.norm_first and n.rms else None for n in (self.attn_norm, self.ffn_norm)]
        qkv = (attn.qkv_proj,) if attn.fused_qkv else (attn.q_proj, attn.k_proj, attn.v_proj)  # the same stacked rows
        self.qkv_weight, self.qkv_bias = _stacked(*qkv, gain=gains[0])
        self.out_weight, self.out_bias = _stacked(attn.out_proj)  # qkv: (D, (H + 2 H_kv) Dh), out: (H Dh, D)
        self.swiglu, self.d_ff = type(ffn) in (SwiGLU, GeGLU), ffn.down_proj.weight.shape[1]  # gated: gate, then up
        self.up_weight, self.up_bias = _stacked(*(ffn.gate_proj, ffn.up_proj) if self.swiglu else (ffn.up_proj,),
                                                gain=gains[1])
        self.down_weight, self.down_bias = _stacked(ffn.down_proj)  # (F, D)
        folded = [n.module for n, g in zip((self.attn_norm, self.ffn_norm), gains) if g is not None]
        ups = (ffn.gate_proj, ffn.up_proj) if self.swiglu else (ffn.up_proj,) if gains[1] is not None else ()
        linears = qkv + ups
        norms = folded + ([attn.q_norm, attn.k_norm] if self.qk_gain is not None else [])
        self.sources = [t for m in linears + tuple(norms) for t in (m.weight, getattr(m, "bias", None)) if t is not None]
        self.signatures = [_signature(t) for t in self.sources]
        stacked = () if len(qkv) == 1 and gains[0] is None else (self.qkv_weight, self.qkv_bias)  # else views
        self.copies = [t for t in stacked + (self.qk_gain,) + (
            (self.up_weight, self.up_bias) if ups else ()) if t is not None]

    def current(self) -> bool:
        """Every copied-from parameter still holds what it held at the copy (see :func:`_signature`)."""
        return all(torch.equal(_signature(t), s) for t, s in zip(self.sources, self.signatures))

    def sublayer_in(self, norm: _Norm, x: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor:
        """(B, D) residual stream -> a sublayer's first product: of norm(x) (pre-LN) or x (post-LN); with an
        RMSNorm's gain folded into ``weight``, the product comes first and 1 / rms(x) scales its rows after."""
        if not (self.norm_first and norm.rms):
            return _project(norm(x) if self.norm_first else x, weight, bias)
        out = torch.mm(x, weight)
        return out.mul_(norm.inv_rms(x)) if bias is None else torch.addcmul(bias, out, norm.inv_rms(x))

    def feed_forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """(B, D) -> (B, D): the block's FFN (gated, or the MLP with its module's activation now) (+ residual)."""
        up = self.sublayer_in(self.ffn_norm, x, self.up_weight, self.up_bias)
        if self.swiglu:
            gate, up = up.narrow(1, 0, self.d_ff), up.narrow(1, self.d_ff, self.d_ff)  # (B, 2F) -> 2 x (B, F)
            up = self.ffn.gate(gate).mul_(up)  # silu (SwiGLU) or GELU (GeGLU), as the module names it
        else:
            up = self.ffn.act(up)  # reads the module's activation now
        return _project(up, self.down_weight, self.down_bias, residual)
