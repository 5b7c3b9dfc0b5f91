"""minitfm.pretrained: GPT-2 and Llama checkpoints against Hugging Face transformers, offline.

Every model here is built by transformers from a config with random weights and saved with save_pretrained:
nothing is downloaded (HF_HUB_OFFLINE=1). Weights are drawn with initializer_range=0.15 (GPT-2 uses 0.02) so that logits reach
3-5 and the greedy choice is far from ties; the tolerance 1e-5 is on fp32 logits. Over every family, 3 seeds
and 60 positions the largest difference seen was 3e-6 (2e-5 with initializer_range=0.3, where the
activations grow large enough that float rounding in 2 layers reaches 1e-5).
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import safetensors  # noqa: E402,F401  requirements.txt installs it: a missing one fails, never skips
import transformers  # noqa: E402  requirements.txt installs it: a missing one fails, never skips
transformers.logging.set_verbosity_error()

import minitfm  # noqa: E402
from minitfm import pretrained as P  # noqa: E402

TOL = 1e-5
VOCAB = 97


def gpt2_config(**overrides):
    base = dict(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=128, bos_token_id=VOCAB - 1,
                eos_token_id=VOCAB - 1, initializer_range=0.15)
    return transformers.GPT2Config(**{**base, **overrides})


def llama_config(**overrides):
    base = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=40, vocab_size=VOCAB, max_position_embeddings=128, rope_theta=500.0,
                initializer_range=0.15, rms_norm_eps=1e-5)
    return transformers.LlamaConfig(**{**base, **overrides})


def build(config, seed=0):
    torch.manual_seed(seed)
    cls = {"gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM,
           "mistral": transformers.MistralForCausalLM}[config.model_type]
    return cls(config).eval()


def saved(model, tmp_path, name="hf", **kwargs):
    folder = tmp_path / name
    model.save_pretrained(folder, **kwargs)
    return folder


FAMILIES = {
    "gpt2": lambda: gpt2_config(),
    "gpt2-untied": lambda: gpt2_config(tie_word_embeddings=False),
    "llama-gqa": lambda: llama_config(),
    "llama-tied-mha-bias": lambda: llama_config(num_key_value_heads=4, tie_word_embeddings=True,
                                                attention_bias=True, mlp_bias=True),
    "llama-linear-rope": lambda: llama_config(rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "mistral": lambda: transformers.MistralConfig(**{**llama_config().to_dict(), "model_type": "mistral",
                                                     "sliding_window": None}),
}


@pytest.fixture(params=sorted(FAMILIES))
def pair(request, tmp_path):
    """(transformers model, the same checkpoint loaded into minitfm, checkpoint folder)."""
    hf = build(FAMILIES[request.param]())
    folder = saved(hf, tmp_path)
    return hf, P.load(folder), folder


@torch.no_grad()
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (3, 40)])
def test_logits_match_transformers(pair, shape):
    hf, model, _ = pair
    tokens = torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(shape[1]))
    want, got = hf(tokens).logits, model(tokens)
    assert want.abs().max() > 1.0  # logits of a size that makes 1e-5 a real test
    assert (want - got).abs().max() <= TOL


@torch.no_grad()
def test_padded_batch_and_causal_prefix_match(pair):
    hf, model, _ = pair
    tokens = torch.randint(0, VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[1, :5], mask[2, :11] = False, False  # left padding
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    want = hf(tokens, attention_mask=mask.long(), position_ids=positions).logits
    got = model(tokens, key_mask=mask)
    assert (want - got)[mask].abs().max() <= TOL  # real positions; padding rows are undefined in both
    alone = model(tokens[2:, 11:])  # a padded row computes what its unpadded prompt computes
    assert (got[2:, 11:] - alone).abs().max() <= TOL
    prefix = model(tokens[:1, :10])  # causal: a prefix's logits do not depend on what follows
    assert (prefix - got[:1, :10]).abs().max() <= TOL


def hf_generate(hf, prompt, n, **kwargs):
    return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                       eos_token_id=None, pad_token_id=0, **kwargs)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generation_identical(pair, use_cache):
    hf, model, _ = pair
    prompt = torch.tensor([[5, 0, 17, 42, 8]])  # holds id 0, which transformers would take for padding without a mask
    want = hf_generate(hf, prompt, 50, do_sample=False)
    got = minitfm.generate(model, prompt, 50, eos_id=-1, use_cache=use_cache).tokens
    assert torch.equal(want, got)


def test_sampled_generation_identical(pair):
    hf, model, _ = pair
    prompt = torch.tensor([[3, 14, 15, 92]])
    for seed in (0, 1, 2):
        # Both draw with torch.multinomial from the global generator, one draw per step, from softmax(logits).
        torch.manual_seed(seed)
        want = hf_generate(hf, prompt, 50, do_sample=True, top_k=0, top_p=1.0, temperature=1.0)
        torch.manual_seed(seed)
        got = minitfm.generate(model, prompt, 50, eos_id=-1, do_sample=True).tokens
        assert torch.equal(want, got)


def test_export_round_trip_is_bit_exact_and_transformers_loads_it(pair, tmp_path):
    hf, model, folder = pair
    out = P.save_pretrained(model, tmp_path / "export")
    again = P.load(out)
    for key, value in model.state_dict().items():
        assert torch.equal(value, again.state_dict()[key]), key
    original = P.read_state_dict(folder)
    exported = P.read_state_dict(out)
    for key, value in exported.items():  # the published layouts come back to the bit
        assert torch.equal(value, original[key]), key
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    tokens = torch.randint(0, VOCAB, (2, 30), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (reloaded(tokens).logits - model(tokens)).abs().max() <= TOL


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_minitfm_model_exports_to_transformers(family, tmp_path):
    if family == "gpt2":
        config = minitfm.ModelConfig(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, max_seq_len=64, norm="layer",
                                     pos="learned", ffn="gelu_tanh", scale_embeddings=False, pad_id=None,
                                     bos_id=VOCAB - 1, eos_id=VOCAB - 1)
    else:
        config = minitfm.ModelConfig.small_lm(vocab_size=VOCAB, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2,
                                              max_seq_len=64, scale_embeddings=False)
    torch.manual_seed(0)
    model = minitfm.DecoderOnlyLM(config).eval()
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(P.save_pretrained(model, tmp_path / "m")).eval()
    tokens = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert (reloaded(tokens).logits - model(tokens)).abs().max() <= TOL


def test_pytorch_bin_and_original_gpt2_key_names_load(tmp_path):
    hf = build(gpt2_config())
    folder = saved(hf, tmp_path, safe_serialization=False) if "safe_serialization" in \
        transformers.PreTrainedModel.save_pretrained.__code__.co_varnames else None
    if folder is None or not (folder / "pytorch_model.bin").exists():
        folder = tmp_path / "bin"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(hf.config.to_dict()))
        torch.save(hf.state_dict(), folder / "pytorch_model.bin")
    tokens = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert (P.load(folder)(tokens) - hf(tokens).logits).abs().max() <= TOL
    # OpenAI's files name tensors without "transformer." and keep the causal-mask buffers: both are accepted
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    state["h.0.attn.bias"] = torch.ones(1, 1, 128, 128).tril()
    config = P.config_from_hf(hf.config.to_dict())
    converted = P.to_minitfm(state, config)
    assert torch.equal(converted["layers.0.self_attn.q_proj.weight"], hf.transformer.h[0].attn.c_attn.weight[:, :32].t())


def test_conventions_are_one_table():
    table = P.conventions_table()
    assert table.count("\n") == len(P.CONVENTIONS) + 1
    for word in ("Conv1D", "c_attn", "rotate", "sqrt(D)", "tie", "eps", "gelu_new", "rope_theta"):
        assert word in table


def test_rotate_half_permutation_is_the_math_not_a_new_model():
    d_head, heads = 8, 3
    perm = P.rotate_half_permutation(d_head)
    assert perm.tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    weight = torch.randn(heads * d_head, 5)
    assert torch.equal(P.to_rotate_half(P.from_rotate_half(weight, heads), heads), weight)
    # rotating halves at position m equals rotating adjacent pairs of the permuted vector at m
    q = torch.randn(1, 1, 6, d_head)
    rope = minitfm.RotaryEmbedding(d_head, base=100.0)
    angles = rope.angles(torch.arange(6))  # (T, Dh/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    rotate_half = torch.cat([-q[..., d_head // 2:], q[..., : d_head // 2]], -1)
    hf_rotated = q * cos + rotate_half * sin
    assert torch.allclose(rope(q[..., perm]), hf_rotated[..., perm], atol=1e-6)


def test_split_fused_qkv_matches_conv1d():
    hf = build(gpt2_config())
    attn = hf.transformer.h[0].attn.c_attn
    x = torch.randn(4, 32)
    q, k, v = P.split_fused_qkv(attn.weight, 32)
    qb, kb, vb = P.split_fused_qkv(attn.bias, 32)
    with torch.no_grad():
        fused = attn(x)
        assert torch.allclose(torch.cat([x @ q.T + qb, x @ k.T + kb, x @ v.T + vb], -1), fused, atol=1e-6)
    assert torch.equal(P.fuse_qkv(q, k, v), attn.weight) and torch.equal(P.fuse_qkv(qb, kb, vb), attn.bias)


# ---- tokenizers ------------------------------------------------------------------------------------------------

TEXTS = ["Hello world, hello Transformer!", "  spaces   and\ttabs\nnewlines", "注意力 is attention: 掩码.",
         "numbers 12345 and 3.14", "it's don't we'll", "<|endoftext|> marks the end"]


def test_gpt2_tokenizer_files_load_into_minitfm_bpe_with_the_same_ids(tmp_path):
    import tokenizers  # requirements.txt installs it: a missing one fails, never skips
    from minitfm.text import bpe_trainer as bpe
    from minitfm.text.bpe_tokenizer import Tokenizer

    corpus = " ".join(TEXTS * 20) + " the cat sat on the mat and the dog ran to the park " * 30
    vocab, merges = bpe.train_bpe(corpus, 300, special_tokens=["<|endoftext|>"])
    Tokenizer(vocab, merges, ["<|endoftext|>"]).save(tmp_path)
    ours = P.load_tokenizer(tmp_path)
    theirs = tokenizers.ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    theirs.add_special_tokens(["<|endoftext|>"])  # what GPT-2's tokenizer files mean by it
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=theirs._tokenizer)
    eot = ours.special_ids["<|endoftext|>"]
    for text in TEXTS + ["two<|endoftext|>documents<|endoftext|>"]:
        ids = ours.encode(text)
        assert ids and ids == theirs.encode(text).ids  # really encodes: a non-empty list, the same ids
        assert fast(text)["input_ids"] == ids
        assert ours.decode(ids) == text
        assert (eot in ids) == ("<|endoftext|>" in text)  # the special token's path is taken, once per occurrence
        assert ids.count(eot) == text.count("<|endoftext|>")


# ---- bad checkpoints -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt2_parts():
    """(transformers GPT-2, its minitfm config, its state dict), built once for the error checks."""
    hf = build(gpt2_config())
    return hf, P.config_from_hf(hf.config.to_dict()), dict(hf.state_dict())


def _without(state, key):
    return {k: v for k, v in state.items() if k != key}


def _write_config_only(hf, folder):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(hf.config.to_dict()))
    return folder


def _gqa_gpt2_config():
    return minitfm.ModelConfig(vocab_size=VOCAB, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=64,
                               norm="layer", pos="learned", ffn="gelu_tanh", scale_embeddings=False, pad_id=None,
                               bos_id=VOCAB - 1, eos_id=VOCAB - 1)


def _gemma_folder(tmp_path):
    torch.manual_seed(0)
    hf = transformers.GemmaForCausalLM(transformers.GemmaConfig(num_hidden_layers=1, hidden_size=16, num_attention_heads=2,
                                                                num_key_value_heads=1, head_dim=8, intermediate_size=24,
                                                                vocab_size=VOCAB, pad_token_id=0))
    return saved(hf, tmp_path, "gemma")


def _llama_parts():
    hf = build(llama_config())
    return P.config_from_hf(hf.config.to_dict()), dict(hf.state_dict())


# (what, call(hf, config, state, tmp_path), exception, pattern)
BAD_CHECKPOINTS = [
    ("not GPT-2 or Llama", lambda hf, c, s, t: P.config_from_hf({"model_type": "bert", "hidden_size": 32}),
     ValueError, "model_type 'gpt2'.*got model_type='bert'"),
    ("family_of a str", lambda hf, c, s, t: P.family_of("gpt2"), TypeError, "dict of a config.json"),
    ("missing key", lambda hf, c, s, t: P.to_minitfm(_without(s, "transformer.h.1.mlp.c_fc.bias"), c), ValueError,
     re.escape("missing ['transformer.h.1.mlp.c_fc.bias'] (1 keys), unexpected []")),
    ("extra key", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.h.2.ln_1.weight": torch.ones(32)}, c),
     ValueError, re.escape("unexpected ['transformer.h.2.ln_1.weight']")),
    ("wrong shape", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.wpe.weight": torch.zeros(64, 32)}, c),
     ValueError, r"transformer.wpe.weight has shape \(64, 32\).*expects \(128, 32\)"),
    ("untied head", lambda hf, c, s, t: P.to_minitfm({**s, "lm_head.weight": torch.zeros(VOCAB, 32)}, c),
     ValueError, "ties the output head"),
    ("activation", lambda hf, c, s, t: P.config_from_hf({**hf.config.to_dict(), "activation_function": "swish"}),
     ValueError, "activation_function='swish'"),
    ("chunked attention", lambda hf, c, s, t: P.config_from_hf({**llama_config().to_dict(), "model_type": "qwen2",
                                                                 "use_sliding_window": True, "sliding_window": 8,
                                                                 "layer_types": ["chunked_attention"] * 2}),
     ValueError, re.escape("layer_types=['chunked_attention']")),
    ("longrope", lambda hf, c, s, t: P.config_from_hf({**llama_config().to_dict(),
                                                        "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}),
     ValueError, "rope_type='longrope'"),
    ("yarn without its factor", lambda hf, c, s, t: P.config_from_hf({**llama_config().to_dict(), "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 1e4}}), ValueError,
     re.escape("rope_type='yarn' without=['factor', 'original_max_position_embeddings']")),
    ("partial rotary", lambda hf, c, s, t: P.config_from_hf({**llama_config().to_dict(), "model_type": "phi3",
                                                              "rope_parameters": {"rope_theta": 1e4,
                                                                                  "partial_rotary_factor": 0.5}}),
     ValueError, "partial_rotary_factor=0.5"),
    ("MoE with dense layers", lambda hf, c, s, t: P.config_from_hf({**llama_config().to_dict(), "model_type": "qwen3_moe",
                                                                     "num_local_experts": 4, "num_experts_per_tok": 2,
                                                                     "moe_intermediate_size": 8, "mlp_only_layers": [0]}),
     ValueError, re.escape("mlp_only_layers=[0]")),
    ("export as a family that cannot hold it", lambda hf, c, s, t: P.save_pretrained(P.load(_gemma_folder(t)), t / "x",
                                                                                      family="llama"),
     ValueError, "a llama config.json cannot hold this model: it differs in .*'norm': 'rms_offset'"),
    ("eos outside the vocabulary", lambda hf, c, s, t: P.config_from_hf({**hf.config.to_dict(), "eos_token_id": 50256}),
     ValueError, "eos_token_id=50256 is not an id of the vocabulary"),
    ("no config.json", lambda hf, c, s, t: P.load(t), ValueError, "has no config.json"),
    ("no weights", lambda hf, c, s, t: P.load(_write_config_only(hf, t / "c")), ValueError,
     "holds no weights: expected model.safetensors"),
    ("no tokenizer files", lambda hf, c, s, t: P.load_tokenizer(t), ValueError,
     re.escape("lacks ['vocab.json', 'merges.txt']")),
    ("neither family",
     lambda hf, c, s, t: P.save_pretrained(minitfm.DecoderOnlyLM(minitfm.ModelConfig.tiny()), t / "x"), ValueError,
     "matches neither GPT-2.*nor Llama"),
    ("not a DecoderOnlyLM", lambda hf, c, s, t: P.save_pretrained(hf, t / "x"), TypeError, "must be a DecoderOnlyLM"),
    # grouped-query attention is no GPT-2: refused by name before anything is written (issue 33, #3)
    ("GQA exported as GPT-2", lambda hf, c, s, t: P.save_pretrained(minitfm.DecoderOnlyLM(_gqa_gpt2_config()), t / "g"),
     ValueError, r"matches neither.*'gpt2': \{'n_kv_heads': 2\}"),
    ("GQA family", lambda hf, c, s, t: P.model_family(_gqa_gpt2_config()), ValueError, "'n_kv_heads': 2"),
    # every rule checks the published shape before it transforms, and gives exactly its targets
    ("c_attn too narrow", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.h.0.attn.c_attn.weight":
                                                             torch.zeros(32, 64)}, c),
     ValueError, r"transformer.h.0.attn.c_attn.weight has shape \(32, 64\); this config expects \(32, 96\)"),
    ("q_proj rows not whole heads", lambda hf, c, s, t: P.to_minitfm(
        {**_llama_parts()[1], "model.layers.0.self_attn.q_proj.weight": torch.zeros(30, 32)}, _llama_parts()[0]),
     ValueError, r"q_proj.weight has shape \(30, 32\); this config expects \(32, 32\)"),
    ("split_fused_qkv of a GQA width", lambda hf, c, s, t: P.split_fused_qkv(torch.zeros(32, 64), 32), ValueError,
     r"expected shape \(32, 96\), got \(32, 64\)"),
    ("fuse_qkv of GQA shapes", lambda hf, c, s, t: P.fuse_qkv(torch.zeros(32, 32), torch.zeros(16, 32),
                                                             torch.zeros(16, 32)),
     ValueError, r"got q \(32, 32\), k \(16, 32\), v \(16, 32\)"),
    ("from_rotate_half, rows not whole heads", lambda hf, c, s, t: P.from_rotate_half(torch.zeros(30, 4), 4),
     ValueError, r"shape \(30, 4\) is not 4 heads of an even width"),
    ("to_rotate_half, odd head width", lambda hf, c, s, t: P.to_rotate_half(torch.zeros(12, 4), 4), ValueError,
     r"shape \(12, 4\) is not 4 heads of an even width"),
]


def test_a_rule_that_gives_too_few_tensors_is_refused(gpt2_parts, monkeypatch):
    _, config, state = gpt2_parts
    monkeypatch.setattr(P.weights, "split_fused_qkv", lambda t, d: [t[..., :d], t[..., d:2 * d]])  # drops v silently
    with pytest.raises(ValueError, match=r"c_attn.weight \(32, 96\) gave 2 tensors; 'split q\|k\|v \+ transpose' "
                                         r"must give 3 \(.*v_proj.weight\)"):
        P.to_minitfm(state, config)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_every_axis_the_family_lacks_is_refused(family):
    """model_family is a round trip through the family's config.json: any setting it cannot hold is named."""
    if family == "gpt2":
        good = dict(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, max_seq_len=64, norm="layer",
                    pos="learned", ffn="gelu_tanh", scale_embeddings=False, pad_id=None)
        bad = dict(n_kv_heads=2, norm_first=False, bias=False, ffn="swiglu", pos="rope", scale_embeddings=True)
    else:
        good = dict(vocab_size=VOCAB, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_seq_len=64, norm="rms",
                    pos="rope", ffn="swiglu", scale_embeddings=False, pad_id=None)
        bad = dict(norm_first=False, ffn="gelu", pos="alibi", norm="layer", scale_embeddings=True)
    assert P.model_family(minitfm.ModelConfig(**good)) == family
    for unimportant in (dict(dropout=0.1), dict(attn_impl="fused"), dict(pad_id=3)):  # the same function
        assert P.model_family(minitfm.ModelConfig(**{**good, **unimportant})) == family
    for key, value in bad.items():
        with pytest.raises(ValueError, match=f"'{family}': {{[^}}]*'{key}': {value!r}"):
            P.model_family(minitfm.ModelConfig(**{**good, key: value}))


def test_from_transformers_puts_rope_buffers_on_the_models_device():
    """A model on another device (here "meta", as a GPU would be) keeps RoPE's frequencies beside its weights."""
    with torch.device("meta"):
        hf = transformers.LlamaForCausalLM(llama_config())
    model = P.from_transformers(hf)
    assert model.tok_emb.weight.device.type == "meta"
    assert model.rope.inv_freq.device.type == "meta"  # was the CPU: the first forward on a GPU failed
    cpu = P.from_transformers(build(llama_config()))
    assert cpu.rope.inv_freq.device.type == "cpu"
    assert torch.equal(cpu.rope.inv_freq, minitfm.RotaryEmbedding(cpu.config.d_head, base=500.0).inv_freq)


# ---- the Hub, without the network -----------------------------------------------------------------------------

def _fake_hub(monkeypatch, behaviour):
    """Replace huggingface_hub.snapshot_download by ``behaviour(name, allow_patterns)``; return the calls made."""
    import huggingface_hub  # requirements.txt installs it: a missing one fails, never skips
    calls = []

    def snapshot_download(name, revision=None, allow_patterns=None, **kwargs):
        calls.append((name, tuple(allow_patterns)))
        return behaviour(name, allow_patterns)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def _hub_error(kind):
    from unittest import mock

    from huggingface_hub import errors
    if kind == "offline":
        return errors.LocalEntryNotFoundError("Cannot find an appropriate cached snapshot folder ... outgoing "
                                              "traffic has been disabled")
    cls = {"missing": errors.RepositoryNotFoundError, "gated": errors.GatedRepoError,
           "revision": errors.RevisionNotFoundError}[kind]
    return cls(f"{kind} (test)", response=mock.MagicMock(status_code=404))


@pytest.mark.parametrize("name", ["./checkpoints/gpt2-ft", "../gpt2-finetuned", "~/models/gpt2", "/no/such/folder",
                                  "checkpoints/gpt2 ft", "a/b/c"])
def test_a_mistyped_path_is_not_looked_up_on_the_hub(monkeypatch, name):
    calls = _fake_hub(monkeypatch, lambda *a: pytest.fail("a path must not reach the Hub"))
    with pytest.raises(FileNotFoundError, match=f"no checkpoint folder at {re.escape(repr(name))}"):
        P.from_pretrained(name)
    assert calls == []


@pytest.mark.parametrize("kind, exception, pattern", [
    ("missing", ValueError, "the Hugging Face Hub has no model 'minitfm-no-such/model'"),
    ("gated", ValueError, "'minitfm-no-such/model' is gated"),
    ("revision", ValueError, "no model 'minitfm-no-such/model' at revision 'v9'"),
    ("offline", ConnectionError, "could not fetch 'minitfm-no-such/model' at revision 'v9'.*HF_HUB_OFFLINE is set"),
])
def test_hub_failures_are_told_apart_and_keep_their_cause(monkeypatch, kind, exception, pattern):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    error = _hub_error(kind)

    def fail(name, patterns):
        raise error

    _fake_hub(monkeypatch, fail)
    with pytest.raises(exception, match=pattern) as info:
        P.from_pretrained("minitfm-no-such/model", revision="v9")
    assert info.value.__cause__ is error
    assert "needs the network" not in str(info.value) or kind == "offline"


def test_loading_by_name_offline_says_so(monkeypatch):
    import huggingface_hub  # noqa: F401  requirements.txt installs it: a missing one fails, never skips
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub.errors import LocalEntryNotFoundError
    with pytest.raises(ConnectionError, match="could not fetch 'minitfm-no-such/model'.*HF_HUB_OFFLINE is set") as info:
        P.from_pretrained("minitfm-no-such/model")  # the real huggingface_hub, offline: nothing is downloaded
    assert isinstance(info.value.__cause__, LocalEntryNotFoundError)


def test_a_repository_with_bin_weights_only_downloads_them(monkeypatch, tmp_path):
    hf = build(gpt2_config())
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    published = {"config.json": lambda f: f.write_text(json.dumps(hf.config.to_dict())),
                 "pytorch_model.bin": lambda f: torch.save(hf.state_dict(), f)}

    def download(name, patterns):  # a cached snapshot holds the files of every call so far
        for file_name, write in published.items():
            if any(fnmatch.fnmatch(file_name, p) for p in patterns):
                write(snapshot / file_name)
        return str(snapshot)

    calls = _fake_hub(monkeypatch, download)
    model = P.from_pretrained("someone/gpt2-bin-only")
    assert len(calls) == 2 and "pytorch_model.bin" in calls[1][1] and "pytorch_model.bin" not in calls[0][1]
    # one weight format, and no variants such as model.fp16.safetensors
    assert not any(p in ("*.safetensors", "*.bin") for _, patterns in calls for p in patterns)
    tokens = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert (model(tokens) - hf(tokens).logits).abs().max() <= TOL


def test_import_minitfm_stays_light():
    code = "import sys, minitfm; print(sorted(m for m in ('transformers', 'safetensors', 'huggingface_hub') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- issue 34: damaged folders, bad arguments, keys that do not fit: a clear error, never a partial model -------

import pickle  # noqa: E402
import pathlib  # noqa: E402

from safetensors.torch import save_file  # noqa: E402

E = re.escape
LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1234\n"


def _folder(hf, tmp_path, fmt="safetensors"):
    """A GPT-2 checkpoint folder written without transformers: config.json and one weight file (or two shards)."""
    folder = tmp_path / "ckpt"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(hf.config.to_dict()))
    state = {k: v.contiguous() for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    if fmt == "safetensors":
        save_file(state, str(folder / "model.safetensors"))
    elif fmt == "bin":
        torch.save(state, folder / "pytorch_model.bin")
    else:  # two shards and their index
        keys = sorted(state)
        shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
                  "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
        for name, part in shards.items():
            save_file({k: state[k] for k in part}, str(folder / name))
        weight_map = {k: name for name, part in shards.items() for k in part}
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def _write(path, content):
    if content is None:
        if path.exists():
            path.unlink()
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


class _Payload:
    """A pickle that, if unpickled without weights_only, would create the file ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


def _index(folder):
    return json.loads((folder / "model.safetensors.index.json").read_text())


def _edit_index(folder, edit):
    content = _index(folder)
    edit(content)
    (folder / "model.safetensors.index.json").write_text(json.dumps(content))


def _shard_without_key(folder):
    from safetensors.torch import load_file
    name = "model-00002-of-00002.safetensors"
    state = load_file(str(folder / name))
    save_file({k: v for k, v in state.items() if k != "transformer.wte.weight"}, str(folder / name))


def _shard_with_extra_key(folder):
    from safetensors.torch import load_file
    name = "model-00002-of-00002.safetensors"
    save_file({**load_file(str(folder / name)), "transformer.extra": torch.zeros(2)}, str(folder / name))


def _duplicate_across_shards(folder):
    from safetensors.torch import load_file
    first, second = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    key = sorted(load_file(str(folder / first)))[0]
    save_file({**load_file(str(folder / second)), key: load_file(str(folder / first))[key]}, str(folder / second))


# (what, format, damage(folder), exception, pattern): each loads the damaged folder with P.load
BAD_FOLDERS = [
    ("config.json empty", "safetensors", lambda f: _write(f / "config.json", b""), ValueError,
     E("config.json is empty (0 bytes), expected a config.json")),
    ("config.json not JSON", "safetensors", lambda f: _write(f / "config.json", "{'model_type': 'gpt2'}"), ValueError,
     E("config.json is not valid JSON (")),
    ("config.json cut short", "safetensors", lambda f: _write(f / "config.json", (f / "config.json").read_text()[:50]),
     ValueError, E("config.json is not valid JSON (")),
    ("config.json a list", "safetensors", lambda f: _write(f / "config.json", "[1, 2]"), ValueError,
     E("config.json must hold one JSON object (setting -> value), got a list")),
    ("config.json repeats a key", "safetensors",
     lambda f: _write(f / "config.json", (f / "config.json").read_text()[:-1] + ', "n_layer": 1}'), ValueError,
     E("config.json repeats the key 'n_layer' (values 2 and 1): JSON would keep the last one silently")),
    ("config.json an LFS pointer", "safetensors", lambda f: _write(f / "config.json", LFS), ValueError,
     E("config.json is a Git LFS pointer")),
    ("config.json a folder", "safetensors", lambda f: _write(f / "config.json", None), ValueError,
     E("config.json is a folder, expected a config.json")),
    ("config.json in Latin-1", "safetensors",
     lambda f: _write(f / "config.json", '{"name": "caf\xe9"}'.encode("latin-1")), ValueError,
     E("config.json is not UTF-8 text (byte 0xe9 at offset 13)")),
    ("safetensors cut short", "safetensors",
     lambda f: _write(f / "model.safetensors", (f / "model.safetensors").read_bytes()[:5000]), ValueError,
     E("model.safetensors is not a readable safetensors file (5000 bytes; ") + ".*"
     + E("truncated, or another format")),
    ("safetensors empty", "safetensors", lambda f: _write(f / "model.safetensors", b""), ValueError,
     E("model.safetensors is empty (0 bytes): an interrupted download?")),
    ("safetensors an LFS pointer", "safetensors", lambda f: _write(f / "model.safetensors", LFS), ValueError,
     E("model.safetensors is a Git LFS pointer (") + r"\d+" + E(" bytes of text starting 'version https://git-lfs.")
     + ".*" + E("not the weights: the repository was cloned without git-lfs")),
    ("safetensors random bytes", "safetensors", lambda f: _write(f / "model.safetensors", bytes(range(256)) * 4),
     ValueError, E("model.safetensors is not a readable safetensors file (1024 bytes")),
    ("safetensors a folder", "safetensors", lambda f: _write(f / "model.safetensors", None), ValueError,
     E("model.safetensors is a folder, expected a weight file")),
    ("bin cut short", "bin", lambda f: _write(f / "pytorch_model.bin", (f / "pytorch_model.bin").read_bytes()[:3000]),
     ValueError, E("pytorch_model.bin cannot be read as PyTorch weights (")),
    ("bin a list", "bin", lambda f: torch.save([torch.zeros(2)], f / "pytorch_model.bin"), ValueError,
     E("pytorch_model.bin must hold a dict of name -> tensor, got list")),
    ("bin a dict of ints", "bin", lambda f: torch.save({"a": 1}, f / "pytorch_model.bin"), ValueError,
     E("pytorch_model.bin must hold a dict of name -> tensor, got dict holding int")),
    ("bin an LFS pointer", "bin", lambda f: _write(f / "pytorch_model.bin", LFS), ValueError,
     E("pytorch_model.bin is a Git LFS pointer")),
    ("index names a missing shard", "shards", lambda f: (f / "model-00002-of-00002.safetensors").unlink(),
     FileNotFoundError, E("model.safetensors.index.json names the shard 'model-00002-of-00002.safetensors' (for "
                          "tensors such as 'transformer.")),
    ("index not JSON", "shards", lambda f: _write(f / "model.safetensors.index.json", "weight_map:"), ValueError,
     E("model.safetensors.index.json is not valid JSON (")),
    ("index without weight_map", "shards", lambda f: _write(f / "model.safetensors.index.json", '{"metadata": {}}'),
     ValueError, E("must hold a JSON object whose 'weight_map' maps each tensor name to its file, got dict")),
    ("index with an empty weight_map", "shards",
     lambda f: _write(f / "model.safetensors.index.json", '{"weight_map": {}}'), ValueError,
     E("whose 'weight_map' maps each tensor name to its file, got {}")),
    ("index pointing outside the folder", "shards",
     lambda f: _edit_index(f, lambda c: c["weight_map"].update({"transformer.wte.weight": "../x.safetensors"})),
     ValueError, E("the weight_map gives 'transformer.wte.weight' the file '../x.safetensors', expected a file name")),
    ("index lists a tensor no shard holds", "shards", _shard_without_key, ValueError,
     E("does not match its shards: 1 tensors it lists are in no shard (['transformer.wte.weight'])")),
    ("a shard holds a tensor the index does not list", "shards", _shard_with_extra_key, ValueError,
     E("0 tensors it lists are in no shard ([]), 1 in the shards are not listed (['transformer.extra'])")),
    ("a tensor in two shards", "shards", _duplicate_across_shards, ValueError, E("is in two shards")),
    ("no weights at all", "safetensors", lambda f: (f / "model.safetensors").unlink(), ValueError,
     E("holds no weights: expected model.safetensors, pytorch_model.bin or a sharded index, found ['config.json']")),
]


@pytest.mark.parametrize("fmt, damage, exception, pattern", [case[1:] for case in BAD_FOLDERS],
                         ids=[case[0] for case in BAD_FOLDERS])
def test_damaged_folders_get_clear_errors(gpt2_parts, tmp_path, fmt, damage, exception, pattern):
    folder = _folder(gpt2_parts[0], tmp_path, fmt)
    P.load(folder)  # the folder loads before the damage
    damage(folder)
    with pytest.raises(exception, match=pattern):
        P.load(folder)


def test_a_malicious_pickle_is_refused_unread_and_never_run(gpt2_parts, tmp_path):
    folder = _folder(gpt2_parts[0], tmp_path, "bin")
    marker = tmp_path / "ran.txt"
    with open(folder / "pytorch_model.bin", "wb") as file:
        pickle.dump({"transformer.wte.weight": _Payload(marker)}, file, protocol=2)
    with pytest.raises(ValueError, match=E("pytorch_model.bin cannot be read as PyTorch weights (UnpicklingError")
                       + ".*" + E("loaded with weights_only=True, which never runs code a pickle carries")):
        P.load(folder)
    assert not marker.exists()


def _config(**changes):
    return {**gpt2_config().to_dict(), **changes}


def _llama(**changes):
    return {**llama_config().to_dict(), **changes}


def _state_of(config, seed=0):
    torch.manual_seed(seed)
    return minitfm.DecoderOnlyLM(config).state_dict()


def _gpt2(n_layers=2, d_model=32, tie=True):
    return minitfm.ModelConfig(vocab_size=VOCAB, d_model=d_model, n_heads=4, n_layers=n_layers, max_seq_len=64,
                               norm="layer", pos="learned", ffn="gelu_tanh", scale_embeddings=False, pad_id=None,
                               bos_id=VOCAB - 1, eos_id=VOCAB - 1, tie_embeddings=tie)


def _a_file(t):
    path = t / "f.txt"
    path.write_text("x")
    return path


def _without_layer(state, layer):
    return {k: v for k, v in state.items() if f".h.{layer}." not in k}


_MISSING_CUDA = r"this machine has (no CUDA device|\d+ CUDA device)"

# (what, call(hf, config, state, tmp_path), exception, pattern)
BAD_ARGUMENTS = [
    # folders and names
    ("load a missing folder", lambda hf, c, s, t: P.load(t / "nowhere"), FileNotFoundError,
     E("no folder") + ".*" + E("expected a checkpoint folder (config.json and its weights)")),
    ("load a file", lambda hf, c, s, t: P.load(_a_file(t)), ValueError,
     E("f.txt is a file, expected a checkpoint folder")),
    ("load None", lambda hf, c, s, t: P.load(None), TypeError,
     E("directory must be the path of a checkpoint folder (config.json and its weights) (str or pathlib.Path), got "
       "NoneType")),
    ("read_state_dict a file", lambda hf, c, s, t: P.read_state_dict(_a_file(t)), ValueError, E("is a file")),
    ("read_config a missing folder", lambda hf, c, s, t: P.read_config(t / "x"), FileNotFoundError, E("no folder")),
    ("from_pretrained an empty name", lambda hf, c, s, t: P.from_pretrained(""), ValueError,
     E("name_or_path is empty")),
    ("from_pretrained revision int", lambda hf, c, s, t: P.from_pretrained("gpt2", revision=3), TypeError,
     E("revision must be None or a str (a branch, tag or commit), got int")),
    ("from_pretrained a file", lambda hf, c, s, t: P.from_pretrained(_a_file(t)), ValueError,
     E("f.txt is a file, expected a checkpoint folder")),
    ("download a Path", lambda hf, c, s, t: P.download(t), TypeError,
     E("name must be a Hub model name such as 'gpt2' (a non-empty str), got PosixPath")),
    ("download revision a list", lambda hf, c, s, t: P.download("gpt2", revision=["main"]), TypeError,
     E("revision must be None or a str (a branch, tag or commit), got list")),
    ("from_pretrained a missing local path", lambda hf, c, s, t: P.from_pretrained(t / "ckpt"), FileNotFoundError,
     E("a path is read locally and never looked up on the Hub")),
    ("save_pretrained into a file", lambda hf, c, s, t: P.save_pretrained(minitfm.DecoderOnlyLM(_gpt2()), _a_file(t)),
     ValueError, E("f.txt is a file, expected a folder to write config.json and model.safetensors into")),
    ("save_pretrained to None", lambda hf, c, s, t: P.save_pretrained(minitfm.DecoderOnlyLM(_gpt2()), None),
     TypeError, E("directory must be a folder's path (str or pathlib.Path), got NoneType")),
    ("load_tokenizer a missing folder", lambda hf, c, s, t: P.load_tokenizer(t / "tok"), FileNotFoundError,
     E("expected a folder holding tokenizer files")),
    ("load_tokenizer a file", lambda hf, c, s, t: P.load_tokenizer(_a_file(t)), ValueError, E("f.txt is a file")),
    ("load_tokenizer None", lambda hf, c, s, t: P.load_tokenizer(None), TypeError, E("got NoneType")),
    # dtype and device, checked before any file is read
    ("dtype int64", lambda hf, c, s, t: P.load(t, dtype=torch.int64), ValueError,
     E("dtype must be a floating-point torch.dtype (weights are real numbers), got torch.int64")),
    ("dtype a str", lambda hf, c, s, t: P.load(t, dtype="float32"), TypeError,
     E("dtype must be a torch.dtype such as torch.float32 or torch.bfloat16, got str 'float32'")),
    ("dtype None", lambda hf, c, s, t: P.load(t, dtype=None), TypeError, E("got NoneType None")),
    ("dtype bool", lambda hf, c, s, t: P.from_pretrained("gpt2", dtype=torch.bool), ValueError, E("got torch.bool")),
    ("device unknown", lambda hf, c, s, t: P.load(t, device="gpu"), ValueError,
     E("device 'gpu' is not a device torch knows")),
    ("device a float", lambda hf, c, s, t: P.load(t, device=1.5), TypeError,
     E("device must be None, a str such as 'cpu' or 'cuda:0', an int or a torch.device, got float 1.5")),
    ("device True", lambda hf, c, s, t: P.load(t, device=True), TypeError, E("got bool True")),
    ("device absent", lambda hf, c, s, t: P.load(t, device="cuda:99"), ValueError, _MISSING_CUDA),
    ("from_transformers device", lambda hf, c, s, t: P.from_transformers(hf, device="tpu"), ValueError,
     E("device 'tpu' is not a device torch knows")),
    ("from_transformers a dict", lambda hf, c, s, t: P.from_transformers(s), TypeError,
     E("hf_model must be a transformers model")),
    # config.json values
    ("no n_embd", lambda hf, c, s, t: P.config_from_hf({k: v for k, v in _config().items() if k != "n_embd"}),
     ValueError,
     
     E("this gpt2 config.json lacks ['n_embd']: they give the model's sizes")),
    ("n_embd a str", lambda hf, c, s, t: P.config_from_hf(_config(n_embd="32")), TypeError,
     E("config.json: n_embd must be an int, got str '32'")),
    ("n_layer a float", lambda hf, c, s, t: P.config_from_hf(_config(n_layer=2.0)), TypeError,
     E("n_layer must be an int, got float 2.0")),
    ("n_head a bool", lambda hf, c, s, t: P.config_from_hf(_config(n_head=True)), TypeError, E("got bool True")),
    ("n_layer 0", lambda hf, c, s, t: P.config_from_hf(_config(n_layer=0)), ValueError,
     E("n_layer must be >= 1, got 0")),
    ("n_inner negative", lambda hf, c, s, t: P.config_from_hf(_config(n_inner=-4)), ValueError,
     E("n_inner must be >= 1, got -4")),
    ("epsilon a str", lambda hf, c, s, t: P.config_from_hf(_config(layer_norm_epsilon="1e-5")), ValueError,
     E("config.json: layer_norm_epsilon must be a number > 0, got str '1e-5'")),
    ("epsilon negative", lambda hf, c, s, t: P.config_from_hf(_config(layer_norm_epsilon=-1e-5)), ValueError,
     E("got float -1e-05")),
    ("eos a str", lambda hf, c, s, t: P.config_from_hf(_config(eos_token_id="96")), TypeError,
     E("config.json: eos_token_id must be an int id (or a list of them), got str '96'")),
    ("bos a bool", lambda hf, c, s, t: P.config_from_hf(_config(bos_token_id=True)), TypeError, E("got bool True")),
    ("eos a list of str", lambda hf, c, s, t: P.config_from_hf(_config(eos_token_id=["96"])), TypeError,
     E("got str '96'")),
    ("pad negative", lambda hf, c, s, t: P.config_from_hf(_config(pad_token_id=-1)), ValueError,
     E("pad_token_id=-1 is not an id of the vocabulary")),
    ("llama without intermediate_size",
     lambda hf, c, s, t: P.config_from_hf({k: v for k, v in _llama().items() if k != "intermediate_size"}), ValueError,
     E("this llama config.json lacks ['intermediate_size']")),
    ("llama kv heads 0", lambda hf, c, s, t: P.config_from_hf(_llama(num_key_value_heads=0)), ValueError,
     E("num_key_value_heads must be >= 1, got 0")),
    ("llama rope_theta 0", lambda hf, c, s, t: P.config_from_hf(_llama(rope_theta=0)), ValueError,
     E("rope_theta must be a number > 0, got int 0")),
    ("tie_word_embeddings a str", lambda hf, c, s, t: P.config_from_hf(_config(tie_word_embeddings="false")),
     TypeError, E("config.json: tie_word_embeddings must be true or false, got str 'false'")),
    ("activation a list", lambda hf, c, s, t: P.config_from_hf(_config(activation_function=["gelu"])), TypeError,
     E("config.json: activation_function must be a str, got list ['gelu']")),
    ("rope_scaling a str", lambda hf, c, s, t: P.config_from_hf(_llama(rope_scaling="linear")), TypeError,
     E("config.json: rope_scaling must be an object (or null), got str 'linear'")),
    ("rope factor a str", lambda hf, c, s, t: P.config_from_hf(_llama(rope_scaling={"rope_type": "linear",
                                                                                     "factor": "2"})), ValueError,
     E("config.json: rope_scaling['factor'] must be a number > 0, got '2'")),
    ("model_type missing", lambda hf, c, s, t: P.family_of({"n_embd": 32}), ValueError, E("got model_type=None")),
    ("family_of a list", lambda hf, c, s, t: P.family_of([("model_type", "gpt2")]), TypeError,
     E("hf_config must be the dict of a config.json, got list")),
    # to_minitfm
    ("to_minitfm a list", lambda hf, c, s, t: P.to_minitfm(list(s.items()), c), TypeError,
     E("state must be a dict of published tensor names -> tensor, got list")),
    ("to_minitfm an int key", lambda hf, c, s, t: P.to_minitfm({**s, 0: torch.zeros(1)}, c), TypeError,
     E("state's keys must be published tensor names (str), got int 0")),
    ("to_minitfm a NumPy array", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.wte.weight": s[
        "transformer.wte.weight"].numpy()}, c), TypeError,
     E("state['transformer.wte.weight'] must be a torch.Tensor, got ndarray")),
    ("to_minitfm integer weights", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.ln_f.bias": torch.zeros(
        32, dtype=torch.long)}, c), TypeError, E("must be a floating-point tensor (weights), got dtype torch.int64")),
    ("to_minitfm a config.json dict", lambda hf, c, s, t: P.to_minitfm(s, hf.config.to_dict()), TypeError,
     E("config must be a minitfm ModelConfig (config_from_hf turns a config.json into one), got dict")),
    ("c_attn with extra columns", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.h.1.attn.c_attn.weight":
                                                                    torch.zeros(32, 100)}, c), ValueError,
     E("transformer.h.1.attn.c_attn.weight has shape (32, 100); this config expects (32, 96)")),
    ("c_attn bias with extra entries", lambda hf, c, s, t: P.to_minitfm({**s, "transformer.h.0.attn.c_attn.bias":
                                                                         torch.zeros(100)}, c), ValueError,
     E("transformer.h.0.attn.c_attn.bias has shape (100,); this config expects (96,)")),
    ("a layer beyond the config", lambda hf, c, s, t: P.to_minitfm(
        {**s, **{k.replace(".h.1.", ".h.2."): v for k, v in s.items() if ".h.1." in k}}, c), ValueError,
     E("missing [] (0 keys), unexpected ['transformer.h.2.attn.c_attn.bias'") + ".*"
     + E("; the config has n_layers=2, and layers [2] differ")),
    ("a layer missing", lambda hf, c, s, t: P.to_minitfm(_without_layer(s, 1), c), ValueError,
     E("missing ['transformer.h.1.attn.c_attn.bias'") + ".*" + E("the config has n_layers=2, and layers [1] differ")),
    # to_hf
    ("to_hf, fewer layers in the config", lambda hf, c, s, t: P.to_hf(_state_of(_gpt2(3)), _gpt2(2)), ValueError,
     E("the minitfm state dict does not fit this config: missing [] (0 keys), unexpected ['layers.2.")
     + ".*" + E("the config has n_layers=2, and layers [2] differ")),
    ("to_hf, more layers in the config", lambda hf, c, s, t: P.to_hf(_state_of(_gpt2(2)), _gpt2(3)), ValueError,
     E("missing ['layers.2.") + ".*" + E("unexpected [] (0 keys); the config has n_layers=3, and layers [2] differ")),
    ("to_hf, a wider config", lambda hf, c, s, t: P.to_hf(_state_of(_gpt2()), _gpt2(d_model=64)), ValueError,
     E("has shape (97, 32); this config expects (97, 64)")),
    ("to_hf, a narrower config", lambda hf, c, s, t: P.to_hf(_state_of(_gpt2(d_model=64)), _gpt2()), ValueError,
     E("has shape (97, 64); this config expects (97, 32)")),
    ("to_hf a list", lambda hf, c, s, t: P.to_hf([], _gpt2()), TypeError,
     E("state must be a dict of minitfm parameter names -> tensor, got list")),
    ("to_hf a value not a tensor", lambda hf, c, s, t: P.to_hf({**_state_of(_gpt2()), "tok_emb.weight": [[0.0]]},
                                                               _gpt2()), TypeError,
     E("state['tok_emb.weight'] must be a torch.Tensor, got list")),
    ("to_hf, an untied head under a tied config", lambda hf, c, s, t: P.to_hf(_state_of(_gpt2(tie=False)), _gpt2()),
     ValueError, E("the config ties the output head to the token embedding, but lm_head.weight differs")),
    ("to_hf config None", lambda hf, c, s, t: P.to_hf(_state_of(_gpt2()), None), TypeError,
     E("config must be a minitfm ModelConfig")),
    ("key_map a str", lambda hf, c, s, t: P.key_map("gpt2"), TypeError, E("config must be a minitfm ModelConfig")),
    ("config_to_hf a dict", lambda hf, c, s, t: P.config_to_hf(hf.config.to_dict()), TypeError,
     E("config must be a minitfm ModelConfig")),
    ("model_family None", lambda hf, c, s, t: P.model_family(None), TypeError, E("got NoneType")),
    # the conversion rules
    ("split_fused_qkv a list", lambda hf, c, s, t: P.split_fused_qkv([[0.0] * 96] * 32, 32), TypeError,
     E("weight must be a torch.Tensor, got list")),
    ("split_fused_qkv d_model 0", lambda hf, c, s, t: P.split_fused_qkv(torch.zeros(32, 96), 0), ValueError,
     E("d_model must be an int >= 1, got 0")),
    ("split_fused_qkv d_model bool", lambda hf, c, s, t: P.split_fused_qkv(torch.zeros(1, 3), True), ValueError,
     E("got True")),
    ("split_fused_qkv 3-D", lambda hf, c, s, t: P.split_fused_qkv(torch.zeros(2, 32, 96), 32), ValueError,
     E("expected shape (32, 96), got (2, 32, 96)")),
    ("fuse_qkv a list", lambda hf, c, s, t: P.fuse_qkv([0.0], torch.zeros(1), torch.zeros(1)), TypeError,
     E("q must be a torch.Tensor, got list")),
    ("from_rotate_half a NumPy array", lambda hf, c, s, t: P.from_rotate_half(torch.zeros(8, 4).numpy(), 2), TypeError,
     E("weight must be a torch.Tensor, got ndarray")),
    ("from_rotate_half 0 heads", lambda hf, c, s, t: P.from_rotate_half(torch.zeros(8, 4), 0), ValueError,
     E("n_heads must be a positive int, got 0")),
    ("from_rotate_half heads bool", lambda hf, c, s, t: P.from_rotate_half(torch.zeros(8, 4), True), ValueError,
     E("got True")),
    ("from_rotate_half 3-D", lambda hf, c, s, t: P.from_rotate_half(torch.zeros(8, 4, 2), 2), ValueError,
     E("shape (8, 4, 2) is not 2 heads of an even width")),
    ("from_rotate_half no rows", lambda hf, c, s, t: P.from_rotate_half(torch.zeros(0, 4), 2), ValueError,
     E("shape (0, 4) is not 2 heads of an even width")),
    ("rotate_half_permutation odd", lambda hf, c, s, t: P.rotate_half_permutation(5), ValueError,
     E("d_head must be an even int >= 2 (RoPE turns pairs), got 5")),
    ("rotate_half_permutation 0", lambda hf, c, s, t: P.rotate_half_permutation(0), ValueError, E("got 0")),
    ("rotate_half_permutation float", lambda hf, c, s, t: P.rotate_half_permutation(4.0), ValueError, E("got 4.0")),
]


@pytest.mark.parametrize("call, exception, pattern", [case[1:] for case in BAD_CHECKPOINTS + BAD_ARGUMENTS],
                         ids=[case[0] for case in BAD_CHECKPOINTS + BAD_ARGUMENTS])
def test_bad_checkpoints_and_arguments_get_clear_errors(gpt2_parts, tmp_path, call, exception, pattern):
    with pytest.raises(exception, match=pattern):
        call(*gpt2_parts, tmp_path)


def test_a_checkpoint_in_shards_or_bin_loads_as_the_single_file(gpt2_parts, tmp_path):
    hf = gpt2_parts[0]
    tokens = torch.randint(0, VOCAB, (1, 10), generator=torch.Generator().manual_seed(6))
    for fmt in ("safetensors", "bin", "shards"):
        model = P.load(_folder(hf, tmp_path / fmt, fmt))
        with torch.no_grad():
            assert (model(tokens) - hf(tokens).logits).abs().max() <= TOL, fmt


def test_a_bool_causal_mask_buffer_in_an_old_checkpoint_is_skipped(gpt2_parts):
    _, config, state = gpt2_parts
    old = {**state, "transformer.h.0.attn.bias": torch.ones(1, 1, 8, 8, dtype=torch.bool).tril()}
    assert P.to_minitfm(old, config).keys() == P.to_minitfm(state, config).keys()


def test_a_config_without_bos_or_eos_ids_warns_that_zero_stands_in():
    hf = {k: v for k, v in _config().items() if k not in ("bos_token_id", "eos_token_id")}
    with pytest.warns(UserWarning, match="names neither bos_token_id nor eos_token_id: minitfm uses id 0 for both"):
        config = P.config_from_hf(hf)
    assert (config.bos_id, config.eos_id) == (0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a config that names its ids loads without a warning
        assert P.config_from_hf(_config()).eos_id == VOCAB - 1


def test_load_tokenizer_prefers_tokenizer_json_and_matches_hugging_face(tmp_path):
    """A folder with a ``tokenizer.json`` (as Qwen's and Llama 3's ship, beside or instead of vocab.json) loads
    through ``minitfm.text.tokenizer_json``; without any tokenizer file the error names what it looked for."""
    import tokenizers  # requirements.txt installs it: a missing one fails, never skips
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" ".join(TEXTS * 20)], trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    ours = P.load_tokenizer(tmp_path)
    for text in TEXTS + ["two<|endoftext|>texts 注意力 🙂"]:
        assert ours.encode(text) == tok.encode(text).ids
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="tokenizer.json and tokenizer.model"):
        P.load_tokenizer(tmp_path)
