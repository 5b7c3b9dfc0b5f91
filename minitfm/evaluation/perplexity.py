"""Per-token perplexity and bits per byte: the second measures loss per byte of text, so models with different
tokenizers compare.

Per-token loss (and its exponential, perplexity) depends on how the text was cut: a tokenizer with longer tokens
makes fewer, harder predictions, so its per-token loss is higher even when both models give the text the same
probability. The text itself does not change, so divide the total loss by a unit the text fixes, its UTF-8 bytes:

    bits per byte = total_nats / (ln 2 * n_bytes)

``total_nats`` is the sum over every token of -ln p(token | tokens before it); dividing by ln 2 turns nats into
bits. By the chain rule that sum is -ln p(text) (strictly, of the text's own tokenization, which is what every
evaluation scores), so two models that give the text the same probability get the same bits per byte whatever
their tokenizers. It is the ``bits_per_byte`` metric of EleutherAI's lm-evaluation-harness
(``-sum(loglikelihood) / sum(bytes) / ln 2``), the headline metric of Gao et al. (2020), "The Pile", and the
validation metric of Karpathy's nanochat. A model that spreads probability uniformly over the 256 byte values
scores exactly 8 bits per byte on byte tokens.

Shapes: T tokens, V vocabulary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from minitfm.evaluation._validate import check_count, check_real

__all__ = ["BitsPerByte", "utf8_length", "bits_per_byte", "next_token_log_probs", "model_bits_per_byte"]


def utf8_length(text: str) -> int:
    """The number of bytes of ``text`` in UTF-8 (``len(text.encode("utf-8"))``; "é" is 2 bytes, "中" is 3)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return len(text.encode("utf-8"))


def bits_per_byte(total_nats: float, n_bytes: int) -> float:
    """``total_nats / (ln 2 * n_bytes)``: the summed token losses (nats, natural log) over the text's UTF-8 bytes."""
    total = check_real(total_nats, "total_nats")
    if total < 0:
        raise ValueError(f"total_nats is a sum of -ln p >= 0, got {total}")
    n = check_count(n_bytes, "n_bytes", minimum=1)
    return total / (math.log(2) * n)


def _model_device(model, default: torch.device) -> torch.device:
    """The device of a module's weights (a model on a GPU scores GPU ids); ``default`` for a plain callable."""
    first = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    return default if first is None else first.device


def _one_pass(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        logits = model(ids[None])  # (1, T) -> (1, T, V)
    if logits.ndim != 3 or logits.shape[:2] != (1, ids.numel()):
        raise ValueError(f"model must return logits (1, T, V) = (1, {ids.numel()}, V), got {tuple(logits.shape)}")
    log_probs = F.log_softmax(logits[0, :-1].double(), dim=-1)  # (T-1, V): position t predicts token t + 1
    return log_probs.gather(-1, ids[1:, None]).squeeze(-1)  # (T-1, V) -> (T-1,)


def next_token_log_probs(model, tokens, *, stride: int | None = None) -> torch.Tensor:
    """ln p(tokens[t] | tokens before it) for t = 1..T-1, shape (T-1,), float64, on the model's device (the ids,
    a list or a tensor on any device, are moved to the device of the model's weights).

    ``model`` is any callable mapping (1, T) int64 ids to (1, T, V) logits (a minitfm ``DecoderOnlyLM``, or a
    Hugging Face model wrapped to return ``.logits``); logits at position t predict token t + 1. A module in
    training mode with active dropout is refused: its scores would change from call to call.

    A sequence longer than the model's ``config.max_seq_len`` (L) needs ``stride``: windows of L tokens start every
    ``stride`` tokens and each scores only the tokens no earlier window scored, so every token after the first
    window sees at least L - stride tokens of context (Hugging Face's "perplexity of fixed-length models" recipe).
    """
    ids = torch.as_tensor(tokens)
    if ids.ndim != 1 or ids.numel() < 2 or ids.dtype in (torch.bool,) or ids.is_floating_point():
        raise ValueError(f"tokens must be a 1-D sequence of >= 2 integer ids, got {ids.dtype} {tuple(ids.shape)}")
    ids, n = ids.long().to(_model_device(model, ids.device)), ids.numel()  # ids where the weights are
    if isinstance(model, torch.nn.Module) and model.training and any(
            isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()):
        raise ValueError("model is in training mode with dropout active, so its scores would be random: "
                         "call model.eval() before scoring")
    limit = getattr(getattr(model, "config", None), "max_seq_len", None)
    if limit is None or n <= limit:
        return _one_pass(model, ids)
    if stride is None:
        raise ValueError(f"{n} tokens exceed the model's max_seq_len={limit}: pass stride (1 to {limit - 1}) to "
                         "score the text in overlapping windows")
    stride = check_count(stride, "stride", minimum=1)
    if stride >= limit:
        raise ValueError(f"stride must be < max_seq_len={limit} so windows overlap, got {stride}")
    pieces, scored_until = [], 1  # token 0 has no context and is never scored
    for begin in range(0, n - 1, stride):
        end = min(begin + limit, n)
        pieces.append(_one_pass(model, ids[begin:end])[scored_until - begin - 1:])  # targets scored_until..end-1
        scored_until = end
        if end == n:
            break
    return torch.cat(pieces)  # (T-1,)


def _first_token_bytes(tokenizer, first: int, text: str) -> int:
    """The UTF-8 bytes the first token spells. A byte-level token may hold part of a character ("中" is 3 bytes,
    a byte tokenizer makes 3 tokens of it): its text is U+FFFD, 3 bytes whatever it stands for, so its bytes are
    read from the vocabulary (``tokenizer.vocab[id]``, bytes, as minitfm's BPE ``Tokenizer`` holds) where there
    is one, and a decoded text that is not the start of ``text`` is refused rather than miscounted."""
    vocab = getattr(tokenizer, "vocab", None)
    if isinstance(vocab, dict) and isinstance(vocab.get(first), bytes):
        return len(vocab[first])
    piece = tokenizer.decode([first])
    if "\ufffd" in piece and not text.startswith(piece):
        raise ValueError(f"the first token (id {first}) is part of a character: it decodes to {piece!r}, so its "
                         "bytes cannot be counted from its text; pass bos_id so that every token is scored "
                         "(or give the tokenizer a vocab of id -> bytes)")
    return utf8_length(piece)


@dataclass(frozen=True)
class BitsPerByte:
    """One text scored by one model: the sums behind bits per byte, and the per-token figures beside it."""
    total_nats: float  # sum of -ln p over the scored tokens
    n_tokens: int  # tokens scored
    n_bytes: int  # UTF-8 bytes those tokens spell
    bits_per_byte: float  # total_nats / (ln 2 * n_bytes)
    nats_per_token: float  # total_nats / n_tokens: the cross-entropy a training loop prints
    perplexity: float  # exp(nats_per_token): per-token perplexity, which depends on the tokenizer


def model_bits_per_byte(model, tokenizer, text: str, *, bos_id: int | None = None,
                        stride: int | None = None) -> BitsPerByte:
    """Score ``text`` with ``model`` under ``tokenizer`` (anything with ``encode(text) -> list[int]``).

    With ``bos_id`` the model reads ``[bos_id] + encode(text)`` and every token of the text is scored, so all of
    its bytes count. Without one, the first token has no context and is not scored, and its bytes leave the
    denominator: ``len(tokenizer.vocab[first])`` for a tokenizer whose ``vocab`` maps ids to bytes (minitfm's
    BPE ``Tokenizer``, whose token may cut a character), else ``utf8_length(tokenizer.decode([first]))`` (the
    tokenizer then needs ``decode``), refused when that text is not the start of ``text`` (a piece of a
    character decodes to U+FFFD).
    A text longer than the model's context is scored in windows: see ``next_token_log_probs``'s ``stride``.
    (A tokenizer whose ``encode`` already starts with a BOS token, like minitfm's ``WordTokenizer``, needs no
    ``bos_id``: its BOS decodes to no bytes.) Bits per byte compares models only when each tokenizer keeps the whole
    text: one that maps rare words to ``<unk>`` is scored on an easier, different text.
    """
    n_text_bytes = utf8_length(text)
    if n_text_bytes == 0:
        raise ValueError("text is empty: bits per byte needs at least one byte")
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must have encode(text) -> list[int], got {type(tokenizer).__name__}")
    ids = list(tokenizer.encode(text))
    if bos_id is not None:
        ids = [check_count(bos_id, "bos_id")] + ids
        n_bytes = n_text_bytes
    else:
        if not callable(getattr(tokenizer, "decode", None)):
            raise TypeError("without bos_id the first token is not scored, and tokenizer.decode is needed to "
                            f"count its bytes: {type(tokenizer).__name__} has no decode (or pass bos_id)")
        n_bytes = n_text_bytes - _first_token_bytes(tokenizer, ids[0], text)
        if n_bytes <= 0:
            raise ValueError(f"text {text!r} is a single token: nothing is left to score without a bos_id")
    log_probs = next_token_log_probs(model, ids, stride=stride)  # (T-1,)
    total = float(-log_probs.sum())
    n_tokens = len(ids) - 1
    return BitsPerByte(total, n_tokens, n_bytes, bits_per_byte(total, n_bytes), total / n_tokens,
                       math.exp(total / n_tokens))
