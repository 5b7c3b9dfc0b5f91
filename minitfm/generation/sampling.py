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

from typing import Iterable

import torch

from minitfm._checks import check_number, check_positive_int, check_tensor, check_token_ids


def _check_inputs(tokens: torch.Tensor, logits: torch.Tensor) -> None:
    check_tensor(logits, "logits", ndim=2, floating=True)
    check_token_ids(tokens, "tokens")
    if tokens.shape[0] != logits.shape[0]:
        raise ValueError(f"tokens (B, T) and logits (B, V) must share B, got {tuple(tokens.shape)} and {tuple(logits.shape)}")


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
        check_number(temperature, "temperature", low=0.0, low_open=True)  # for the limit 0, decode greedily
        self.temperature = float(temperature)

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

    A token is removed when the tokens ranked above it already cover ``p``; the most likely token has
    nothing before it, so it always stays. ``p = 1`` keeps every token.

    Ties at the cut are broken by rank, not kept together: tokens are ranked by logit, equal logits by
    token id (a stable sort), and the kept set is the smallest prefix of that ranking whose mass reaches
    ``p``. Of two equally likely tokens straddling the cut, the one with the lower id stays.
    """

    def __init__(self, p: float):
        check_number(p, "top-p p", low=0.0, high=1.0, low_open=True)
        self.p = float(p)

    def process(self, tokens, logits):
        if self.p == 1.0:
            return logits.clone()
        sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)  # (B, V) each; ties by id
        probs = sorted_logits.float().softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each one
        remove_sorted = mass_before >= self.p  # (B, V) in sorted order; column 0 is always False
        remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
        return logits.masked_fill(remove, float("-inf"))


class RepetitionPenalty(LogitsProcessor):
    """Make tokens that already appear in ``tokens`` less likely: Hugging Face's sign-aware form of CTRL's penalty.

    CTRL (Keskar et al., 2019) divides the logit of every token already seen by ``penalty``, whatever its
    sign, which *raises* a negative logit. This processor follows Hugging Face Transformers (Wolf et al.,
    2020): for every token id present in a row's history, a positive logit is divided by ``penalty`` and a
    negative one multiplied by it, so ``penalty > 1`` always lowers the score; ``penalty = 1`` does nothing
    and ``penalty < 1`` rewards repetition. The penalty does not depend on how often the token appeared.

    Args:
        penalty: > 0.
        ignore_ids: token ids never penalised (for example the padding id of left-padded prompts).
    """

    def __init__(self, penalty: float, ignore_ids: Iterable[int] = ()):
        check_number(penalty, "repetition penalty", low=0.0, low_open=True)  # 1 = no penalty
        if isinstance(ignore_ids, (str, bytes, torch.Tensor)) or not hasattr(ignore_ids, "__iter__"):
            raise TypeError(f"ignore_ids must be a list of token ids, got {type(ignore_ids).__name__}")
        ignore_ids = tuple(ignore_ids)
        for i in ignore_ids:
            check_number(i, "every id in ignore_ids", low=0, integer=True)
        self.penalty, self.ignore_ids = float(penalty), ignore_ids

    def process(self, tokens, logits):
        vocab = logits.shape[-1]
        if self.ignore_ids and max(self.ignore_ids) >= vocab:
            raise ValueError(f"ignore_ids must be ids in [0, V={vocab}), got {max(self.ignore_ids)}")
        if tokens.shape[1] == 0:
            return logits.clone()
        if int(tokens.min()) < 0 or int(tokens.max()) >= vocab:
            raise ValueError(f"tokens must be ids in [0, V={vocab}), got min {int(tokens.min())}, max {int(tokens.max())}")
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
