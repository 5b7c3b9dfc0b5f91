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

**State is explicit, and the model owns it.** A decoder copies only what its step must change: q, k and v stacked
into one matrix, SwiGLU's (GeGLU's) gate and up into another, a pre-LN RMSNorm's gain folded into the product after
it (then the up matrix of a plain MLP too), the QK-norms' gains as one table, and the output head transposed to
(D, V) (:attr:`LeanDecoder.copy_head`: for one row the (in, out) layout reads the largest matrix about twice as
fast, 6 ms against 11.6 ms for GPT-2 small's head on one core of a 2-core EPYC, the difference between beating
``transformers`` and tying it). Everything else is the model's own tensor, read through a view: the output and
down projections, an unfolded up projection, the embeddings and the other norms' weights; the norms' ``eps``,
``norm_first``, the activation, the embedding scale, the attention's ``scale`` and ``softcap`` and RoPE's
frequencies are read at every step. **Memory:** the copies are those matrices again, :meth:`LeanDecoder.nbytes`:
for GPT-2 small 85 MB of q, k, v and 154 MB of output head, about half of its weights; for Qwen3-0.6B about 1.2 GB
of q, k, v, gate and up and 0.6 GB of head, three quarters of its weights (by the count of those matrices, in
float32). ``LeanDecoder.copy_head = False`` before the first ``generate`` keeps the head a view: a sixth and half.

``generate`` keeps one decoder per model (:meth:`LeanDecoder.of`) for as long as the model lives, and checks it at
every call (:meth:`LeanDecoder.is_current`, well under a millisecond plus one matrix-vector product per copied
matrix): it is rebuilt only when the model changed, so only the first call pays for the copy.
:meth:`LeanDecoder.release` frees it. The check sees a module or parameter replaced, moved or cast, a
parameter's version counter (an optimizer step, ``load_state_dict``, an in-place operation), a changed attention
setting (``scale``, ``softcap``, ``qk_norm``) or window, and a write through ``p.data`` or under
``torch.inference_mode`` (which bump no counter) into a matrix it copied: each copied matrix's product with a
fixed random (in,) probe, and each copied vector itself, are compared with those at build time (one read of the
copied-from matrices per call: about 20 ms for GPT-2 small on one core, most of it the head) (a change whose
product with the probe rounds to the same float32 numbers would be missed; no ordinary edit is). A caller can
still build and pass a decoder of its own (``dec = LeanDecoder.build(model)``, then ``generate(model, prompt, n,
decoder=dec)``); ``generate`` refuses it once it is stale.

Where :func:`~minitfm.generation.lean_refusal.refusal` gives a reason (training mode, hooks, a module type it
does not know exactly such as LoRA, a replaced ``forward``, tensor subclasses, mixed or half-precision dtypes, a
mixture of experts), :meth:`LeanDecoder.build` returns ``None`` and ``generate`` uses the modules.
"""
from __future__ import annotations

import math
import weakref

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import trusted_inputs
from minitfm.generation._lean_layer import _Layer, _Norm, _project, _signature
from minitfm.generation.lean_refusal import check_step_inputs, refusal
from minitfm.layers.attention import fused_attention
from minitfm.models import DecoderOnlyLM

_INITIAL_ROTATIONS = 256  # positions in RoPE's table when the builder gives no max_len; it grows on demand
_OWNED: "weakref.WeakKeyDictionary[DecoderOnlyLM, LeanDecoder]" = weakref.WeakKeyDictionary()  # model -> its decoder

class LeanDecoder:
    """The cached decode step of a :class:`~minitfm.models.DecoderOnlyLM`, without the module tree.

    ``LeanDecoder.of(model)`` is the model's own decoder (what ``generate`` uses), ``LeanDecoder.build(model,
    max_len=None)`` a new one for the caller to hold; both give ``None`` when the model needs its modules
    (:func:`refusal`). ``decoder(tokens (B, 1), caches, key_mask=None) -> logits (B, V)`` appends the token's keys
    and values to ``caches`` (from ``model.new_caches``, holding P >= 1 tokens) exactly as ``model(tokens,
    caches=caches, key_mask=key_mask)[:, -1]`` would; ``key_mask`` (B, P + 1) bool, ``True`` = real token, hides
    left padding (every row keeps a visible key). It holds copies of q, k, v (gate, up) made at build time, the
    rest are views of the model's tensors: rebuild a decoder you hold after you change the model (``generate``
    refuses one whose model it can see changed, :meth:`is_current`; the model's own is rebuilt for you).
    """

    copy_head: bool = True  # the output head copied to (D, V) (faster for one row) or read through a view (no memory)

    def __init__(self, model: DecoderOnlyLM, max_len: int | None = None, *, _checked: bool = False):
        if not isinstance(model, DecoderOnlyLM):
            raise TypeError(f"a LeanDecoder serves a DecoderOnlyLM (one-token decode steps of a decoder-only model), "
                            f"got {type(model).__name__}; generate() runs an EncoderDecoder through its modules")
        why = None if _checked else refusal(model)  # _checked: the caller (generate, build, of) just asked
        if why is not None:
            raise ValueError(f"the lean step cannot compute this model exactly ({why}); LeanDecoder.build(model) "
                             "returns None for it, and generate() uses its modules")
        c = model.config
        self._model = weakref.ref(model)  # weak: the model's own decoder (of) must not keep the model alive
        self.n_heads, self.n_kv_heads, self.d_head, self.d_model = c.n_heads, c.n_kv_heads, c.d_head, c.d_model
        self.vocab_size, self.max_seq_len = c.vocab_size, c.max_seq_len
        self._modules = list(model.modules())[1:]  # held (the model's submodules), so that is_current compares them
        self._params = list(model.parameters())
        self._fingerprint, self._settings_at_build = self._weights_now(), self._settings(model)
        self.final_norm, self.tok_emb, self.rope = _Norm(model.final_norm), model.tok_emb, model.rope
        self._rotation_len = min(c.max_seq_len, _INITIAL_ROTATIONS) if max_len is None else max_len
        self._inv_freq = self.rotations = None  # RoPE's table of rotations, and the frequencies it was made from
        with torch.no_grad():  # copies: no autograd history, whatever the caller's mode
            self.layers = [_Layer(*layer) for layer in zip(model.layers, model.layer_windows, model.layer_ropes)]
            head = model.lm_head.weight  # (V, D), or the tied embedding
            self.lm_head = head.t().contiguous() if self.copy_head else head.t()  # (D, V): a copy, or a view
            self._head = [(head, _signature(head))] if self.copy_head else []
            if model.rope is not None:
                self.rotation_table(0)
        self._no_bias = self.lm_head.new_zeros(1, 1, 1)  # baddbmm's (ignored, beta = 0) addend

    @property
    def model(self) -> DecoderOnlyLM | None:
        """The model this decoder was built from (``None`` once it has been freed)."""
        return self._model()

    @staticmethod
    def _check_max_len(model, max_len) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a DecoderOnlyLM (an nn.Module), got {type(model).__name__}")
        if max_len is not None:
            if isinstance(max_len, bool) or not isinstance(max_len, int):
                raise TypeError(f"max_len must be an int or None, got {type(max_len).__name__} ({max_len!r:.40})")
            if max_len < 1:
                raise ValueError(f"max_len must be >= 1 (the positions a step can reach), got {max_len}")

    @classmethod
    def build(cls, model, max_len: int | None = None) -> "LeanDecoder | None":
        """A new lean decoder for ``model``, or ``None`` if it must use its modules (:func:`refusal` says why).

        ``max_len`` (``None`` or an int >= 1) sizes RoPE's table of rotations (``generate`` passes the prompt length
        plus the new tokens); without it the table starts small and grows on demand, to any length the model takes."""
        cls._check_max_len(model, max_len)
        if refusal(model) is not None:
            return None
        decoder = cls(model, max_len, _checked=True)
        decoder._keep = model  # a caller's decoder keeps its model alive (the model's own, from of, does not)
        return decoder

    @classmethod
    def of(cls, model, max_len: int | None = None) -> "LeanDecoder | None":
        """The model's own decoder, or ``None`` if it must use its modules: built at the first call, then kept (for as
        long as the model lives) and returned again while :meth:`is_current`, rebuilt when the model changed.
        ``generate`` calls this; its memory (:meth:`nbytes`) stays held until :meth:`release` or the model goes."""
        cls._check_max_len(model, max_len)
        if refusal(model) is not None:
            return None
        return cls._owned(model, max_len)

    @classmethod
    def _owned(cls, model, max_len: int | None = None) -> "LeanDecoder":
        """:meth:`of` for a model whose refusal its caller has just checked (``generate``)."""
        decoder = _OWNED.get(model)
        if decoder is None or not decoder.is_current():
            _OWNED.pop(model, None)  # the stale copies go before the new ones are made
            decoder = _OWNED[model] = cls(model, max_len, _checked=True)
        return decoder

    @staticmethod
    def release(model) -> bool:
        """Free the model's own decoder (its copied matrices); ``True`` if it had one. The next ``generate`` builds
        it again."""
        return _OWNED.pop(model, None) is not None

    def _weights_now(self) -> list:
        # Every in-place write but one through ``.data`` bumps the version counter (inference tensors have none).
        return [(p.data_ptr(), p.dtype, p.device, None if p.is_inference() else getattr(p, "_version", None))
                for p in self._params]

    def _settings(self, model) -> tuple:
        """What the step reads from the model once, at build: each layer's window, RoPE and QK-norm kind."""
        return (tuple(model.layer_windows), tuple(model.layer_ropes), tuple(b.self_attn.qk_norm for b in model.layers))

    def is_current(self) -> bool:
        """The model's modules and parameters are those it was built from and unchanged: the same objects, storage,
        dtype, device, version counter, windows, RoPE kinds and QK-norm kinds, and every copied matrix and vector
        holds what it held at the copy (which catches a write through ``p.data`` or under inference mode)."""
        model = self.model
        if model is None:
            return False
        modules, params = list(model.modules())[1:], list(model.parameters())
        return (len(modules) == len(self._modules) and all(a is b for a, b in zip(modules, self._modules))
                and len(params) == len(self._params) and all(a is b for a, b in zip(params, self._params))
                and self._weights_now() == self._fingerprint and self._settings(model) == self._settings_at_build
                and all(layer.current() for layer in self.layers)
                and all(torch.equal(_signature(t), sig) for t, sig in self._head))

    def nbytes(self) -> int:
        """Bytes of the tensors this decoder copied (q, k, v stacked, gate and up stacked or a gain folded in, QK-norm
        gains, the output head unless ``copy_head`` was False): the memory it holds besides the model. The other
        matrices are the model's own, viewed."""
        head = self.lm_head.numel() * self.lm_head.element_size() if self._head else 0
        return head + sum(t.numel() * t.element_size() for layer in self.layers for t in layer.copies)

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
        attn_scale, softcap = layer.attn.scale, layer.attn.softcap  # read now: a caller may have set them (L2)
        scale = 1.0 / math.sqrt(d_head) if attn_scale is None else attn_scale
        if layer.window is not None and k.shape[2] > layer.window:  # the window: only the W latest keys count
            k, v = k[:, :, -layer.window:], v[:, :, -layer.window:]
        if mask is not None and mask.shape[-1] > k.shape[2]:  # the window, or a bounded cache: the latest columns
            mask = mask[..., -k.shape[2]:]
        if bias is not None and bias.shape[-1] > k.shape[2]:
            bias = bias[..., -k.shape[2]:]
        if (mask is not None or bias is not None) and softcap is None:  # padding or ALiBi: the fused path
            if h_kv != h:
                k, v = k.repeat_interleave(h // h_kv, dim=1), v.repeat_interleave(h // h_kv, dim=1)
            out = fused_attention(q, k, v, mask, bias, 0.0, scale)  # (B, H, 1, Dh)
            return out.reshape(b, h * d_head)  # -> (B, H Dh)
        # Batched products over (B H_kv) groups of H / H_kv queries, the heads that share a key/value head (GQA): k
        # and v are never repeated. As cheap as PyTorch's fused kernel over a few keys, cheaper over hundreds.
        q = q.reshape(b * h_kv, h // h_kv, d_head)  # (B, H, 1, Dh) -> (B H_kv, H / H_kv, Dh)
        k, v = k.reshape(b * h_kv, -1, d_head), v.reshape(b * h_kv, -1, d_head)  # views of the cache
        scores = torch.baddbmm(self._no_bias, q, k.mT, beta=0.0, alpha=scale)  # (B H_kv, H / H_kv, T_k)
        if softcap is not None:  # Gemma 2: the scores smoothly capped, before the mask
            scores = torch.tanh(scores / softcap) * softcap
        if mask is not None:  # (B, 1, 1, T_k) -> (B H_kv, 1, T_k), the same for every head of a group
            keep = mask.expand(b, h_kv, 1, mask.shape[-1]).reshape(b * h_kv, 1, -1)
            weights = scores.masked_fill(~keep, torch.finfo(scores.dtype).min).softmax(dim=-1).masked_fill(~keep, 0.0)
        else:
            weights = scores.softmax(dim=-1)
        out = torch.bmm(weights, v)  # (B H_kv, H / H_kv, Dh)
        return out.reshape(b, h * d_head)  # -> (B, H Dh): head j * H / H_kv + g is group j's query g

    def __call__(self, tokens: torch.Tensor, caches, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 1) token ids -> (B, V) next-token logits, appending the token's keys and values to ``caches``.

        Checked: one token per row, ids in the vocabulary, one cache per layer from ``model.new_caches``, each holding
        the same P >= 1 tokens (the prompt runs through the model first: the lean step only continues), and a
        position P the model can reach (< ``max_seq_len``). ``generate`` checks once and calls the step directly."""
        check_step_inputs(self, tokens, caches, key_mask)
        return self._step(tokens, caches, key_mask)

    def _step(self, tokens: torch.Tensor, caches, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`__call__` without its checks (``generate`` checked its inputs once)."""
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
