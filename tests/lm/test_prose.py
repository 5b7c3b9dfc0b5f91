"""The book's prose for byte-level models: bytes as tokens, the stream a corpus becomes, held-out paragraphs cut by
bytes, and batched bits per byte equal to chapter 14's function."""
from __future__ import annotations

import math

import pytest
import torch

from minitfm.evaluation import model_bits_per_byte
from minitfm.finetuning import ChatTemplate
from minitfm.lm import prose as B
from minitfm.lm.base_lm import base_lm_config
from minitfm.models import DecoderOnlyLM


def test_the_tokenizer_is_bytes_plus_the_special_tokens():
    tok = B.byte_tokenizer()
    text = "strawberry 注意力 🙂"
    assert tok.encode(text) == list(text.encode("utf-8")) and tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == base_lm_config().vocab_size == 256 + len(B.SPECIAL_TOKENS)
    assert [tok.special_ids[t] for t in B.SPECIAL_TOKENS] == list(range(256, 256 + len(B.SPECIAL_TOKENS)))
    chat = ChatTemplate(tok, bos_id=base_lm_config().bos_id).render(
        [{"role": "user", "content": "<|end|>hi"}, {"role": "assistant", "content": "yo"}])
    assert chat.ids.tolist().count(tok.special_ids["<|end|>"]) == 2  # typed text never becomes the control token


def test_the_stream_puts_endoftext_before_every_text():
    ids = B.corpus_ids(["ab", "注"])
    assert ids.tolist() == [256, 97, 98, 256, *"注".encode("utf-8")]


def test_batched_bits_per_byte_equals_chapter_14s_function():
    torch.manual_seed(0)
    model = DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, attn_impl="manual")).double().eval()
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


def test_heldout_paragraphs_are_cut_to_the_context_in_bytes_between_characters(monkeypatch):
    """Review 2026-12b L5: a cut by characters left a Chinese paragraph 3 times the context in bytes, which
    text_nats refuses; the cut is now by bytes, at a character boundary."""
    torch.manual_seed(0)
    model = DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=64)).eval()
    monkeypatch.setattr(B, "heldout_prose", lambda: [("ch", "注意力机制" * 10), ("en", "Keys and values. " * 9)])
    got = B.heldout_bits_per_byte(model)
    want = B.bits_per_byte_of(model, ["注意力机制" * 4 + "注", ("Keys and values. " * 9)[:63]])  # 63 bytes each
    assert got == pytest.approx(want, rel=1e-12)
    assert B.cut_to_bytes("注意力", 7) == "注意" and B.cut_to_bytes("ab注", 4) == "ab" and B.cut_to_bytes("abc", 9) == "abc"


def test_about_one_paragraph_in_ten_is_held_out_the_same_way_every_time():
    held = B.heldout_prose()
    assert 0.05 < len(held) / len(B.prose_paragraphs()) < 0.15
    assert all(B.is_heldout(p) for _, p in held) and held == B.heldout_prose()
