import pytest
import torch
from torch.testing import assert_close

from minitfm.config import POSITIONS, ModelConfig
from minitfm.layers.kv_cache import ConcatKVCache, KVCache
from minitfm.models import DecoderOnlyLM, EncoderDecoder, Intermediates

VARIANTS = [(pos, norm_first, kv) for pos in POSITIONS for norm_first in (True, False) for kv in (4, 2)]


def config(pos="sinusoidal", norm_first=True, n_kv_heads=4, **kw):
    base = dict(vocab_size=20, d_model=32, n_heads=4, n_kv_heads=n_kv_heads, d_ff=48, n_layers=2,
                max_seq_len=24, pos=pos, norm_first=norm_first)
    return ModelConfig(**{**base, **kw})


def tokens(b, t, low=3, high=20):
    return torch.randint(low, high, (b, t))


@pytest.mark.parametrize("pos,norm_first,kv", VARIANTS)
def test_decoder_only_cached_equals_full_recompute(pos, norm_first, kv):
    model = DecoderOnlyLM(config(pos, norm_first, kv, norm="rms", ffn="swiglu")).eval()
    x = tokens(2, 9)
    full = model(x)
    caches = model.new_caches(2, 9)
    steps = [model(x[:, :4], caches=caches)]  # prefill a 4-token prompt, then one token per step
    steps += [model(x[:, i:i + 1], caches=caches) for i in range(4, 9)]
    assert caches[0].length == 9
    assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pos,norm_first,kv", VARIANTS)
def test_encoder_decoder_cached_equals_full_recompute(pos, norm_first, kv):
    model = EncoderDecoder(config(pos, norm_first, kv)).eval()
    src, tgt = tokens(2, 7), tokens(2, 6)
    src[1, 5:] = model.config.pad_id  # a padded source row
    full = model(src, tgt)
    memory, src_mask = model.encode(src)
    caches = model.new_caches(2, 6, memory_len=7)
    steps = [model.decode(tgt[:, i:i + 1], memory, src_mask, caches=caches) for i in range(6)]
    assert caches[0].cross_attn.length == 7  # filled once, not appended to
    assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


def test_concat_cache_gives_the_same_logits():
    model = DecoderOnlyLM(config("rope")).eval()
    x = tokens(1, 6)
    caches = model.new_caches(1, 6, cache_cls=ConcatKVCache)
    steps = [model(x[:, i:i + 1], caches=caches) for i in range(6)]
    assert isinstance(caches[0].self_attn, ConcatKVCache)
    assert_close(torch.cat(steps, dim=1), model(x), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pos", POSITIONS)
def test_left_padded_prompts_match_unpadded_rows_cached_and_uncached(pos):
    model = DecoderOnlyLM(config(pos, n_kv_heads=2)).eval()
    pad = model.config.pad_id
    rows = [tokens(1, 6)[0], tokens(1, 3)[0]]
    batch = torch.full((2, 6), pad)
    batch[0], batch[1, 3:] = rows[0], rows[1]  # left padding: row 1 starts with 3 pads
    key_mask = batch != pad
    full = model(batch, key_mask=key_mask)
    # one extra token after the prompt, through the cache
    nxt = tokens(2, 1)
    caches = model.new_caches(2, 7)
    model(batch, caches=caches, key_mask=key_mask)
    step = model(nxt, caches=caches, key_mask=torch.cat([key_mask, torch.ones(2, 1, dtype=torch.bool)], 1))
    for i, row in enumerate(rows):
        alone = model(torch.cat([row, nxt[i]])[None])  # (1, n + 1, V)
        n = len(row)
        assert_close(full[i, 6 - n:], alone[0, :n], atol=1e-5, rtol=1e-4)
        assert_close(step[i, 0], alone[0, n], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pos", ["sinusoidal", "rope", "alibi"])
def test_decoder_only_is_causal(pos):
    model = DecoderOnlyLM(config(pos)).eval()
    x = tokens(2, 8)
    y = x.clone()
    y[:, 5:] = tokens(2, 3)  # change the future only
    assert_close(model(x)[:, :5], model(y)[:, :5])
    assert not torch.allclose(model(x)[:, 5:], model(y)[:, 5:])


def test_encoder_decoder_decoder_is_causal_and_reads_the_source():
    model = EncoderDecoder(config()).eval()
    src, tgt = tokens(2, 5), tokens(2, 7)
    changed = tgt.clone()
    changed[:, 4:] = tokens(2, 3)
    assert_close(model(src, tgt)[:, :4], model(src, changed)[:, :4])
    other_src = src.clone()
    other_src[:, 0] = (src[:, 0] - 3 + 1) % 17 + 3
    assert not torch.allclose(model(src, tgt), model(other_src, tgt))


def test_source_padding_is_ignored():
    model = EncoderDecoder(config()).eval()
    src, tgt = tokens(1, 4), tokens(1, 5)
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    assert_close(model(src, tgt), model(padded, tgt), atol=1e-5, rtol=1e-4)


def test_intermediates_hold_every_layer_and_kind():
    model = EncoderDecoder(config(n_encoder_layers=3, n_decoder_layers=2)).eval()
    logits, inter = model(tokens(2, 7), tokens(2, 5), return_intermediates=True)
    assert isinstance(inter, Intermediates) and logits.shape == (2, 5, 20)
    assert [w.shape for w in inter.encoder_self] == [(2, 4, 7, 7)] * 3
    assert [w.shape for w in inter.decoder_self] == [(2, 4, 5, 5)] * 2
    assert [w.shape for w in inter.cross] == [(2, 4, 5, 7)] * 2
    assert len(inter.encoder_hidden) == 4 and len(inter.decoder_hidden) == 3
    assert_close(inter.cross[0].sum(-1), torch.ones(2, 4, 5))
    assert torch.all(inter.decoder_self[0].triu(1) == 0)  # nothing from the future
    lm_logits, lm_inter = DecoderOnlyLM(config()).eval()(tokens(2, 5), return_intermediates=True)
    assert len(lm_inter.decoder_self) == 2 and lm_inter.cross == [] and lm_inter.encoder_self == []


def test_intermediates_do_not_change_logits_with_fused_attention():
    model = DecoderOnlyLM(config(attn_impl="fused")).eval()
    x = tokens(2, 6)
    assert_close(model(x, return_intermediates=True)[0], model(x), atol=1e-5, rtol=1e-4)


def test_tied_embeddings_share_one_matrix():
    tied, untied = DecoderOnlyLM(config()), DecoderOnlyLM(config(tie_embeddings=False))
    assert tied.lm_head.weight is tied.tok_emb.weight
    n_tied = sum(p.numel() for p in tied.parameters())
    assert sum(p.numel() for p in untied.parameters()) - n_tied == 20 * 32


def test_new_caches_shapes():
    model = EncoderDecoder(config(n_kv_heads=2))
    caches = model.new_caches(3, 10, memory_len=5)
    assert len(caches) == 2 and isinstance(caches[0].self_attn, KVCache)
    assert caches[0].self_attn.k.shape == (3, 2, 10, 8) and caches[0].cross_attn.k.shape == (3, 2, 5, 8)


@pytest.mark.parametrize("bad,kind,match", [
    (torch.tensor([[3, 20]]), ValueError, r"vocab_size=20"),
    (torch.tensor([[3, -1]]), ValueError, r"min -1"),
    (torch.zeros(0, 4, dtype=torch.long), ValueError, "empty"),
    (torch.randint(3, 20, (1, 25)), ValueError, "max_seq_len=24"),
    (torch.ones(1, 3), TypeError, "integer token ids"),
])
def test_bad_tokens_raise_clear_errors(bad, kind, match):
    with pytest.raises(kind, match=match):
        DecoderOnlyLM(config())(bad)
    with pytest.raises(kind, match=match):
        EncoderDecoder(config())(bad, torch.tensor([[3]]) if bad.shape[0] else bad)


def test_cache_overflow_and_wrong_caches_raise():
    model = DecoderOnlyLM(config())
    caches = model.new_caches(1, 30)
    model(tokens(1, 20), caches=caches)
    with pytest.raises(ValueError, match="20 cached \\+ 5 new tokens exceed max_seq_len=24"):
        model(tokens(1, 5), caches=caches)
    with pytest.raises(ValueError, match="list of 2 LayerCache"):
        model(tokens(1, 2), caches=caches[:1])
    with pytest.raises(ValueError, match="key_mask must be bool"):
        model(tokens(1, 2), key_mask=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="cross-attention caches"):
        ed = EncoderDecoder(config())
        memory, src_mask = ed.encode(tokens(1, 3))
        ed.decode(tokens(1, 1), memory, src_mask, caches=model.new_caches(1, 4))


@pytest.mark.parametrize("pos", POSITIONS)
def test_bfloat16_model_matches_float32_model(pos):
    # model.to(bfloat16) must run for every positional scheme (ALiBi's float32 bias used to crash the
    # manual path) and stay close to the float32 model
    torch.manual_seed(0)
    model = DecoderOnlyLM(config(pos)).eval()
    x = tokens(2, 6)
    reference = model(x)
    low = model.to(torch.bfloat16)(x)
    assert low.dtype == torch.bfloat16
    assert_close(low.float(), reference, atol=0.15, rtol=0.05)


def test_layers_trust_the_model_but_check_direct_calls():
    from minitfm._checks import inputs_trusted
    from minitfm.layers.multihead import MultiHeadAttention

    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny())
    seen = []
    model.layers[0].self_attn.register_forward_pre_hook(lambda module, args: seen.append(inputs_trusted()))
    model(torch.tensor([[1, 2, 3]]))
    assert seen == [True] and not inputs_trusted()  # trusted inside the model's forward only
    attention = model.layers[0].self_attn
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D=16\)"):
        attention(torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match="ids must be in"):
        model(torch.tensor([[1, 2, 100]]))
    assert not inputs_trusted()
    assert isinstance(attention, MultiHeadAttention)


def test_model_still_rejects_caches_of_the_wrong_dtype_or_shape():
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny())
    caches = model.new_caches(1, 8)
    for cache in caches:
        cache.self_attn.k, cache.self_attn.v = cache.self_attn.k.half(), cache.self_attn.v.half()
    with pytest.raises(TypeError, match="the cache holds torch.float16"):
        model(torch.tensor([[1, 2]]), caches=caches)
    caches = model.new_caches(2, 8)  # batch 2 for a batch-1 input
    with pytest.raises(ValueError, match=r"cache holds \(B, H_kv, T, Dh\) = \(2,"):
        model(torch.tensor([[1, 2]]), caches=caches)


def test_decode_checks_the_memory_and_source_mask_it_is_given():
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny())
    src, tgt = torch.tensor([[1, 4, 5, 2]]), torch.tensor([[1, 4]])
    memory, src_mask = model.encode(src)
    with pytest.raises(ValueError, match=r"memory must have shape \(B, T, D=16\)"):
        model.decode(tgt, memory[..., :5], src_mask)
    with pytest.raises(TypeError, match="memory has dtype float64"):
        model.decode(tgt, memory.double(), src_mask)
    with pytest.raises(ValueError, match=r"src_mask must be the bool \(B, 1, 1, S\)"):
        model.decode(tgt, memory, src_mask[..., :2])
    with pytest.raises(ValueError, match=r"src_mask must be the bool"):
        model.decode(tgt, memory, src_mask.float())


def test_gemmas_embedding_scale_is_rounded_to_the_weights_dtype_as_transformers_does():
    """Library review L1: transformers' Gemma multiplies by tensor(sqrt(D), dtype=bf16) (sqrt(3072) = 55.43 becomes
    55.5); in float32 that is the float32 sqrt(D) it always was."""
    config = ModelConfig.small_lm(vocab_size=50, d_model=3072, n_heads=4, n_layers=1, scale_embeddings=True)
    model = DecoderOnlyLM(config)
    tokens = torch.tensor([[1, 2, 3]])
    positions = torch.arange(3)
    bf16 = model.to(torch.bfloat16)
    rows = bf16.tok_emb(tokens)
    assert torch.equal(bf16.embed(tokens, positions), rows * torch.tensor(3072 ** 0.5, dtype=torch.bfloat16))
    assert float(torch.tensor(3072 ** 0.5, dtype=torch.bfloat16)) == 55.5
    f32 = model.float()
    assert torch.equal(f32.embed(tokens, positions), f32.tok_emb(tokens) * 3072 ** 0.5)


@pytest.mark.parametrize("options", [dict(), dict(sliding_window=4), dict(nope_layers=(1,)),
                                     dict(sliding_window=4, sliding_layers=(0,), rope_local_base=50.0),
                                     dict(final_softcap=3.0)], ids=["plain", "window", "nope", "local-rope", "softcap"])
def test_forward_is_the_head_on_hidden_states(options):
    """One forward pass: logits are lm_head (and the soft-cap) on hidden_states, with the same keywords."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.small_lm(vocab_size=41, d_model=32, n_heads=4, n_kv_heads=2, n_layers=3,
                                               **options)).eval()
    tokens = torch.randint(1, 41, (2, 12))
    key_mask = torch.ones(2, 12, dtype=torch.bool)
    key_mask[1, :3] = False
    with torch.no_grad():
        logits = model.lm_head(model.hidden_states(tokens, key_mask=key_mask))
        if model.config.final_softcap is not None:
            logits = torch.tanh(logits / 3.0) * 3.0
        assert torch.equal(logits, model(tokens, key_mask=key_mask))


@pytest.mark.parametrize("impl", ["manual", "fused"])
@pytest.mark.parametrize("options", [dict(), dict(sliding_window=4, sliding_layers=(0,)), dict(pos="alibi")],
                         ids=["plain", "window", "alibi"])
def test_causal_fast_path_computes_what_the_mask_path_computes(impl, options):
    """Issue 46: without caches or masks, the layers get causal=True instead of the causal mask. Logits and gradients
    equal those of the mask path (an all-True attn_mask keeps the explicit mask), in training mode."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=30, n_layers=2, attn_impl=impl, **options)).train()
    tokens = torch.randint(0, 30, (3, 10))
    fast = model(tokens)
    fast_grads = torch.autograd.grad(fast.square().sum(), list(model.parameters()))
    slow = model(tokens, attn_mask=torch.ones(1, 1, 10, 10, dtype=torch.bool))
    slow_grads = torch.autograd.grad(slow.square().sum(), list(model.parameters()))
    assert_close(fast, slow)
    assert_close(fast_grads, slow_grads)
    logits, _ = model(tokens, return_intermediates=True)  # the manual path, which builds the mask from the flag
    assert_close(logits, slow)


def test_a_training_step_hands_causal_masking_to_the_fused_kernel(monkeypatch):
    """Issue 46: a fused-attention model's plain forward calls PyTorch's kernel with is_causal=True and no mask (the
    kernel then skips the hidden half of the scores), not with a boolean mask and a pass that pins empty rows."""
    import torch.nn.functional as F

    calls = []
    kernel = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append((kwargs.get("is_causal", False), kwargs.get("attn_mask")))
        return kernel(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=30, n_layers=2, attn_impl="fused", pos="learned"))
    model(torch.randint(0, 30, (2, 9))).sum().backward()
    assert calls == [(True, None)] * 2


def test_a_patched_causal_mask_still_reaches_the_layers():
    """Chapters 2 and 10 patch minitfm.models.causal_mask with a leaking mask to show what the bug does; the causal
    fast path (issue 46) must not bypass it: the model's output then changes, as it did before."""
    from unittest import mock

    import minitfm.models as models_module

    def leaky(t_q, t_k=None, device=None):
        t_k = t_q if t_k is None else t_k
        return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q + 2)[None]

    torch.manual_seed(0)
    for impl in ("manual", "fused"):
        model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=30, attn_impl=impl)).train()
        tokens = torch.randint(0, 30, (2, 8))
        honest = model(tokens)
        with mock.patch.object(models_module, "causal_mask", leaky):
            leaking = model(tokens)
        assert not torch.allclose(honest[:, :-2], leaking[:, :-2])  # the first positions now see two tokens ahead


# ---- issue 48: latent attention and routed experts in the decoder-only model ----

def _deepseek_like(**overrides):
    return ModelConfig.small_lm(vocab_size=40, d_model=32, n_layers=3, max_seq_len=48, **{**dict(
        mla=dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6, q_lora_rank=12), n_experts=4,
        experts_per_token=2, routed=dict(d_expert=8, score_func="sigmoid", topk_method="noaux_tc", n_group=2,
                                         topk_group=1, n_shared_experts=1, routed_scaling_factor=2.0),
        moe_layers=(1, 2)), **overrides})


def test_latent_attention_and_routed_experts_decode_alike_with_and_without_the_cache():
    import minitfm
    from minitfm.layers.latent_attention import LatentAttention, LatentKVCache
    from minitfm.layers.routed_moe import RoutedMoE

    torch.manual_seed(0)
    model = DecoderOnlyLM(_deepseek_like()).eval()
    assert all(isinstance(block.self_attn, LatentAttention) for block in model.layers)
    assert [type(block.ffn) is RoutedMoE for block in model.layers] == [False, True, True]  # layer 0 stays dense
    caches = model.new_caches(2, 20)
    assert all(isinstance(c.self_attn, LatentKVCache) and c.self_attn.latent.shape == (2, 20, 8) for c in caches)
    prompt = torch.tensor([[5, 3, 17, 4, 8]])
    cached = minitfm.generate(model, prompt, 30, eos_id=-1).tokens
    assert torch.equal(cached, minitfm.generate(model, prompt, 30, eos_id=-1, use_cache=False).tokens)
    beams = minitfm.beam_search(model, prompt, 8, num_beams=3, eos_id=-1)  # reorders the latent caches
    assert torch.equal(beams.tokens, minitfm.beam_search(model, prompt, 8, num_beams=3, eos_id=-1,
                                                         use_cache=False).tokens)


def test_latent_attention_reads_left_padding_from_the_key_mask_and_refuses_an_attn_mask():
    torch.manual_seed(1)
    model = DecoderOnlyLM(_deepseek_like()).eval()
    tokens = torch.randint(3, 40, (2, 12))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[1, :4] = False
    with torch.no_grad():
        padded = model(tokens, key_mask=mask)
        assert_close(padded[1, 4:], model(tokens[1:, 4:])[0], atol=1e-5, rtol=1e-5)
        with pytest.raises(ValueError, match="attn_mask"):
            model(tokens, attn_mask=torch.ones(2, 1, 12, 12, dtype=torch.bool))


def test_chunked_layers_see_their_chunk_only_and_decode_alike_with_the_cache():
    """Llama 4 (issue 48): a chunked layer's query sees the keys of its own chunk; greedy equal with the cache."""
    import minitfm

    cfg = ModelConfig.small_lm(vocab_size=40, d_model=32, n_layers=2, max_seq_len=48, attention_chunk=5,
                               chunked_layers=(0,), nope_layers=(1,), qk_norm="weightless", attn_temperature="llama4",
                               attn_temperature_length=4)
    assert [cfg.layer_chunk(i) for i in range(2)] == [5, None]
    torch.manual_seed(0)
    model = DecoderOnlyLM(cfg).eval()
    tokens = torch.randint(3, 40, (1, 12))
    _, inter = model(tokens, return_intermediates=True)
    seen = inter.decoder_self[0][0, 0] > 0  # (T, T): layer 0's weights
    assert seen[7, 5:8].all() and not seen[7, :5].any() and seen[4, :5].all()  # chunks 0..4 and 5..9
    assert inter.decoder_self[1][0, 0, 7, :5].gt(0).all()  # the NoPE layer sees the whole past
    prompt = torch.tensor([[5, 3, 17, 4, 8]])
    assert torch.equal(minitfm.generate(model, prompt, 25, eos_id=-1).tokens,
                       minitfm.generate(model, prompt, 25, eos_id=-1, use_cache=False).tokens)
    with pytest.raises(ValueError, match="sliding window and chunks"):
        ModelConfig.small_lm(attention_chunk=5, sliding_window=4)


def test_gated_deltanet_layers_decode_alike_with_their_state_and_read_left_padding():
    """Qwen 3.5 (issue 48): linear_layers hold a DeltaNetCache; greedy and beam search alike with and without it,
    a left-padded row as the row alone."""
    import minitfm
    from minitfm.layers.delta_net import DeltaNetCache, GatedDeltaNet

    cfg = ModelConfig.small_lm(vocab_size=40, d_model=32, n_layers=3, max_seq_len=48, n_kv_heads=2, head_dim=8,
                               norm="rms_offset", qk_norm="head", rope_dims=4, attn_output_gate=True,
                               linear_layers=(0, 1), delta_net=dict(n_heads=4, n_key_heads=2, d_key_head=8,
                                                                    d_value_head=6))
    assert [cfg.layer_kind(i) for i in range(3)] == ["linear", "linear", "full"]
    torch.manual_seed(0)
    model = DecoderOnlyLM(cfg).eval()
    assert [type(b.self_attn) is GatedDeltaNet for b in model.layers] == [True, True, False]
    caches = model.new_caches(2, 20)
    assert [type(c.self_attn) for c in caches[:2]] == [DeltaNetCache] * 2
    prompt = torch.tensor([[5, 3, 17, 4, 8]])
    assert torch.equal(minitfm.generate(model, prompt, 25, eos_id=-1).tokens,
                       minitfm.generate(model, prompt, 25, eos_id=-1, use_cache=False).tokens)
    assert torch.equal(minitfm.beam_search(model, prompt, 6, num_beams=3, eos_id=-1).tokens,
                       minitfm.beam_search(model, prompt, 6, num_beams=3, eos_id=-1, use_cache=False).tokens)
    tokens = torch.randint(3, 40, (2, 10))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[1, :3] = False
    with torch.no_grad():
        assert_close(model(tokens, key_mask=mask)[1, 3:], model(tokens[1:, 3:])[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="go together"):
        ModelConfig.small_lm(linear_layers=(0,))
