"""The lean decode step: one cached generation step of a DecoderOnlyLM as a flat list of tensor operations.

Glossary: B batch, P tokens already cached, D d_model, H query heads, H_kv key/value heads, Dh head
dimension, F FFN hidden size, V vocabulary.

The book's modules (:class:`~minitfm.layers.multihead.MultiHeadAttention`, :class:`~minitfm.layers.blocks.DecoderBlock`,
...) are written to be read and called on their own: each checks its inputs, splits heads, calls its submodules.
For **one new token** against a KV cache that bookkeeping costs more than the arithmetic. :class:`LeanDecoder`
reads the same weights and computes the same function as about 50 operations per layer, most of them views:

- every matrix in (in, out) layout (faster at batch 1 than nn.Linear's (out, in) on some machines); q, k and v in
  one product (stacked), SwiGLU's gate and up in another; the output and down products add the residual stream
  themselves (``addmm``); a pre-LN RMSNorm's gain folded into the product after it, then 1 / rms(x) per row;
- an RMSNorm's mean of squares as one small product; a per-head QK-norm over every query and key head at once;
  RoPE's rotations from a table of positions;
- attention as two batched products and a softmax, or the library's fused attention
  (:func:`~minitfm.layers.attention.fused_attention`) when padding or ALiBi needs a mask or a bias;
- no checks per step: :func:`~minitfm.generation.generate` checked its inputs once.

The result equals the module path up to float rounding (sums in another order); ``tests/generation/test_lean_decode.py``
and ``test_lean_families.py`` compare the two for every configuration.

**State is explicit.** A decoder holds copies of the projection matrices (stacked, transposed, the pre-norms'
gains folded in) and of the QK-norms' gains, as much memory again as the weights (:meth:`LeanDecoder.nbytes`),
and references to the model's modules: the norms' ``eps``, ``norm_first``, the activation, the embedding scale
and RoPE's frequencies are read at every step; the other norms' weights and the embeddings are the model's own
tensors. There is no hidden cache: ``generate`` builds a decoder per call by default. A caller who generates
many times from an unchanged model can build one and pass it in (``dec = LeanDecoder.build(model)``, then
``generate(model, prompt, n, decoder=dec)``), which saves the copy (about a second for GPT-2 small's 500 MB).
**Rebuild it after you change the model.** ``generate`` refuses a decoder whose model had a module or parameter
replaced, moved or cast, or a parameter changed through its version counter (an optimizer step,
``load_state_dict``, an in-place operation); it cannot see a write through ``p.data``, or an in-place write to a
parameter made under ``torch.inference_mode``, which bump no counter.

Where :func:`~minitfm.generation.lean_refusal.refusal` gives a reason (training mode, hooks, a module type it
does not know exactly such as LoRA, a replaced ``forward``, tensor subclasses, mixed or half-precision dtypes, a
mixture of experts), :meth:`LeanDecoder.build` returns ``None`` and ``generate`` uses the modules.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import trusted_inputs
from minitfm.layers.attention import fused_attention
from minitfm.layers.blocks import DecoderBlock
from minitfm.layers.feedforward import GeGLU, SwiGLU
from minitfm.layers.norms import OffsetRMSNorm, RMSNorm
from minitfm.generation.lean_refusal import refusal
from minitfm.models import DecoderOnlyLM

_INITIAL_ROTATIONS = 256  # positions in RoPE's table when the builder gives no max_len; it grows on demand

def _stacked(*linears: nn.Linear, gain: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One (in, sum of outs) matrix (and bias) for several nn.Linear that read the same input: ``x @ W`` then
    computes all of their outputs at once; row i times ``gain[i]`` if given (a norm's gain, folded in). The (in, out)
    layout, the transpose of nn.Linear's (out, in), streams down W's rows into an output that stays in the cache:
    on a 2-core EPYC, one thread, about 20 GB/s against 15 GB/s for ``F.linear`` (on a Xeon, the same rate)."""
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
    """One DecoderBlock's projection matrices, copied and arranged for a decode step, a pre-LN RMSNorm's gain folded
    into the product after it (for ``norm_first`` as it was then); the rest is read from the modules every step."""

    def __init__(self, block: DecoderBlock, window: int | None, rope: str | None):
        self.block, self.ffn, self.window, self.rope = block, block.ffn, window, rope  # rope: "global", "local", None
        self.norm_first = block.norm_first
        self.attn_norm, self.ffn_norm = _Norm(block.attn_norm), _Norm(block.ffn_norm)
        self.attn_out_norm, self.ffn_out_norm = (None if n is None else _Norm(n)
                                                 for n in (block.attn_out_norm, block.ffn_out_norm))
        attn, ffn = block.self_attn, block.ffn
        self.qk_norm, self.scale, self.softcap = attn.qk_norm, attn.scale, attn.softcap
        self.q_norm, self.k_norm = (None if n is None else _Norm(n) for n in (attn.q_norm, attn.k_norm))
        self.qk_gain = None  # QK-norm per head: (H + H_kv, 1, Dh), each query head's gain then each key head's
        if attn.qk_norm == "head":
            self.qk_gain = torch.cat([attn.q_norm.gain().expand(attn.n_heads, -1),
                                      attn.k_norm.gain().expand(attn.n_kv_heads, -1)]).unsqueeze(1)
        gains = [n.module.gain() if self.norm_first and n.rms else None for n in (self.attn_norm, self.ffn_norm)]
        self.qkv_weight, self.qkv_bias = _stacked(attn.q_proj, attn.k_proj, attn.v_proj, gain=gains[0])
        self.out_weight, self.out_bias = _stacked(attn.out_proj)  # qkv: (D, (H + 2 H_kv) Dh), out: (H Dh, D)
        self.swiglu, self.d_ff = type(ffn) in (SwiGLU, GeGLU), ffn.down_proj.weight.shape[1]  # gated: gate, then up
        self.up_weight, self.up_bias = _stacked(*(ffn.gate_proj, ffn.up_proj) if self.swiglu else (ffn.up_proj,),
                                                gain=gains[1])
        self.down_weight, self.down_bias = _stacked(ffn.down_proj)  # (F, D)

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


class LeanDecoder:
    """The cached decode step of a :class:`~minitfm.models.DecoderOnlyLM`, without the module tree.

    ``LeanDecoder.build(model, max_len=None)`` returns one, or ``None`` when the model needs its modules
    (:func:`refusal`). ``decoder(tokens (B, 1), caches, key_mask=None) -> logits (B, V)`` appends the token's keys
    and values to ``caches`` (from ``model.new_caches``, holding P >= 1 tokens) exactly as ``model(tokens,
    caches=caches, key_mask=key_mask)[:, -1]`` would; ``key_mask`` (B, P + 1) bool, ``True`` = real token, hides
    left padding (every row keeps a visible key). It holds copies made at build time: rebuild it after you change
    the model (``generate`` refuses one whose parameters it can see changed, :meth:`is_current`).
    """

    def __init__(self, model: DecoderOnlyLM, max_len: int | None = None):
        c = model.config
        self.model = model
        self.n_heads, self.n_kv_heads, self.d_head, self.d_model = c.n_heads, c.n_kv_heads, c.d_head, c.d_model
        self._modules = list(model.modules())  # held, so that is_current compares the same objects
        self._params = list(model.parameters())
        self._fingerprint = self._weights_now()
        self.final_norm, self.tok_emb, self.rope = _Norm(model.final_norm), model.tok_emb, model.rope
        self._rotation_len = min(c.max_seq_len, _INITIAL_ROTATIONS) if max_len is None else max_len
        self._inv_freq = self.rotations = None  # RoPE's table of rotations, and the frequencies it was made from
        with torch.no_grad():  # copies: no autograd history, whatever the caller's mode
            self.layers = [_Layer(*layer) for layer in zip(model.layers, model.layer_windows, model.layer_ropes)]
            self.lm_head = model.lm_head.weight.t().contiguous()  # (D, V): the largest matrix, in the faster layout
            if model.rope is not None:
                self.rotation_table(0)
        self._no_bias = self.lm_head.new_zeros(1, 1, 1)  # baddbmm's (ignored, beta = 0) addend

    @classmethod
    def build(cls, model, max_len: int | None = None) -> "LeanDecoder | None":
        """A lean decoder for ``model``, or ``None`` if it must use its modules (:func:`refusal` says why).

        ``max_len`` (``None`` or an int >= 1) sizes RoPE's table of rotations (``generate`` passes the prompt length
        plus the new tokens); without it the table starts small and grows on demand, to any length the model takes."""
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a DecoderOnlyLM (an nn.Module), got {type(model).__name__}")
        if max_len is not None:
            if isinstance(max_len, bool) or not isinstance(max_len, int):
                raise TypeError(f"max_len must be an int or None, got {type(max_len).__name__} ({max_len!r:.40})")
            if max_len < 1:
                raise ValueError(f"max_len must be >= 1 (the positions a step can reach), got {max_len}")
        if refusal(model) is not None:
            return None
        return cls(model, max_len)

    def _weights_now(self) -> list:
        # Every in-place write but one through ``.data`` bumps the version counter (inference tensors have none).
        return [(p.data_ptr(), p.dtype, p.device, None if p.is_inference() else getattr(p, "_version", None))
                for p in self._params]

    def is_current(self) -> bool:
        """The model's modules and parameters are those it was built from, unchanged as far as PyTorch can tell (same
        objects, storage, dtype, device, version counter; a write via ``p.data`` or under inference_mode is unseen)."""
        modules, params = list(self.model.modules()), list(self.model.parameters())
        return (len(modules) == len(self._modules) and all(a is b for a, b in zip(modules, self._modules))
                and len(params) == len(self._params) and all(a is b for a, b in zip(params, self._params))
                and self._weights_now() == self._fingerprint)

    def nbytes(self) -> int:
        """Bytes of the tensors this decoder copied (every projection, the output head, QK-norm gains): its memory."""
        tensors = [self.lm_head] + [t for layer in self.layers for t in vars(layer).values() if torch.is_tensor(t)]
        return sum(t.numel() * t.element_size() for t in tensors)

    def rotation_table(self, past: int) -> torch.Tensor:
        """(N, Dh/2) rotations ``cos + i sin`` of positions 0 .. N - 1, N > ``past``: rebuilt when RoPE's frequencies
        changed (setting ``rope.base`` or ``rope.scale`` replaces them) or a step needs a later position (doubled)."""
        rope, table = self.rope, self.rotations
        if table is None or rope.inv_freq is not self._inv_freq or past >= table.shape[0]:
            if table is not None and past >= table.shape[0]:
                self._rotation_len = max(past + 1, 2 * table.shape[0])
            self._rotation_len = max(self._rotation_len, past + 1)
            positions = torch.arange(self._rotation_len, device=self.lm_head.device)
            self.rotations = rope.complex_rotation(positions, self.lm_head.dtype)
            self._inv_freq = rope.inv_freq
        return self.rotations

    def attend(self, layer: _Layer, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask, bias) -> torch.Tensor:
        """One query per row and head: q (B, H, 1, Dh), k and v (B, H_kv, T_k, Dh) -> (B, H Dh), heads in order."""
        b, h, h_kv, d_head = q.shape[0], self.n_heads, self.n_kv_heads, self.d_head
        scale = 1.0 / math.sqrt(d_head) if layer.scale is None else layer.scale
        if layer.window is not None and k.shape[2] > layer.window:  # the window: only the W latest keys count
            k, v = k[:, :, -layer.window:], v[:, :, -layer.window:]
        if mask is not None and mask.shape[-1] > k.shape[2]:  # the window, or a bounded cache: the latest columns
            mask = mask[..., -k.shape[2]:]
        if bias is not None and bias.shape[-1] > k.shape[2]:
            bias = bias[..., -k.shape[2]:]
        if (mask is not None or bias is not None) and layer.softcap is None:  # padding or ALiBi: the fused path
            if h_kv != h:
                k, v = k.repeat_interleave(h // h_kv, dim=1), v.repeat_interleave(h // h_kv, dim=1)
            out = fused_attention(q, k, v, mask, bias, 0.0, scale)  # (B, H, 1, Dh)
            return out.reshape(b, h * d_head)  # -> (B, H Dh)
        # Batched products over (B H_kv) groups of H / H_kv queries, the heads that share a key/value head (GQA): k
        # and v are never repeated. As cheap as PyTorch's fused kernel over a few keys, cheaper over hundreds.
        q = q.reshape(b * h_kv, h // h_kv, d_head)  # (B, H, 1, Dh) -> (B H_kv, H / H_kv, Dh)
        k, v = k.reshape(b * h_kv, -1, d_head), v.reshape(b * h_kv, -1, d_head)  # views of the cache
        scores = torch.baddbmm(self._no_bias, q, k.mT, beta=0.0, alpha=scale)  # (B H_kv, H / H_kv, T_k)
        if layer.softcap is not None:  # Gemma 2: the scores smoothly capped, before the mask
            scores = torch.tanh(scores / layer.softcap) * layer.softcap
        if mask is not None:  # (B, 1, 1, T_k) -> (B H_kv, 1, T_k), the same for every head of a group
            keep = mask.expand(b, h_kv, 1, mask.shape[-1]).reshape(b * h_kv, 1, -1)
            weights = scores.masked_fill(~keep, torch.finfo(scores.dtype).min).softmax(dim=-1).masked_fill(~keep, 0.0)
        else:
            weights = scores.softmax(dim=-1)
        out = torch.bmm(weights, v)  # (B H_kv, H / H_kv, Dh)
        return out.reshape(b, h * d_head)  # -> (B, H Dh): head j * H / H_kv + g is group j's query g

    def __call__(self, tokens: torch.Tensor, caches, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 1) token ids -> (B, V) next-token logits, appending the token's keys and values to ``caches``."""
        model, b = self.model, tokens.shape[0]
        h, h_kv, d_head = self.n_heads, self.n_kv_heads, self.d_head
        past = caches[0].length
        positions = None if key_mask is None else model.positions_from_mask(key_mask, past, 1, b, tokens.device)
        if model.pos_emb is not None:  # additive positions: the model's own embed
            x = model.embed(tokens, torch.tensor([past], device=tokens.device) if positions is None else positions)
            x = x.view(b, self.d_model)  # (B, 1, D) -> (B, D): one token per row from here on
        else:
            x = F.embedding(tokens.view(b), self.tok_emb.weight)  # (B, 1) -> (B, D)
            if model.config.scale_embeddings:
                x = x * math.sqrt(self.d_model)
        rotations = {None: None}  # per kind of layer: (Dh/2,) for one shared position, (B, 1, 1, Dh/2) per row
        if self.rope is not None:
            table = self.rotation_table(past)
            rotations["global"] = table[past] if positions is None else table[positions][:, None]
        if model.local_rope is not None:  # Gemma 3's sliding layers: this step's rotation, computed here
            local = model.local_rope.complex_rotation(torch.tensor([past], device=tokens.device) if positions is None
                                                      else positions)
            rotations["local"] = local[0] if positions is None else local[:, None]
        mask = None if key_mask is None else key_mask[:, None, None, :]  # (B, P + 1) -> (B, 1, 1, P + 1)
        bias = model.alibi(1, past + 1)  # (1, H, 1, P + 1) or None
        with trusted_inputs():  # the caches' update skips its checks: k and v are built here
            for i, (layer, cache) in enumerate(zip(self.layers, caches)):
                norm_first = layer.block.norm_first
                if norm_first != layer.norm_first:  # flipped since: the folded gains belong to the other placement
                    with torch.no_grad():
                        layer = self.layers[i] = _Layer(layer.block, layer.window, layer.rope)
                qkv = layer.sublayer_in(layer.attn_norm, x, layer.qkv_weight, layer.qkv_bias).view(b, -1, 1, d_head)
                qk, v = qkv.narrow(1, 0, h + h_kv), qkv.narrow(1, h + h_kv, h_kv)  # two narrows cost less than split
                if layer.qk_norm != "none":
                    qk = self.qk_normed(layer, qk)
                if layer.rope is not None:  # q and k together: pairs as complex numbers times cos + i sin
                    pairs = torch.view_as_complex(qk.view(b, h + h_kv, 1, d_head // 2, 2))
                    qk = torch.view_as_real(pairs * rotations[layer.rope]).view(b, h + h_kv, 1, d_head)
                q, k = qk.narrow(1, 0, h), qk.narrow(1, h, h_kv)  # (B, H, 1, Dh), (B, H_kv, 1, Dh)
                k, v = cache.self_attn.update(k, v)  # (B, H_kv, P + 1, Dh)
                heads = self.attend(layer, q, k, v, mask, bias)  # (B, H Dh)
                plain = norm_first and layer.attn_out_norm is None  # then x + o W is one operation
                out = _project(heads, layer.out_weight, layer.out_bias, x if plain else None)  # (B, D)
                if layer.attn_out_norm is not None:
                    out = layer.attn_out_norm(out)
                x = out if plain else x + out if norm_first else layer.attn_norm(x + out)
                plain = norm_first and layer.ffn_out_norm is None
                out = layer.feed_forward(x, x if plain else None)
                if layer.ffn_out_norm is not None:
                    out = layer.ffn_out_norm(out)
                x = out if plain else x + out if norm_first else layer.ffn_norm(x + out)
        logits = torch.mm(self.final_norm(x), self.lm_head)  # (B, D) @ (D, V) -> (B, V)
        cap = model.config.final_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def qk_normed(self, layer: _Layer, qk: torch.Tensor) -> torch.Tensor:
        """(B, H + H_kv, 1, Dh) queries and keys -> the same after the QK-norm: per head, or over all heads."""
        b, h, d_head = qk.shape[0], self.n_heads, self.d_head
        q_norm, k_norm = layer.q_norm, layer.k_norm
        if layer.qk_gain is not None and q_norm.module.eps == k_norm.module.eps:  # one norm for every head
            mean_square = q_norm.mean_square(qk.reshape(-1, 1, d_head))  # (B (H + H_kv), 1, 1)
            return qk * mean_square.rsqrt().view(b, -1, 1, 1) * layer.qk_gain
        q, k = qk.split((h, self.n_kv_heads), dim=1)  # "all": one norm over each token's H Dh (H_kv Dh) features
        q, k = (n.heads(t.reshape(b, 1, -1) if layer.qk_norm == "all" else t).view(t.shape)
                for n, t in ((q_norm, q), (k_norm, k)))
        return torch.cat((q, k), dim=1)
