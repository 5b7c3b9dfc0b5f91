import math
import re

import pytest
import torch
import torch.nn.functional as F

from minitfm.config import ModelConfig
from minitfm.generation import generate
from minitfm.generation.greedy import greedy_decode
from minitfm.lm.corpus import generate_sentences, lm_rows, lm_stream_rows, make_tokenizer, validity
from minitfm.lm.small_lm import (
                                 ROW_LEN,
                                 PerplexityAndLoss,
                                 load_small_lm,
                                 lm_batches,
                                 perplexity_and_loss,
                                 sample_texts,
                                 small_lm_config,
                                 train_small_lm,
                                 )
from minitfm.models import DecoderOnlyLM



def test_config_matches_tokenizer():
    tok = make_tokenizer()
    cfg = small_lm_config()
    assert cfg.vocab_size == tok.vocab_size
    assert (cfg.pad_id, cfg.bos_id, cfg.eos_id) == (tok.pad_id, tok.bos_id, tok.eos_id)


def test_small_lm_config_refuses_an_unknown_or_a_fixed_keyword_by_name():
    with pytest.raises(TypeError, match=r"small_lm_config got \['d_modle'\], which are not ModelConfig fields "
                                        r"\('d_modle': did you mean 'd_model'\?\)"):
        small_lm_config(d_modle=64)
    with pytest.raises(ValueError, match=r"takes \['pad_id', 'vocab_size'\] from the tokenizer"):
        small_lm_config(vocab_size=50, pad_id=3)
    assert small_lm_config(d_model=64).d_model == 64


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


# ---- bad input: a clear error naming what was expected and what arrived (issue 34) ----

def _rows():
    return lm_stream_rows(generate_sentences(20, seed=0), make_tokenizer(), ROW_LEN)  # (N, 32)


def _checkpoint_file(tmp_path, kind):
    """A file at ``tmp_path`` that load_small_lm must refuse; returns its path."""
    path = tmp_path / "small_lm.pt"
    if kind == "missing":
        return tmp_path / "no_such_file.pt"
    if kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("hello, not a checkpoint")
    elif kind == "lfs pointer":
        path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 2000000\n")
    elif kind == "truncated":
        from minitfm.lm.small_lm import CHECKPOINT
        data = CHECKPOINT.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "malicious pickle":
        class Payload:
            def __reduce__(self):
                return (print, ("this must never run",))
        torch.save({"kind": "DecoderOnlyLM", "config": Payload()}, path)
    elif kind == "bare dict":
        torch.save({"a": 1}, path)
    elif kind == "encoder-decoder":
        from minitfm.models import EncoderDecoder
        from minitfm.training import save_checkpoint
        save_checkpoint(path, EncoderDecoder(ModelConfig.tiny()))
    return path


LOAD_CASES = [
    ("missing", FileNotFoundError, "no checkpoint at"),
    ("folder", ValueError, "is a folder; the loader expects the .pt checkpoint file"),
    ("empty", ValueError, "is an empty file, not a checkpoint"),
    ("text", ValueError, "is not a checkpoint written by torch.save (it starts with b'hello, not a che"),
    ("lfs pointer", ValueError, "is a Git LFS pointer, not the checkpoint"),
    ("truncated", ValueError, "is not a readable checkpoint"),
    ("malicious pickle", ValueError, "refused to load"),
    ("bare dict", ValueError, "is not a minitfm checkpoint"),
    ("encoder-decoder", TypeError, "holds a EncoderDecoder, not a DecoderOnlyLM"),
]


@pytest.mark.parametrize("kind, error, message", LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_load_small_lm_refuses_a_bad_file_naming_it(tmp_path, capsys, kind, error, message):
    path = _checkpoint_file(tmp_path, kind)
    with pytest.raises(error, match=re.escape(message)) as info:
        load_small_lm(path)
    assert path.name in str(info.value)  # the message names the file
    assert "must never run" not in capsys.readouterr().out  # weights_only loading: the pickle never ran


def _model():
    return tiny_lm()


SENTENCES = generate_sentences(15, seed=3)

BAD_CALLS = [
    ("config: tokenizer a str", lambda: small_lm_config("tok"), TypeError,
     "tokenizer must be a WordTokenizer (minitfm.lm.corpus.make_tokenizer()) or None, got str"),
    ("lm_batches: rows a list", lambda: lm_batches([[1, 5, 2]], 4, 0), TypeError,
     "rows must be a torch.Tensor, got list"),
    ("lm_batches: float rows", lambda: lm_batches(_rows().float(), 4, 0), TypeError,
     "rows must hold integer token ids, got dtype torch.float32"),
    ("lm_batches: 1-D rows", lambda: lm_batches(_rows()[0], 4, 0), ValueError,
     "rows must have 2 dimensions, got 1"),
    ("lm_batches: no rows", lambda: lm_batches(_rows()[:0], 4, 0), ValueError,
     "rows must be (N, T) with N >= 1 rows of T >= 2 tokens (input and target), got shape (0, 32)"),
    ("lm_batches: an all-padding row", lambda: lm_batches(torch.cat([_rows(), torch.zeros(1, 32, dtype=torch.long)]), 4, 0),
     ValueError, "every row needs at least 2 tokens that are not pad_id=0"),
    ("lm_batches: batch_size bool", lambda: lm_batches(_rows(), True, 0), TypeError, "batch_size must be an int, got bool"),
    ("lm_batches: batch_size float", lambda: lm_batches(_rows(), 4.0, 0), TypeError, "batch_size must be an int, got float"),
    ("lm_batches: batch_size 0", lambda: lm_batches(_rows(), 0, 0), ValueError, "batch_size must be >= 1, got 0"),
    ("lm_batches: pad_id float", lambda: lm_batches(_rows(), 4, 0.0), TypeError, "pad_id must be an int, got float"),
    ("lm_batches: pad_id bool", lambda: lm_batches(_rows(), 4, False), TypeError, "pad_id must be an int, got bool"),
    ("lm_batches: seed float", lambda: lm_batches(_rows(), 4, 0, seed=1.5), TypeError, "seed must be an int, got float"),
    ("train: steps 0", lambda: train_small_lm(0), ValueError, "steps must be >= 1, got 0"),
    ("train: steps bool", lambda: train_small_lm(True), TypeError, "steps must be an int, got bool"),
    ("train: steps float", lambda: train_small_lm(2.5), TypeError, "steps must be an int, got float"),
    ("train: n_sentences negative", lambda: train_small_lm(2, n_sentences=-5), ValueError,
     "n_sentences must be >= 1, got -5"),
    ("train: seed float", lambda: train_small_lm(2, seed=1.0), TypeError, "seed must be an int, got float"),
    ("train: progress a str", lambda: train_small_lm(2, progress="yes"), TypeError, "progress must be a bool, got str"),
    ("load: path an int", lambda: load_small_lm(123), TypeError,
     "path must be a str or a pathlib.Path to a .pt checkpoint, got int"),
    ("perplexity: one string", lambda: perplexity_and_loss(_model(), "the cats sleep ."), TypeError,
     "sentences must be a list of strings, got a single str ('the cats sleep .'); wrap it in a list: [text]"),
    ("perplexity: bytes", lambda: perplexity_and_loss(_model(), b"the cats"), TypeError,
     "sentences must be a list of strings, got a single bytes"),
    ("perplexity: a number in the list", lambda: perplexity_and_loss(_model(), SENTENCES[:2] + [7]), TypeError,
     "sentences[2] must be a str, got int (7)"),
    ("perplexity: a dict", lambda: perplexity_and_loss(_model(), {"the cats": 1}), TypeError,
     "sentences must be a list of strings, got dict"),
    ("perplexity: a tensor", lambda: perplexity_and_loss(_model(), torch.tensor([1, 2])), TypeError,
     "sentences must be a list of strings, got Tensor"),
    ("perplexity: model a str", lambda: perplexity_and_loss("model", SENTENCES), TypeError,
     "model must be a DecoderOnlyLM, got str"),
    ("perplexity: batch_size float", lambda: perplexity_and_loss(_model(), SENTENCES, 8.0), TypeError,
     "batch_size must be an int, got float"),
    ("perplexity: tokenizer a str", lambda: perplexity_and_loss(_model(), SENTENCES, tokenizer="word"), TypeError,
     "tokenizer must be a WordTokenizer (minitfm.lm.corpus.make_tokenizer()) or None, got str"),
    ("sample: model a str", lambda: sample_texts("model", 2), TypeError, "model must be a DecoderOnlyLM, got str"),
    ("sample: n bool", lambda: sample_texts(_model(), True), TypeError, "n must be an int, got bool"),
    ("sample: n float", lambda: sample_texts(_model(), 2.0), TypeError, "n must be an int, got float"),
    ("sample: max_new_tokens negative", lambda: sample_texts(_model(), 2, -1), ValueError,
     "max_new_tokens must be >= 1, got -1"),
    ("sample: max_new_tokens bool", lambda: sample_texts(_model(), 2, True), TypeError,
     "max_new_tokens must be an int, got bool"),
    ("sample: one prompt string", lambda: sample_texts(_model(), 1, 4, prompts="the"), TypeError,
     "prompts must be a list of strings, got a single str ('the')"),
    ("sample: a prompt not a str", lambda: sample_texts(_model(), 2, 4, prompts=["the", None]), TypeError,
     "prompts[1] must be a str, got NoneType (None)"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_gets_a_named_error(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_lm_batches_checks_at_the_call_and_good_iterables_still_score():
    with pytest.raises(TypeError, match=re.escape("rows must be a torch.Tensor")):
        lm_batches("rows", 4, 0)  # not at the first next(): the error points at the caller's line
    model = tiny_lm()
    assert perplexity_and_loss(model, iter(SENTENCES)) == perplexity_and_loss(model, tuple(SENTENCES))
