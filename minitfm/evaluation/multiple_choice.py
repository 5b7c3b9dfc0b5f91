"""Multiple-choice scoring by log-likelihood, as EleutherAI's lm-evaluation-harness (``lm-eval``) does it.

For a question (the context) and choices c_1..c_K, the model never generates: it scores each choice as a
continuation of the context, ln p(c_i | context) = sum over the choice's tokens of ln p(token | everything
before it). The predicted answer is the choice with the best score, and that score is read four ways:

- ``sum``: the log-likelihood itself. lm-eval's ``acc`` takes argmax of this. Longer choices pay for every extra
  token, so it favours short answers.
- ``per_char``: log-likelihood / number of characters of the choice. lm-eval's ``acc_norm`` takes argmax of
  ``lls / completion_len`` with ``completion_len = len(choice)``, a *character* count of the choice as the task
  lists it (without the space lm-eval puts before it). Its ``acc_bytes`` divides by UTF-8 bytes instead
  (``per_byte`` here); for ASCII text the two agree. (Gao's blog post describes ``acc_norm`` as byte-length
  normalised; the code, checked in lm-eval 0.4.13, counts characters, and the tests follow the code.)
- ``per_token``: log-likelihood / number of tokens (the mean per token), which GPT-3 used for most tasks; it
  depends on the tokenizer, so lm-eval does not report it.

Ties go to the first choice, as ``numpy.argmax`` (and so lm-eval) breaks them. Sources: lm-eval
``lm_eval/api/task.py`` (``ConfigurableTask.process_results``, ``MultipleChoiceTask.process_results``); Gao (2021),
"Multiple choice normalization in LM evaluation" (EleutherAI blog).

Shapes: T tokens, V vocabulary, K choices.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from minitfm.evaluation._validate import check_count
from minitfm.evaluation.perplexity import next_token_log_probs

__all__ = ["ChoiceScores", "choice_scores", "multiple_choice_metrics", "continuation_log_probs",
           "score_choices"]


@dataclass(frozen=True)
class ChoiceScores:
    """Per-choice scores of one item, each a (K,) array; ``predict(kind)`` is argmax with ties to the first."""
    sum: np.ndarray  # ln p(choice | context)
    per_token: np.ndarray  # sum / number of tokens of the choice
    per_char: np.ndarray  # sum / len(choice): lm-eval's acc_norm
    per_byte: np.ndarray  # sum / UTF-8 bytes of the choice: lm-eval's acc_bytes

    def predict(self, kind: str = "sum") -> int:
        if kind not in ("sum", "per_token", "per_char", "per_byte"):
            raise ValueError(f"kind must be 'sum', 'per_token', 'per_char' or 'per_byte', got {kind!r}")
        return int(np.argmax(getattr(self, kind)))


def choice_scores(token_log_probs, choices) -> ChoiceScores:
    """Scores of K choices from their tokens' log-probs: ``token_log_probs[i]`` lists ln p of choice i's tokens.

    ``choices[i]`` is choice i's text as the task lists it; its characters and UTF-8 bytes are the normalisers.
    """
    if isinstance(choices, str) or len(choices) == 0:
        raise ValueError(f"choices must be a non-empty list of strings, got {choices!r}")
    if len(token_log_probs) != len(choices):
        raise ValueError(f"need one list of token log-probs per choice: got {len(token_log_probs)} lists "
                         f"for {len(choices)} choices")
    sums, counts, chars, n_bytes = [], [], [], []
    for i, (lps, text) in enumerate(zip(token_log_probs, choices)):
        if not isinstance(text, str) or not text:
            raise ValueError(f"choices[{i}] must be a non-empty str, got {text!r}")
        lps = np.asarray(torch.as_tensor(lps).detach().double().reshape(-1).cpu())  # from any device
        if lps.size == 0 or np.any(lps > 0) or not np.all(np.isfinite(lps)):
            raise ValueError(f"token_log_probs[{i}] must be a non-empty list of finite log-probs <= 0, "
                             f"got {lps.tolist()[:5]}")
        sums.append(lps.sum())
        counts.append(lps.size)
        chars.append(len(text))
        n_bytes.append(len(text.encode("utf-8")))
    total = np.array(sums)
    return ChoiceScores(total, total / np.array(counts), total / np.array(chars), total / np.array(n_bytes))


def multiple_choice_metrics(scores: ChoiceScores, gold: int) -> dict:
    """Per-item metrics: lm-eval's ``acc``, ``acc_norm`` (per character) and ``acc_bytes``, and this library's
    ``acc_per_token`` (not an lm-eval metric), each 1.0 when that normalisation's argmax is the gold index, else
    0.0. Average over items for the score."""
    gold = check_count(gold, "gold")
    if gold >= len(scores.sum):
        raise ValueError(f"gold must index one of the {len(scores.sum)} choices, got {gold}")
    return {"acc": float(scores.predict("sum") == gold), "acc_norm": float(scores.predict("per_char") == gold),
            "acc_bytes": float(scores.predict("per_byte") == gold),
            "acc_per_token": float(scores.predict("per_token") == gold)}


def continuation_log_probs(model, tokenizer, context: str, continuation: str) -> torch.Tensor:
    """ln p of each token of ``continuation`` after ``context``, shape (n_continuation_tokens,).

    As lm-eval's ``_encode_pair``: trailing spaces of the context move to the continuation, the whole string is
    encoded at once and the continuation's tokens are those after the context's, so the cut between them is
    the one the tokenizer makes on the whole text. ``tokenizer`` needs only ``encode(text) -> list[int]``.
    """
    if not isinstance(context, str) or not context:
        raise ValueError(f"context must be a non-empty str (the model needs a token to condition on), got {context!r}")
    if not isinstance(continuation, str) or not continuation:
        raise ValueError(f"continuation must be a non-empty str, got {continuation!r}")
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = list(tokenizer.encode(context + continuation))
    n_context = len(tokenizer.encode(context))
    if not 0 < n_context < len(whole):
        raise ValueError(f"context encodes to {n_context} tokens and context + continuation to {len(whole)}: "
                         "need at least one token in each")
    return next_token_log_probs(model, whole)[n_context - 1:]  # (T-1,) -> (T - n_context,)


def score_choices(model, tokenizer, context: str, choices, *, delimiter: str = " ") -> ChoiceScores:
    """Score each choice as ``context + delimiter + choice`` (lm-eval's default ``target_delimiter`` is a space);
    the normalisers count the choice without the delimiter, as lm-eval does."""
    if isinstance(choices, str) or len(choices) == 0:
        raise ValueError(f"choices must be a non-empty list of strings, got {choices!r}")
    log_probs = [continuation_log_probs(model, tokenizer, context, delimiter + c) for c in choices]
    return choice_scores(log_probs, choices)
