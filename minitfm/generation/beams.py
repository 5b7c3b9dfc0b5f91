"""Beam search (chapter 9): keep the ``num_beams`` most probable continuations instead of one.

It shares :func:`minitfm.generation.generate`'s checks, its handling of eos and padding, and its next-token
step; only the choice of tokens differs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from minitfm._checks import check_positive_int
from minitfm.generation._decode_checks import _check_flags, _check_inputs, _special_ids
from minitfm.generation.decode_loop import _for_inference, _NextLogits, _prompt_valid
from minitfm.layers.kv_cache import KVCache


@dataclass
class BeamSearchOutput:
    """What :func:`beam_search` returns.

    Attributes:
        tokens: (B, P + N) the best hypothesis of every row (``pad_id`` after its ``eos_id``); N is the
            number of steps the search ran (at most ``max_new_tokens``).
        scores: (B,) its length-normalised log-probability.
        beams: (B, K, P + N) the K best hypotheses (finished, or live when the steps ran out), best first.
        beam_scores: (B, K) their normalised scores, in the same order.
        prompt_len: P.
    """

    tokens: torch.Tensor
    scores: torch.Tensor
    beams: torch.Tensor
    beam_scores: torch.Tensor
    prompt_len: int

    @property
    def new_tokens(self) -> torch.Tensor:
        return self.tokens[:, self.prompt_len:]


def beam_search(model, prompt: torch.Tensor, max_new_tokens: int, *, num_beams: int = 4,
                length_penalty: float = 1.0, src: torch.Tensor | None = None, eos_id=None,
                pad_id: int | None = None, use_cache: bool = True, cache_cls=KVCache,
                prompt_mask: torch.Tensor | None = None) -> BeamSearchOutput:
    """Keep the ``num_beams`` most likely continuations of every row, and a list of finished ones.

    A hypothesis is scored by its summed log-probability divided by ``length ** length_penalty``
    (length = generated tokens, eos included): 0 ranks by raw probability (which favours short
    outputs), 1 by the mean log-probability per token.

    Every step extends each of the K **live** beams by every token. A live beam followed by ``eos_id``
    is a **finished** hypothesis: it goes to a separate list that keeps the K best by score, so a
    finished beam never takes a live beam's slot and cannot be pushed out by live beams that later
    score worse. The K best extensions by any other token are the next live beams (ranked by summed
    log-probability, since they all have the same length).

    Each row's K live beams are K rows of one (B K, T) batch, and so are their caches: when a step keeps
    beam j's continuation in slot i, slot i's cache rows are replaced by beam j's (``cache.reorder``).

    **Stopping rule.** A row stops when it holds K finished hypotheses and no live beam can still beat
    the worst of them: log-probabilities are <= 0, so a live beam's sum can only fall, and its best
    possible score is its sum divided by the most favourable length it can still reach
    (``max_new_tokens ** length_penalty`` if ``length_penalty > 0``, the next length otherwise). The
    search ends when every row has stopped, or after ``max_new_tokens``; in the second case a row's live
    beams (of ``max_new_tokens`` tokens) compete with its finished ones. The result is the best of
    them: no hypothesis the search ever scored beats it.

    Arguments as in :func:`generate`; ``eos_id`` may be several ids (each ends a hypothesis), and ``eos_id=-1``
    turns finishing off: no hypothesis ends, and the K live beams of ``max_new_tokens`` tokens are the result.
    """
    _check_inputs(model, prompt, max_new_tokens, src)
    check_positive_int(num_beams, "num_beams")
    if not isinstance(length_penalty, (int, float)) or isinstance(length_penalty, bool):
        raise TypeError(f"length_penalty must be a float, got {type(length_penalty).__name__}")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty}")
    _check_flags(cache_cls, use_cache=use_cache)
    eos_id, pad_id, fill_id = _special_ids(model, eos_id, pad_id)
    valid = _prompt_valid(model, prompt, pad_id, prompt_mask)
    return _for_inference(model, _beam_loop, prompt, valid, max_new_tokens, num_beams, float(length_penalty), src,
                          eos_id, fill_id, use_cache, cache_cls)


def _beam_loop(model, prompt, valid, max_new_tokens, k, length_penalty, src, eos_id, pad_id, use_cache, cache_cls):
    b, p = prompt.shape
    n, device, width = max_new_tokens, prompt.device, prompt.shape[1] + max_new_tokens
    valid = valid.repeat_interleave(k, dim=0)  # (B, P) -> (B K, P)
    tokens = prompt.repeat_interleave(k, dim=0)  # (B, P) -> (B K, P): the live beams
    src = None if src is None else src.repeat_interleave(k, dim=0)  # (B, S) -> (B K, S)
    next_logits = _NextLogits(model, src, b * k, width, use_cache, cache_cls)
    scores = torch.full((b, k), float("-inf"), device=device)  # live beams' summed log-probabilities
    scores[:, 0] = 0.0  # all beams start identical: let only the first one expand at step 0
    done_tokens = torch.full((b, k, width), pad_id, dtype=prompt.dtype, device=device)  # finished hypotheses
    done_scores = torch.full((b, k), float("-inf"), device=device)  # their normalised scores, best first
    stopped = torch.zeros(b, dtype=torch.bool, device=device)
    first_row = torch.arange(b, device=device)[:, None] * k  # (B, 1): row of each batch entry's beam 0
    eos, e = torch.tensor(eos_id, dtype=torch.long, device=device), len(eos_id)  # (E,) the ids that end a hypothesis
    for step in range(n):
        length = step + 1  # generated tokens of every candidate of this step, eos included
        logp = next_logits(tokens, valid).float().log_softmax(dim=-1)  # (B K, V)
        # 1. every live beam followed by an eos id is a finished hypothesis (E of them for E eos ids); keep the K
        # best finished per row
        if e:
            ended = (scores[..., None] + logp[:, eos].view(b, k, e)) / length ** length_penalty  # (B, K, E)
            ended = ended.masked_fill(stopped[:, None, None], float("-inf")).view(b, k * e)  # a stopped row: no more
            ended_tokens = torch.cat([tokens.repeat_interleave(e, dim=0), eos.repeat(b * k)[:, None]], dim=1)
            ended_tokens = torch.nn.functional.pad(ended_tokens, (0, n - length), value=pad_id).view(b, k * e, width)
            done_scores, pick = torch.cat([done_scores, ended], dim=1).topk(k, dim=1)  # (B, K + K E) -> (B, K)
            done_tokens = torch.cat([done_tokens, ended_tokens], dim=1).gather(1, pick[..., None].expand(-1, -1, width))
        # 2. the K best extensions by any other token are the next live beams
        if e:
            logp[:, eos] = float("-inf")
        vocab = logp.shape[-1]
        candidates = (scores.view(-1, 1) + logp).view(b, k * vocab)  # (B K, V) -> (B, K V)
        scores, best = candidates.topk(k, dim=-1)  # (B, K) each, best first
        rows = (first_row + best // vocab).view(-1)  # parent row of every new beam, (B K,)
        tokens = torch.cat([tokens[rows], (best % vocab).view(-1, 1)], dim=1)  # (B K, T) -> (B K, T + 1)
        valid = torch.cat([valid[rows], torch.ones_like(valid[:, :1])], dim=1)
        next_logits.reorder(rows)
        if length == n:
            break
        # 3. the stopping rule: K finished hypotheses that no live beam can still beat
        most_favourable = n ** length_penalty if length_penalty > 0 else (length + 1) ** length_penalty
        stopped = stopped | (done_scores[:, -1] >= scores[:, 0] / most_favourable)
        if stopped.all():
            break
    return _rank_beams(tokens, scores, done_tokens, done_scores, stopped, length_penalty, p)


def _rank_beams(tokens, scores, done_tokens, done_scores, stopped, length_penalty, p) -> BeamSearchOutput:
    """The K best of each row's finished hypotheses and, for rows that ran out of steps, its live beams."""
    b, k = scores.shape
    steps = tokens.shape[1] - p
    live = (scores / steps ** length_penalty).masked_fill(stopped[:, None], float("-inf"))  # (B, K)
    pool = torch.cat([done_tokens[..., : p + steps], tokens.view(b, k, -1)], dim=1)  # (B, 2K, P + steps)
    beam_scores, order = torch.cat([done_scores, live], dim=1).topk(k, dim=1)  # (B, 2K) -> (B, K), best first
    beams = pool.gather(1, order[..., None].expand(-1, -1, pool.shape[-1]))  # (B, K, P + steps)
    return BeamSearchOutput(beams[:, 0], beam_scores[:, 0], beams, beam_scores, p)
