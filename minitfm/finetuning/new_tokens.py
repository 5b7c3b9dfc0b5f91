"""New special tokens for a published model: the chat template's tokens for GPT-2, which has only one.

Glossary: V the old vocabulary size, V' = V + the new tokens, D d_model.

A chat template needs its role and end-of-turn tokens in the vocabulary (:mod:`minitfm.finetuning.chat`). The
book's base model was born with them; GPT-2 knows only ``<|endoftext|>``. So two things grow together:

- the **tokenizer** gains the tokens as special tokens with the next free ids (:func:`with_special_tokens`);
- the **model** gains as many rows in its token embedding (and in its output head, tied or not), so that those
  ids exist (:func:`resize_token_embeddings`). Each new row starts at the mean of the old rows, so the new
  tokens start as an average token, not as noise the model has never seen (Hewitt, 2021, "Initializing new word
  embeddings for pretrained language models"). Fine-tuning then learns what they mean.

A frozen model (LoRA trains its adapters only) cannot learn those rows at all, nor the rows of special tokens a base
model was born with but never read: :func:`train_token_rows` lets only chosen rows learn (``peft`` calls it
``trainable_token_indices``).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import torch
from torch import nn

from minitfm.finetuning.lora import check_decoder
from minitfm.models import DecoderOnlyLM
from minitfm.text.bpe_tokenizer import Tokenizer


def with_special_tokens(tokenizer: Tokenizer, tokens: Sequence[str]) -> Tokenizer:
    """A copy of ``tokenizer`` with ``tokens`` added as special tokens at the next free ids (V, V + 1, ... for a
    vocabulary numbered 0..V-1); a token it already has as a special token keeps its id."""
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"tokenizer must be a minitfm BPE Tokenizer, got {type(tokenizer).__name__}")
    if isinstance(tokens, str) or not all(isinstance(t, str) and len(t.encode("utf-8")) >= 2 for t in tokens):
        raise TypeError(f"tokens must be a list of strings of two bytes or more, got {tokens!r:.80}")
    vocab = dict(tokenizer.vocab)
    taken = set(vocab.values())
    new = [t for t in dict.fromkeys(tokens) if t not in tokenizer.special_ids]
    clash = [t for t in new if t.encode("utf-8") in taken]
    if clash:
        raise ValueError(f"{clash} are already ordinary tokens of this vocabulary; choose other strings")
    for token in new:
        vocab[max(vocab) + 1] = token.encode("utf-8")
    # every other setting (split regex, normal form, ignore_merges) as it was: the old ids stay the model's ids
    return tokenizer.replace(vocab=vocab, special_tokens=list(tokenizer.special_tokens) + new)


def resize_token_embeddings(model: DecoderOnlyLM, vocab_size: int) -> DecoderOnlyLM:
    """Grow ``model``'s vocabulary to ``vocab_size`` in place (new rows = the mean of the old ones) and return it.
    The old ids compute exactly what they computed before (a test checks the logits)."""
    check_decoder(model)
    old = model.config.vocab_size
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < old:
        raise ValueError(f"vocab_size must be an int >= the current {old} (this only grows), got {vocab_size!r}")
    weight = model.tok_emb.weight.detach()  # (V, D)
    grown = torch.cat([weight, weight.mean(0, keepdim=True).expand(vocab_size - old, -1)])  # (V', D)
    tied = model.lm_head.weight is model.tok_emb.weight
    model.tok_emb = nn.Embedding.from_pretrained(grown.clone(), freeze=False)
    if tied:
        model.lm_head.weight = model.tok_emb.weight
    else:
        head = model.lm_head.weight.detach()  # (V, D)
        new_head = nn.Linear(head.shape[1], vocab_size, bias=False).to(head)
        new_head.weight.data = torch.cat([head, head.mean(0, keepdim=True).expand(vocab_size - old, -1)]).clone()
        model.lm_head = new_head
    model.config = dataclasses.replace(model.config, vocab_size=vocab_size)
    return model


def train_token_rows(model: DecoderOnlyLM, ids: Sequence[int]) -> DecoderOnlyLM:
    """Let the rows ``ids`` of ``model``'s token embedding (and of its output head: the same rows, tied or not)
    learn, every other row staying frozen; in place, returned. Call it after :func:`~minitfm.finetuning.add_lora`,
    which freezes everything.

    The whole table requires gradients and a hook zeroes its gradient outside those rows, so Adam leaves the other
    rows exactly where they were: a zero gradient gives a zero step. Weight decay would not respect the hook: the
    optimiser must not decay these tables (the book's AdamW never decays an embedding or a tied head; plain Adam's
    L2 with ``weight_decay`` > 0 would). :func:`~minitfm.finetuning.trainable_parameters` counts the rows only."""
    check_decoder(model)
    vocab = model.config.vocab_size
    if isinstance(ids, (str, int)) or not ids or not all(type(i) is int and 0 <= i < vocab for i in ids):
        raise ValueError(f"ids must be a non-empty list of token ids in [0, {vocab}), got {ids!r:.80}")
    rows = sorted(set(ids))
    for weight in dict.fromkeys([model.tok_emb.weight, model.lm_head.weight]):  # once when tied
        keep = torch.zeros(vocab, 1, dtype=weight.dtype, device=weight.device)
        keep[rows] = 1.0
        weight.requires_grad_(True)
        weight.register_hook(lambda grad, keep=keep: grad * keep)
        weight.trainable_rows = len(rows)  # read by trainable_parameters
    return model
