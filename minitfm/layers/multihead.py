"""Multi-head attention for self- and cross-attention, with grouped/multi-query heads.

Glossary: B batch, T_q queries, T_k keys, D d_model, H query heads, H_kv key/value heads,
Dh head dimension (D / H unless given: Gemma and Qwen 3 choose it on its own).

Steps: project (q_proj, k_proj, v_proj) -> split into heads -> attend per head -> concatenate ->
out_proj, which mixes what the heads found. H heads of size D/H have exactly the parameters of one
head of size D: splitting is free, only the attention pattern changes.

Options of today's open models: QK-norm (an RMSNorm on the queries and keys before RoPE, per head as in
Qwen 3 and Gemma 3, or over all heads at once as in OLMo 2), biases on q/k/v only (Qwen 2), another score
scale than 1/sqrt(Dh) (Gemma 2/3's ``query_pre_attn_scalar``), Gemma 2's soft cap on the scores, and Ministral 3's
query temperature, which grows with the position (``temperature``), and gpt-oss's sink logit per head (``sinks``).
``fused_qkv`` stores q, k, v as one matrix (nanoGPT's layout): :func:`fuse_qkv` and :func:`split_qkv` convert.
"""
from __future__ import annotations

import torch
from torch import nn

from minitfm._checks import check_choice, check_module_input, check_number, check_positive_int, check_probability
from minitfm.layers._fused_qkv import fuse_qkv, split_qkv  # noqa: F401 (public here: the two weight layouts)
from minitfm.layers._attention_variants import (chunked_causal_mask, count_left_padding,  # noqa: F401 (for models)
                                                sink_attention, weightless_qk_norm)
from minitfm.layers.attention import IMPLEMENTATIONS, scaled_dot_product_attention
from minitfm.layers.kv_cache import KVCache
from minitfm.layers.masks import causal_mask
from minitfm.layers.norms import make_norm
from minitfm.layers.positional import RotaryEmbedding

QK_NORMS = ("none", "head", "all", "weightless")


class MultiHeadAttention(nn.Module):
    """Multi-head attention.

    Args:
        d_model: D, the width of the inputs and of the output.
        n_heads: H query heads; D must divide by H.
        n_kv_heads: H_kv key/value heads (defaults to H). H_kv < H shares each key/value head between
            H / H_kv query heads: grouped-query attention, or multi-query attention when H_kv = 1.
        bias: whether the four projections have biases.
        dropout: dropout on the attention weights during training.
        impl: ``"manual"`` or ``"fused"``, see :func:`minitfm.scaled_dot_product_attention`.
        d_head: Dh; ``None`` = D / H (then D must divide by H).
        qkv_bias: biases on q, k and v (``None``: as ``bias``, which then covers out_proj only when given).
        qk_norm: ``"none"``, ``"head"`` (an RMSNorm of width Dh on every query and key head), ``"all"``
            (one RMSNorm over the H Dh query features and one over the H_kv Dh key features) or ``"weightless"``
            (Llama 4: an RMSNorm without weights on every head, after RoPE, only when a ``rope`` is given).
        qk_norm_kind, norm_eps: that norm's kind (``"rms"`` or Gemma's ``"rms_offset"``) and epsilon.
        scale: the scores' multiplier; ``None`` = 1 / sqrt(Dh).
        softcap: cap the scores at +-softcap with c tanh(s / c) (Gemma 2); forces the manual path.
        temperature: ``(beta, length)``: self-attention's queries at position p, after RoPE, times
            1 + beta log(1 + floor(p / length)) (Ministral 3's ``llama_4_scaling_beta``); ``None`` = 1.
            ``(beta, length, "llama4")``: only when no ``rope`` is given (Llama 4's NoPE layers), with
            1 + beta log(1 + floor((p + 1) / length)) and p = cache length + arange(T_q) in every row.
        sinks: a learned logit per head, ``sinks`` (H,), joins every softmax as one more column that no value
            reads (gpt-oss): a head may then attend to nothing. Its weights (``need_weights``) leave the sink out.
        output_gate: the heads' output times sigmoid(``gate_proj(x)``) before ``out_proj`` (Qwen3-Next, Qwen 3.5).
        fused_qkv: store q, k and v as one ``qkv_proj`` (rows: H Dh of q, H_kv Dh of k, H_kv Dh of v, the three
            matrices stacked) and compute them with one product (nanoGPT's ``c_attn``); the same function as the
            three matrices (:func:`fuse_qkv` and :func:`split_qkv` convert the weights), one product fewer.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True,
                 dropout: float = 0.0, impl: str = "manual", *, d_head: int | None = None,
                 qkv_bias: bool | None = None, qk_norm: str = "none", qk_norm_kind: str = "rms",
                 norm_eps: float = 1e-6, scale: float | None = None, softcap: float | None = None,
                 temperature: tuple | None = None, sinks: bool = False, output_gate: bool = False,
                 fused_qkv: bool = False):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
            check_positive_int(value, name)
        check_choice(qk_norm, "qk_norm", QK_NORMS)
        for name, value in (("scale", scale), ("softcap", softcap)):
            if value is not None:
                check_number(value, name, low=0.0, low_open=True)
        if temperature is not None:
            if not isinstance(temperature, tuple) or len(temperature) not in (2, 3) or temperature[2:] not in ((),
                                                                                                   ("llama4",)):
                raise TypeError(f"temperature must be a (beta, length) or (beta, length, 'llama4') tuple or None, "
                                f"got {temperature!r}")
            check_number(temperature[0], "temperature's beta", low=0.0)
            check_positive_int(temperature[1], "temperature's length")
        self.temperature = temperature
        if d_head is not None:
            check_positive_int(d_head, "d_head")
        elif d_model % n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads to split it into equal heads, "
                f"got d_model={d_model}, n_heads={n_heads} (d_model / n_heads = {d_model / n_heads:.2f})"
            )
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads must be divisible by n_kv_heads, got n_heads={n_heads}, n_kv_heads={n_kv_heads}")
        check_probability(dropout, "dropout")
        check_choice(impl, "impl", IMPLEMENTATIONS)
        if not isinstance(fused_qkv, bool):
            raise TypeError(f"fused_qkv must be a bool, got {type(fused_qkv).__name__}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads if d_head is None else d_head
        self.dropout, self.impl, self.qk_norm, self.scale, self.softcap = dropout, impl, qk_norm, scale, softcap
        self.norm_eps = norm_eps
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.fused_qkv, self.qkv_sizes = fused_qkv, (n_heads * self.d_head,) + (n_kv_heads * self.d_head,) * 2
        if fused_qkv:  # one (H Dh + 2 H_kv Dh, D) matrix: q's rows, then k's, then v's
            self.qkv_proj = nn.Linear(d_model, sum(self.qkv_sizes), bias=qkv_bias)
        else:
            self.q_proj = nn.Linear(d_model, n_heads * self.d_head, bias=qkv_bias)
            self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=qkv_bias)
            self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=qkv_bias)
        self.out_proj = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.sinks = nn.Parameter(torch.zeros(n_heads)) if sinks else None
        self.gate_proj = nn.Linear(d_model, n_heads * self.d_head, bias=qkv_bias) if output_gate else None
        self.q_norm = self.k_norm = None
        if qk_norm not in ("none", "weightless"):  # "head": width Dh, shared by the heads; "all": one norm over every head's features
            q_width, k_width = (self.d_head, self.d_head) if qk_norm == "head" else \
                (n_heads * self.d_head, n_kv_heads * self.d_head)
            self.q_norm = make_norm(qk_norm_kind, q_width, eps=norm_eps)
            self.k_norm = make_norm(qk_norm_kind, k_width, eps=norm_eps)

    def _check_input(self, x: torch.Tensor, name: str) -> None:
        check_module_input(x, name, self, self.d_model, ndim=3)  # shape, and dtype against the weights

    def split_heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        """(B, T, n_heads * Dh) -> (B, n_heads, T, Dh)."""
        return x.view(x.shape[0], x.shape[1], n_heads, self.d_head).transpose(1, 2)

    def project(self, x: torch.Tensor, proj: nn.Linear, norm: nn.Module | None, n_heads: int) -> torch.Tensor:
        """(B, T, D) -> (B, n_heads, T, Dh): project, split into heads, and apply the QK-norm where it sits."""
        return self.heads(proj(x), norm, n_heads)  # (B, T, D) -> (B, T, n_heads * Dh) -> (B, n_heads, T, Dh)

    def heads(self, h: torch.Tensor, norm: nn.Module | None, n_heads: int) -> torch.Tensor:
        """A projection's output (B, T, n_heads * Dh) -> (B, n_heads, T, Dh), with the QK-norm where it sits."""
        if self.qk_norm == "all":
            h = norm(h)  # over all heads' features at once (OLMo 2)
        h = self.split_heads(h, n_heads)  # (B, T, n_heads * Dh) -> (B, n_heads, T, Dh)
        return norm(h) if self.qk_norm == "head" else h  # per head (Qwen 3, Gemma 3)

    @staticmethod
    def rotate(rope: RotaryEmbedding, x: torch.Tensor, offset: int, positions: torch.Tensor | None) -> torch.Tensor:
        """x (B, heads, T, Dh) rotated by ``rope``; a RoPE narrower than Dh turns only the first ``rope.d_head``
        features of each head and passes the rest (partial RoPE: GLM-4.5, MiniMax-M2)."""
        r = rope.d_head
        if r == x.shape[-1]:
            return rope(x, offset=offset, positions=positions)
        return torch.cat([rope(x[..., :r].contiguous(), offset=offset, positions=positions), x[..., r:]], dim=-1)

    def temper(self, q: torch.Tensor, offset: int, positions: torch.Tensor | None) -> torch.Tensor:
        """q (B, H, T_q, Dh) times tau(p) = 1 + beta log(1 + floor(p / length)) at its positions (``positions``
        (T_q,) or (B, T_q), else ``offset + arange(T_q)``), tau computed in float32 as transformers does."""
        beta, length = self.temperature[:2]
        if len(self.temperature) == 3:  # Llama 4: cache length + arange(T_q) for every row, and p + 1
            p = torch.arange(offset, offset + q.shape[-2], device=q.device).float()
            return (q * (torch.log1p(torch.floor((p + 1.0) / length)) * beta + 1.0)[:, None]).to(q.dtype)
        if positions is None:
            positions = torch.arange(offset, offset + q.shape[-2], device=q.device)
        tau = 1 + beta * torch.log(1 + torch.floor(positions / length))  # (T_q,) or (B, T_q), float32
        return q * (tau[:, None] if tau.dim() == 1 else tau[:, None, :, None]).to(q.dtype)

    def project_q(self, x: torch.Tensor) -> torch.Tensor:
        """Queries of ``x`` (B, T_q, D) -> (B, H, T_q, Dh)."""
        if self.fused_qkv:  # cross-attention: the whole product, through the module (a LoRA on it included)
            return self.heads(self.qkv_proj(x)[..., :self.qkv_sizes[0]], self.q_norm, self.n_heads)
        return self.project(x, self.q_proj, self.q_norm, self.n_heads)

    def project_kv(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``source`` (B, T_k, D), each (B, H_kv, T_k, Dh)."""
        if self.fused_qkv:
            _, k, v = self.qkv_proj(source).split(self.qkv_sizes, dim=-1)
            return self.heads(k, self.k_norm, self.n_kv_heads), self.split_heads(v, self.n_kv_heads)
        k = self.project(source, self.k_proj, self.k_norm, self.n_kv_heads)  # (B, T_k, D) -> (B, H_kv, T_k, Dh)
        v = self.split_heads(self.v_proj(source), self.n_kv_heads)
        return k, v

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's queries (B, H, T, Dh), keys and values (B, H_kv, T, Dh) of ``x`` (B, T, D): with
        ``fused_qkv``, one product split by the head counts."""
        if not self.fused_qkv:
            return (self.project(x, self.q_proj, self.q_norm, self.n_heads),) + self.project_kv(x)
        h = self.qkv_proj(x)  # (B, T, (H + 2 H_kv) Dh)
        q, k, v = h.split(self.qkv_sizes, dim=-1)  # -> 3 views (B, T, width)
        if self.qk_norm in ("none", "weightless"):  # split first, then heads: backward joins the kernel's gradients
            # with one cat; a view of the whole product split by heads would also copy them back in a clone
            return self.split_heads(q, self.n_heads), self.split_heads(k, self.n_kv_heads), self.split_heads(
                v, self.n_kv_heads)
        return (self.heads(q, self.q_norm, self.n_heads), self.heads(k, self.k_norm, self.n_kv_heads),
                self.split_heads(v, self.n_kv_heads))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        rope: RotaryEmbedding | None = None,
        positions: torch.Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
        causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``x`` to itself (self-attention) or to ``memory`` (cross-attention).

        Args:
            x: (B, T_q, D) the tokens that ask (queries).
            memory: (B, T_k, D) what to look at for cross-attention (the encoder output); ``None`` for
                self-attention.
            mask: boolean, ``True`` = may attend, broadcastable to (B, H, T_q, T_k), where T_k counts
                cached keys too.
            bias: float scores bias broadcastable to (B, H, T_q, T_k), e.g. ALiBi.
            rope: rotate queries and keys (self-attention only) at ``positions`` (T_q,) or (B, T_q);
                default positions continue from the cache: ``cache.length + arange(T_q)``.
            cache: a :class:`KVCache` (or :class:`ConcatKVCache`). Self-attention appends the new keys
                and values and attends to all of them. Cross-attention fills it on the first call and
                reuses it afterwards (the encoder output does not change while decoding).
            need_weights: also return the (B, H, T_q, T_k) attention weights; this always takes the
                manual path, the only one that materialises them.
            causal: also hide the future (queries the last T_q of the T_k keys), as ``mask=causal_mask(T_q, T_k)``
                would, combined with ``mask``; see :func:`minitfm.scaled_dot_product_attention`. A model's forward
                passes it instead of the mask when the causal mask is all there is: the fused kernel then masks
                by itself.

        Returns:
            ``(out, weights)``: out (B, T_q, D); weights (B, H, T_q, T_k) or ``None``.
        """
        self._check_input(x, "x")
        if memory is not None:
            self._check_input(memory, "memory")
            if memory.shape[0] not in (1, x.shape[0]):
                raise ValueError(f"memory must have batch size 1 or B={x.shape[0]} like x, got {memory.shape[0]} "
                                 f"(x {tuple(x.shape)}, memory {tuple(memory.shape)})")
            if rope is not None:
                raise ValueError("rope rotates positions within one sequence; it does not apply to cross-attention")
        offset = cache.length if (cache is not None and memory is None) else 0
        if memory is None:  # (B, T_q, D) -> q (B, H, T_q, Dh), k and v (B, H_kv, T_q, Dh)
            q, k, v = self.project_qkv(x)
        else:
            q = self.project_q(x)  # (B, T_q, D) -> (B, H, T_q, Dh)
        if memory is not None and cache is not None and cache.length > 0:
            k, v = cache.get()  # cross-attention: the encoder's keys/values were computed once
        else:
            if memory is not None:
                k, v = self.project_kv(memory)
            if rope is not None:
                q, k = self.rotate(rope, q, offset, positions), self.rotate(rope, k, offset, positions)
            if self.qk_norm == "weightless" and rope is not None:  # Llama 4: after RoPE, on the RoPE layers
                q, k = weightless_qk_norm(q, self.norm_eps), weightless_qk_norm(k, self.norm_eps)
            if self.temperature is not None and memory is None and (len(self.temperature) == 2 or rope is None):
                q = self.temper(q, offset, positions)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, H_kv, T_cached + T_q, Dh)
                if k.shape[-2] < offset + q.shape[-2]:  # a bounded cache returned only the latest keys:
                    mask = None if mask is None else mask[..., -k.shape[-2]:]  # align the columns to the right
                    bias = None if bias is None else bias[..., -k.shape[-2]:]

        if self.n_kv_heads != self.n_heads:  # grouped heads: each K/V head serves H / H_kv query heads
            repeat = self.n_heads // self.n_kv_heads
            k = k.repeat_interleave(repeat, dim=1)  # (B, H_kv, T_k, Dh) -> (B, H, T_k, Dh)
            v = v.repeat_interleave(repeat, dim=1)

        # Decoding with a cache needs no weights: PyTorch's fused kernel is one call instead of the five
        # steps of the manual path, which is most of a small model's decode step.
        impl = "manual" if need_weights or self.softcap is not None else \
            ("fused" if cache is not None and not self.training else self.impl)
        options = {n: x for n, x in (("scale", self.scale), ("softcap", self.softcap)) if x is not None}  # only if set
        if self.sinks is not None:  # gpt-oss: the sink's column, then the causal mask made here (no kernel flag)
            if causal:
                tri = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
                mask = tri if mask is None else mask & tri
            out, weights = sink_attention(q, k, v, self.sinks, mask, scale=self.scale)
        else:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask=mask, bias=bias, dropout_p=self.dropout if self.training else 0.0, impl=impl,
                causal=causal, **options)
        out = out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)  # (B, H, T_q, Dh) -> (B, T_q, H Dh)
        if self.gate_proj is not None:  # Qwen 3.5: each output feature through its own sigmoid gate
            out = out * torch.sigmoid(self.gate_proj(x))
        return self.out_proj(out), weights if need_weights else None
