"""The model's own lean decoder (issue 45, item 8): ``generate`` builds it once and keeps it while the model is
unchanged, sees every kind of weight change, and copies only q, k, v and gate/up; the caller-held decoder reads the
attention's settings live (review 2026-12b L2); LeanDecoder's bad input (item 9)."""
import gc
import re
import weakref

import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.generation import generate
from minitfm.generation.lean_decode import LeanDecoder
from minitfm.models import DecoderOnlyLM, EncoderDecoder

from counting import CountBuilds

PROMPT = torch.tensor([[1, 5, 6, 7]])


def lm(dtype=torch.float32, **overrides):
    torch.manual_seed(0)
    return DecoderOnlyLM(ModelConfig.tiny(**overrides)).to(dtype).eval()


def wide(**overrides):
    """Gains far from 1 and weights large enough that every change below moves the greedy tokens."""
    model = lm(pos="rope", norm="rms", ffn="swiglu", vocab_size=32, **overrides)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model


CLOSE = dict(atol=1e-3, rtol=1e-4)  # logits of about 10: float rounding in another order; a stale step is off by ~1


def plain(model, n=8):
    """Tokens and logits through the modules only (no cache, no lean step)."""
    out = generate(model, PROMPT, n, eos_id=-1, return_logits=True, use_cache=False)
    return out.tokens, out.logits


def cached(model, n=8):
    out = generate(model, PROMPT, n, eos_id=-1, return_logits=True)
    return out.tokens, out.logits


def test_generate_builds_the_models_decoder_once(monkeypatch):
    counter = CountBuilds(monkeypatch)
    model = wide()
    first = cached(model)
    for _ in range(3):
        assert torch.equal(cached(model)[0], first[0])
    assert counter.builds == 1  # before issue 45: one build per call, 4
    assert LeanDecoder.of(model) is LeanDecoder.of(model) and counter.builds == 1
    tokens, logits = plain(model)
    assert torch.equal(first[0], tokens)
    torch.testing.assert_close(first[1], logits, **CLOSE)


def _data_edit_q(model):
    model.layers[0].self_attn.q_proj.weight.data.mul_(-2.0)  # copied (stacked with k, v): only the signature sees it


def _data_edit_up(model):
    model.layers[1].ffn.up_proj.weight.data.copy_(model.layers[1].ffn.up_proj.weight.data.flip(0))


def _data_edit_gain(model):
    model.layers[0].attn_norm.weight.data.mul_(-1.5)  # folded into the qkv copy


def _data_edit_out(model):
    model.layers[0].self_attn.out_proj.weight.data.mul_(-2.0)  # not copied: read through a view


def _load_state_dict(model):
    other = wide()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn_like(p))
    model.load_state_dict(other.state_dict())


def _optimizer_step(model):
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    model(PROMPT).logsumexp(-1).sum().backward()
    opt.step()
    model.eval()


def _to_float64(model):
    model.to(torch.float64)


def _inference_mode_write(model):
    with torch.inference_mode():
        model.layers[0].self_attn.v_proj.weight.mul_(-2.0)


CHANGES = {"data edit of q_proj": _data_edit_q, "data edit of up_proj": _data_edit_up,
           "data edit of a folded gain": _data_edit_gain, "data edit of out_proj": _data_edit_out,
           "load_state_dict": _load_state_dict, "optimizer step": _optimizer_step, ".to(float64)": _to_float64,
           "write under inference_mode": _inference_mode_write}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_every_weight_change_is_seen_and_the_tokens_stay_the_plain_paths(change, monkeypatch):
    model = wide()
    before = cached(model)  # builds the model's decoder
    change(model)
    tokens, logits = plain(model)
    if change is _to_float64:  # the same function, in float64: the step must compute in float64 too
        assert logits.dtype == torch.float64
    else:
        assert not torch.allclose(logits, before[1], atol=1e-1)  # the change matters
    after = cached(model)
    assert torch.equal(after[0], tokens)
    torch.testing.assert_close(after[1], logits, **CLOSE)
    assert LeanDecoder.of(model).is_current()


def test_an_unchanged_model_is_not_rebuilt_and_a_changed_one_once(monkeypatch):
    counter = CountBuilds(monkeypatch)
    model = wide()
    cached(model)
    _data_edit_q(model)
    cached(model)
    cached(model)
    assert counter.builds == 2


def test_the_decoder_copies_only_what_its_step_changes():
    gpt2_like = lm(norm="layer", ffn="gelu_tanh", bias=True)  # LayerNorm: no gain folded; a plain MLP
    d, f, v = 16, 32, 16
    dec = LeanDecoder.of(gpt2_like)
    per_layer = (d * 3 * d + 3 * d) * 4  # q, k, v stacked, with their biases: nothing else
    assert dec.nbytes() == gpt2_like.config.n_layers * per_layer + v * d * 4  # and the head, transposed
    head = gpt2_like.lm_head.weight
    assert dec.lm_head.data_ptr() != head.data_ptr() and torch.equal(dec.lm_head, head.t())
    layer = dec.layers[0]
    for view, param in ((layer.out_weight, gpt2_like.layers[0].self_attn.out_proj.weight),
                        (layer.up_weight, gpt2_like.layers[0].ffn.up_proj.weight),
                        (layer.down_weight, gpt2_like.layers[0].ffn.down_proj.weight)):
        assert view.data_ptr() == param.data_ptr()
    llama_like = lm(norm="rms", ffn="swiglu", pos="rope", bias=False)  # gains folded into qkv and gate/up: both copied
    dec = LeanDecoder.of(llama_like)
    assert dec.nbytes() == llama_like.config.n_layers * (d * 3 * d + d * 2 * f) * 4 + v * d * 4
    assert LeanDecoder.release(llama_like) and not LeanDecoder.release(llama_like)


def test_the_head_can_stay_the_models_own(monkeypatch):
    monkeypatch.setattr(LeanDecoder, "copy_head", False)
    model = wide()
    dec = LeanDecoder.of(model)
    assert dec.lm_head.data_ptr() == model.lm_head.weight.data_ptr()
    assert dec.nbytes() == model.config.n_layers * (16 * 3 * 16 + 16 * 2 * 32 + 3 * 16 + 2 * 32) * 4  # biases too
    before = cached(model)
    model.lm_head.weight.data[:, 0] += 100.0  # read through the view: seen without a rebuild
    after, plain_ = cached(model), plain(model)
    assert torch.equal(after[0], plain_[0]) and not torch.equal(after[0], before[0])


def test_a_write_through_data_into_the_copied_head_is_seen():
    model = wide()
    before = cached(model)
    model.tok_emb.weight.data[:, 0] += 100.0  # the tied head: its copy is stale, its signature says so
    tokens, logits = plain(model)
    after = cached(model)
    assert not torch.equal(tokens, before[0]) and torch.equal(after[0], tokens)
    torch.testing.assert_close(after[1], logits, **CLOSE)


def test_the_models_decoder_does_not_keep_the_model_alive():
    model = wide()
    cached(model)
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None


# ---- L2: a caller-held decoder and the attention's settings ----

def test_a_caller_held_decoder_reads_scale_and_softcap_now():
    model = wide()
    decoder = LeanDecoder.build(model)
    generate(model, PROMPT, 4, eos_id=-1, decoder=decoder)
    model.layers[0].self_attn.softcap = 0.5
    model.layers[1].self_attn.scale = 0.05
    out = generate(model, PROMPT, 8, eos_id=-1, return_logits=True, decoder=decoder)
    tokens, logits = plain(model)
    assert torch.equal(out.tokens, tokens)
    torch.testing.assert_close(out.logits, logits, **CLOSE)  # before: 0.78 apart (review L2)


def test_a_changed_qk_norm_kind_or_window_makes_a_decoder_stale():
    model = lm(qk_norm="head", pos="rope", norm="rms")
    decoder = LeanDecoder.build(model)
    assert decoder.is_current()
    model.layers[0].self_attn.qk_norm = "all"
    assert not decoder.is_current()
    with pytest.raises(ValueError, match="rebuild it"):
        generate(model, PROMPT, 3, decoder=decoder)
    model = lm(pos="rope")
    decoder = LeanDecoder.build(model)
    model.layer_windows[1] = 2
    assert not decoder.is_current()


def test_a_config_option_the_lean_step_does_not_know_is_refused():
    import dataclasses

    from minitfm.generation.lean_refusal import LEAN_CONFIG_FIELDS, refusal

    assert LEAN_CONFIG_FIELDS == {f.name for f in dataclasses.fields(ModelConfig)}  # a new field: decide, then list it

    @dataclasses.dataclass
    class FutureConfig(ModelConfig):
        attention_sinks: int = 0  # an option the modules would compute and the lean step not

    model = lm()
    model.config = FutureConfig(**dataclasses.asdict(model.config), attention_sinks=4)
    assert refusal(model) == "the config's attention_sinks=4 is an option the lean step does not implement"
    assert LeanDecoder.build(model) is None
    model.config = FutureConfig(**dataclasses.asdict(lm().config))  # at its default: nothing to compute
    assert refusal(model) is None


# ---- item 9: bad input to a caller-held LeanDecoder ----

def _prefilled(n_cached=3, max_len=40, **overrides):
    model = lm(pos="rope", **overrides)
    caches = model.new_caches(1, max_len)
    if n_cached:
        with torch.no_grad():
            model(torch.tensor([[1, 5, 6]])[:, :n_cached], caches=caches)
    return model, LeanDecoder.build(model), caches


def _past_the_end():
    model, decoder, caches = _prefilled(max_len=64)  # a cache larger than the model's 32 positions
    with torch.no_grad():
        for step in range(40):
            decoder(torch.tensor([[4]]), caches)


BAD_CALLS = [
    ("an encoder-decoder", lambda: LeanDecoder(EncoderDecoder(ModelConfig.tiny()).eval()), TypeError,
     "a LeanDecoder serves a DecoderOnlyLM (one-token decode steps of a decoder-only model), got EncoderDecoder"),
    ("a model in training mode", lambda: LeanDecoder(lm().train()), ValueError,
     "the lean step cannot compute this model exactly (the model is in training mode (dropout))"),
    ("several tokens", lambda: (lambda m, d, c: d(torch.tensor([[4, 5]]), c))(*_prefilled()), ValueError,
     "a LeanDecoder takes one new token per row, tokens (B, 1), got (1, 2)"),
    ("an id out of range", lambda: (lambda m, d, c: d(torch.tensor([[16]]), c))(*_prefilled()), ValueError,
     "token ids must be in [0, 16) (vocab_size), got min 16, max 16"),
    ("a negative id", lambda: (lambda m, d, c: d(torch.tensor([[-1]]), c))(*_prefilled()), ValueError,
     "token ids must be in [0, 16) (vocab_size), got min -1, max -1"),
    ("float tokens", lambda: (lambda m, d, c: d(torch.tensor([[4.0]]), c))(*_prefilled()), TypeError,
     "tokens must be a (B, 1) tensor of integer token ids, got torch.float32 (1, 1)"),
    ("empty caches", lambda: (lambda m, d, c: d(torch.tensor([[4]]), c))(*_prefilled(0)), ValueError,
     "the caches are empty: a LeanDecoder continues a sequence"),
    ("caches not a list", lambda: (lambda m, d, c: d(torch.tensor([[4]]), c[0]))(*_prefilled()), TypeError,
     "caches must be the list of 2 layer caches of model.new_caches(B, max_len), got LayerCache"),
    ("too few caches", lambda: (lambda m, d, c: d(torch.tensor([[4]]), c[:1]))(*_prefilled()), TypeError,
     "caches must be the list of 2 layer caches of model.new_caches(B, max_len), got list of 1"),
    ("a batch the caches do not hold", lambda: (lambda m, d, c: d(torch.tensor([[4], [5]]), c))(*_prefilled()),
     ValueError, "the caches hold batch 1, tokens has 2 rows"),
    ("a key_mask of the wrong length", lambda: (lambda m, d, c: d(torch.tensor([[4]]), c,
                                                                  torch.ones(1, 3, dtype=torch.bool)))(*_prefilled()),
     ValueError, "key_mask must be bool (B, P + 1) = (1, 4), True = real token, got torch.bool (1, 3)"),
    ("past the end of the model's positions", _past_the_end, ValueError,
     "position 32 is past the model's max_seq_len=32"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_a_caller_held_decoder_refuses_bad_input(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_a_caller_held_decoder_still_steps_after_its_checks():
    model, decoder, caches = _prefilled()
    module_caches = model.new_caches(1, 40)
    with torch.no_grad():
        model(torch.tensor([[1, 5, 6]]), caches=module_caches)
        ref = model(torch.tensor([[4]]), caches=module_caches)[:, -1]
        got = decoder(torch.tensor([[4]]), caches)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


# ---- issue 48: every option of today's other decoders is refused by name, and generate still decodes them ----

ISSUE_48 = {
    "attn_temperature": dict(pos="rope", attn_temperature="ministral3", attn_temperature_length=4),
    "mla": dict(pos="rope", mla=dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6)),
    "routed": dict(n_experts=4, routed=dict(d_expert=8)),
    "attn_sinks": dict(attn_sinks=True),
    "rope_dims": dict(pos="rope", rope_dims=4),
    "attention_chunk": dict(attention_chunk=3),
    "linear_layers": dict(linear_layers=(0,), delta_net=dict(n_heads=2, n_key_heads=1, d_key_head=4, d_value_head=4)),
    "attn_output_gate": dict(attn_output_gate=True),
}


@pytest.mark.parametrize("field", sorted(ISSUE_48))
def test_the_lean_step_refuses_each_option_of_issue_48_by_name(field):
    from minitfm.generation.lean_refusal import LEAN_REFUSED_FIELDS, refusal

    assert field in LEAN_REFUSED_FIELDS
    model = lm(**ISSUE_48[field])
    reason = refusal(model)
    assert LeanDecoder.build(model) is None
    module = {"mla": "LatentAttention", "routed": "RoutedMoE", "linear_layers": "GatedDeltaNet"}.get(field)
    assert reason == (f"module layers.0.{'ffn' if field == 'routed' else 'self_attn'} is a {module}, not a type the "
                      "lean step knows" if module else f"the config's {field}={getattr(model.config, field)!r} is an "
                      "option the lean step does not implement")
    prompt = torch.tensor([[3, 5, 7]])
    assert torch.equal(generate(model, prompt, 12, eos_id=-1).tokens,
                       generate(model, prompt, 12, eos_id=-1, use_cache=False).tokens)
