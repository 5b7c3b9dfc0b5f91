"""Multi-head latent attention (MLA, DeepSeek-V2 and V3) and its cache of compressed latents.

Glossary: B batch, T_q queries, T_k keys (cached ones included), D d_model, H heads, R the kv latent's
width (``kv_lora_rank``), R_q the query latent's width (``q_lora_rank``), Dn and Dr a query/key head's
width without and with RoPE (``qk_nope_head_dim``, ``qk_rope_head_dim``), Dv a value head's width.

A KV cache of multi-head attention keeps 2 H Dh numbers per token and layer. MLA keeps R + Dr
(DeepSeek-V2 report, Liu et al. 2024, arXiv 2405.04434, section 2.1):

- ``kv_down_proj`` compresses each token to a latent c (R numbers, RMS-normed) and one RoPE key shared
  by all heads (Dr numbers, "decoupled RoPE"). Only these two are cached.
- ``kv_up_proj`` expands c into every head's key part without RoPE (Dn) and value (Dv). A head's key
  is that part followed by the shared RoPE key; the query has the same two parts.
- Queries go through a latent of their own (``q_lora_rank``, V3) or one projection (``None``, V2-Lite).

RoPE cannot sit on the latent: a rotation between the up-projection and the query would depend on the
key's position, and could not be folded into the weights. With ``absorb=True`` it is folded: the key
up-projection moves to the query side (q_h W_UK,h is a query over c) and the value up-projection to
the output side, so heads attend to the cached latents themselves and no per-head key or value is
ever built (the report's "absorbed" inference). Both paths compute the same function.

RoPE pairing: DeepSeek's checkpoints rotate adjacent pairs (``rope_layout="interleaved"``, the
library's convention; transformers' ``rope_interleave=True``); ``"halves"`` rotates (x_i, x_{i+Dr/2}).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from minitfm._checks import check_choice, check_module_input, check_positive_int, check_tensor
from minitfm.layers.attention import IMPLEMENTATIONS, scaled_dot_product_attention
from minitfm.layers.kv_cache import bytes_per_element, kv_cache_bytes
from minitfm.layers.masks import causal_mask
from minitfm.layers.norms import RMSNorm
from minitfm.layers.positional import RotaryEmbedding
from minitfm.layers.rope_scaling import RopeScaling

ROPE_LAYOUTS = ("interleaved", "halves")
# transformers' DeepseekV3Attention parameter names -> this module's (what a checkpoint loader renames).
DEEPSEEK_NAMES = {"q_proj": "q_proj", "q_a_proj": "q_down_proj", "q_a_layernorm": "q_norm",
                  "q_b_proj": "q_up_proj", "kv_a_proj_with_mqa": "kv_down_proj", "kv_a_layernorm": "kv_norm",
                  "kv_b_proj": "kv_up_proj", "o_proj": "out_proj"}


def _number_bytes(bytes_per_number) -> int:
    """A count of bytes (checked under its own name) or a dtype (:func:`~minitfm.layers.kv_cache.bytes_per_element`)."""
    if isinstance(bytes_per_number, int):
        check_positive_int(bytes_per_number, "bytes_per_number")
    return bytes_per_element(bytes_per_number)


def mla_cache_bytes_per_token(kv_lora_rank: int, qk_rope_head_dim: int,
                              bytes_per_number: int | torch.dtype | str = 2) -> int:
    """Bytes one token occupies in one layer's MLA cache: (R + Dr) numbers (2 bytes each in bf16; a dtype works too)."""
    for name, value in (("kv_lora_rank", kv_lora_rank), ("qk_rope_head_dim", qk_rope_head_dim)):
        check_positive_int(value, name)
    return (kv_lora_rank + qk_rope_head_dim) * _number_bytes(bytes_per_number)


def gqa_cache_bytes_per_token(n_kv_heads: int, d_head: int, bytes_per_number: int | torch.dtype | str = 2) -> int:
    """The same for (grouped-query) multi-head attention: a key and a value per K/V head, 2 H_kv Dh numbers
    (:func:`~minitfm.layers.kv_cache.kv_cache_bytes` of one layer and one token)."""
    return kv_cache_bytes(1, n_kv_heads, 1, d_head, dtype=_number_bytes(bytes_per_number))


def mla_softmax_scale(qk_head_dim: int, scaling: RopeScaling | None = None) -> float:
    """The scores' multiplier: 1 / sqrt(Dn + Dr), times mscale^2 under YaRN with ``mscale_all_dim``, where
    mscale = 0.1 mscale_all_dim ln(factor) + 1 (DeepSeek's reference code; transformers' ``yarn_apply_mscale``)."""
    check_positive_int(qk_head_dim, "qk_head_dim")
    scale = qk_head_dim ** -0.5
    if scaling is not None and scaling.mscale_all_dim and scaling.factor > 1:
        mscale = 0.1 * scaling.mscale_all_dim * math.log(scaling.factor) + 1.0
        scale = scale * mscale * mscale
    return scale


class LatentKVCache:
    """Preallocated buffers for the latents (B, T_max, R) and RoPE keys (B, T_max, Dr), and a length pointer.

    Nothing per head is stored: that is MLA's saving. ``update(latent, k_rope)`` writes at ``length`` and
    returns the valid prefixes (B, length, R) and (B, length, Dr).
    """

    def __init__(self, batch_size: int, max_seq_len: int, kv_lora_rank: int, qk_rope_head_dim: int,
                 dtype: torch.dtype = torch.float32, device=None):
        for name, value in (("batch_size", batch_size), ("max_seq_len", max_seq_len),
                            ("kv_lora_rank", kv_lora_rank), ("qk_rope_head_dim", qk_rope_head_dim)):
            check_positive_int(value, name)
        self.latent = torch.zeros(batch_size, max_seq_len, kv_lora_rank, dtype=dtype, device=device)
        self.k_rope = torch.zeros(batch_size, max_seq_len, qk_rope_head_dim, dtype=dtype, device=device)
        self.length = 0

    @property
    def max_seq_len(self) -> int:
        return self.latent.shape[1]

    @property
    def nbytes(self) -> int:
        """The bytes the buffers hold (all T_max positions)."""
        return self.latent.nbytes + self.k_rope.nbytes

    def bytes_per_token(self) -> int:
        """The buffers' bytes per position, measured from the tensors (compare :func:`mla_cache_bytes_per_token`)."""
        return self.nbytes // (self.latent.shape[0] * self.max_seq_len)

    def update(self, latent: torch.Tensor, k_rope: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (B, T_new, R) latents and (B, T_new, Dr) RoPE keys; return all (B, length, .) so far."""
        b, _, r = self.latent.shape
        for name, t, width in (("latent", latent, r), ("k_rope", k_rope, self.k_rope.shape[2])):
            check_tensor(t, name, ndim=3, floating=True)
            if (t.shape[0], t.shape[2]) != (b, width):
                raise ValueError(f"cache holds {name} (B, T, {width}) with B={b}, got {tuple(t.shape)}")
            if t.dtype != self.latent.dtype:  # writing would round silently
                raise TypeError(f"the cache holds {self.latent.dtype}, got {name} {t.dtype}; build it with the "
                                "module's dtype or cast")
        if latent.shape[1] != k_rope.shape[1]:
            raise ValueError(f"latent and k_rope must add the same number of steps, got {latent.shape[1]} "
                             f"and {k_rope.shape[1]}")
        end = self.length + latent.shape[1]
        if end > self.max_seq_len:
            raise ValueError(f"latent cache overflow: it holds {self.max_seq_len} positions, {self.length} are "
                             f"used and {latent.shape[1]} more were added; allocate a larger max_seq_len")
        self.latent.narrow(1, self.length, latent.shape[1]).copy_(latent)
        self.k_rope.narrow(1, self.length, k_rope.shape[1]).copy_(k_rope)
        self.length = end
        return self.latent.narrow(1, 0, end), self.k_rope.narrow(1, 0, end)


class LatentAttention(nn.Module):
    """Multi-head latent attention, causal self-attention with an optional :class:`LatentKVCache`.

    Args:
        d_model: D.
        n_heads: H.
        kv_lora_rank: R, the width of the cached kv latent (512 in DeepSeek-V2/V3).
        qk_nope_head_dim, qk_rope_head_dim: Dn and Dr (128 and 64 in V3); Dr must be even.
        v_head_dim: Dv (128 in V3).
        q_lora_rank: R_q, the query latent's width (1536 in V3); ``None``: one projection D -> H (Dn + Dr).
        bias: biases on the down-projections and ``out_proj`` (transformers' ``attention_bias``); the
            up-projections never have one, which is what lets ``absorb`` fold them.
        norm_eps: the RMSNorms' epsilon on the latents.
        rope_base, rope_scaling: the RoPE of the Dr part; a YaRN scaling also sets the softmax scale
            (:func:`mla_softmax_scale`).
        rope_layout: ``"interleaved"`` (adjacent pairs, DeepSeek's) or ``"halves"``.
        absorb: attend over the latents with the up-projections folded into the query and output.
        impl: ``"manual"`` or ``"fused"``, see :func:`minitfm.scaled_dot_product_attention`.
    """

    def __init__(self, d_model: int, n_heads: int, *, kv_lora_rank: int, qk_nope_head_dim: int,
                 qk_rope_head_dim: int, v_head_dim: int, q_lora_rank: int | None = None, bias: bool = False,
                 norm_eps: float = 1e-6, rope_base: float = 10000.0, rope_scaling: RopeScaling | None = None,
                 rope_layout: str = "interleaved", absorb: bool = False, impl: str = "manual"):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("kv_lora_rank", kv_lora_rank),
                            ("qk_nope_head_dim", qk_nope_head_dim), ("qk_rope_head_dim", qk_rope_head_dim),
                            ("v_head_dim", v_head_dim)):
            check_positive_int(value, name)
        if q_lora_rank is not None:
            check_positive_int(q_lora_rank, "q_lora_rank")
        if qk_rope_head_dim % 2:
            raise ValueError(f"RoPE rotates pairs, so qk_rope_head_dim must be even, got {qk_rope_head_dim}")
        check_choice(rope_layout, "rope_layout", ROPE_LAYOUTS)
        check_choice(impl, "impl", IMPLEMENTATIONS)
        for name, value in (("bias", bias), ("absorb", absorb)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        self.d_model, self.n_heads, self.q_lora_rank, self.kv_lora_rank = d_model, n_heads, q_lora_rank, kv_lora_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.rope_layout, self.absorb, self.impl = rope_layout, absorb, impl
        qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        if q_lora_rank is None:  # DeepSeek-V2-Lite
            self.q_proj = nn.Linear(d_model, n_heads * qk_head_dim, bias=False)
        else:  # D -> R_q -> H (Dn + Dr), with a norm on the query latent
            self.q_down_proj = nn.Linear(d_model, q_lora_rank, bias=bias)
            self.q_norm = RMSNorm(q_lora_rank, eps=norm_eps)
            self.q_up_proj = nn.Linear(q_lora_rank, n_heads * qk_head_dim, bias=False)
        self.kv_down_proj = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=bias)  # latent | RoPE key
        self.kv_norm = RMSNorm(kv_lora_rank, eps=norm_eps)
        self.kv_up_proj = nn.Linear(kv_lora_rank, n_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.out_proj = nn.Linear(n_heads * v_head_dim, d_model, bias=bias)
        self.rope = RotaryEmbedding(qk_rope_head_dim, base=rope_base, scaling=rope_scaling)
        self.scale = mla_softmax_scale(qk_head_dim, rope_scaling)

    def new_cache(self, batch_size: int, max_seq_len: int, dtype: torch.dtype | None = None, device=None):
        """An empty :class:`LatentKVCache` sized for this module (its weights' dtype and device by default)."""
        weight = self.kv_down_proj.weight
        return LatentKVCache(batch_size, max_seq_len, self.kv_lora_rank, self.qk_rope_head_dim,
                             dtype=weight.dtype if dtype is None else dtype,
                             device=weight.device if device is None else device)

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor | None, offset: int) -> torch.Tensor:
        """RoPE on (..., T, Dr). ``"halves"`` pairs x_i with x_{i+Dr/2}: reorder so those pairs are adjacent;
        q and k are reordered alike, so their dot products are unchanged."""
        if self.rope_layout == "halves":
            half = self.qk_rope_head_dim // 2
            order = torch.arange(half, device=x.device)
            x = x[..., torch.stack((order, order + half), dim=-1).flatten()]  # [x0, x_half, x1, x_half+1, ...]
        return self.rope(x, offset=offset, positions=positions)

    def _queries(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T_q, D) -> the queries' parts without and with RoPE, (B, H, T_q, Dn) and (B, H, T_q, Dr)."""
        q = self.q_proj(x) if self.q_lora_rank is None else self.q_up_proj(self.q_norm(self.q_down_proj(x)))
        q = q.view(x.shape[0], x.shape[1], self.n_heads, -1).transpose(1, 2)  # (B, T_q, H(Dn+Dr)) -> (B, H, T_q, Dn+Dr)
        return q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

    def _mask(self, key_padding_mask, b: int, t_q: int, t_k: int, device) -> torch.Tensor:
        """The causal mask (bottom-right: the queries are the last T_q positions) and the padding mask, (B, 1, T_q, T_k)."""
        mask = causal_mask(t_q, t_k, device=device)[None]  # (1, 1, T_q, T_k)
        if key_padding_mask is None:
            return mask
        check_tensor(key_padding_mask, "key_padding_mask", ndim=2)
        if key_padding_mask.dtype != torch.bool:
            raise TypeError(f"key_padding_mask must be boolean (True = a real token), got dtype {key_padding_mask.dtype}")
        if tuple(key_padding_mask.shape) != (b, t_k):
            raise ValueError(f"key_padding_mask must have shape (B, T_k) = ({b}, {t_k}) (T_k counts cached tokens), "
                             f"got {tuple(key_padding_mask.shape)}")
        return mask & key_padding_mask[:, None, None, :].to(device)

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None, cache: LatentKVCache | None = None,
                need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Causal self-attention of ``x`` (B, T_q, D), after the cached tokens if a cache is given.

        Args:
            positions: (T_q,) or (B, T_q) RoPE positions; default ``cache.length + arange(T_q)``.
            key_padding_mask: (B, T_k) boolean, ``True`` = a real token, over cached and new tokens.
            cache: a :class:`LatentKVCache` (see :meth:`new_cache`); the new latents are appended to it.
            need_weights: also return the (B, H, T_q, T_k) weights (manual path).

        Returns:
            ``(out, weights)``: out (B, T_q, D); weights or ``None``.
        """
        check_module_input(x, "x", self, self.d_model, ndim=3)
        if cache is not None and not isinstance(cache, LatentKVCache):
            raise TypeError(f"cache must be a LatentKVCache (LatentAttention.new_cache), got {type(cache).__name__}")
        b, t_q, _ = x.shape
        offset = 0 if cache is None else cache.length
        q_nope, q_rope = self._queries(x)
        latent, k_rope = self.kv_down_proj(x).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent = self.kv_norm(latent)  # (B, T_q, R): the norm sits before the cache, which stores its output
        q_rope = self._rotate(q_rope, positions, offset)  # (B, H, T_q, Dr)
        k_rope = self._rotate(k_rope, positions, offset)  # (B, T_q, Dr): one RoPE key per token, all heads
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, T_k, R), (B, T_k, Dr)
        mask = self._mask(key_padding_mask, b, t_q, latent.shape[1], x.device)
        impl = "manual" if need_weights else self.impl
        attend = self._absorbed if self.absorb else self._expanded
        out, weights = attend(q_nope, q_rope, latent, k_rope, mask, impl)  # (B, H, T_q, Dv)
        out = out.transpose(1, 2).reshape(b, t_q, -1)  # (B, H, T_q, Dv) -> (B, T_q, H Dv)
        return self.out_proj(out), weights if need_weights else None

    def _expanded(self, q_nope, q_rope, latent, k_rope, mask, impl):
        """The plain path: expand every cached latent into H keys and values, then attend per head."""
        b, t_k, _ = latent.shape
        kv = self.kv_up_proj(latent).view(b, t_k, self.n_heads, -1).transpose(1, 2)  # (B, H, T_k, Dn+Dv)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k_rope = k_rope[:, None].expand(-1, self.n_heads, -1, -1)  # (B, T_k, Dr) -> (B, H, T_k, Dr), shared
        q = torch.cat((q_nope, q_rope), dim=-1)  # (B, H, T_q, Dn + Dr)
        k = torch.cat((k_nope, k_rope), dim=-1)
        return scaled_dot_product_attention(q, k, v, mask=mask, impl=impl, scale=self.scale)

    def _absorbed(self, q_nope, q_rope, latent, k_rope, mask, impl):
        """The absorbed path: q_nope . (W_UK c) = (W_UK^T q_nope) . c, and sum_j w_j W_UV c_j = W_UV sum_j w_j c_j.
        Attention runs as one shared key/value "head" of width R + Dr (keys) and R (values)."""
        w = self.kv_up_proj.weight.view(self.n_heads, self.qk_nope_head_dim + self.v_head_dim, self.kv_lora_rank)
        w_uk, w_uv = w.split([self.qk_nope_head_dim, self.v_head_dim], dim=1)  # (H, Dn, R), (H, Dv, R)
        q_latent = torch.einsum("bhqn,hnr->bhqr", q_nope, w_uk)  # (B, H, T_q, Dn) -> (B, H, T_q, R)
        q = torch.cat((q_latent, q_rope), dim=-1)  # (B, H, T_q, R + Dr)
        k = torch.cat((latent, k_rope), dim=-1)[:, None].expand(-1, self.n_heads, -1, -1)  # (B, H, T_k, R + Dr), a view
        v = latent[:, None].expand(-1, self.n_heads, -1, -1)  # (B, H, T_k, R)
        out_latent, weights = scaled_dot_product_attention(q, k, v, mask=mask, impl=impl, scale=self.scale)
        return torch.einsum("bhqr,hvr->bhqv", out_latent, w_uv), weights  # (B, H, T_q, R) -> (B, H, T_q, Dv)
