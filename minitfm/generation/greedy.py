"""Greedy decoding for both model kinds, with a KV cache by default, and copy-style evaluation.

Glossary: B batch, S source length, P prompt length, N new tokens, V vocab_size.

Greedy decoding appends the most likely next token until every row has produced ``eos_id`` (rows that
finished early are filled with ``pad_id``, or with ``eos_id`` for a model without a padding token) or
``max_new_tokens`` is reached. With the cache each step feeds only the tokens the cache has not seen yet;
without it each step recomputes the whole prefix, which is slower but must give the same tokens.
:func:`greedy_decode` is a thin wrapper over the one generation loop, :func:`minitfm.generation.generate`.
"""
from __future__ import annotations

import time

import torch

from minitfm._checks import check_positive_int, check_token_ids
from minitfm.data import Batch, pad_sequences
from minitfm.generation._decode_checks import _special_ids
from minitfm.generation.decode_loop import _for_inference, _generate_loop, _prompt_valid, generate
from minitfm.layers.kv_cache import KVCache
from minitfm.models import DecoderOnlyLM, EncoderDecoder


def greedy_decode(model: torch.nn.Module, inputs: torch.Tensor, max_new_tokens: int, *,
                  use_cache: bool = True) -> torch.Tensor:
    """Greedy output of an :class:`EncoderDecoder` (``inputs`` = source (B, S); decoding starts from BOS)
    or a :class:`DecoderOnlyLM` (``inputs`` = prompt (B, P), left-padded with ``pad_id`` if lengths
    differ). Returns (B, N <= max_new_tokens) new tokens, EOS included, then ``pad_id`` (``eos_id`` for a
    model whose ``pad_id`` is ``None``, as every loaded checkpoint).

    For a DecoderOnlyLM this is ``generate(model, inputs, max_new_tokens, use_cache=use_cache).new_tokens``;
    for an EncoderDecoder, the same loop from a column of BOS with ``src=inputs``. The model's mode is restored.
    """
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
    if isinstance(model, DecoderOnlyLM):
        return generate(model, inputs, max_new_tokens, use_cache=use_cache).new_tokens
    # An EncoderDecoder feeds its decoder BOS and N - 1 generated tokens: N positions, one fewer than generate's
    # budget (prompt + N) counts, so it calls the same loop after its own check above.
    eos_id, pad_id, fill_id = _special_ids(model, None, None)
    start = torch.full((inputs.shape[0], 1), model.config.bos_id, dtype=inputs.dtype, device=inputs.device)
    valid = _prompt_valid(model, start, pad_id)
    out = _for_inference(model, _generate_loop, start, valid, max_new_tokens, inputs, (), False, None, eos_id,
                         fill_id, use_cache, KVCache, False, time.perf_counter)
    return out.new_tokens


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
