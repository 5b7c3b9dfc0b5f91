"""Greedy decoding for both model kinds, with a KV cache by default, and copy-style evaluation.

Glossary: B batch, S source length, P prompt length, N new tokens, V vocab_size.

Greedy decoding appends the most likely next token until every row has produced ``eos_id`` (rows that
finished early are filled with ``pad_id``) or ``max_new_tokens`` is reached. With the cache each step
feeds only the tokens the cache has not seen yet; without it each step recomputes the whole prefix,
which is slower but must give the same tokens.
"""
from __future__ import annotations

from typing import Callable

import torch

from ._checks import check_positive_int, check_tensor, check_token_ids
from .data import Batch, pad_sequences
from .models import DecoderOnlyLM, EncoderDecoder


def _greedy_loop(step: Callable[[torch.Tensor], torch.Tensor], start: torch.Tensor, max_new_tokens: int,
                 eos_id: int, pad_id: int) -> torch.Tensor:
    """Run ``step(tokens (B, n)) -> next-token logits (B, V)`` greedily; return the (B, N) new tokens."""
    tokens = start
    finished = torch.zeros(start.shape[0], dtype=torch.bool, device=start.device)
    for _ in range(max_new_tokens):
        nxt = step(tokens).argmax(dim=-1).masked_fill(finished, pad_id)  # (B, V) -> (B,)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (B, n) -> (B, n + 1)
        finished |= nxt == eos_id
        if finished.all():
            break
    return tokens[:, start.shape[1]:]


@torch.no_grad()
def greedy_decode(model: torch.nn.Module, inputs: torch.Tensor, max_new_tokens: int, *,
                  use_cache: bool = True) -> torch.Tensor:
    """Greedy output of an :class:`EncoderDecoder` (``inputs`` = source (B, S); decoding starts from BOS)
    or a :class:`DecoderOnlyLM` (``inputs`` = prompt (B, P), left-padded with ``pad_id`` if lengths
    differ). Returns (B, N <= max_new_tokens) new tokens, EOS included, ``pad_id`` after it."""
    check_positive_int(max_new_tokens, "max_new_tokens")
    if not isinstance(model, (EncoderDecoder, DecoderOnlyLM)):
        raise TypeError(f"greedy_decode needs an EncoderDecoder or DecoderOnlyLM, got {type(model).__name__}")
    check_token_ids(inputs, "inputs", ndim=2)  # (B, S) or (B, P); one prompt needs prompt[None]
    # Check the length budget now, not after the steps it lets run (generate does the same).
    limit = model.config.max_seq_len
    needed = max_new_tokens if isinstance(model, EncoderDecoder) else inputs.shape[1] + max_new_tokens
    if needed > limit or inputs.shape[1] > limit:
        what = (f"max_len={max_new_tokens}" if isinstance(model, EncoderDecoder)
                else f"prompt length {inputs.shape[1]} + max_new_tokens {max_new_tokens} = {needed}")
        raise ValueError(f"{what} exceeds the model's max_seq_len={limit}"
                         + (f" (or the source, {inputs.shape[1]} tokens, does)" if inputs.shape[1] > limit else ""))
    was_training = model.training
    model.eval()
    try:
        make_step = _encoder_decoder_step if isinstance(model, EncoderDecoder) else _decoder_only_step
        step, start = make_step(model, inputs, max_new_tokens, use_cache)
        return _greedy_loop(step, start, max_new_tokens, model.config.eos_id, model.config.pad_id)
    finally:
        model.train(was_training)


def _encoder_decoder_step(model: EncoderDecoder, src: torch.Tensor, max_new_tokens: int, use_cache: bool):
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    b = src.shape[0]
    caches = model.new_caches(b, max_new_tokens, memory_len=src.shape[1]) if use_cache else None

    def step(tokens: torch.Tensor) -> torch.Tensor:
        new = tokens if caches is None else tokens[:, caches[0].length:]  # only what the cache lacks
        return model.decode(new, memory, src_mask, caches=caches)[:, -1]  # (B, T, V) -> (B, V)

    return step, torch.full((b, 1), model.config.bos_id, device=src.device)


def _decoder_only_step(model: DecoderOnlyLM, prompt: torch.Tensor, max_new_tokens: int, use_cache: bool):
    b, p = prompt.shape
    prompt_mask = prompt != model.config.pad_id  # (B, P) real prompt tokens
    if bool(prompt_mask.all()):
        prompt_mask = None  # nothing is padded: plain causal attention
    caches = model.new_caches(b, p + max_new_tokens) if use_cache else None

    def step(tokens: torch.Tensor) -> torch.Tensor:
        key_mask = None
        if prompt_mask is not None:  # generated tokens are always real: extend the mask with True
            extra = torch.ones(b, tokens.shape[1] - p, dtype=torch.bool, device=tokens.device)
            key_mask = torch.cat([prompt_mask, extra], dim=1)  # (B, P + n)
        new = tokens if caches is None else tokens[:, caches[0].length:]
        return model(new, caches=caches, key_mask=key_mask)[:, -1]  # (B, T, V) -> (B, V)

    return step, prompt


def _align(pred: torch.Tensor, target: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad both (B, *) tensors on the right to one width."""
    check_token_ids(pred, "pred", ndim=2)
    check_token_ids(target, "target", ndim=2)
    if pred.shape[0] != target.shape[0]:
        raise ValueError(f"pred and target need the same batch size, got {pred.shape[0]} and {target.shape[0]}")
    both = pad_sequences(list(pred) + list(target), pad_id)  # (2B, width)
    return both[: pred.shape[0]], both[pred.shape[0]:]


def exact_match(pred: torch.Tensor, target: torch.Tensor, pad_id: int) -> float:
    """Share of rows whose whole output (up to and including EOS) equals the target."""
    pred, target = _align(pred, target, pad_id)
    return float((pred == target).all(dim=1).float().mean())


def token_accuracy(pred: torch.Tensor, target: torch.Tensor, pad_id: int) -> float:
    """Share of non-padding target positions predicted correctly (position by position)."""
    pred, target = _align(pred, target, pad_id)
    real = target != pad_id
    return float((pred == target)[real].float().mean())


def evaluate(model: EncoderDecoder, batch: Batch, *, use_cache: bool = True) -> dict[str, float]:
    """Greedy-decode ``batch.src`` and score it against ``batch.tgt_out``: exact match and token accuracy."""
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"evaluate scores an EncoderDecoder on the copy task, got {type(model).__name__}")
    if not isinstance(batch, Batch) or batch.src is None:
        raise TypeError(f"batch must be a minitfm.Batch with a source (collate_pairs builds one), got {type(batch).__name__}")
    pred = greedy_decode(model, batch.src, batch.tgt_out.shape[1], use_cache=use_cache)
    return {"exact_match": exact_match(pred, batch.tgt_out, batch.pad_id),
            "token_accuracy": token_accuracy(pred, batch.tgt_out, batch.pad_id)}
