"""The lean decode step: one cached generation step of a DecoderOnlyLM as a flat list of tensor operations.

Glossary: B batch, P tokens already cached, D d_model, H query heads, H_kv key/value heads, Dh head
dimension, F FFN hidden size, V vocabulary.

The modules the book builds (:class:`~minitfm.multihead.MultiHeadAttention`, :class:`~minitfm.blocks.DecoderBlock`,
...) are written to be read and to be called on their own: each checks its inputs, splits heads, and calls
its submodules. For **one new token** against a KV cache that bookkeeping costs more than the arithmetic: the
book's small language model does about 1.6 MFLOP per token, well under a tenth of a millisecond, while a
step through the module tree makes seven ``nn.Linear`` calls per layer, each a Python module call, and checks
and reshapes at every level. :class:`LeanDecoder` reads the same weights and computes the same function as
one flat list of about 50 PyTorch operations per layer, most of them free views:

- every matrix is kept in (in, out) layout, read faster at batch 1 than nn.Linear's (out, in); q, k and v come
  from one matrix product (the three stacked), prepared once per model and reused while its weights are unchanged,
  and so do SwiGLU's gate and up projections;
- RoPE's rotations for every position are computed once, and a step indexes that table;
- attention is two batched matrix products and a softmax (no mask: one query sees every cached key), or
  PyTorch's fused kernel when padding or ALiBi needs a mask or a bias;
- nothing is checked per step: :func:`~minitfm.generation.generate` checked its inputs once, and the step
  only sees tensors that it or the model built.

The result equals the module path up to float rounding (the stacked matrices, and RMSNorm's sum of squares
as a matrix product, may add in another order); ``tests/test_lean_decode.py`` compares the two for every configuration. The weights are read
when the decoder is built: build a new one after changing the model (``generate`` builds one per call, and the
prepared matrices are rebuilt when any parameter's storage, version counter or sum changed).

Not every model can take this path. :meth:`LeanDecoder.build` returns ``None``, and ``generate`` uses the
modules, for a model in training mode, with forward hooks (they would not fire), with a block, attention,
norm or FFN module of a type other than the library's own (a mixture of experts, a subclass), or with
float16/bfloat16 weights (RoPE then needs the cos/sin form).
"""
from __future__ import annotations

import math
import weakref

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module_globals

from ._checks import trusted_inputs
from .attention import _fused
from .blocks import DecoderBlock
from .feedforward import FeedForward, SwiGLU
from .multihead import MultiHeadAttention
from .norms import RMSNorm

_NORMS = (nn.LayerNorm, RMSNorm)


def _norm(module: nn.Module):
    """A function (B, D) -> (B, D) that normalises each row with the module's weights."""
    if type(module) is nn.Identity:
        return lambda x: x
    if type(module) is RMSNorm:
        weight, inv_d = module.weight, 1.0 / module.d_model
        eps = torch.full((1, 1, 1), module.eps, dtype=weight.dtype, device=weight.device)

        def rms_norm(x):
            # mean(x^2) + eps as one batched product eps + (x . x) / D: for one token per row this is the
            # cheapest sum of squares PyTorch offers (a mean() reduction or F.rms_norm costs several times more).
            row = x.unsqueeze(1)  # (B, D) -> (B, 1, D)
            mean_square = torch.baddbmm(eps, row, row.mT, alpha=inv_d)  # (B, 1, 1)
            return x * mean_square.rsqrt().view(-1, 1) * weight
        return rms_norm
    weight, bias, eps, shape = module.weight, module.bias, module.eps, module.normalized_shape
    return lambda x: F.layer_norm(x, shape, weight, bias, eps)


def _stacked(*linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One (in, sum of outs) matrix (and bias) for several nn.Linear that read the same input: ``x @ W`` then
    computes all of their outputs at once.

    The (in, out) layout, the transpose of nn.Linear's (out, in), is the faster one for a few rows of input:
    the product streams down W's rows, adding x_i times row i into an output that stays in the cache. On a
    2-core EPYC, one thread, it read a (768, 3072) matrix at about 20 GB/s against about 15 GB/s for
    ``F.linear`` on the (out, in) weight; decoding is reading weights, so the step is that much faster."""
    weight = torch.cat([lin.weight.t() for lin in linears], dim=1)  # (in, sum of outs), contiguous
    bias = None if linears[0].bias is None else torch.cat([lin.bias for lin in linears])
    return weight, bias


def _project(x: torch.Tensor, weight_in_out: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(B, in) @ (in, out) (+ bias) -> (B, out)."""
    return torch.mm(x, weight_in_out) if bias is None else torch.addmm(bias, x, weight_in_out)


def _has_hooks(model: nn.Module) -> bool:
    if _module_globals._global_forward_hooks or _module_globals._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


class _Layer:
    """The weights of one DecoderBlock, arranged for a decode step."""

    def __init__(self, block: DecoderBlock):
        attn = block.self_attn
        self.norm_first = block.norm_first
        self.attn_norm, self.ffn_norm = _norm(block.attn_norm), _norm(block.ffn_norm)
        self.qkv_weight, self.qkv_bias = _stacked(attn.q_proj, attn.k_proj, attn.v_proj)  # (D, (H + 2 H_kv) Dh)
        self.out_weight, self.out_bias = _stacked(attn.out_proj)
        ffn = block.ffn
        self.swiglu = type(ffn) is SwiGLU
        if self.swiglu:
            self.up_weight, self.up_bias = _stacked(ffn.gate_proj, ffn.up_proj)  # (D, 2F): gate, then up
            self.act = None
        else:
            self.up_weight, self.up_bias = _stacked(ffn.up_proj)
            self.act = ffn.act
        self.down_weight, self.down_bias = _stacked(ffn.down_proj)  # (F, D)

    def feed_forward(self, h: torch.Tensor) -> torch.Tensor:
        up = _project(h, self.up_weight, self.up_bias)
        if self.swiglu:
            gate, up = up.chunk(2, dim=-1)  # (B, 2F) -> 2 x (B, F)
            up = F.silu(gate) * up
        else:
            up = self.act(up)
        return _project(up, self.down_weight, self.down_bias)


_PREPARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> (weights' versions, layers, head)


def _prepared(model) -> tuple[list, torch.Tensor]:
    """The layers' stacked (in, out) matrices and the (D, V) output head, built once per model and reused
    by later ``generate`` calls while no parameter changed (same storage, same version counter: an
    optimizer step or ``load_state_dict`` bumps it; and the same sum, for writes through ``p.data``, which
    bump no counter; the sums read every weight once, about one decode step's time). Copying GPT-2 small's
    500 MB of weights takes about a second on one thread, as long as 30 decode steps; the copies stay alive
    as long as the model."""
    with torch.no_grad():  # a write through ``p.data`` bumps no version counter: the sums catch it too
        versions = tuple((p.data_ptr(), p._version, p.dtype, p.device, float(p.sum())) for p in model.parameters())
    cached = _PREPARED.get(model)
    if cached is not None and cached[0] == versions:
        return cached[1], cached[2]
    with torch.no_grad():
        layers = [_Layer(block) for block in model.layers]
        head = model.lm_head.weight.t().contiguous()  # (D, V): the largest matrix, in the faster layout
    _PREPARED[model] = (versions, layers, head)
    return layers, head


class LeanDecoder:
    """The cached decode step of a :class:`~minitfm.models.DecoderOnlyLM`, without the module tree.

    ``LeanDecoder.build(model, max_len)`` returns one, or ``None`` when the model needs its modules (see the
    module docstring). ``decoder(tokens (B, 1), caches, key_mask=None) -> logits (B, V)`` appends the
    token's keys and values to ``caches`` (from ``model.new_caches``, already holding P >= 1 tokens) exactly
    as ``model(tokens, caches=caches, key_mask=key_mask)[:, -1]`` would. ``key_mask`` (B, P + 1) bool,
    ``True`` = real token, hides left padding; every row must keep at least one visible key.
    """

    def __init__(self, model, max_len: int):
        c = model.config
        self.model = model
        self.n_heads, self.n_kv_heads, self.d_head, self.d_model = c.n_heads, c.n_kv_heads, c.d_head, c.d_model
        self.scale = 1.0 / math.sqrt(c.d_head)
        self.layers, self.lm_head = _prepared(model)
        self.final_norm = _norm(model.final_norm)
        self.embed_scale = math.sqrt(c.d_model) if c.scale_embeddings else 1.0
        self._no_bias = self.lm_head.new_zeros(1, 1, 1)  # baddbmm's (ignored, beta = 0) addend
        self.additive_positions = model.pos_emb is not None
        self.rotations = None
        if model.rope is not None:  # every position's cos + i sin, once: (max_len, Dh/2) complex
            positions = torch.arange(max_len, device=self.lm_head.device)
            self.rotations = model.rope.complex_rotation(positions, self.lm_head.dtype)

    @classmethod
    def build(cls, model, max_len: int) -> "LeanDecoder | None":
        """A lean decoder for ``model`` and positions below ``max_len``, or ``None`` if it must use its modules."""
        from .models import DecoderOnlyLM  # models imports blocks; import here to keep this module a leaf

        if type(model) is not DecoderOnlyLM or model.training or _has_hooks(model):
            return None
        if model.lm_head.weight.dtype not in (torch.float32, torch.float64):
            return None
        for block in model.layers:
            if type(block) is not DecoderBlock or type(block.self_attn) is not MultiHeadAttention \
                    or type(block.ffn) not in (FeedForward, SwiGLU) \
                    or type(block.attn_norm) not in _NORMS or type(block.ffn_norm) not in _NORMS:
                return None
        if type(model.final_norm) not in _NORMS + (nn.Identity,):
            return None
        return cls(model, max_len)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask, bias) -> torch.Tensor:
        """One query per row and head: q (B, H, 1, Dh), k and v (B, H_kv, T_k, Dh) -> (B, D), heads in order."""
        b, h, h_kv, d_head = q.shape[0], self.n_heads, self.n_kv_heads, self.d_head
        if mask is not None or bias is not None:  # padding or ALiBi: the library's fused path combines them
            if h_kv != h:
                k, v = k.repeat_interleave(h // h_kv, dim=1), v.repeat_interleave(h // h_kv, dim=1)
            return _fused(q, k, v, mask, bias, 0.0, self.scale).reshape(b, self.d_model)  # (B, H, 1, Dh) -> (B, D)
        # Batched matrix products over (B H_kv) groups of H / H_kv queries: the query heads that share a
        # key/value head (grouped-query attention) form one group, so k and v are never repeated. For one
        # query this is as cheap as PyTorch's fused kernel over a few keys, and clearly cheaper over hundreds.
        q = q.reshape(b * h_kv, h // h_kv, d_head)  # (B, H, 1, Dh) -> (B H_kv, H / H_kv, Dh)
        k, v = k.reshape(b * h_kv, -1, d_head), v.reshape(b * h_kv, -1, d_head)  # views of the cache
        scores = torch.baddbmm(self._no_bias, q, k.mT, beta=0.0, alpha=self.scale)  # (B H_kv, H / H_kv, T_k)
        out = torch.bmm(scores.softmax(dim=-1), v)  # (B H_kv, H / H_kv, Dh)
        return out.reshape(b, self.d_model)  # -> (B, D): head j * H / H_kv + g is group j's query g

    def __call__(self, tokens: torch.Tensor, caches, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        b = tokens.shape[0]
        h, h_kv, d_head = self.n_heads, self.n_kv_heads, self.d_head
        past = caches[0].length
        positions = None if key_mask is None else self.model._positions(key_mask, past, 1, b, tokens.device)
        if self.additive_positions:
            x = self.model.embed(tokens, torch.tensor([past], device=tokens.device) if positions is None else positions)
            x = x.view(b, self.d_model)  # (B, 1, D) -> (B, D): one token per row from here on
        else:
            x = F.embedding(tokens.view(b), self.model.tok_emb.weight) * self.embed_scale  # (B, 1) -> (B, D)
        rotation = None
        if self.rotations is not None:  # (Dh/2,) for one shared position, (B, 1, 1, Dh/2) per row
            rotation = self.rotations[past] if positions is None else self.rotations[positions][:, None]
        mask = None if key_mask is None else key_mask[:, None, None, :]  # (B, P + 1) -> (B, 1, 1, P + 1)
        bias = self.model.alibi(1, past + 1)  # (1, H, 1, P + 1) or None
        with trusted_inputs():  # the caches' update skips its checks: k and v are built here
            for layer, cache in zip(self.layers, caches):
                attn_in = layer.attn_norm(x) if layer.norm_first else x
                qkv = _project(attn_in, layer.qkv_weight, layer.qkv_bias).view(b, h + 2 * h_kv, 1, d_head)
                qk, v = qkv.split((h + h_kv, h_kv), dim=1)  # (B, H + H_kv, 1, Dh), (B, H_kv, 1, Dh)
                if rotation is not None:  # rotate q and k together: pairs as complex numbers times cos + i sin
                    pairs = torch.view_as_complex(qk.unflatten(-1, (-1, 2)))
                    qk = torch.view_as_real(pairs * rotation).flatten(-2)
                q, k = qk.split((h, h_kv), dim=1)
                k, v = cache.self_attn.update(k, v)  # (B, H_kv, P + 1, Dh)
                out = _project(self.attend(q, k, v, mask, bias), layer.out_weight, layer.out_bias)  # (B, D)
                x = x + out if layer.norm_first else layer.attn_norm(x + out)
                ffn_in = layer.ffn_norm(x) if layer.norm_first else x
                out = layer.feed_forward(ffn_in)
                x = x + out if layer.norm_first else layer.ffn_norm(x + out)
        return torch.mm(self.final_norm(x), self.lm_head)  # (B, D) @ (D, V) -> (B, V)
