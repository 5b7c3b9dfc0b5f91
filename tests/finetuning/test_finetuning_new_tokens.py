"""Chat tokens for a published model: GPT-2's tokenizer gains them as special tokens, its model as many embedding
rows, and the old ids compute what they computed before; then the chapter's fine-tuning runs on it unchanged."""
from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402  requirements.txt installs it: a missing one fails here, never skips
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
    # The head's new rows (its own when untied) start at the mean of its old rows, so each new token's logit is
    # the mean of the old logits (a bias-free linear head).
    torch.testing.assert_close(model.lm_head.weight[v:], model.lm_head.weight[:v].mean(0).expand(4, -1))
    torch.testing.assert_close(after[..., v:], after[..., :v].mean(-1, keepdim=True).expand(-1, -1, 4))
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


# Library review H2: a Llama 3- or Qwen-style tokenizer keeps its split regex, its normal form and ignore_merges.
# Their tokenizer.json files are built here with `tokenizers` (the patterns are those files' public ones).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
NOT_GPT2 = ["IT'S 12345 o'clock, YOU'RE late", "cafe\u0301 and café", "x\n\n  y", "abc xabc", "1234567 apples"]


def _tokenizer_json(tmp_path, kind):
    import tokenizers  # requirements.txt installs it: a missing one fails, never skips
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    pattern, nfc, ignore_merges = {"llama3": (LLAMA3_PATTERN, False, True), "qwen2": (QWEN2_PATTERN, True, False)}[kind]
    hf = tokenizers.Tokenizer(models.BPE(ignore_merges=ignore_merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated"),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.normalizer = normalizers.NFC() if nfc else None
    hf.decoder = decoders.ByteLevel()
    corpus = [TEXT, "It's 5 o'clock; they're late. Prices rose 3.5% to $1,234,567 in 2024. abc abc ab bc " * 5,
              "café naïve résumé " * 10]
    hf.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                       show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(str(tmp_path / "tokenizer.json"))
    return hf, P.load_tokenizer(tmp_path)


@pytest.mark.parametrize("kind", ["llama3", "qwen2"])
def test_new_tokens_keep_the_split_regex_the_normal_form_and_ignore_merges(tmp_path, kind):
    hf, old = _tokenizer_json(tmp_path, kind)
    new = with_special_tokens(old, CHAT_SPECIAL_TOKENS)
    assert (new.split_pattern, new.normalization, new.ignore_merges) == \
        (old.split_pattern, old.normalization, old.ignore_merges)
    for text in NOT_GPT2:
        assert new.encode(text) == hf.encode(text, add_special_tokens=False).ids, (kind, text)
    assert new.encode("hi<|user|>") == old.encode("hi") + [new.special_ids["<|user|>"]]


def test_replace_carries_every_argument_of_the_tokenizer():
    import inspect

    old = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"<|endoftext|>"}, [], ["<|endoftext|>"],
                    normalization="NFC",
                    split_pattern=r"\p{N}| ?\p{L}+|\s+|.", ignore_merges=True)
    for name in inspect.signature(Tokenizer).parameters:  # a new argument must be carried over too
        new = old.replace(**{name: getattr(old, name, getattr(old, "_" + name, None))})
        assert (new.split_pattern, new.normalization, new.ignore_merges) == (old.split_pattern, "NFC", True), name
    with pytest.raises(TypeError, match=r"replace\(\) takes Tokenizer's arguments .* got \['pattern'\]"):
        old.replace(pattern="x")


@pytest.mark.parametrize("tied", [True, False])
def test_train_token_rows_moves_those_rows_only_and_counts_them(tied):
    """LoRA freezes the tied embedding, and with it the row of <|end|> that a base model never read: a LoRA model could
    not learn to end its reply (chapter 15). Only the chosen rows move; Adam leaves the others bit for bit."""
    from minitfm.finetuning import train_token_rows, trainable_parameters
    from minitfm.lm.base_lm import base_lm_config
    from minitfm.lm.prose import byte_tokenizer
    from minitfm.models import DecoderOnlyLM

    torch.manual_seed(0)
    model = DecoderOnlyLM(base_lm_config(d_model=32, n_layers=1, d_ff=64, n_heads=2, tie_embeddings=tied))
    tok = byte_tokenizer()
    template = ChatTemplate(tok, bos_id=256)
    add_lora(model, targets=("q_proj", "v_proj"), r=2, alpha=4, seed=0)
    lora_only = trainable_parameters(model)
    end = template.end_id
    assert train_token_rows(model, [end, end]) is model
    assert trainable_parameters(model) == lora_only + 32 * (1 if tied else 2)  # one row of D, twice when untied
    before = {name: w.detach().clone() for name, w in [("emb", model.tok_emb.weight), ("head", model.lm_head.weight)]}
    chats = [template.render([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])] * 4
    supervised_finetune(model, chats, TrainConfig(steps=2, batch_size=2, lr=1e-2, label_smoothing=0.0, seed=0),
                        progress=False)
    for name, w in [("emb", model.tok_emb.weight), ("head", model.lm_head.weight)]:
        moved = (w.detach() != before[name]).any(dim=1)
        assert moved[end] and moved.sum() == 1, name  # the <|end|> row learned; no other row changed
    with pytest.raises(ValueError, match="token ids"):
        train_token_rows(model, [10_000])
    with pytest.raises(ValueError, match="token ids"):
        train_token_rows(model, [])
