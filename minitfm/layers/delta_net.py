"""Gated DeltaNet: linear attention with a fixed-size state, the delta rule and a decay (Qwen3-Next, Qwen 3.5).

Glossary: B batch, T length, D d_model, H value heads (one state each), H_k query/key heads (H divides by H_k),
Dk key head dim, Dv value head dim, C chunk size, K convolution kernel.

Softmax attention keeps every past key and value, so its cache grows with T. A linear-attention layer keeps
one matrix per head instead, the state S (Dk x Dv), and reads it with the query: o_t = S_t^T q_t. The delta
rule (Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length") writes
to S like one step of gradient descent on ||S^T k - v||^2: it reads what S predicts for the key, S^T k_t, and
stores only a beta_t share of the error v_t - S^T k_t. Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, "Gated
Delta Networks", arXiv 2412.06464) first multiplies S by a decay exp(g_t) in (0, 1], so the layer can forget:

    S_t = exp(g_t) S_{t-1}                                   (decay, first)
    S_t = S_t + beta_t k_t (v_t - S_t^T k_t)^T               (delta-rule update)
    o_t = S_t^T q_t

with q and k L2-normalised and q scaled by 1 / sqrt(Dk), the conventions of transformers' torch fallback for
Qwen3-Next (``torch_recurrent_gated_delta_rule``). :func:`gated_delta_recurrent` runs this token by token
(decoding); :func:`gated_delta_chunked` computes the same thing C tokens at a time with matrix products
(a prompt). Both take (B, H, T, .) tensors, as attention does here, and return the final state (B, H, Dk, Dv),
the whole cache of the layer whatever T.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import (check_choice, check_module_input, check_number, check_positive_int, check_tensor,
                             inputs_trusted)
from minitfm.layers.kv_cache import bytes_per_element, kv_cache_bytes

LAYOUTS = ("qwen3_next", "qwen3_5")  # fused projections (Qwen3-Next) or four separate ones (Qwen 3.5)


def _l2_normalise(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)  # eps inside, as transformers and FLA


def _prepare(q, k, v, g, beta, state):
    """Check the shapes, normalise q and k, scale q; compute in float32 for half inputs (as transformers)."""
    if not inputs_trusted():
        for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
            check_tensor(t, name, ndim=3 if name in ("g", "beta") else 4, floating=True)
        b, h, t, dk = q.shape
        dv = v.shape[-1]
        want = {"k": ((b, h, t, dk), k), "v": ((b, h, t, dv), v), "g": ((b, h, t), g), "beta": ((b, h, t), beta)}
        if state is not None:
            check_tensor(state, "state", ndim=4, floating=True)
            want["state"] = ((b, h, dk, dv), state)
        for name, (shape, x) in want.items():
            if tuple(x.shape) != shape:
                raise ValueError(f"q is (B, H, T, Dk) = {tuple(q.shape)} and v has Dv = {dv}, so {name} must be "
                                 f"{shape}, got {tuple(x.shape)}")
        dtypes = {x.dtype for x in (q, k, v, g, beta)}
        if len(dtypes) > 1:
            raise TypeError(f"q, k, v, g and beta must share one dtype, got {sorted(str(d) for d in dtypes)}")
    work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    q, k, v, g, beta = (x.to(work) for x in (q, k, v, g, beta))
    q = _l2_normalise(q) * q.shape[-1] ** -0.5
    k = _l2_normalise(k)
    if state is None:
        state = q.new_zeros(q.shape[0], q.shape[1], q.shape[-1], v.shape[-1])
    return q, k, v, g, beta, state.to(work)


def gated_delta_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                          state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule one token at a time.

    Args:
        q, k: (B, H, T, Dk) queries and keys (normalised here); v: (B, H, T, Dv) values.
        g: (B, H, T) log decay (<= 0: the state is multiplied by exp(g)); beta: (B, H, T) write strength in [0, 1].
        state: (B, H, Dk, Dv) the state before the first token; ``None`` = zeros.

    Returns:
        The outputs (B, H, T, Dv) in the input's dtype, and the state after the last token (B, H, Dk, Dv), in
        float32 for half inputs.
    """
    dtype = q.dtype
    q, k, v, g, beta, state = _prepare(q, k, v, g, beta, state)
    outputs = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t, None, None].exp()  # decay first, then the delta rule reads the decayed state
        k_t = k[:, :, t].unsqueeze(-2)  # (B, H, Dk) -> (B, H, 1, Dk)
        error = v[:, :, t].unsqueeze(-2) - k_t @ state  # (B, H, 1, Dv): v_t - S^T k_t
        state = state + k_t.transpose(-1, -2) @ (beta[:, :, t, None, None] * error)  # + beta k (v - S^T k)^T
        outputs.append((q[:, :, t].unsqueeze(-2) @ state).squeeze(-2))  # o_t = S_t^T q_t, (B, H, Dv)
    out = torch.stack(outputs, dim=2) if outputs else v.new_zeros(v.shape)
    return out.to(dtype), state


def gated_delta_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                        chunk_size: int = 64, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The same outputs and final state as :func:`gated_delta_recurrent`, C tokens at a time.

    Inside a chunk, with G_i = g_1 + ... + g_i (the log decay from the chunk's start S_0 to token i), every
    state is S_i = e^{G_i} S_0 + sum_{j<=i} e^{G_i - G_j} k_j u_j^T, where u_j is what token j actually writes:
    u_j = beta_j (v_j - e^{G_j} S_0^T k_j - sum_{m<j} e^{G_j - G_m} (k_j . k_m) u_m). Those C equations form one
    unit lower-triangular system (I + A) U = beta (V - e^G K S_0), solved at once; then the outputs are
    o_i = e^{G_i} S_0^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i . k_j) u_j, a masked (C x C) product as in attention.
    Only the step from one chunk's state to the next is sequential: T / C steps instead of T.

    Args: as :func:`gated_delta_recurrent`, and ``chunk_size`` C (the last chunk is padded with tokens of
    beta = 0 and g = 0, which write nothing and decay nothing).
    """
    check_positive_int(chunk_size, "chunk_size")
    dtype, (b, h, t, _) = q.dtype, q.shape
    q, k, v, g, beta, state = _prepare(q, k, v, g, beta, state)
    pad = -t % chunk_size
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    q, k, v = (x.reshape(b, h, -1, chunk_size, x.shape[-1]) for x in (q, k, v))  # (B, H, T, .) -> (B, H, N, C, .)
    g, beta = (x.reshape(b, h, -1, chunk_size) for x in (g, beta))  # (B, H, T) -> (B, H, N, C)
    G = g.cumsum(-1)  # (B, H, N, C): log decay from each chunk's start
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
    # e^{G_i - G_j} for j <= i; masked before exp, where G_i - G_j > 0 could overflow
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()  # (B, H, N, C, C)
    system = beta[..., None] * (k @ k.transpose(-1, -2)) * decay.tril(-1)  # A, strictly lower; the solver adds I
    scores = (q @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C): q_i . k_j, decayed, j <= i
    to_end = (G[..., -1:] - G).exp()[..., None]  # (B, H, N, C, 1): decay from token j to the chunk's end
    outputs = []
    for n in range(q.shape[2]):
        start = G[:, :, n, :, None].exp()  # (B, H, C, 1): decay of S_0 up to token i
        target = beta[:, :, n, :, None] * (v[:, :, n] - start * (k[:, :, n] @ state))  # (B, H, C, Dv)
        u = torch.linalg.solve_triangular(system[:, :, n], target, upper=False, unitriangular=True)
        outputs.append(start * (q[:, :, n] @ state) + scores[:, :, n] @ u)  # (B, H, C, Dv)
        state = G[:, :, n, -1, None, None].exp() * state + (to_end[:, :, n] * k[:, :, n]).transpose(-1, -2) @ u
    out = torch.cat(outputs, dim=2)[:, :, :t] if outputs else v.new_zeros(b, h, 0, v.shape[-1])
    return out.to(dtype), state


class GatedRMSNorm(nn.Module):
    """weight * x / rms(x) * silu(z): the RMSNorm of each value head's output, gated by z (Qwen3-Next)."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_number(eps, "eps", low=0.0)
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        normed = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (self.weight * normed.to(x.dtype) * F.silu(z.to(wide.dtype))).to(x.dtype)  # gate after the norm


class DeltaNetCache:
    """What a Gated DeltaNet layer carries from one call to the next; its size never depends on T.

    ``conv``: (B, C_conv, K - 1) the last K - 1 inputs of the short convolution (zeros = nothing seen yet);
    ``state``: (B, H, Dk, Dv) the delta-rule state (float32 for a half-precision layer, as transformers keeps it);
    ``length``: the tokens seen so far, a count only. Build one with :meth:`GatedDeltaNet.new_cache`.
    """

    def __init__(self, conv: torch.Tensor, state: torch.Tensor):
        self.conv, self.state, self.length = conv, state, 0

    def nbytes(self) -> int:
        """The bytes the cache holds now (:func:`cache_bytes` for the layer's dtype)."""
        return self.conv.nbytes + self.state.nbytes


class GatedDeltaNet(nn.Module):
    """The linear-attention layer of Qwen3-Next and Qwen 3.5 (transformers' ``Qwen3NextGatedDeltaNet`` and
    ``Qwen3_5GatedDeltaNet``), parameter for parameter.

    Steps: input projections give q, k (H_k heads of Dk), v and the output gate z (H heads of Dv), and per value
    head b and a: beta = sigmoid(b) and g = -exp(A_log) softplus(a + dt_bias) (a learned per-head rate, as in
    Mamba 2); a causal depthwise convolution of K taps then SiLU mixes each of q, k, v with the K - 1 tokens
    before it; the gated delta rule runs per value head, each query/key head serving H / H_k value heads; a
    :class:`GatedRMSNorm` gated by z and ``out_proj`` give the output. The projections keep each checkpoint's
    layout, so the weights load without reordering (``layout``):

    - ``"qwen3_next"``: two fused projections, ``in_proj_qkvz`` holding for each key head g [q_g (Dk), k_g (Dk),
      v (H/H_k x Dv), z (H/H_k x Dv)] and ``in_proj_ba`` holding for each key head [b (H/H_k), a (H/H_k)];
    - ``"qwen3_5"``: four, ``in_proj_qkv`` = [q (H_k Dk), k (H_k Dk), v (H Dv)], ``in_proj_z`` (H Dv),
      ``in_proj_b`` and ``in_proj_a`` (H each), every one head after head. The same numbers, grouped otherwise:
      the computation after the split is identical.

    Args:
        d_model: D. n_heads: H value heads. n_key_heads: H_k (H must divide by it). d_key_head: Dk.
        d_value_head: Dv. conv_kernel: K. norm_eps: the gated norm's epsilon. chunk_size: C for prompts.
        layout: ``"qwen3_next"`` or ``"qwen3_5"``, the projections' layout above.
    """

    def __init__(self, d_model: int, n_heads: int, n_key_heads: int, d_key_head: int, d_value_head: int,
                 conv_kernel: int = 4, norm_eps: float = 1e-6, chunk_size: int = 64, layout: str = "qwen3_next"):
        super().__init__()
        check_choice(layout, "layout", LAYOUTS)
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_key_heads", n_key_heads),
                            ("d_key_head", d_key_head), ("d_value_head", d_value_head),
                            ("conv_kernel", conv_kernel), ("chunk_size", chunk_size)):
            check_positive_int(value, name)
        if n_heads % n_key_heads:
            raise ValueError(f"n_heads must be divisible by n_key_heads, got n_heads={n_heads}, "
                             f"n_key_heads={n_key_heads}")
        self.d_model, self.n_heads, self.n_key_heads, self.layout = d_model, n_heads, n_key_heads, layout
        self.d_key_head, self.d_value_head, self.conv_kernel, self.chunk_size = (
            d_key_head, d_value_head, conv_kernel, chunk_size)
        key_dim, value_dim = n_key_heads * d_key_head, n_heads * d_value_head
        self.conv_channels = 2 * key_dim + value_dim  # q, k and v go through the convolution; z does not
        if layout == "qwen3_next":
            self.in_proj_qkvz = nn.Linear(d_model, 2 * key_dim + 2 * value_dim, bias=False)
            self.in_proj_ba = nn.Linear(d_model, 2 * n_heads, bias=False)
        else:
            self.in_proj_qkv = nn.Linear(d_model, self.conv_channels, bias=False)
            self.in_proj_z = nn.Linear(d_model, value_dim, bias=False)
            self.in_proj_b, self.in_proj_a = (nn.Linear(d_model, n_heads, bias=False) for _ in range(2))
        self.conv1d = nn.Conv1d(self.conv_channels, self.conv_channels, conv_kernel, groups=self.conv_channels,
                                bias=False)  # depthwise: one K-tap filter per channel, no mixing across channels
        self.dt_bias = nn.Parameter(torch.ones(n_heads))
        self.A_log = nn.Parameter(torch.empty(n_heads).uniform_(1.0, 16.0).log())  # rates exp(A_log) in [1, 16]
        self.norm = GatedRMSNorm(d_value_head, eps=norm_eps)
        self.out_proj = nn.Linear(value_dim, d_model, bias=False)

    def new_cache(self, batch_size: int) -> DeltaNetCache:
        """An empty cache (zeros) in the layer's dtype and device: its size is fixed here, before any token."""
        check_positive_int(batch_size, "batch_size")
        weight = self.out_proj.weight
        state_dtype = torch.float32 if weight.dtype in (torch.float16, torch.bfloat16) else weight.dtype
        conv = weight.new_zeros(batch_size, self.conv_channels, self.conv_kernel - 1)
        state = torch.zeros(batch_size, self.n_heads, self.d_key_head, self.d_value_head, dtype=state_dtype,
                            device=weight.device)
        return DeltaNetCache(conv, state)

    def split(self, x: torch.Tensor):
        """(B, T, D) -> q, k (B, T, H_k Dk), v (B, T, H Dv), z (B, T, H, Dv), b and a (B, T, H)."""
        bsz, t, _ = x.shape
        if self.layout == "qwen3_5":  # head after head already: q, k, v side by side, then z, b, a
            key_dim = self.n_key_heads * self.d_key_head
            q, k, v = torch.split(self.in_proj_qkv(x), [key_dim, key_dim, self.n_heads * self.d_value_head], -1)
            z = self.in_proj_z(x).view(bsz, t, self.n_heads, self.d_value_head)  # (B, T, H Dv) -> (B, T, H, Dv)
            return q, k, v, z, self.in_proj_b(x), self.in_proj_a(x)
        per_group = self.n_heads // self.n_key_heads  # value heads per key head
        qkvz = self.in_proj_qkvz(x).view(bsz, t, self.n_key_heads, -1)  # (B, T, H_k, 2 Dk + 2 (H/H_k) Dv)
        ba = self.in_proj_ba(x).view(bsz, t, self.n_key_heads, 2 * per_group)  # (B, T, H_k, 2 H/H_k)
        dk, dv = self.d_key_head, per_group * self.d_value_head
        q, k, v, z = torch.split(qkvz, [dk, dk, dv, dv], dim=-1)
        b, a = torch.split(ba, [per_group, per_group], dim=-1)
        flat = [y.reshape(bsz, t, -1) for y in (q, k, v, b, a)]  # key head g's value heads are g*H/H_k, ...
        return flat[0], flat[1], flat[2], z.reshape(bsz, t, self.n_heads, self.d_value_head), flat[3], flat[4]

    def convolve(self, qkv: torch.Tensor, cache: DeltaNetCache | None) -> torch.Tensor:
        """(B, T, C_conv) -> (B, T, C_conv): causal depthwise convolution and SiLU, after the cached K - 1 inputs."""
        x = qkv.transpose(1, 2)  # (B, T, C_conv) -> (B, C_conv, T)
        past = cache.conv if cache is not None else x.new_zeros(x.shape[0], x.shape[1], self.conv_kernel - 1)
        x = torch.cat([past, x], dim=-1)  # (B, C_conv, K - 1 + T)
        if cache is not None:
            cache.conv = x[:, :, x.shape[-1] - (self.conv_kernel - 1):]
        return F.silu(self.conv1d(x)).transpose(1, 2)  # no padding: exactly T outputs

    def forward(self, x: torch.Tensor, cache: DeltaNetCache | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, D) -> (B, T, D). With ``cache``, continue from it and update it in place (T = 1: the recurrent
        form, a decoding step; longer: the chunked form, a prompt or the next part of one).

        ``mask``: the batch's padding mask, (B, L) with L >= T, True or 1 for a real token (its last T columns
        are this call's tokens, so the whole mask so far may be passed). Padded positions' inputs are zeroed
        first, as transformers does: a zero input gives q = k = v = 0 through the bias-free projections and
        convolution, so a left-padded row's state is still zero at its first real token and its convolution sees
        zeros there, as a row alone does. (Right padding would decay the state and fill the convolution's cache
        with zeros after the row's end: pad on the left to continue from the cache.)"""
        check_module_input(x, "x", self, self.d_model, ndim=3)
        bsz, t, _ = x.shape
        if cache is not None and not inputs_trusted():
            if not isinstance(cache, DeltaNetCache):
                raise TypeError(f"cache must be a DeltaNetCache (layer.new_cache), got {type(cache).__name__}")
            if cache.state.shape[0] != bsz:
                raise ValueError(f"the cache holds batch size {cache.state.shape[0]}, x has {bsz}")
        if mask is not None:
            if not inputs_trusted():
                check_tensor(mask, "mask", ndim=2)
                if mask.shape[0] != bsz or mask.shape[1] < t:
                    raise ValueError(f"mask must be (B, L) = ({bsz}, >= {t}), True for real tokens, "
                                     f"got {tuple(mask.shape)}")
            x = x * mask[:, -t:, None].to(x.dtype)  # (B, T, 1): padded positions' inputs become zeros
        q, k, v, z, b, a = self.split(x)
        qkv = self.convolve(torch.cat([q, k, v], dim=-1), cache)
        key_dim = self.n_key_heads * self.d_key_head
        q, k, v = torch.split(qkv, [key_dim, key_dim, self.n_heads * self.d_value_head], dim=-1)
        repeat = self.n_heads // self.n_key_heads
        # (B, T, H_k Dk) -> (B, H, T, Dk): key head g serves value heads g*H/H_k ... (g+1)*H/H_k - 1
        q, k = (y.view(bsz, t, self.n_key_heads, -1).repeat_interleave(repeat, dim=2).transpose(1, 2) for y in (q, k))
        v = v.view(bsz, t, self.n_heads, -1).transpose(1, 2)  # (B, T, H Dv) -> (B, H, T, Dv)
        beta = b.sigmoid().transpose(1, 2)  # (B, T, H) -> (B, H, T)
        work = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype  # g never in half
        g = -self.A_log.to(work).exp() * F.softplus(a.to(work) + self.dt_bias.to(work))  # (B, T, H), <= 0
        q, k, v, g, beta = (y.to(work) for y in (q, k, v, g.transpose(1, 2), beta))
        state = cache.state if cache is not None else None
        if t == 1 and cache is not None:
            out, state = gated_delta_recurrent(q, k, v, g, beta, state)
        else:
            out, state = gated_delta_chunked(q, k, v, g, beta, self.chunk_size, state)
        if cache is not None:
            cache.state, cache.length = state, cache.length + t
        out = self.norm(out.to(x.dtype).transpose(1, 2), z)  # (B, H, T, Dv) -> (B, T, H, Dv), gated by z
        return self.out_proj(out.reshape(bsz, t, -1))  # (B, T, H Dv) -> (B, T, D)


def cache_bytes(layer, batch_size: int = 1, dtype: torch.dtype | str = torch.float32) -> int:
    """Bytes of one Gated DeltaNet layer's cache, for any length: B (C_conv (K - 1) + H Dk Dv) numbers, C_conv =
    2 H_k Dk + H Dv, the state in float32 when ``dtype`` is narrower (as :meth:`GatedDeltaNet.new_cache` builds it
    for a half type). ``layer``: a :class:`GatedDeltaNet`, or its sizes (``ModelConfig.delta_net``)."""
    check_positive_int(batch_size, "batch_size")
    size = bytes_per_element(dtype)
    conv = (2 * layer.n_key_heads * layer.d_key_head + layer.n_heads * layer.d_value_head) * (layer.conv_kernel - 1)
    return batch_size * (conv * size + layer.n_heads * layer.d_key_head * layer.d_value_head * max(size, 4))


def softmax_kv_bytes(seq_len: int, n_kv_heads: int, d_head: int, batch_size: int = 1,
                     dtype: torch.dtype = torch.float32) -> int:
    """Bytes of one softmax attention layer's KV cache after ``seq_len`` tokens: 2 B T H_kv Dh x bytes per number
    (:func:`minitfm.layers.kv_cache.kv_cache_bytes` of one layer, which counts whole models too)."""
    return kv_cache_bytes(1, n_kv_heads, seq_len, d_head, batch_size=batch_size, dtype=dtype)
