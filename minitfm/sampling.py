"""Sampling as a list of small logits processors.

Glossary: B batch, T tokens so far, V vocabulary.

A processor is a callable ``(tokens, logits) -> logits``: it reads the tokens generated so far
(B, T) and the next-token logits (B, V) and returns new logits (B, V). Processors compose: temperature,
then top-k, then top-p, then sampling from the softmax is the usual recipe. Every processor

- validates its arguments when it is built (a bad value fails at once, not after minutes of generation),
- never mutates its input (it returns a new tensor, so the caller can compare before and after),
- always keeps at least one token (the most likely one is never removed).

Removed tokens get the logit ``-inf``, so their probability after the softmax is exactly 0.
"""
from __future__ import annotations

import math
from typing import Iterable

import torch

from ._checks import check_positive_int, check_tensor, check_token_ids


def _check_inputs(tokens: torch.Tensor, logits: torch.Tensor) -> None:
    check_tensor(logits, "logits", ndim=2, floating=True)
    check_token_ids(tokens, "tokens")
    if tokens.shape[0] != logits.shape[0]:
        raise ValueError(f"tokens (B, T) and logits (B, V) must share B, got {tuple(tokens.shape)} and {tuple(logits.shape)}")


def _check_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


class LogitsProcessor:
    """Base class: subclasses implement ``process(tokens, logits)``; calling checks shapes first."""

    def __call__(self, tokens: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        _check_inputs(tokens, logits)
        return self.process(tokens, logits)

    def process(self, tokens: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Temperature(LogitsProcessor):
    """Divide the logits by ``temperature`` > 0: below 1 sharpens the distribution, above 1 flattens it.

    Temperature never removes a token; as it approaches 0 sampling approaches greedy decoding.
    """

    def __init__(self, temperature: float):
        temperature = _check_number(temperature, "temperature")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 (use greedy decoding for the limit 0), got {temperature}")
        self.temperature = temperature

    def process(self, tokens, logits):
        return logits / self.temperature


class TopK(LogitsProcessor):
    """Keep the ``k`` largest logits of each row, set the others to ``-inf``.

    Ties with the k-th value are kept (so a row may keep slightly more than k); k larger than V keeps all.
    """

    def __init__(self, k: int):
        check_positive_int(k, "k")
        self.k = k

    def process(self, tokens, logits):
        k = min(self.k, logits.shape[-1])
        kth = logits.topk(k, dim=-1).values[:, -1:]  # (B, V) -> (B, 1), the smallest value kept
        return logits.masked_fill(logits < kth, float("-inf"))


class TopP(LogitsProcessor):
    """Nucleus sampling: keep the smallest set of most likely tokens whose probabilities sum to >= ``p``.

    A token is removed when the tokens strictly more likely than it already cover ``p``; the most likely
    token has nothing before it, so it always stays. ``p = 1`` keeps every token.
    """

    def __init__(self, p: float):
        p = _check_number(p, "p")
        if not 0 < p <= 1:
            raise ValueError(f"top-p needs p in (0, 1], got {p}")
        self.p = p

    def process(self, tokens, logits):
        if self.p == 1.0:
            return logits.clone()
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V) each
        probs = sorted_logits.float().softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each one
        remove_sorted = mass_before >= self.p  # (B, V) in sorted order; column 0 is always False
        remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
        return logits.masked_fill(remove, float("-inf"))


class RepetitionPenalty(LogitsProcessor):
    """Make tokens that already appear in ``tokens`` less likely (Keskar et al., 2019, CTRL).

    For every token id present in a row's history, a positive logit is divided by ``penalty`` and a
    negative one multiplied by it, so ``penalty > 1`` always lowers the score; ``penalty = 1`` does nothing
    and ``penalty < 1`` rewards repetition. The penalty does not depend on how often the token appeared.

    Args:
        penalty: > 0.
        ignore_ids: token ids never penalised (for example the padding id of left-padded prompts).
    """

    def __init__(self, penalty: float, ignore_ids: Iterable[int] = ()):
        penalty = _check_number(penalty, "penalty")
        if penalty <= 0:
            raise ValueError(f"repetition penalty must be > 0 (1 = no penalty), got {penalty}")
        self.penalty = penalty
        self.ignore_ids = tuple(int(i) for i in ignore_ids)

    def process(self, tokens, logits):
        if tokens.shape[1] == 0:
            return logits.clone()
        seen = torch.zeros_like(logits, dtype=torch.bool)
        seen.scatter_(-1, tokens.long(), True)  # (B, T) ids -> (B, V) "appeared before" flags
        for i in self.ignore_ids:
            seen[:, i] = False
        penalised = torch.where(logits > 0, logits / self.penalty, logits * self.penalty)
        return torch.where(seen, penalised, logits)


def apply_processors(tokens: torch.Tensor, logits: torch.Tensor,
                     processors: Iterable[LogitsProcessor]) -> torch.Tensor:
    """Run ``processors`` in order on (B, V) ``logits`` given the (B, T) ``tokens`` so far."""
    _check_inputs(tokens, logits)
    for i, processor in enumerate(processors):
        if not callable(processor):
            raise TypeError(f"processor {i} must be callable (tokens, logits) -> logits, got {type(processor).__name__}")
        logits = processor(tokens, logits)
    return logits
