"""Whole models: the encoder-decoder Transformer of the paper and a decoder-only language model.

Glossary: B batch, S source length, T new target tokens, P tokens already in the KV cache,
T_k = P + T keys seen by self-attention, D d_model, H heads, V vocab_size, L layers.

Both models share one embedding recipe: token vectors scaled by sqrt(D) (the paper's choice: the embedding is
initialised with std 1/sqrt(D), so the scaled vectors have unit size like the sinusoidal encodings added to them),
plus additive positions for ``pos="sinusoidal"|"learned"``; RoPE rotates queries/keys inside attention and ALiBi
biases the scores instead.

KV cache: pass ``caches=model.new_caches(B, max_len)`` and feed the tokens step by step (or a prompt
first). Positions start at P; the causal mask ``causal_mask(T, P + T)`` and ALiBi's bias, both bottom-right.

Padded prompts (decoder-only): pad on the **left** and pass ``key_mask`` (B, P + T), ``True`` for real
tokens, covering cached tokens too. Padding keys are then hidden and positions count real tokens only
(``cumsum(key_mask) - 1``), so a padded row computes what the unpadded prompt would. ALiBi measures
distances in columns, which left padding leaves unchanged between real tokens.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from minitfm._checks import check_module_input, check_tensor, check_token_ids, trusted_inputs
from minitfm._decoder_masks import DECODER_ONLY_FIELDS, mask_keys, positions_from_mask, window_masks
from minitfm.config import ModelConfig
from minitfm.layers.blocks import DecoderBlock, EncoderBlock, LayerCache
from minitfm.layers.kv_cache import KVCache, SlidingKVCache
from minitfm.layers.latent_attention import LatentKVCache
from minitfm.layers.masks import causal_mask, causal_mask as _library_causal_mask, padding_mask
from minitfm.layers.norms import make_norm
from minitfm.layers.positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding, alibi_bias


@dataclass
class Intermediates:
    """What a forward pass saw, ready to plot. Attention lists hold one (B, H, T_q, T_k) tensor per
    layer; hidden lists hold the embeddings then the output of every block, each (B, T, D)."""

    encoder_self: list = field(default_factory=list)  # L_enc x (B, H, S, S)
    decoder_self: list = field(default_factory=list)  # L_dec x (B, H, T, P + T)
    cross: list = field(default_factory=list)  # L_dec x (B, H, T, S)
    encoder_hidden: list = field(default_factory=list)  # (L_enc + 1) x (B, S, D)
    decoder_hidden: list = field(default_factory=list)  # (L_dec + 1) x (B, T, D)


class _Transformer(nn.Module):
    """Embeddings, positions, output head and cache helpers shared by both models."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = c = config.resolved()
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = None
        if c.pos == "learned":
            self.pos_emb = LearnedPositionalEmbedding(c.max_seq_len, c.d_model)
        elif c.pos == "sinusoidal":
            self.pos_emb = SinusoidalPositionalEncoding(c.d_model, c.max_seq_len)
        turned = c.rope_dims or c.d_head  # partial RoPE (GLM-4.5, MiniMax-M2): the first rope_dims of each head
        self.rope = RotaryEmbedding(turned, c.rope_base, c.rope_scale, c.rope_scaling) if c.pos == "rope" else None
        # Gemma 3's sliding layers turn with their own base, unscaled; the others with self.rope
        self.local_rope = None if c.rope_local_base is None else RotaryEmbedding(turned, c.rope_local_base)
        self.emb_dropout = nn.Dropout(c.dropout)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        nn.init.normal_(self.tok_emb.weight, std=self.config.d_model ** -0.5)
        if self.config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one (V, D) matrix reads and writes tokens

    def _final_norm(self) -> nn.Module:
        c = self.config
        return make_norm(c.norm, c.d_model, eps=c.norm_eps, bias=c.norm_bias) if c.norm_first else nn.Identity()

    def check_tokens(self, tokens: torch.Tensor, name: str, past: int = 0) -> None:
        check_token_ids(tokens, name)
        if tokens.numel() == 0:
            raise ValueError(f"{name} is empty: got shape {tuple(tokens.shape)}, need (B >= 1, T >= 1)")
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.config.vocab_size:
            raise ValueError(f"{name} ids must be in [0, vocab_size={self.config.vocab_size}), got min {low}, max {high}")
        if past + tokens.shape[1] > self.config.max_seq_len:
            raise ValueError(f"{name}: {past} cached + {tokens.shape[1]} new tokens exceed "
                             f"max_seq_len={self.config.max_seq_len}")

    def embed(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """(B, T) ids and (T,) or (B, T) positions -> (B, T, D) scaled embeddings (+ positions)."""
        check_tensor(positions, "positions", ndim=(1, 2))
        if positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integer positions, got dtype {positions.dtype}")
        b, t = tokens.shape
        if positions.shape[-1] != t or (positions.dim() == 2 and positions.shape[0] not in (1, b)):
            raise ValueError(f"positions must have shape (T,) = ({t},) or (B, T) = ({b}, {t}) like the tokens, "
                             f"got {tuple(positions.shape)}")
        x = self.tok_emb(tokens)  # (B, T) -> (B, T, D)
        if self.config.scale_embeddings:  # fp16/bf16: sqrt(D) rounded to the dtype first (55.5 for D = 3072), as Gemma's
            scale = math.sqrt(self.config.d_model)
            x = x * (scale if x.dtype in (torch.float32, torch.float64) else float(torch.tensor(scale, dtype=x.dtype)))
        if self.pos_emb is not None:
            x = x + self.pos_emb(positions=positions)  # (T, D) or (B, T, D) broadcasts over B
        return self.emb_dropout(x) if self.training and self.emb_dropout.p > 0 else x

    def alibi(self, t_q: int, t_k: int) -> torch.Tensor | None:
        """(1, H, T_q, T_k) ALiBi bias, or None for other positional schemes."""
        return None if self.config.pos != "alibi" else alibi_bias(self.config.n_heads, t_q, t_k,
                                                                  device=self.tok_emb.weight.device)

    def _new_cache(self, cls, batch_size: int, length: int, dtype, device, **extra) -> KVCache:
        c = self.config
        weights = self.tok_emb.weight.dtype
        if dtype is not None and dtype != weights:  # a cache of another dtype would fail inside attention
            raise TypeError(f"new_caches(dtype={dtype}) does not match the model's weights ({weights}); "
                            "leave dtype out to use the model's, or cast the model first")
        dtype = weights if dtype is None else dtype
        device = self.tok_emb.weight.device if device is None else device
        return cls(batch_size, c.n_kv_heads, length, c.d_head, dtype=dtype, device=device, **extra)

    def _check_caches(self, caches, n_layers: int, cross: bool) -> int:
        """Validate ``caches`` and return P, the number of tokens already cached."""
        if caches is None:
            return 0
        if len(caches) != n_layers or not all(isinstance(c, LayerCache) for c in caches):
            raise ValueError(f"caches must be a list of {n_layers} LayerCache (use model.new_caches), "
                             f"got {caches!r:.80}")
        if cross and any(c.cross_attn is None for c in caches):
            raise ValueError("the encoder-decoder decoder needs cross-attention caches; use model.new_caches")
        return caches[0].length


class DecoderOnlyLM(_Transformer):
    """A GPT-style language model: ``n_layers`` causal DecoderBlocks without cross-attention.

    ``forward(tokens (B, T), *, caches, positions, key_mask, attn_mask, return_intermediates)`` returns logits
    (B, T, V), or ``(logits, Intermediates)``: ``lm_head`` on ``hidden_states(tokens, ...)`` (B, T, D), the one
    pass. ``positions`` (T,) or (B, T) overrides the default (P + arange(T), or counted from ``key_mask``);
    ``key_mask`` (B, P + T) bool, ``True`` = real token; ``attn_mask`` (B or 1, 1, T, P + T) bool, ``True`` = query
    may attend to key, narrows the causal mask further (combined with it: packed rows pass a block-diagonal one).

    Layer i attends within ``config.layer_window(i)`` keys (a sliding window, counted in columns of the cache
    as ``transformers`` counts them) or its chunk (``config.layer_chunk(i)``) and rotates with ``config.layer_rope(i)``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        c = self.config
        self.layers = nn.ModuleList(DecoderBlock(c, cross_attention=False, layer=i) for i in range(c.n_layers))
        self.layer_windows = [c.layer_window(i) for i in range(c.n_layers)]  # W or None, per layer
        self.mask_keys = mask_keys(c)  # W, ("chunk", C) or None, per layer: which mask it gets
        self.layer_ropes = [c.layer_rope(i) for i in range(c.n_layers)]  # "global", "local" or None
        self.final_norm = self._final_norm()
        self._init_weights()

    def window_masks(self, mask: torch.Tensor | None, t: int, past: int, device, key_mask=None) -> dict:
        """{each of ``mask_keys`` (W, ("chunk", C) or None): the mask of its layers}, see :func:`window_masks`."""
        return window_masks(self.mask_keys, mask, t, past, device, key_mask)

    def new_caches(self, batch_size: int, max_seq_len: int, cache_cls=KVCache, *, bounded: bool = False, dtype=None,
                   device=None):
        """One :class:`LayerCache` per layer, each holding up to ``max_seq_len`` tokens; ``bounded=True`` gives the
        sliding-window layers a :class:`SlidingKVCache` of their window; ``config.mla`` a :class:`LatentKVCache`."""
        def cache(i, window):
            if i in self.config.linear_layers:  # Gated DeltaNet: its convolution window and state, of fixed size
                return self.layers[i].self_attn.new_cache(batch_size)
            if self.config.mla is not None:  # latent attention caches R + Dr numbers per token, for every head
                m, weights = self.config.mla, self._new_cache(cache_cls, 1, 1, dtype, device)
                return LatentKVCache(batch_size, max_seq_len, m.kv_lora_rank, m.qk_rope_head_dim,
                                     dtype=weights.k.dtype, device=weights.k.device)
            if not bounded or window is None:
                return self._new_cache(cache_cls, batch_size, max_seq_len, dtype, device)
            return self._new_cache(SlidingKVCache, batch_size, max_seq_len, dtype, device, window=window)

        return [LayerCache(cache(i, w)) for i, w in enumerate(self.layer_windows)]

    def positions_from_mask(self, key_mask: torch.Tensor | None, past: int, t: int, batch: int,
                            device) -> torch.Tensor:
        """The positions of ``t`` new tokens after ``past`` cached ones: ``past + arange(t)`` (T,), or with a ``key_mask``
        (B, P + T) (checked) each token's index among its row's real tokens, (B, T): left padding does not shift them."""
        return positions_from_mask(key_mask, past, t, batch, device)

    def hidden_states(self, tokens: torch.Tensor, *, caches=None, positions=None, key_mask=None, attn_mask=None,
                      _inter: Intermediates | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, T, D) after the final norm (what ``lm_head`` reads): ``forward`` without the head."""
        past = self._check_caches(caches, len(self.layers), cross=False)
        self.check_tokens(tokens, "tokens", past)
        b, t = tokens.shape
        auto_positions = self.positions_from_mask(key_mask, past, t, b, tokens.device)
        positions = auto_positions if positions is None else positions
        masked = t > 1 or key_mask is not None or attn_mask is not None  # one new token after a cache sees every key
        # only the causal mask, this module's own (a chapter patches it to leak), and the fused kernel: causal=True
        fast = (masked and caches is None and key_mask is None and attn_mask is None and _inter is None
                and self.config.attn_impl == "fused" and causal_mask is _library_causal_mask)
        skip = fast and set(self.mask_keys) == {None}  # the kernel masks every layer itself: no mask to build
        mask = causal_mask(t, past + t, device=tokens.device) if masked and not skip else None  # (1, T, P + T)
        if key_mask is not None:
            mask = mask & key_mask[:, None, None, :]  # (1, T, P + T) & (B, 1, 1, P + T) -> (B, 1, T, P + T)
        if attn_mask is not None:
            check_tensor(attn_mask, "attn_mask", ndim=4)
            if attn_mask.dtype != torch.bool or attn_mask.shape[0] not in (1, b) or attn_mask.shape[1:] != (1, t, past + t):
                raise ValueError(f"attn_mask must be bool (B, 1, T, P + T) = ({b}, 1, {t}, {past + t}) with True = "
                                 f"may attend, got {attn_mask.dtype} {tuple(attn_mask.shape)}")
            if self.config.mla is not None:
                raise ValueError("latent attention (config.mla) masks causally and by key_mask only: no attn_mask")
            mask = mask & attn_mask  # (.., 1, T, P + T)
        bias = self.alibi(t, past + t)
        masks = self.window_masks(mask, t, past, tokens.device, key_mask)
        ropes = {"global": self.rope, "local": self.local_rope, None: None}
        x, inter = self.embed(tokens, positions), _inter
        if inter is not None:
            inter.decoder_hidden.append(x)
        with trusted_inputs():  # everything the layers get was checked above or built here
            for i, (layer, w) in enumerate(zip(self.layers, self.mask_keys)):
                x, weights, _ = layer(x, mask=None if fast and w is None else masks[w], causal=fast and w is None,
                                      bias=bias, rope=ropes[self.layer_ropes[i]], positions=positions,
                                      cache=None if caches is None else caches[i], need_weights=inter is not None,
                                      key_mask=key_mask)
                if inter is not None:
                    inter.decoder_self.append(weights)
                    inter.decoder_hidden.append(x)
        return self.final_norm(x)  # (B, T, D)

    def forward(self, tokens: torch.Tensor, *, caches=None, positions=None, key_mask=None, attn_mask=None,
                return_intermediates: bool = False):
        inter = Intermediates() if return_intermediates else None
        logits = self.lm_head(self.hidden_states(tokens, caches=caches, positions=positions, key_mask=key_mask,
                                                 attn_mask=attn_mask, _inter=inter))  # (B, T, D) -> (B, T, V)
        if self.config.final_softcap is not None:  # Gemma 2: logits smoothly capped at +-final_softcap
            logits = torch.tanh(logits / self.config.final_softcap) * self.config.final_softcap
        return (logits, inter) if return_intermediates else logits


class EncoderDecoder(_Transformer):
    """The Transformer of "Attention Is All You Need": an encoder over the source, a decoder that attends
    to its own past (causally) and to the encoder output (cross-attention). One embedding table serves
    source, target and (with ``tie_embeddings``) the output head.

    ``encode(src (B, S)) -> (memory (B, S, D), src_mask (B, 1, 1, S))``;
    ``decode(tgt_in (B, T), memory, src_mask, *, caches, positions, return_intermediates)`` -> logits (B, T, V);
    ``forward(src, tgt_in, *, return_intermediates)`` does both.
    """

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        c = self.config
        if c.pad_id is None:
            raise ValueError("an EncoderDecoder masks source padding by pad_id: give the config a pad_id, got None")
        decoder_only = {k: getattr(c, k) for k in DECODER_ONLY_FIELDS if getattr(c, k) not in (None, (), False)}
        if decoder_only:
            raise ValueError(f"these settings are the decoder-only models' (DecoderOnlyLM), got {decoder_only}")
        self.encoder = nn.ModuleList(EncoderBlock(c) for _ in range(c.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderBlock(c, cross_attention=True) for _ in range(c.n_decoder_layers))
        self.encoder_norm, self.final_norm = self._final_norm(), self._final_norm()
        self._init_weights()

    def new_caches(self, batch_size: int, max_seq_len: int, cache_cls=KVCache, *, memory_len=None, dtype=None, device=None):
        """One :class:`LayerCache` per decoder layer: self-attention for ``max_seq_len`` target tokens and
        cross-attention for ``memory_len`` source tokens (default ``config.max_seq_len``)."""
        memory_len = self.config.max_seq_len if memory_len is None else memory_len
        return [LayerCache(self._new_cache(cache_cls, batch_size, max_seq_len, dtype, device),
                           self._new_cache(cache_cls, batch_size, memory_len, dtype, device))
                for _ in self.decoder]

    def _encode(self, src: torch.Tensor, inter: Intermediates | None):
        self.check_tokens(src, "src")
        s = src.shape[1]
        src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        positions = torch.arange(s, device=src.device)
        x = self.embed(src, positions)
        bias = self.alibi(s, s)
        if inter is not None:
            inter.encoder_hidden.append(x)
        with trusted_inputs():  # the layers get tensors built here from checked token ids
            for layer in self.encoder:
                x, weights = layer(x, mask=src_mask, bias=bias, rope=self.rope, positions=positions,
                                   need_weights=inter is not None)
                if inter is not None:
                    inter.encoder_self.append(weights)
                    inter.encoder_hidden.append(x)
        return self.encoder_norm(x), src_mask

    def encode(self, src: torch.Tensor):
        """(B, S) source ids -> memory (B, S, D) and the padding mask (B, 1, 1, S) of the source."""
        return self._encode(src, None)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, *, caches=None,
               positions=None, return_intermediates: bool = False, _inter: Intermediates | None = None):
        past = self._check_caches(caches, len(self.decoder), cross=True)
        self.check_tokens(tgt_in, "tgt_in", past)
        check_module_input(memory, "memory", self, self.config.d_model, ndim=3)
        if memory.shape[0] != tgt_in.shape[0]:
            raise ValueError(f"memory batch {memory.shape[0]} != tgt_in batch {tgt_in.shape[0]}")
        check_tensor(src_mask, "src_mask", ndim=4)
        if src_mask.dtype != torch.bool or src_mask.shape[1:3] != (1, 1) or src_mask.shape[0] not in (1, memory.shape[0]) \
                or src_mask.shape[3] != memory.shape[1]:
            raise ValueError(f"src_mask must be the bool (B, 1, 1, S) = ({memory.shape[0]}, 1, 1, {memory.shape[1]}) "
                             f"mask that encode() returns, got {src_mask.dtype} {tuple(src_mask.shape)}")
        t = tgt_in.shape[1]
        positions = torch.arange(past, past + t, device=tgt_in.device) if positions is None else positions
        mask = causal_mask(t, past + t, device=tgt_in.device)  # (1, T, P + T)
        bias = self.alibi(t, past + t)
        x = self.embed(tgt_in, positions)
        inter = _inter if _inter is not None else (Intermediates() if return_intermediates else None)
        if inter is not None:
            inter.decoder_hidden.append(x)
        with trusted_inputs():  # memory and src_mask were checked above; the rest is built here
            for i, layer in enumerate(self.decoder):
                x, self_w, cross_w = layer(x, memory, mask=mask, bias=bias, memory_mask=src_mask, rope=self.rope,
                                           positions=positions, cache=None if caches is None else caches[i],
                                           need_weights=inter is not None)
                if inter is not None:
                    inter.decoder_self.append(self_w)
                    inter.cross.append(cross_w)
                    inter.decoder_hidden.append(x)
        logits = self.lm_head(self.final_norm(x))  # (B, T, D) -> (B, T, V)
        return (logits, inter) if inter is not None else logits

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, *, return_intermediates: bool = False):
        """(B, S) source and (B, T) decoder input -> logits (B, T, V) (and Intermediates on request)."""
        inter = Intermediates() if return_intermediates else None
        memory, src_mask = self._encode(src, inter)
        return self.decode(tgt_in, memory, src_mask, _inter=inter)
