import math

import pytest
import torch
import torch.nn.functional as F

from minitfm.config import ModelConfig
from minitfm.corpus import generate_sentences, lm_rows, lm_stream_rows, make_tokenizer, validity
from minitfm.decoding import greedy_decode
from minitfm.generation import generate
from minitfm.models import DecoderOnlyLM
from minitfm.small_lm import (
    ROW_LEN,
    PerplexityAndLoss,
    load_small_lm,
    lm_batches,
    perplexity_and_loss,
    sample_texts,
    small_lm_config,
    train_small_lm,
)



def test_config_matches_tokenizer():
    tok = make_tokenizer()
    cfg = small_lm_config()
    assert cfg.vocab_size == tok.vocab_size
    assert (cfg.pad_id, cfg.bos_id, cfg.eos_id) == (tok.pad_id, tok.bos_id, tok.eos_id)


def test_lm_batches_shift_and_trim():
    tok = make_tokenizer()
    rows = lm_rows(generate_sentences(200, seed=0), tok, 40)
    batch = next(lm_batches(rows, 16, tok.pad_id, seed=0))
    assert batch.src is None and batch.tgt_in.shape == batch.tgt_out.shape and batch.tgt_in.shape[0] == 16
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])  # target = input shifted by one
    assert (batch.tgt_in[:, 0] == tok.bos_id).all()
    assert (batch.tgt_out[:, -1] != tok.pad_id).any()  # cut to the longest row: no all-padding column
    again = next(lm_batches(rows, 16, tok.pad_id, seed=0))
    assert torch.equal(batch.tgt_in, again.tgt_in)  # reproducible from the seed


def test_short_training_lowers_the_loss():
    model, history = train_small_lm(steps=12, n_sentences=500)
    assert len(history.loss) == 12
    assert sum(history.loss[-3:]) / 3 < sum(history.loss[:3]) / 3
    torch.manual_seed(0)  # the same initial weights as train_small_lm's seed 0
    untrained = DecoderOnlyLM(small_lm_config())
    held_out = generate_sentences(50, seed=1)
    log_v = math.log(model.config.vocab_size)  # the loss of a uniform guess
    # an untrained model scores above ln V (about 7 nats: it predicts the token it reads); 12 updates, about 3.8
    assert perplexity_and_loss(untrained, held_out).loss > log_v > perplexity_and_loss(model, held_out).loss


def tiny_lm():
    torch.manual_seed(0)
    return DecoderOnlyLM(small_lm_config(n_layers=1, d_model=32, n_heads=2))


def test_perplexity_and_loss_is_the_cross_entropy_of_every_token_whatever_the_batch_size():
    model, tok = tiny_lm(), make_tokenizer()
    sentences = generate_sentences(15, seed=3)
    rows = lm_stream_rows(sentences, tok, ROW_LEN)  # what the function scores: full rows of <bos> + sentences
    assert rows.shape[0] == 3  # batches of 2 then hold 2 rows and 1 row: a mean of batch means would be off
    with torch.no_grad():
        logits = model(rows[:, :-1])  # (3, 31, V): one hand-made batch, scored independently of the library
    expected = F.cross_entropy(logits.flatten(0, 1), rows[:, 1:].flatten(), ignore_index=tok.pad_id).item()
    model.train()
    for batch_size in (1, 2, 256):
        result = perplexity_and_loss(model, sentences, batch_size=batch_size)
        assert isinstance(result, PerplexityAndLoss)
        ppl, loss = result  # the order of the name
        assert loss == pytest.approx(expected, rel=1e-5) and result.loss == loss
        assert ppl == pytest.approx(math.exp(expected), rel=1e-5) and result.perplexity == ppl
        assert model.training  # the mode it was in is restored


def test_perplexity_and_loss_checks_its_tokenizer():
    model, tok = tiny_lm(), make_tokenizer()
    other = DecoderOnlyLM(ModelConfig.small_lm(vocab_size=tok.vocab_size + 5, n_layers=1, d_model=32, n_heads=2))
    sentences = generate_sentences(15, seed=3)
    with pytest.raises(ValueError, match=f"vocab_size is {tok.vocab_size + 5}, the tokenizer has {tok.vocab_size}"):
        perplexity_and_loss(other, sentences)
    given = perplexity_and_loss(model, sentences, tokenizer=tok)
    assert given == perplexity_and_loss(model, sentences)


def test_sample_texts_and_greedy_agree_with_greedy_decode():
    model, tok = tiny_lm(), make_tokenizer()
    model.eval()
    prompt = tok.encode_batch(["the", "the cats near"], side="left")
    new_tokens = generate(model, prompt, 10).new_tokens
    assert torch.equal(new_tokens, greedy_decode(model, prompt, 10))
    texts = sample_texts(model, 2, 10, prompts=["the", "the cats near"])
    assert len(texts) == 2
    for text, prompt_text, row in zip(texts, ["the", "the cats near"], new_tokens):
        assert text.startswith(prompt_text + " ")
        assert text[len(prompt_text) + 1:] == tok.decode(row)  # the new part is what generate wrote
    with pytest.raises(ValueError, match="2 prompts for n=3"):
        sample_texts(model, 3, 10, prompts=["the", "a"])


def test_shipped_checkpoint_loads_and_writes_the_language():
    model = load_small_lm()
    assert isinstance(model, DecoderOnlyLM) and not model.training
    assert model.config == small_lm_config().resolved()
    held_out = generate_sentences(100, seed=1)
    assert perplexity_and_loss(model, held_out).loss < 2.6
    torch.manual_seed(0)
    assert perplexity_and_loss(DecoderOnlyLM(small_lm_config()), held_out).loss > 2.6 + 1  # untrained: ~7 nats
    texts = sample_texts(model, 20, do_sample=True, generator=torch.Generator().manual_seed(0))
    assert validity(texts, complete_only=True) > 0.8
