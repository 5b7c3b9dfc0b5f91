import pytest
import torch

from minitfm.corpus import generate_sentences, lm_rows, make_tokenizer, validity
from minitfm.decoding import greedy_decode
from minitfm.generation import generate
from minitfm.models import DecoderOnlyLM
from minitfm.small_lm import (
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
    loss, ppl = perplexity_and_loss(model, generate_sentences(50, seed=1))
    assert ppl == pytest.approx(torch.tensor(loss).exp().item())
    assert loss < torch.log(torch.tensor(float(model.config.vocab_size))).item() + 2.5


def test_sample_texts_and_greedy_agree_with_greedy_decode():
    torch.manual_seed(0)
    model = DecoderOnlyLM(small_lm_config(n_layers=1, d_model=32, n_heads=2)).eval()
    tok = make_tokenizer()
    prompt = tok.encode_batch(["the", "the cats near"], side="left")
    ours = generate(model, prompt, 10).new_tokens
    theirs = greedy_decode(model, prompt, 10)
    assert torch.equal(ours, theirs)
    texts = sample_texts(model, 2, 10, prompts=["the", "the cats near"])
    assert texts[1].startswith("the cats near") and len(texts) == 2
    with pytest.raises(ValueError, match="2 prompts for n=3"):
        sample_texts(model, 3, 10, prompts=["the", "a"])


def test_shipped_checkpoint_loads_and_writes_the_language():
    model = load_small_lm()
    assert isinstance(model, DecoderOnlyLM) and not model.training
    assert model.config == small_lm_config().resolved()
    loss, _ = perplexity_and_loss(model, generate_sentences(100, seed=1))
    assert loss < 2.6  # an untrained model scores about log(V) = 4.4 nats or worse
    texts = sample_texts(model, 20, do_sample=True, generator=torch.Generator().manual_seed(0))
    assert validity(texts, complete_only=True) > 0.8
