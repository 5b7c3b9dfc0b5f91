"""Chapter 15's base model: bytes as tokens, a corpus that keeps its held-out prose out, batched bits per byte
equal to chapter 14's function, and the shipped checkpoint."""
from __future__ import annotations

import json
import math

import pytest
import torch

from minitfm.evaluation import model_bits_per_byte
from minitfm.finetuning import ChatTemplate
from minitfm.finetuning.tasks import TASKS, statements
from minitfm.lm import base_lm as B
from minitfm.models import DecoderOnlyLM


def test_the_tokenizer_is_bytes_plus_the_special_tokens():
    tok = B.byte_tokenizer()
    text = "strawberry 注意力 🙂"
    assert tok.encode(text) == list(text.encode("utf-8")) and tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == B.base_lm_config().vocab_size == 256 + len(B.SPECIAL_TOKENS)
    assert [tok.special_ids[t] for t in B.SPECIAL_TOKENS] == list(range(256, 256 + len(B.SPECIAL_TOKENS)))
    chat = ChatTemplate(tok, bos_id=B.base_lm_config().bos_id).render(
        [{"role": "user", "content": "<|end|>hi"}, {"role": "assistant", "content": "yo"}])
    assert chat.ids.tolist().count(tok.special_ids["<|end|>"]) == 2  # typed text never becomes the control token


def test_the_corpus_holds_the_training_prose_and_every_statement_but_no_heldout_paragraph():
    corpus = B.base_corpus(seed=0)
    lines = set(corpus)
    held = B.heldout_prose()
    assert 0.05 < len(held) / len(B.prose_paragraphs()) < 0.15
    assert not any(p in lines for _, p in held)
    trained = [p for _, p in B.prose_paragraphs() if not B.is_heldout(p)]
    assert all(p in lines for p in trained[::25])
    assert all(s in lines for task in TASKS for s in statements(task)[::7])
    assert B.base_corpus(seed=0) == corpus != B.base_corpus(seed=1)


def test_the_stream_puts_endoftext_before_every_text():
    ids = B.corpus_ids(["ab", "注"])
    assert ids.tolist() == [256, 97, 98, 256, *"注".encode("utf-8")]


def test_corpus_batches_are_shifted_rows_of_the_stream():
    ids = torch.arange(1000) % 250
    batch = next(B.corpus_batches(ids, 4, seed=0, row_len=16))
    assert batch.tgt_in.shape == batch.tgt_out.shape == (4, 16)
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert torch.equal(next(B.corpus_batches(ids, 4, seed=0, row_len=16)).tgt_in, batch.tgt_in)
    with pytest.raises(ValueError, match="longer than row_len"):
        next(B.corpus_batches(ids[:10], 4, seed=0, row_len=16))


def test_batched_bits_per_byte_equals_chapter_14s_function():
    torch.manual_seed(0)
    model = DecoderOnlyLM(B.base_lm_config(d_model=32, n_layers=2, d_ff=64, attn_impl="manual")).double().eval()
    texts = ["Attention is a weighted average.", "注意力", "a", "The KV cache keeps keys and values. " * 3]
    want_nats = sum(model_bits_per_byte(model, B.byte_tokenizer(), t, bos_id=model.config.bos_id).total_nats
                    for t in texts)
    want = want_nats / (math.log(2) * sum(len(t.encode()) for t in texts))
    assert B.bits_per_byte_of(model, texts, batch_size=3) == pytest.approx(want, rel=1e-9)
    each = [model_bits_per_byte(model, B.byte_tokenizer(), t, bos_id=model.config.bos_id).total_nats for t in texts]
    assert B.text_nats(model, texts, batch_size=3) == pytest.approx(each, rel=1e-9)
    with pytest.raises(ValueError, match="reads at most"):
        B.bits_per_byte_of(model, ["x" * model.config.max_seq_len])
    with pytest.raises(TypeError, match="non-empty list"):
        B.bits_per_byte_of(model, "a text")


def test_the_shipped_base_model_loads_with_its_recipe_and_its_record():
    model = B.load_base_lm()
    assert model.config == B.base_lm_config().resolved()
    record = json.loads(B.CHECKPOINT.with_suffix(".json").read_text())
    assert B.CHECKPOINT.stat().st_size < 4e6  # "a few MB"
    assert sum(p.numel() for p in model.parameters()) == record["parameters"]
    # the figure the training script stored is the one this checkpoint earns (re-measured here, any machine)
    assert B.heldout_bits_per_byte(model) == pytest.approx(record["heldout_bits_per_byte"], abs=2e-3)
    assert record["heldout_bits_per_byte"] < 3.0  # well below uniform over bytes (8 bits): it learned the prose


def test_heldout_paragraphs_are_cut_to_the_context_in_bytes_between_characters(monkeypatch):
    """Review 2026-12b L5: a cut by characters left a Chinese paragraph 3 times the context in bytes, which
    text_nats refuses; the cut is now by bytes, at a character boundary."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(B.base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=64)).eval()
    monkeypatch.setattr(B, "heldout_prose", lambda: [("ch", "注意力机制" * 10), ("en", "Keys and values. " * 9)])
    got = B.heldout_bits_per_byte(model)
    want = B.bits_per_byte_of(model, ["注意力机制" * 4 + "注", ("Keys and values. " * 9)[:63]])  # 63 bytes each
    assert got == pytest.approx(want, rel=1e-12)
    assert B.cut_to_bytes("注意力", 7) == "注意" and B.cut_to_bytes("ab注", 4) == "ab" and B.cut_to_bytes("abc", 9) == "abc"
