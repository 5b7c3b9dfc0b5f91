"""Bad input across the public API: every case gets a ValueError/TypeError that names the argument, what
was expected and what arrived (never a deep torch error, never a silent NaN). Grouped by kind, as in the
review that listed them; each module's own file tests its everyday errors."""
import math
import pickle

import pytest
import torch

import minitfm
from minitfm import (
                     DecoderOnlyLM, EncoderDecoder, FeedForward, KVCache, ModelConfig, MultiHeadAttention, RMSNorm,
                     RepetitionPenalty, RotaryEmbedding, SwiGLU, TrainConfig, combine_masks, generate, greedy_decode, load_checkpoint,
                     make_norm, noam_lr, save_checkpoint, scaled_dot_product_attention, train, warmup_cosine_lr,
                     )

NAN = float("nan")


def lm(**overrides):
    torch.manual_seed(0)
    return DecoderOnlyLM(ModelConfig.tiny(**overrides)).eval()


# ---- non-finite or out-of-range numbers ----------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: ModelConfig.tiny(rope_base=NAN), "rope_base must be a finite number, got nan"),
    (lambda: ModelConfig.tiny(rope_base=-1.0), "rope_base must be > 0, got -1"),
    (lambda: ModelConfig.tiny(norm_eps=math.inf), "norm_eps must be a finite number"),
    (lambda: RotaryEmbedding(8, base=0.0), "RoPE base must be > 0, got 0"),
    (lambda: RotaryEmbedding(8, base=NAN), "RoPE base must be a finite number"),
    (lambda: RMSNorm(8, eps=-1e-6), r"eps must be >= 0, got -1e-06"),
    (lambda: make_norm("rms", 8, eps=NAN), "eps must be a finite number"),
    (lambda: TrainConfig(lr=NAN), "lr must be a finite number, got nan"),
    (lambda: TrainConfig(lr=1e-3, min_lr=1e-2), r"min_lr must be in \[0, 0.001\], got 0.01"),
    (lambda: TrainConfig(weight_decay=-0.1), "weight_decay must be >= 0, got -0.1"),
    (lambda: TrainConfig(betas=(0.9, 1.0)), r"betas\[1\] must be in \[0, 1\), got 1.0"),
    (lambda: TrainConfig(eps=0.0), "eps must be > 0"),
    (lambda: warmup_cosine_lr(-1, 1e-3, 10, 100), "step must be >= 0, got -1"),
    (lambda: warmup_cosine_lr(5, 1e-3, 10, 100, min_lr=1.0), r"min_lr must be in \[0, 0.001\]"),
    (lambda: noam_lr(10, d_model=64, warmup=0), "warmup must be >= 1, got 0"),
    (lambda: noam_lr(10, d_model=0, warmup=4), "d_model must be >= 1, got 0"),
])
def test_non_finite_and_out_of_range_numbers_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_generate_refuses_special_ids_outside_the_vocabulary():
    model, prompt = lm(), torch.tensor([[1, 5, 6]])
    with pytest.raises(ValueError, match=r"eos_id must be in \[-1, 15\], got 16"):
        generate(model, prompt, 3, eos_id=16)
    with pytest.raises(ValueError, match=r"pad_id must be in \[0, 15\], got 99"):
        generate(model, prompt, 3, pad_id=99)
    with pytest.raises(TypeError, match="pad_id must be an int, got str"):
        generate(model, prompt, 3, pad_id="0")
    out = generate(model, prompt, 4, eos_id=-1)  # -1: no early stop, exactly max_new_tokens
    assert out.new_tokens.shape == (1, 4)


# ---- dtype mismatches ---------------------------------------------------------------------------------
def test_attention_with_mixed_dtypes_names_them():
    q, k = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4, dtype=torch.float16)
    with pytest.raises(TypeError, match="dtypes must match, got q float32, k float16, v float16"):
        scaled_dot_product_attention(q, k, k)


@pytest.mark.parametrize("module", [MultiHeadAttention(8, 2), FeedForward(8), SwiGLU(8), RMSNorm(8)],
                         ids=lambda m: type(m).__name__)
def test_half_input_into_a_float32_module_says_how_to_fix_it(module):
    x = torch.randn(1, 3, 8, dtype=torch.float16)
    call = (lambda: module(x)) if not isinstance(module, MultiHeadAttention) else (lambda: module(x)[0])
    with pytest.raises(TypeError, match=r"x has dtype float16 but \w+'s weights are float32"):
        call()


def test_modules_accept_mixed_dtypes_under_autocast():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert FeedForward(8)(torch.randn(2, 8)).dtype == torch.bfloat16


def test_new_caches_of_another_dtype_are_refused_and_caches_do_not_cast_silently():
    model = lm()
    with pytest.raises(TypeError, match=r"new_caches\(dtype=torch.float16\) does not match the model's weights"):
        model.new_caches(1, 8, dtype=torch.float16)
    cache = KVCache(1, 2, 8, 4)
    with pytest.raises(TypeError, match="the cache holds torch.float32, got k torch.float16"):
        cache.update(torch.randn(1, 2, 1, 4).half(), torch.randn(1, 2, 1, 4).half())


# ---- shapes -------------------------------------------------------------------------------------------
def test_batch_dimensions_that_do_not_broadcast():
    q, k = torch.randn(2, 4, 3, 8), torch.randn(3, 4, 3, 8)
    with pytest.raises(ValueError, match=r"leading \(batch, head\) dimensions of q and k must broadcast"):
        scaled_dot_product_attention(q, k, k)


def test_a_head_dimension_of_zero():
    q = torch.randn(1, 1, 3, 0)
    with pytest.raises(ValueError, match="head dimension d_k must be >= 1"):
        scaled_dot_product_attention(q, q, torch.randn(1, 1, 3, 4))


@pytest.mark.parametrize("module", [FeedForward(8), SwiGLU(8), RMSNorm(8)], ids=lambda m: type(m).__name__)
def test_wrong_last_dimension_for_norms_and_feed_forward(module):
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., D=8\), got \(2, 3, 6\)"):
        module(torch.randn(2, 3, 6))


def test_positions_of_the_wrong_length():
    model, tokens = lm(pos="sinusoidal"), torch.tensor([[1, 5, 6]])
    with pytest.raises(ValueError, match=r"positions must have shape \(T,\) = \(3,\) or \(B, T\) = \(1, 3\)"):
        model(tokens, positions=torch.arange(5))


def test_combine_masks_of_incompatible_shapes():
    with pytest.raises(ValueError, match=r"masks must broadcast together.*\(1, 3, 3\).*\(2, 1, 1, 4\)"):
        combine_masks(torch.ones(1, 3, 3, dtype=torch.bool), torch.ones(2, 1, 1, 4, dtype=torch.bool))


# ---- wrong types --------------------------------------------------------------------------------------
def test_wrong_types_name_what_was_expected():
    model = lm()
    with pytest.raises(TypeError, match="lr must be a number, got str"):
        TrainConfig(lr="1e-3")
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got list"):
        scaled_dot_product_attention([[1.0]], torch.randn(1, 1), torch.randn(1, 1))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got NoneType"):
        train(None, [], TrainConfig(steps=1))
    with pytest.raises(TypeError, match="batches must yield minitfm.Batch objects.*got a Tensor"):
        train(model, iter([torch.zeros(2, 3)]), TrainConfig(steps=1), progress=False)
    with pytest.raises(TypeError, match="batches must be an iterable of minitfm.Batch.*got Tensor"):
        train(model, torch.zeros(2, 3), TrainConfig(steps=1), progress=False)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        generate(model, torch.tensor([[1, 5]]), 2, do_sample=True, generator="0")
    with pytest.raises(TypeError, match=r"prompt must hold integer token ids, got dtype torch.uint8"):
        generate(model, torch.tensor([[1, 5]], dtype=torch.uint8), 2)
    with pytest.raises(TypeError, match="model must be a DecoderOnlyLM or an EncoderDecoder, got NoneType"):
        generate(None, torch.tensor([[1, 5]]), 2)


# ---- configs that used to fail late ----------------------------------------------------------------------
def test_train_config_checks_everything_up_front():
    with pytest.raises(TypeError, match="autocast_dtype must be a torch.dtype such as torch.bfloat16"):
        TrainConfig(autocast_dtype="bfloat16")
    with pytest.raises(TypeError, match="betas must be a pair"):
        TrainConfig(betas=0.9)


def test_repetition_penalty_ignore_ids_outside_the_vocabulary():
    with pytest.raises(ValueError, match="every id in ignore_ids must be >= 0, got -1"):
        RepetitionPenalty(1.2, ignore_ids=[-1])
    with pytest.raises(ValueError, match=r"ignore_ids must be ids in \[0, V=5\), got 9"):
        RepetitionPenalty(1.2, ignore_ids=[9])(torch.tensor([[1, 2]]), torch.randn(1, 5))


def test_kv_cache_reorder_checks_its_rows():
    cache = KVCache(2, 1, 4, 2)
    with pytest.raises(ValueError, match=r"index must select rows in \[0, B=2\), got min 0, max 2"):
        cache.reorder(torch.tensor([0, 2]))
    with pytest.raises(TypeError, match="index must hold integer row numbers"):
        cache.reorder(torch.tensor([0.0, 1.0]))


def test_greedy_decode_checks_its_budget_before_the_first_step():
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(max_seq_len=8)).eval()
    src = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match=r"max_len=30 exceeds the model's max_seq_len=8"):
        greedy_decode(model, src, max_new_tokens=30)


# ---- checkpoints ----------------------------------------------------------------------------------------
def test_checkpoint_errors_name_the_file(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.pt is not a readable checkpoint"):
        load_checkpoint(empty)
    with pytest.raises(ValueError, match="is a directory, not a checkpoint file"):
        load_checkpoint(tmp_path)
    good = tmp_path / "good.pt"
    save_checkpoint(good, lm())
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:500])
    with pytest.raises(ValueError, match="truncated.pt is not a readable checkpoint"):
        load_checkpoint(truncated)
    bare = tmp_path / "bare.pt"
    torch.save(lm().state_dict(), bare)
    with pytest.raises(ValueError, match="bare.pt is not a minitfm checkpoint.*bare state_dict"):
        load_checkpoint(bare)
    data = torch.load(good, weights_only=True)
    torch.save({**data, "kind": "GPT5"}, tmp_path / "kind.pt")
    with pytest.raises(ValueError, match="unknown model kind 'GPT5'"):
        load_checkpoint(tmp_path / "kind.pt")
    # a file missing its config, or with a config or state_dict of the wrong type: named, never a KeyError
    torch.save({k: v for k, v in data.items() if k != "config"}, tmp_path / "noconfig.pt")
    with pytest.raises(ValueError, match="noconfig.pt is not a minitfm checkpoint"):
        load_checkpoint(tmp_path / "noconfig.pt")
    torch.save({**data, "config": [1, 2]}, tmp_path / "listconfig.pt")
    with pytest.raises(ValueError, match="listconfig.pt: its config must be a dict of ModelConfig fields, got list"):
        load_checkpoint(tmp_path / "listconfig.pt")
    torch.save({**data, "state_dict": [torch.zeros(1)]}, tmp_path / "liststate.pt")
    with pytest.raises(ValueError, match="liststate.pt: its state_dict must be a dict of name -> tensor, got list"):
        load_checkpoint(tmp_path / "liststate.pt")
    torch.save({**data, "config": {**data["config"], "d_model": 32}}, tmp_path / "mismatch.pt")
    with pytest.raises(ValueError, match="mismatch.pt: the weights do not fit its config"):
        load_checkpoint(tmp_path / "mismatch.pt")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="map_location='cuda' but this machine has no CUDA device"):
            load_checkpoint(good, map_location="cuda")


class _Evil:
    def __reduce__(self):
        return (print, ("this ran while loading",))


def test_an_unsafe_pickle_is_refused_without_suggesting_weights_only_false(tmp_path):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"kind": "DecoderOnlyLM", "payload": _Evil()}, f, protocol=2)
    with pytest.raises(ValueError, match="refused to load .*evil.pt") as info:
        load_checkpoint(path)
    assert "weights_only=False" not in str(info.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_checkpoint_round_trip_keeps_the_dtype_bit_for_bit(tmp_path, dtype):
    model = lm(pos="rope", norm="rms", ffn="swiglu").to(dtype)
    save_checkpoint(tmp_path / "m.pt", model)
    loaded = load_checkpoint(tmp_path / "m.pt")
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert a.dtype == b.dtype == dtype and torch.equal(a, b), name
    tokens = torch.tensor([[1, 5, 6, 7]])
    assert torch.equal(model(tokens), loaded(tokens))


# ---- explorers ------------------------------------------------------------------------------------------
def test_explorers_refuse_bad_sizes():
    se = minitfm.viz.static_explorers
    with pytest.raises(ValueError, match="tokens must have 2 dimensions"):
        se.static_mask_explorer(torch.tensor([3, 4, 0]))
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        se.static_positional_explorer(max_len=0)


def test_helpers_that_used_to_crash_or_accept_garbage():
    from minitfm import count_params, estimate_params, evaluate, pad_sequences, set_seed, shift_right
    from minitfm.data import padding_fraction
    from minitfm.training.debugging import grad_norms

    with pytest.raises(TypeError, match="positions must be a torch.Tensor, got list"):
        minitfm.sinusoidal_encoding([0, 1], 4)
    with pytest.raises(ValueError, match="multiple_of must be >= 1, got 0"):
        minitfm.swiglu_hidden_size(8, multiple_of=0)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got NoneType"):
        count_params(None)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got NoneType"):
        grad_norms(None)
    with pytest.raises(TypeError, match="config must be a ModelConfig, got str"):
        estimate_params("x")
    with pytest.raises(TypeError, match=r"seqs\[0\] must hold integer token ids, got dtype torch.float32"):
        pad_sequences([torch.randn(3)], 0)
    with pytest.raises(TypeError, match="tgt_out must hold integer token ids"):
        shift_right(torch.randn(1, 3), 1)
    with pytest.raises(TypeError, match="seed must be an int, got str"):
        set_seed("0")
    with pytest.raises(ValueError, match="tokens is empty"):
        padding_fraction(torch.zeros(0, 3, dtype=torch.long), 0)
    with pytest.raises(TypeError, match="evaluate scores an EncoderDecoder"):
        evaluate(None, None)


def test_save_checkpoint_into_a_missing_folder_names_it(tmp_path):
    with pytest.raises(ValueError, match="the folder .*nowhere does not exist"):
        save_checkpoint(tmp_path / "nowhere" / "m.pt", lm())


def test_second_sweep_of_helpers():
    from minitfm.generation import kv_memory as memory
    from minitfm.layers import moe
    from minitfm.lm import corpus
    from minitfm.training.activation_memory import SavedTensorMeter
    from minitfm.training.debugging import check_causality, overfit_one_batch

    with pytest.raises(TypeError, match=r"x has dtype float16 but MoEFeedForward's weights are float32"):
        moe.MoEFeedForward(8, n_experts=2, top_k=1)(torch.randn(2, 3, 8).half())
    with pytest.raises(ValueError, match=r"indices must be expert numbers in \[0, 2\), got min 5"):
        moe.expert_load(torch.tensor([[5]]), 2)
    with pytest.raises(ValueError, match="must have the same N"):
        moe.load_balancing_loss(torch.rand(3, 2), torch.tensor([[0], [1]]))
    with pytest.raises(TypeError, match="texts must be a list of strings, got str"):
        corpus.validity("a cat")
    with pytest.raises(TypeError, match="text must be a string, got NoneType"):
        corpus.split_sentences(None)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        overfit_one_batch(None, None)
    with pytest.raises(TypeError, match="tokens must hold integer token ids"):
        check_causality(lambda t: t, torch.randn(1, 3), 5)
    with pytest.raises(TypeError, match="exclude must hold tensors only"):
        SavedTensorMeter("x")
    with pytest.raises(ValueError, match="must be a finite number"):
        memory.format_bytes(NAN)


# ---- the older API's last raw errors (issue 45, item 7) -----------------------------------------------------------
@pytest.mark.parametrize("call, error, match", [
    (lambda: minitfm.padding_mask(torch.tensor([[1, 2, 0]]), None), TypeError,
     r"pad_id must be an int \(the padding token's id\), got NoneType None; a model without a padding token"),
    (lambda: minitfm.padding_mask(torch.tensor([[1, 2, 0]]), "0"), TypeError, "pad_id must be an int"),
    (lambda: minitfm.padding_mask(torch.tensor([[1, 2, 0]]), 0.0), TypeError, "pad_id must be an int"),
    (lambda: _words().decode([4, 1.5]), TypeError, "token ids must be ints, got float 1.5"),
    (lambda: _words().decode(["cat"]), TypeError, "token ids must be ints, got str 'cat'"),
    (lambda: _words().decode([True]), TypeError, "token ids must be ints, got bool"),
    (lambda: _words().decode(torch.tensor([4.0, 5.0])), TypeError, "integer token ids, got a tensor of dtype torch.float32"),
    (lambda: _words().decode("the cat"), TypeError, "ids must be a sequence of int token ids, got str"),
    (lambda: _words().decode(None), TypeError, "ids must be a sequence of int token ids, got NoneType"),
])
def test_padding_mask_and_word_decode_refuse_what_is_not_an_id(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _words():
    from minitfm.text.words import WordTokenizer

    return WordTokenizer(["the", "cat", "sat"])


def test_word_decode_still_takes_numpy_and_tensor_ids():
    import numpy as np

    words = _words()
    ids = words.encode("the cat sat")
    assert words.decode(ids) == words.decode(torch.tensor(ids)) == words.decode(np.array(ids)) == "the cat sat"
    assert minitfm.padding_mask(torch.tensor([[5, 0]]), 0).tolist() == [[[[True, False]]]]
