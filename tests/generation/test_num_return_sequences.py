"""``generate(num_return_sequences=G)`` reads each prompt once and continues it in G rows: the same tokens and
logits as G repeated prompt rows, drawn from the same generator, for every cache and model kind."""
import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.generation import generate
from minitfm.generation.sampling import Temperature
from minitfm.layers.kv_cache import ConcatKVCache, KVCache
from minitfm.models import DecoderOnlyLM, EncoderDecoder

PAD, G = 0, 3


def repeated_and_grouped(model, prompt, **kwargs):
    """(generate on the prompt rows repeated G times, generate with num_return_sequences=G), same seed."""
    src = kwargs.pop("src", None)
    mask = kwargs.pop("prompt_mask", None)
    twice = []
    for rows, g in ((lambda x: x.repeat_interleave(G, dim=0), 1), (lambda x: x, G)):
        extra = {} if src is None else {"src": rows(src)}
        if mask is not None:
            extra["prompt_mask"] = rows(mask)
        twice.append(generate(model, rows(prompt), 7, processors=[Temperature(1.3)], do_sample=True,
                              generator=torch.Generator().manual_seed(11), return_logits=True,
                              num_return_sequences=g, **extra, **kwargs))
    return twice


@pytest.mark.parametrize("pos", ["learned", "rope", "alibi"])
@pytest.mark.parametrize("n_kv_heads", [None, 1])
@pytest.mark.parametrize("use_cache,cache_cls", [(True, KVCache), (True, ConcatKVCache), (False, KVCache)])
def test_grouped_rows_equal_repeated_prompts(pos, n_kv_heads, use_cache, cache_cls):
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(pos=pos, n_kv_heads=n_kv_heads))
    prompt = torch.tensor([[PAD, PAD, 1, 5, 6], [1, 7, 8, 9, 3]])  # left-padded
    repeated, grouped = repeated_and_grouped(model, prompt, use_cache=use_cache, cache_cls=cache_cls)
    assert grouped.tokens.shape[0] == 2 * G and grouped.finished.shape == (2 * G,)
    assert torch.equal(grouped.tokens, repeated.tokens)
    torch.testing.assert_close(grouped.logits, repeated.logits, atol=1e-5, rtol=1e-5)
    assert len({tuple(r) for r in grouped.new_tokens[:G].tolist()}) > 1  # the G rows of a prompt went their own ways


def test_grouped_rows_with_a_prompt_mask_and_a_sliding_window():
    torch.manual_seed(0)
    config = ModelConfig.small_lm(vocab_size=41, d_model=32, n_layers=3, max_seq_len=64, sliding_window=3,
                                  sliding_layers=(0, 2))
    model = DecoderOnlyLM(config)
    prompt = torch.tensor([[9, 9, 4, 1, 5, 9], [3, 1, 4, 1, 5, 8]])
    mask = torch.tensor([[False, False, True, True, True, True], [True] * 6])
    repeated, grouped = repeated_and_grouped(model, prompt, prompt_mask=mask, eos_id=-1)
    assert torch.equal(grouped.tokens, repeated.tokens)
    torch.testing.assert_close(grouped.logits, repeated.logits, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_grouped_rows_equal_repeated_sources():
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(n_kv_heads=1))
    src = torch.tensor([[1, 5, 6, 7, 2, PAD], [1, 8, 9, 2, PAD, PAD]])  # right-padded source
    start = torch.ones(2, 1, dtype=torch.long)
    repeated, grouped = repeated_and_grouped(model, start, src=src)
    assert torch.equal(grouped.tokens, repeated.tokens)
    torch.testing.assert_close(grouped.logits, repeated.logits, atol=1e-5, rtol=1e-5)


def test_greedy_grouped_rows_are_copies():
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny())
    prompt = torch.tensor([[PAD, 4, 5], [1, 7, 8]])
    out = generate(model, prompt, 6, num_return_sequences=2)
    alone = generate(model, prompt, 6)
    assert torch.equal(out.tokens, alone.tokens.repeat_interleave(2, dim=0))


@pytest.mark.parametrize("value,error", [(0, ValueError), (-2, ValueError), (True, TypeError), (2.0, TypeError)])
def test_bad_num_return_sequences_is_refused_by_name(value, error):
    model = DecoderOnlyLM(ModelConfig.tiny())
    with pytest.raises(error, match="num_return_sequences"):
        generate(model, torch.tensor([[1, 2]]), 3, num_return_sequences=value)
