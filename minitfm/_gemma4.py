"""Gemma 4's decoder (private to ``minitfm``; :class:`Gemma4LM` is what :mod:`minitfm.pretrained` loads for
``config.gemma4``). Gemma 3's layers (sandwich norms, a per-head QK-norm, local and global layers, embeddings times
sqrt(D), GeGLU) with what Gemma 4 adds:

- scores are not divided by sqrt(Dh) (``attn_scale=1``), and the values pass an RMSNorm without weights;
- the global (full-attention) layers have heads of their own width and K/V head count, a proportional RoPE that
  turns only the first ``global_rope_pairs`` frequencies of base^(-2i/Dh) (the others stay still), and with
  ``k_eq_v`` no value projection: the values are the keys before their norm and RoPE;
- per-layer inputs (PLE): a second embedding table gives every token P numbers per layer, mixed with a projection
  of its embedding; after its FFN, layer i adds out(gelu(gate(x)) * its P numbers), normalised;
- the last ``kv_shared_layers`` layers compute no keys or values: they reuse those of the last earlier layer of
  their kind (sliding or global), whose cache serves both (such a layer's FFN may be twice as wide);
- every layer's output is multiplied by a stored ``layer_scalar``;
- with ``experts`` (the 26B A4B), a mixture of GeGLU experts beside every FFN, read from the layer's input.

Glossary: B batch, T new tokens, P tokens already cached, D d_model, H heads, L layers.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from minitfm._checks import trusted_inputs
from minitfm._decoder_masks import mask_keys
from minitfm.config import ModelConfig
from minitfm.layers.attention import scaled_dot_product_attention
from minitfm.layers.blocks import LayerCache
from minitfm.layers.feedforward import make_ffn
from minitfm.layers.kv_cache import KVCache, SlidingKVCache, kv_cache_bytes
from minitfm.layers.masks import causal_mask
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import RMSNorm
from minitfm.layers.positional import RotaryEmbedding
from minitfm.models import DecoderOnlyLM


class ProportionalRope(RotaryEmbedding):
    """RoPE over a head of ``d_head`` whose first ``pairs`` frequencies are base^(-2i/Dh) / scale and the rest 0
    (transformers' ``rope_type="proportional"``): a pair at frequency 0 is never turned."""

    pairs = None  # None: every pair turns (the plain RoPE)

    def __init__(self, d_head: int, pairs: int | None, base: float, scale: float = 1.0):
        super().__init__(d_head, base, scale)
        self.pairs = pairs
        self._refresh_inv_freq()

    def float32_inv_freq(self) -> torch.Tensor:
        turned = super().float32_inv_freq() if self.pairs is None else \
            1.0 / (self.base ** (torch.arange(0, 2 * self.pairs, 2, dtype=torch.int64).float() / self.d_head))
        still = torch.zeros(self.d_head // 2 - turned.numel())
        return turned if self.pairs is None else torch.cat([turned, still]) / self.scale


def layer_heads(c: ModelConfig, i: int) -> tuple[int, int, bool]:
    """(Dh, H_kv, values are the keys) of layer ``i``: the global layers' own, or the config's."""
    g = c.gemma4
    if c.layer_window(i) is not None:
        return c.d_head, c.n_kv_heads, False
    return g.global_head_dim, g.global_kv_heads or c.n_kv_heads, g.k_eq_v


def shares_kv(c: ModelConfig, i: int) -> bool:
    """True if layer ``i`` reuses the keys and values of an earlier layer (one of the last ``kv_shared_layers``)."""
    return i >= c.n_layers - c.gemma4.kv_shared_layers


def _weightless_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / rms(x) over the last axis, computed in float32 for float16/bfloat16 (as transformers computes it)."""
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)


class Gemma4Attention(MultiHeadAttention):
    """Gemma 4's self-attention: q/k norms per head, weightless v-norm, no k/v of its own when ``shared``."""

    def __init__(self, c: ModelConfig, i: int):
        d_head, kv_heads, k_eq_v = layer_heads(c, i)
        super().__init__(c.d_model, c.n_heads, kv_heads, bias=False, impl=c.attn_impl, d_head=d_head, qk_norm="head",
                         norm_eps=c.norm_eps, scale=c.attn_scale)
        if shares_kv(c, i):
            self.k_proj = self.v_proj = self.k_norm = None
        elif k_eq_v:
            self.v_proj = None

    def forward(self, x, *, mask=None, rope=None, positions=None, cache=None, shared=None, kind=None):
        """``shared[kind]``: the (k, v) of the last layer of this kind that computed them (written, or read)."""
        q = self.rotate(rope, self.project(x, self.q_proj, self.q_norm, self.n_heads), 0, positions)
        if self.k_proj is None:
            k, v = shared[kind]
        else:
            raw = self.split_heads(self.k_proj(x), self.n_kv_heads)  # (B, H_kv, T, Dh)
            v = _weightless_rms(raw if self.v_proj is None else self.split_heads(self.v_proj(x), self.n_kv_heads),
                                self.norm_eps)
            k = self.rotate(rope, self.k_norm(raw), 0, positions)
            if cache is not None:
                k, v = cache.update(k, v)
            shared[kind] = k, v
        if mask is not None and k.shape[-2] < mask.shape[-1]:  # a bounded cache kept only the latest keys
            mask = mask[..., -k.shape[-2]:]
        if self.n_kv_heads != self.n_heads:
            k, v = (t.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1) for t in (k, v))
        scale = self.d_head ** -0.5 if self.scale is None else self.scale
        out, _ = scaled_dot_product_attention(q, k, v, mask=mask, impl="fused" if cache is not None else self.impl,
                                              scale=scale)
        return self.out_proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))


class Gemma4Experts(nn.Module):
    """E GeGLU experts beside a layer's FFN: a router over the weightless-normed input times ``scale`` / sqrt(D) picks
    k, weighted by their softmax probabilities renormalised over the k, times a learned ``per_expert_scale``; the
    experts read the input through ``norm`` and their sum passes ``out_norm``."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        g, d = c.gemma4, c.d_model
        self.top_k, self.eps = g.top_k, c.norm_eps
        self.scale, self.per_expert_scale = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(g.experts))
        self.proj = nn.Linear(d, g.experts, bias=False)
        self.gate_up_proj = nn.Parameter(torch.empty(g.experts, 2 * g.d_expert, d))  # (E, 2F, D): gate rows, up rows
        self.down_proj = nn.Parameter(torch.empty(g.experts, d, g.d_expert))  # (E, D, F)
        nn.init.normal_(self.gate_up_proj, std=d ** -0.5)
        nn.init.normal_(self.down_proj, std=g.d_expert ** -0.5)
        self.norm, self.out_norm = RMSNorm(d, eps=c.norm_eps), RMSNorm(d, eps=c.norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) the layer's input (the residual stream before the FFN's norm) -> (B, T, D)."""
        flat = x.reshape(-1, x.shape[-1])  # (B T, D)
        scores = self.proj(_weightless_rms(flat, self.eps) * self.scale * x.shape[-1] ** -0.5)
        weights, chosen = torch.softmax(scores, dim=-1, dtype=torch.float32).topk(self.top_k, dim=-1)  # (B T, k)
        weights = weights / weights.sum(dim=-1, keepdim=True) * self.per_expert_scale[chosen]
        h, out = self.norm(flat), torch.zeros_like(flat)
        for e in chosen.unique().tolist():
            rows, slot = torch.where(chosen == e)
            gate, up = F.linear(h[rows], self.gate_up_proj[e]).chunk(2, dim=-1)
            y = F.linear(F.gelu(gate, approximate="tanh") * up, self.down_proj[e])
            out.index_add_(0, rows, (y * weights[rows, slot, None]).to(out.dtype))
        return self.out_norm(out.view(x.shape))


class PerLayerInput(nn.Module):
    """One layer's use of its per-layer input: x + norm(out(gelu(gate(x)) * e)), e (B, T, P)."""

    def __init__(self, d_model: int, ple_dim: int, eps: float):
        super().__init__()
        self.gate = nn.Linear(d_model, ple_dim, bias=False)
        self.out = nn.Linear(ple_dim, d_model, bias=False)
        self.norm = RMSNorm(d_model, eps=eps)

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        return x + self.norm(self.out(F.gelu(self.gate(x), approximate="tanh") * e))


class PerLayerEmbeddings(nn.Module):
    """Every token's P numbers per layer: (table[token] sqrt(P) + norm(proj(embedding) / sqrt(D))) / sqrt(2)."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.n_layers, self.dim = c.n_layers, c.gemma4.ple_dim
        self.table = nn.Embedding(c.vocab_size, c.n_layers * self.dim)
        self.proj = nn.Linear(c.d_model, c.n_layers * self.dim, bias=False)
        self.norm = RMSNorm(self.dim, eps=c.norm_eps)

    def forward(self, tokens: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(B, T) ids and (B, T, D) scaled embeddings -> (B, T, L, P)."""
        shape = (*tokens.shape, self.n_layers, self.dim)
        own = (self.table(tokens) * math.sqrt(self.dim)).reshape(shape)
        mixed = self.norm((self.proj(x) * x.shape[-1] ** -0.5).reshape(shape))
        return (mixed + own) * 2 ** -0.5


class Gemma4Block(nn.Module):
    """Sandwich-normed attention and GeGLU, the per-layer input, all times ``layer_scalar``."""

    def __init__(self, c: ModelConfig, i: int):
        super().__init__()
        self.self_attn = Gemma4Attention(c, i)
        wide = 2 if c.gemma4.double_wide_mlp and shares_kv(c, i) else 1
        self.ffn = make_ffn(c.ffn, c.d_model, wide * c.d_ff, bias=False)
        for name in ("attn_norm", "attn_out_norm", "ffn_norm", "ffn_out_norm"):
            setattr(self, name, RMSNorm(c.d_model, eps=c.norm_eps))
        self.per_layer = PerLayerInput(c.d_model, c.gemma4.ple_dim, c.norm_eps) if c.gemma4.ple_dim else None
        self.experts = Gemma4Experts(c) if c.gemma4.experts else None
        self.ffn_out_norm_1 = RMSNorm(c.d_model, eps=c.norm_eps) if c.gemma4.experts else None
        self.register_buffer("layer_scalar", torch.ones(1))

    def forward(self, x, e, **attention):
        x = x + self.attn_out_norm(self.self_attn(self.attn_norm(x), **attention))
        h = self.ffn(self.ffn_norm(x))
        if self.experts is not None:  # the dense FFN's output, normed, plus the experts'
            h = self.ffn_out_norm_1(h) + self.experts(x)
        x = x + self.ffn_out_norm(h)
        if self.per_layer is not None:
            x = self.per_layer(x, e)
        return x * self.layer_scalar


class Gemma4LM(DecoderOnlyLM):
    """:class:`DecoderOnlyLM`'s interface (``forward``, ``hidden_states``, ``new_caches``) over Gemma 4's blocks."""

    def __init__(self, config: ModelConfig):
        super(DecoderOnlyLM, self).__init__(config)  # embeddings and head; the blocks are Gemma 4's
        c, g = self.config, config.gemma4
        if g is None:
            raise ValueError("Gemma4LM builds a config with gemma4=Gemma4Dims(...); use DecoderOnlyLM for the others")
        self.rope = ProportionalRope(g.global_head_dim, g.global_rope_pairs, c.rope_base, c.rope_scale)
        self.local_rope = RotaryEmbedding(c.d_head, c.rope_base if c.rope_local_base is None else c.rope_local_base)
        self.per_layer_embeddings = PerLayerEmbeddings(c) if g.ple_dim else None
        self.layers = nn.ModuleList(Gemma4Block(c, i) for i in range(c.n_layers))
        self.layer_windows = [c.layer_window(i) for i in range(c.n_layers)]
        self.mask_keys = mask_keys(c)
        self.layer_ropes = ["global" if w is None else "local" for w in self.layer_windows]
        self.final_norm = self._final_norm()
        self._init_weights()

    def new_caches(self, batch_size: int, max_seq_len: int, cache_cls=KVCache, *, bounded: bool = False, dtype=None,
                   device=None):
        """One :class:`LayerCache` per layer; a layer that shares keys and values gets an empty one-slot cache (it
        writes nothing) that reports its producer's length."""
        c, caches = self.config, []
        weights = self._new_cache(KVCache, 1, 1, dtype, device)  # the checks of dtype and device, once
        for i, window in enumerate(self.layer_windows):
            d_head, kv_heads, _ = layer_heads(c, i)
            cls, extra = (SlidingKVCache, {"window": window}) if bounded and window is not None else (cache_cls, {})
            if shares_kv(c, i):
                cls, extra = KVCache, {}
            cache = cls(batch_size, kv_heads, 1 if shares_kv(c, i) else max_seq_len, d_head, dtype=weights.k.dtype,
                        device=weights.k.device, **extra)
            caches.append(LayerCache(cache))
        return caches

    def hidden_states(self, tokens: torch.Tensor, *, caches=None, positions=None, key_mask=None, attn_mask=None,
                      _inter=None) -> torch.Tensor:
        """(B, T) ids -> (B, T, D) after the final norm, as :meth:`DecoderOnlyLM.hidden_states` (no intermediates)."""
        if _inter is not None or attn_mask is not None:
            raise ValueError("Gemma 4's model returns no intermediates and takes no attn_mask (key_mask for padding)")
        past = self._check_caches(caches, len(self.layers), cross=False)
        self.check_tokens(tokens, "tokens", past)
        b, t = tokens.shape
        auto = self.positions_from_mask(key_mask, past, t, b, tokens.device)
        positions = auto if positions is None else positions
        mask = causal_mask(t, past + t, device=tokens.device) if t > 1 or key_mask is not None else None
        if key_mask is not None:
            mask = mask & key_mask[:, None, None, :]
        masks = self.window_masks(mask, t, past, tokens.device, key_mask)
        x = self.embed(tokens, positions)
        e = None if self.per_layer_embeddings is None else self.per_layer_embeddings(tokens, x)
        ropes, shared = {"global": self.rope, "local": self.local_rope}, {}
        with trusted_inputs():
            for i, (layer, w) in enumerate(zip(self.layers, self.mask_keys)):
                cache = None if caches is None or shares_kv(self.config, i) else caches[i].self_attn
                x = layer(x, None if e is None else e[:, :, i], mask=masks[w], rope=ropes[self.layer_ropes[i]],
                          positions=positions, cache=cache, shared=shared, kind=self.layer_ropes[i])
        if caches is not None:  # the sharing layers' caches report the length of the others
            for i in range(len(self.layers)):
                if shares_kv(self.config, i):
                    caches[i].self_attn.length = past + t
        return self.final_norm(x)


def gemma4_params(c: ModelConfig, active: bool = False) -> dict[str, int]:
    """Gemma 4's parameters per part (minitfm.params' parts; the per-layer inputs count as embeddings); with
    ``active``, the experts a token does not run left out."""
    g, d, h = c.gemma4, c.d_model, c.n_heads
    counts = {"embeddings": c.vocab_size * d, "attention": 0, "ffn": 0, "norms": (4 * c.n_layers + 1) * d,
              "head": 0 if c.tie_embeddings else c.vocab_size * d}
    for i in range(c.n_layers):
        d_head, kv_heads, k_eq_v = layer_heads(c, i)
        counts["attention"] += 2 * d * h * d_head + d_head
        if not shares_kv(c, i):
            counts["attention"] += d * kv_heads * d_head * (1 if k_eq_v else 2) + d_head
        wide = 2 if g.double_wide_mlp and shares_kv(c, i) else 1
        counts["ffn"] += 3 * d * wide * c.d_ff
        if g.experts:  # router (scale, proj, per-expert scale), E or k experts, their two norms; the dense FFN's norm
            used = g.top_k if active else g.experts
            counts["ffn"] += d + d * g.experts + g.experts + used * 3 * d * g.d_expert + 2 * d
            counts["norms"] += d
    if g.ple_dim:
        counts["embeddings"] += c.n_layers * g.ple_dim * (c.vocab_size + d) + g.ple_dim + \
            c.n_layers * (2 * d * g.ple_dim + d)
    counts["total"] = sum(counts.values())
    return counts


def gemma4_lookups(c: ModelConfig) -> int:
    """The parameters a token only looks up: the token table (unless it is also the head) and the per-layer table."""
    return c.vocab_size * c.d_model * (not c.tie_embeddings) + c.vocab_size * c.n_layers * c.gemma4.ple_dim


def gemma4_cache_bytes(c: ModelConfig, seq_len: int, batch_size: int = 1, dtype=torch.float16) -> int:
    """The keys and values Gemma 4 keeps after ``seq_len`` tokens: each layer that computes them (the sharing ones
    keep none) holds min(T, W) positions (sliding) or T (global), with its own K/V heads and head width."""
    total = 0
    for i in range(c.n_layers):
        if not shares_kv(c, i):
            d_head, kv_heads, _ = layer_heads(c, i)
            held = seq_len if c.layer_window(i) is None else min(seq_len, c.layer_window(i))
            total += kv_cache_bytes(1, kv_heads, held, d_head, batch_size=batch_size, dtype=dtype)
    return total
