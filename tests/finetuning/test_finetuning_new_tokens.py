"""Chat tokens for a published model: GPT-2's tokenizer gains them as special tokens, its model as many embedding
rows, and the old ids compute what they computed before; then the chapter's fine-tuning runs on it unchanged."""
from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

from minitfm import pretrained as P  # noqa: E402
from minitfm.finetuning import (CHAT_SPECIAL_TOKENS, ChatTemplate, add_lora, resize_token_embeddings,  # noqa: E402
                                supervised_finetune, with_special_tokens)
from minitfm.finetuning.answering import replies  # noqa: E402
from minitfm.text import bpe_trainer as bpe  # noqa: E402
from minitfm.text.bpe_tokenizer import Tokenizer  # noqa: E402
from minitfm.training import TrainConfig  # noqa: E402

TEXT = "the cat sat on the mat and the dog ran to the park; what is two plus three? five. " * 40


@pytest.fixture
def tiny_gpt2(tmp_path):
    """A tiny random GPT-2 folder as ``transformers`` writes it, with GPT-2-style tokenizer files (offline)."""
    vocab, merges = bpe.train_bpe(TEXT, 300, special_tokens=["<|endoftext|>"])
    Tokenizer(vocab, merges, ["<|endoftext|>"]).save(tmp_path)
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=len(vocab), n_positions=128,
                                     bos_token_id=len(vocab) - 1, eos_token_id=len(vocab) - 1)
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(tmp_path)
    return tmp_path


def test_the_tokenizer_gains_the_chat_tokens_at_the_next_ids_and_keeps_the_old_ones(tiny_gpt2):
    old = P.load_tokenizer(tiny_gpt2)
    new = with_special_tokens(old, CHAT_SPECIAL_TOKENS)
    assert [new.special_ids[t] for t in CHAT_SPECIAL_TOKENS] == list(range(old.vocab_size, old.vocab_size + 4))
    assert new.special_ids["<|endoftext|>"] == old.special_ids["<|endoftext|>"]
    assert new.encode("the cat sat") == old.encode("the cat sat")
    assert new.encode("<|user|>") == [old.vocab_size + 1]
    assert with_special_tokens(new, CHAT_SPECIAL_TOKENS).vocab_size == new.vocab_size  # nothing twice
    merged = next(b.decode() for b in old.vocab.values() if len(b) >= 2 and b.isascii() and b.decode() not in
                  old.special_ids)  # a merge's result: an ordinary token of two bytes or more
    with pytest.raises(ValueError, match="already ordinary tokens"):
        with_special_tokens(old, [merged])
    with pytest.raises(TypeError, match="list of strings"):
        with_special_tokens(old, "<|user|>")


@pytest.mark.parametrize("tied", [True, False])
def test_resizing_keeps_every_old_logit_and_starts_new_rows_at_the_mean(tiny_gpt2, tied):
    model = P.load(tiny_gpt2)
    if not tied:  # an untied head grows too
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone() * 1.5)
    ids = torch.tensor([[1, 5, 9, 200]])
    with torch.no_grad():
        before = model(ids)
    v = model.config.vocab_size
    resize_token_embeddings(model, v + 4)
    with torch.no_grad():
        after = model(ids)
    assert model.config.vocab_size == v + 4 and after.shape[-1] == v + 4
    torch.testing.assert_close(after[..., :v], before, rtol=0, atol=0)
    torch.testing.assert_close(model.tok_emb.weight[v:], model.tok_emb.weight[:v].mean(0).expand(4, -1))
    assert (model.lm_head.weight is model.tok_emb.weight) == tied
    with pytest.raises(ValueError, match="only grows"):
        resize_token_embeddings(model, v)


def test_the_chapters_fine_tuning_runs_on_a_published_checkpoint(tiny_gpt2):
    """The real path of chapter 15, offline: GPT-2's files, chat tokens, LoRA, SFT through train, replies."""
    model = P.load(tiny_gpt2)
    tokenizer = with_special_tokens(P.load_tokenizer(tiny_gpt2), CHAT_SPECIAL_TOKENS)
    resize_token_embeddings(model, tokenizer.vocab_size)
    template = ChatTemplate(tokenizer, bos_id=tokenizer.special_ids["<|endoftext|>"])
    chats = [template.render([{"role": "user", "content": "what is two plus three?"},
                              {"role": "assistant", "content": " five."}])] * 8
    add_lora(model, targets=("q_proj", "v_proj", "up_proj", "down_proj"), r=8, alpha=16, seed=0)
    model.tok_emb.weight.requires_grad_(True)  # the new tokens' rows must learn (peft: trainable_token_indices)
    history = supervised_finetune(model, chats, TrainConfig(steps=80, batch_size=8, lr=2e-2, seed=0), progress=False)
    assert history.loss[-1] < 0.2 * history.loss[0]
    assert replies(model, template, [[{"role": "user", "content": "what is two plus three?"}]],
                   max_new_tokens=8) == [" five."]
