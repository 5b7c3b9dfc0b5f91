import itertools
import re
import types
from collections import Counter

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.utils._python_dispatch import TorchDispatchMode

import minitfm.generation.lean_decode
import minitfm.generation.lean_refusal

from minitfm.config import ModelConfig
from minitfm.generation import generate
from minitfm.generation.lean_decode import LeanDecoder
from minitfm.layers.kv_cache import ConcatKVCache, KVCache
from minitfm.layers.moe import MoEFeedForward
from minitfm.layers.norms import RMSNorm
from minitfm.lm.small_lm import small_lm_config
from minitfm.models import DecoderOnlyLM, EncoderDecoder

from counting import CountBuilds

PAD = 0
CONFIGS = [dict(pos=pos, norm=norm, norm_first=norm_first, ffn=ffn, n_kv_heads=n_kv_heads)
           for pos, norm, norm_first, ffn, n_kv_heads in itertools.product(
               ["sinusoidal", "learned", "rope", "alibi", "none"], ["layer", "rms"], [True, False],
               ["relu", "gelu_tanh", "swiglu"], [None, 1])]


def lm(dtype=torch.float32, **overrides):
    torch.manual_seed(0)
    return DecoderOnlyLM(ModelConfig.tiny(**overrides)).to(dtype).eval()


def module_and_lean_steps(model, prompt, steps, cache_cls=KVCache, padded=False):
    """Feed the same tokens step by step through the modules and through LeanDecoder; both logits lists."""
    b, p = prompt.shape
    valid = prompt != PAD if padded else torch.ones_like(prompt, dtype=torch.bool)
    module_caches = model.new_caches(b, p + steps, cache_cls)
    lean_caches = model.new_caches(b, p + steps, cache_cls)
    lean = LeanDecoder.build(model, p + steps)
    assert lean is not None
    key_mask = valid if padded else None
    with torch.no_grad():
        model(prompt, caches=module_caches, key_mask=key_mask)
        model(prompt, caches=lean_caches, key_mask=key_mask)
        ref, got = [], []
        for step in range(steps):
            token = torch.full((b, 1), 3 + step % 5)
            if padded:
                key_mask = torch.cat([key_mask, torch.ones(b, 1, dtype=torch.bool)], dim=1)
            ref.append(model(token, caches=module_caches, key_mask=key_mask)[:, -1])
            got.append(lean(token, lean_caches, key_mask))
    return torch.stack(ref), torch.stack(got)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_lean_step_computes_what_the_modules_compute(config):
    model = lm(**config)
    ref, got = module_and_lean_steps(model, torch.tensor([[1, 5, 6, 7], [1, 8, 3, 9]]), 6)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pos", ["sinusoidal", "learned", "rope", "alibi", "none"])
@pytest.mark.parametrize("cache_cls", [KVCache, ConcatKVCache])
def test_lean_step_with_left_padding_and_either_cache(pos, cache_cls):
    model = lm(pos=pos, n_kv_heads=1)
    prompt = torch.tensor([[PAD, PAD, 1, 5, 6], [1, 7, 8, 9, 3]])
    ref, got = module_and_lean_steps(model, prompt, 5, cache_cls=cache_cls, padded=True)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_lean_step_with_biases_untied_embeddings_and_float64():
    model = lm(dtype=torch.float64, bias=True, tie_embeddings=False, pos="rope", norm="rms")
    ref, got = module_and_lean_steps(model, torch.tensor([[1, 5, 6, 7]]), 4)
    assert got.dtype == torch.float64
    # both stay in float64 (RMSNorm upcasts only float16/bfloat16): they agree far below float32's rounding
    torch.testing.assert_close(got, ref, atol=1e-12, rtol=1e-12)


def test_rms_norm_upcasts_only_half_types():
    x = torch.randn(3, 8, dtype=torch.float64) * 1e3
    norm = RMSNorm(8).double()
    exact = x / (x.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()
    torch.testing.assert_close(norm(x), exact, atol=1e-14, rtol=1e-14)  # float32 arithmetic is ~1e-7 off
    half = torch.full((1, 8), 300.0, dtype=torch.float16)  # 300^2 overflows float16: squared in float32
    assert torch.isfinite(RMSNorm(8).half()(half)).all()


def test_lean_step_with_rope_position_interpolation():
    model = lm(pos="rope", rope_scale=4.0, rope_base=500.0)
    ref, got = module_and_lean_steps(model, torch.tensor([[1, 5, 6, 7, 8, 9]]), 5)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_models_that_need_their_modules_get_none():
    assert LeanDecoder.build(lm().train(), 16) is None  # dropout, and training statistics
    assert LeanDecoder.build(lm(dtype=torch.bfloat16), 16) is None
    torch.manual_seed(0)
    assert LeanDecoder.build(EncoderDecoder(ModelConfig.tiny()).eval(), 16) is None
    moe = lm()
    moe.layers[0].ffn = MoEFeedForward(moe.config.d_model, n_experts=2)
    assert LeanDecoder.build(moe, 16) is None
    hooked = lm()
    hooked.layers[1].self_attn.register_forward_hook(lambda module, args, out: None)
    assert LeanDecoder.build(hooked, 16) is None
    assert LeanDecoder.build(lm(), 16) is not None


class CountLeanCalls:
    def __init__(self, monkeypatch):
        self.calls = 0
        original = LeanDecoder._step  # what generate calls (the public __call__ checks its inputs, then calls it)

        def counted(decoder, *args, **kwargs):
            self.calls += 1
            return original(decoder, *args, **kwargs)
        monkeypatch.setattr(LeanDecoder, "_step", counted)


def test_generate_takes_the_lean_step_after_the_prefill(monkeypatch):
    counter = CountLeanCalls(monkeypatch)
    out = generate(lm(), torch.tensor([[1, 5, 6]]), 7, eos_id=-1)
    assert out.new_tokens.shape == (1, 7)
    assert counter.calls == 6  # step 0 is the prefill through the modules
    generate(lm(), torch.tensor([[1, 5, 6]]), 7, eos_id=-1, use_cache=False)
    assert counter.calls == 6  # no cache, no decode step


def test_a_hooked_model_generates_through_its_modules_and_the_hooks_fire(monkeypatch):
    counter = CountLeanCalls(monkeypatch)
    model = lm()
    seen = []
    model.layers[0].ffn.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    plain = generate(lm(), torch.tensor([[1, 5, 6]]), 5, eos_id=-1)
    hooked = generate(model, torch.tensor([[1, 5, 6]]), 5, eos_id=-1)
    assert counter.calls == 4  # only the plain model's decode steps
    assert len(seen) == 5 and seen[1] == (1, 1, model.config.d_model)
    assert torch.equal(hooked.tokens, plain.tokens)


def test_generate_reads_the_weights_of_each_call():
    model = lm()
    prompt = torch.tensor([[1, 5, 6]])
    before = generate(model, prompt, 6, eos_id=-1, return_logits=True).logits
    with torch.no_grad():
        model.layers[0].ffn.down_proj.weight.mul_(3.0)
    after = generate(model, prompt, 6, eos_id=-1, return_logits=True).logits
    recompute = generate(model, prompt, 6, eos_id=-1, return_logits=True, use_cache=False).logits
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, recompute, atol=1e-5, rtol=1e-5)


def test_generate_returns_ordinary_tensors_that_can_feed_training():
    # generate runs under torch.inference_mode; an inference tensor cannot be saved for a backward pass
    model = lm()
    out = generate(model, torch.tensor([[1, 5, 6]]), 4, eos_id=-1, return_logits=True)
    assert not any(t.is_inference() for t in (out.tokens, out.finished, out.logits))
    model.train()
    model(out.tokens).sum().backward()
    assert model.tok_emb.weight.grad is not None


class CountOps(TorchDispatchMode):
    """Counts the operations run, and in ``products`` those that read one of ``weights`` (tensors)."""
    def __init__(self, weights=()):
        super().__init__()
        self.ops, self.products, self.weights = Counter(), Counter(), {w.data_ptr() for w in weights}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        if any(isinstance(a, torch.Tensor) and a.data_ptr() in self.weights for a in args):
            self.products[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def test_the_lean_step_of_the_small_lm_stays_small():
    # Issue 20: a decode step costs its PyTorch operations and Python calls more than its arithmetic. The lean
    # step makes 4 matrix products per layer (q/k/v stacked, out, gate/up stacked, down) and about 50
    # operations in all, most of them free views, against the module path's Python calls and checks.
    torch.manual_seed(0)
    model = DecoderOnlyLM(small_lm_config()).eval()
    caches = model.new_caches(1, 32)
    lean = LeanDecoder.build(model, 32)
    with torch.inference_mode():
        model(torch.tensor([[1, 5, 6, 7]]), caches=caches)  # prefill
        matrices = [lean.lm_head] + [w for layer in lean.layers
                                     for w in (layer.qkv_weight, layer.out_weight, layer.up_weight, layer.down_weight)]
        with CountOps(matrices) as counter:
            lean(torch.tensor([[8]]), caches)
        with CountOps() as module_counter:
            model(torch.tensor([[8]]), caches=caches)
    ops, layers = counter.ops, model.config.n_layers
    assert ops["masked_fill"] == 0 and ops["triu"] == 0 and ops["repeat_interleave"] == 0
    # one product each for qkv, out_proj, the stacked gate/up and the down (in, out) matrices, and the output head;
    # out_proj's and down's add the residual stream themselves (addmm), so no separate sum follows them
    # (the small LM ties its output head to the embedding: the lookup reads that matrix too, a row of it)
    assert counter.products - Counter(embedding=1) == Counter(mm=2 * layers + 1, addmm=2 * layers), counter.products
    assert ops["linear"] == 0 and ops["add"] == 0, ops
    assert ops["softmax"] == layers
    assert sum(ops.values()) <= 50 * layers, ops.most_common(8)
    assert module_counter.ops["linear"] == 7 * layers + 1
    assert sum(ops.values()) < sum(module_counter.ops.values())


def test_lean_step_leaves_the_caches_as_the_modules_do():
    model = lm(pos="rope", n_kv_heads=1)
    prompt = torch.tensor([[1, 5, 6, 7]])
    module_caches, lean_caches = model.new_caches(1, 8), model.new_caches(1, 8)
    lean = LeanDecoder.build(model, 8)
    with torch.no_grad():
        for caches in (module_caches, lean_caches):
            model(prompt, caches=caches)
        model(torch.tensor([[9]]), caches=module_caches)
        lean(torch.tensor([[9]]), lean_caches)
    for mine, theirs in zip(lean_caches, module_caches):
        assert mine.length == theirs.length == 5
        torch.testing.assert_close(mine.self_attn.k, theirs.self_attn.k)
        torch.testing.assert_close(mine.self_attn.v, theirs.self_attn.v)


def test_identity_final_norm_of_post_ln_models_is_supported():
    model = lm(norm_first=False)
    assert isinstance(model.final_norm, nn.Identity)
    ref, got = module_and_lean_steps(model, torch.tensor([[1, 5, 6, 7]]), 3)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_a_cached_decode_step_through_the_modules_stays_lean():
    # Issue 20: a decode step's cost is its number of PyTorch operations, not its arithmetic. A step with one
    # query, a cache and no padding builds no mask, runs fused attention (no softmax of its own), and does
    # about 75 operations per layer of the small LM; a regression that adds per-layer work shows here.
    torch.manual_seed(0)
    model = DecoderOnlyLM(small_lm_config()).eval()
    caches = model.new_caches(1, 32)
    with torch.no_grad():
        model(torch.tensor([[1, 5, 6, 7]]), caches=caches)  # prefill
        with CountOps() as counter:
            model(torch.tensor([[8]]), caches=caches)
    ops = counter.ops
    assert ops["masked_fill"] == 0 and ops["_softmax"] == 0 and ops["triu"] == 0
    assert sum(n for op, n in ops.items() if "scaled_dot_product" in op) == model.config.n_layers
    assert sum(ops.values()) <= 80 * model.config.n_layers, ops.most_common(8)


def test_prepared_matrices_follow_a_write_through_data():
    """generate reuses the lean step's prepared matrices while the weights are unchanged; a write through
    ``.data`` bumps no version counter, and must still be seen."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.small_lm(vocab_size=50, max_seq_len=64)).eval()
    prompt = torch.tensor([[3, 4, 5]])
    before = generate(model, prompt, 10, eos_id=-1).tokens
    model.lm_head.weight.data[7] += 5.0  # token 7 now wins every step
    cached = generate(model, prompt, 10, eos_id=-1).tokens
    assert torch.equal(cached, generate(model, prompt, 10, eos_id=-1, use_cache=False).tokens)
    assert not torch.equal(cached, before)


# ---- the lean step never computes something other than the modules (issue 33, review findings #1, #2, #13) ----
PROMPT = torch.tensor([[1, 5, 6, 7]])


def cached_and_plain(model, n=6, **kwargs):
    """generate's logits with the cache (the lean step where it may) and without (the modules, every step)."""
    cached = generate(model, PROMPT, n, eos_id=-1, return_logits=True, **kwargs).logits
    plain = generate(model, PROMPT, n, eos_id=-1, return_logits=True, use_cache=False).logits
    return cached, plain


class LoRALinear(nn.Module):
    """A LoRA adapter as peft builds one: the base nn.Linear plus a low-rank update x A^T B^T, with B non-zero
    (a trained adapter), exposing the base layer's weight and bias."""

    def __init__(self, base: nn.Linear, rank: int = 2):
        super().__init__()
        self.base_layer = base
        generator = torch.Generator().manual_seed(1)
        self.lora_A = nn.Parameter(torch.randn(rank, base.in_features, generator=generator) * 0.5)
        self.lora_B = nn.Parameter(torch.randn(base.out_features, rank, generator=generator) * 0.5)

    @property
    def weight(self):
        return self.base_layer.weight

    @property
    def bias(self):
        return self.base_layer.bias

    def forward(self, x):
        return self.base_layer(x) + x @ self.lora_A.t() @ self.lora_B.t()


class ScaledLinear(nn.Linear):
    """An nn.Linear subclass with another forward (as a quantised or instrumented layer would have)."""

    def forward(self, x):
        return 2.0 * super().forward(x) + 0.1


class Doubled(nn.Module):
    def forward(self, weight):
        return 2.0 * weight


def swap_in(model, kind):
    attn = model.layers[0].self_attn
    if kind == "LoRA on v_proj":
        attn.v_proj = LoRALinear(attn.v_proj)
    elif kind == "nn.Linear subclass":
        scaled = ScaledLinear(attn.q_proj.in_features, attn.q_proj.out_features)
        scaled.load_state_dict(attn.q_proj.state_dict())
        attn.q_proj = scaled
    else:
        parametrize.register_parametrization(attn.out_proj, "weight", Doubled())


@pytest.mark.parametrize("kind", ["LoRA on v_proj", "nn.Linear subclass", "parametrization"])
def test_a_module_the_lean_step_does_not_know_exactly_takes_the_module_path(kind):
    model = lm(pos="rope")
    generate(model, PROMPT, 4, eos_id=-1)  # before the swap: whatever a first call prepares
    swap_in(model, kind)
    cached, plain = cached_and_plain(model)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)
    assert LeanDecoder.build(model, 16) is None
    assert "not a type the lean step knows" in minitfm.generation.lean_refusal.refusal(model)


@pytest.mark.parametrize("write", ["row swap", "flip"])
def test_a_write_through_data_that_keeps_the_sum_is_seen(write):
    model = lm(pos="rope")
    weight = model.layers[0].ffn.up_proj.weight
    weight.data.copy_((weight.data * 64).round() / 64)  # multiples of 1/64: every float32 sum of them is exact
    before = generate(model, PROMPT, 6, eos_id=-1, return_logits=True).logits  # a first call
    total = weight.sum().item()
    if write == "row swap":  # the permutation chapter 13 applies to RoPE's weights
        weight.data[[0, 1]] = weight.data[[1, 0]]
    else:
        weight.data.copy_(weight.data.flip(0))
    assert weight.sum().item() == total  # the same sum, bit for bit
    cached, plain = cached_and_plain(model)
    assert not torch.allclose(plain, before, atol=1e-3)  # the write matters
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)


def test_flipping_norm_first_after_a_generate_is_seen():
    model = lm(norm="rms")
    generate(model, PROMPT, 6, eos_id=-1)
    model.layers[1].norm_first = not model.layers[1].norm_first
    cached, plain = cached_and_plain(model)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)


def test_a_caller_owned_decoder_follows_a_flipped_norm_first():
    # The decoder folds each pre-LN RMSNorm's gain into the product after it; a layer whose norm_first flipped
    # since it was built gets its matrices prepared again at its next step, for the new placement.
    model = lm(norm="rms")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.5 * torch.randn_like(p))  # gains far from 1: folding them in matters
    decoder = LeanDecoder.build(model)
    generate(model, PROMPT, 4, eos_id=-1, decoder=decoder)
    for flip in range(2):  # to post-LN, and back
        model.layers[1].norm_first = not model.layers[1].norm_first
        cached, plain = cached_and_plain(model, decoder=decoder)
        torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_changing_a_norms_eps_after_a_generate_is_seen(norm):
    model = lm(norm=norm)
    before = generate(model, PROMPT, 6, eos_id=-1, return_logits=True).logits
    model.layers[0].attn_norm.eps = 2.0  # Llama uses 1e-5 or 1e-6; a large change shows plainly
    model.final_norm.eps = 2.0
    cached, plain = cached_and_plain(model)
    assert not torch.allclose(plain, before, atol=1e-3)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)


def test_a_model_built_under_inference_mode_generates():
    with torch.inference_mode():
        model = lm(pos="rope")
    cached, plain = cached_and_plain(model)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)
    decoder = LeanDecoder.build(model)
    assert decoder is not None and decoder.is_current()


def test_a_caller_owned_decoder_is_reused(monkeypatch):
    counter, calls = CountBuilds(monkeypatch), CountLeanCalls(monkeypatch)
    model = lm(pos="rope")
    generate(model, PROMPT, 5, eos_id=-1)
    generate(model, PROMPT, 5, eos_id=-1)
    assert counter.builds == 1  # without a decoder: the model's own, built at the first call and kept (issue 45)
    decoder = LeanDecoder.build(model)
    assert counter.builds == 2 and decoder is not LeanDecoder.of(model)  # build: a new one, the caller's
    first = generate(model, PROMPT, 5, eos_id=-1, return_logits=True, decoder=decoder).logits
    second = generate(model, PROMPT, 5, eos_id=-1, return_logits=True, decoder=decoder).logits
    assert counter.builds == 2  # the caller's decoder served both calls
    assert calls.calls == 4 * 4  # and took every decode step of the four calls
    plain = generate(model, PROMPT, 5, eos_id=-1, return_logits=True, use_cache=False).logits
    torch.testing.assert_close(first, plain, atol=1e-5, rtol=1e-5)
    assert torch.equal(first, second)


def test_generate_refuses_a_decoder_it_can_see_is_stale_or_foreign():
    model = lm()
    decoder = LeanDecoder.build(model)
    with pytest.raises(ValueError, match="another model"):
        generate(lm(), PROMPT, 3, decoder=decoder)
    with pytest.raises(ValueError, match="needs use_cache=True"):
        generate(model, PROMPT, 3, decoder=decoder, use_cache=False)
    with pytest.raises(TypeError, match="decoder must be a LeanDecoder"):
        generate(model, PROMPT, 3, decoder="lean")
    with torch.no_grad():
        model.layers[0].ffn.down_proj.weight.mul_(2.0)  # an in-place write: an optimizer step does the same
    assert not decoder.is_current()
    with pytest.raises(ValueError, match="rebuild it with LeanDecoder.build"):
        generate(model, PROMPT, 3, decoder=decoder)
    decoder = LeanDecoder.build(model)
    swap_in(model, "LoRA on v_proj")  # new parameters: the copied matrices no longer describe the model
    with pytest.raises(ValueError, match="rebuild it"):
        generate(model, PROMPT, 3, decoder=decoder)


def test_a_caller_owned_decoder_steps_aside_for_hooks(monkeypatch):
    calls = CountLeanCalls(monkeypatch)
    model = lm()
    decoder = LeanDecoder.build(model)
    handle = model.layers[0].ffn.register_forward_hook(lambda module, args, out: None)
    hooked = generate(model, PROMPT, 5, eos_id=-1, decoder=decoder).tokens
    handle.remove()
    assert calls.calls == 0
    assert torch.equal(hooked, generate(model, PROMPT, 5, eos_id=-1, use_cache=False).tokens)


def test_a_caller_owned_decoder_reaches_every_position_and_follows_ropes_frequencies():
    model = lm(pos="rope", max_seq_len=64)
    decoder = LeanDecoder.build(model, max_len=4)  # a table of 4 positions: it must grow
    cached, plain = cached_and_plain(model, n=50, decoder=decoder)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)
    model.rope.scale = 2.0  # position interpolation on the same weights: new frequencies
    cached, plain = cached_and_plain(model, n=20, decoder=decoder)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)


def test_a_torch_that_hides_its_hook_registries_degrades_to_the_module_path(monkeypatch):
    # torch's global hook dictionaries are private; if a release moves them, the lean step cannot know
    # whether hooks are registered, so it steps aside instead of raising AttributeError
    monkeypatch.setattr(minitfm.generation.lean_refusal, "_torch_module", types.SimpleNamespace())
    model = lm()
    assert LeanDecoder.build(model) is None
    assert "hides" in minitfm.generation.lean_refusal.refusal(model)
    cached, plain = cached_and_plain(model)
    torch.testing.assert_close(cached, plain, atol=1e-5, rtol=1e-5)


def test_the_lean_step_uses_public_library_names():
    import inspect

    from minitfm.layers.attention import fused_attention
    from minitfm.models import DecoderOnlyLM as Model

    source = inspect.getsource(minitfm.generation.lean_decode)
    assert "._fused" not in source and "._positions" not in source and "float32_inv_freq" not in source
    assert fused_attention.__doc__ and Model.positions_from_mask.__doc__


# ---- bad input to the builder and to generate's decoder= (issue 34) ----

BAD_BUILDS = [
    ("max_len 0", lambda: LeanDecoder.build(lm(), 0), ValueError, "max_len must be >= 1 (the positions a step can reach), got 0"),
    ("max_len negative", lambda: LeanDecoder.build(lm(), -3), ValueError, "max_len must be >= 1 (the positions a step can reach), got -3"),
    ("max_len bool", lambda: LeanDecoder.build(lm(), True), TypeError, "max_len must be an int or None, got bool (True)"),
    ("max_len float", lambda: LeanDecoder.build(lm(), 8.0), TypeError, "max_len must be an int or None, got float (8.0)"),
    ("max_len str", lambda: LeanDecoder.build(lm(), "8"), TypeError, "max_len must be an int or None, got str ('8')"),
    ("model a str", lambda: LeanDecoder.build("model", 8), TypeError, "model must be a DecoderOnlyLM (an nn.Module), got str"),
    ("model None", lambda: LeanDecoder.build(None), TypeError, "model must be a DecoderOnlyLM (an nn.Module), got NoneType"),
    ("decoder of another model", lambda: generate(lm(), torch.tensor([[1, 5]]), 2, decoder=LeanDecoder.build(lm())),
     ValueError, "decoder was built for another model: build one with LeanDecoder.build(model) for this model"),
    ("decoder not a LeanDecoder", lambda: generate(lm(), torch.tensor([[1, 5]]), 2, decoder="lean"), TypeError,
     "decoder must be a LeanDecoder (LeanDecoder.build(model)) or None, got str"),
    ("decoder without a cache", lambda: (lambda m: generate(m, torch.tensor([[1, 5]]), 2, use_cache=False,
                                                            decoder=LeanDecoder.build(m)))(lm()),
     ValueError, "decoder= serves the cached decode steps; it needs use_cache=True"),
    ("decoder of an encoder-decoder's call", lambda: generate(EncoderDecoder(ModelConfig.tiny()), torch.tensor([[1]]), 2,
                                                                src=torch.tensor([[1, 5, 2]]), decoder=LeanDecoder.build(lm())),
     ValueError, "decoder was built for another model"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in BAD_BUILDS], ids=[c[0] for c in BAD_BUILDS])
def test_the_builder_and_decoder_argument_refuse_bad_input(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_a_decoder_built_with_max_len_none_or_an_int_still_serves_generate():
    model = lm()
    prompt = torch.tensor([[1, 5, 6]])
    ref = generate(model, prompt, 5, eos_id=-1).tokens
    for max_len in (None, 1, 8):
        assert torch.equal(generate(model, prompt, 5, eos_id=-1, decoder=LeanDecoder.build(model, max_len)).tokens, ref)
