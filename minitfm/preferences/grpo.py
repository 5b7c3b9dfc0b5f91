"""Group relative policy optimisation (GRPO): learning from a reward that a program computes.

Glossary: N prompts, G completions per prompt (a *group*), B = N * G rows, C the longest completion (tokens);
r a completion's reward, A its advantage; pi the policy, pi_old the policy that sampled the completions, pi_ref
the frozen reference; the ratio rho = pi(token) / pi_old(token).

One step (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300, section 4.1):

1. **Sample** a group of G completions for each prompt (:func:`sample_groups`).
2. **Score** each with a reward (:mod:`minitfm.preferences.rewards`).
3. **Advantages** relative to the group (:func:`group_advantages`): A_i = (r_i - mean(r)) / (std(r) + 1e-4).
   The group mean is the baseline of REINFORCE, with no value network to train. A group whose rewards are all
   equal has A = 0 for every completion: it teaches nothing (watch the share of such groups).
4. **Per-token loss** (PPO's clipped surrogate, Schulman et al. 2017): -min(rho * A, clip(rho, 1 - eps, 1 + eps)
   * A), every token of a completion sharing its completion's A; plus, optionally, beta * k3 (below).
5. **Aggregate** the per-token losses over the batch, one of four ways (``loss_type``):

   ===========  ==========================================  =================================================
   loss_type    loss =                                      from
   ===========  ==========================================  =================================================
   ``grpo``     mean over rows of (sum over the row's       the DeepSeekMath paper: each completion weighs the
                tokens / the row's length)                  same, so a token of a long completion weighs less
                                                            (a long wrong answer is punished less per token)
   ``bnpo``     sum over all tokens / tokens in the batch   every token weighs the same
   ``dr_grpo``  sum over all tokens / (B * max_length)      Liu et al. 2025, "Understanding R1-Zero-Like
                                                            Training" (Dr. GRPO, arXiv 2503.20783): a constant
                                                            normaliser, no length bias (with ``scale="none"``)
   ``dapo``     sum over all tokens / tokens of the whole   Yu et al. 2025, "DAPO" (arXiv 2503.14476): the
                generation batch (``num_tokens``)           token mean over everything sampled, however it is
                                                            split into micro-batches; TRL's default
   ===========  ==========================================  =================================================

   With one batch per generation (as here), ``dapo`` equals ``bnpo``; they differ when a generation batch is
   split over gradient-accumulation steps or devices, which ``num_tokens`` stands for.

Answers to what learners ask:

- *Why is the loss 0?* On-policy (one gradient step per sample, pi_old = pi) the ratio is 1 and the clip does
  nothing; the loss is -mean(A) per the normalisation, and group-relative advantages have mean 0. The *value*
  is 0 (exactly, under ``bnpo`` with equal lengths), the *gradient* is not: it is the policy gradient, mean of
  A * grad log pi (the tests check it). Watch the reward, its spread within groups and the gradient norm.
- *Where does the KL go?* Here, into the loss, per token, as DeepSeekMath does: beta * k3 with
  k3 = pi_ref/pi - log(pi_ref/pi) - 1 (Schulman, "Approximating KL divergence", 2020, joschu.net): >= 0 for
  every token, unbiased for KL(pi || pi_ref) on tokens sampled from pi, and with lower variance than
  log(pi/pi_ref). PPO as InstructGPT ran it puts the KL into the reward instead. TRL (1.16) multiplies k3 by the
  ratio (``use_bias_correction_kl``: the tokens were sampled from pi_old, not pi); ``kl_ratio=True`` does too.
  TRL's default is beta = 0 (no reference at all), following Dr. GRPO and DAPO; DeepSeek-R1 used 0.001.
- *Sum or mean over tokens?* A mean, per token: every token of a completion gets its completion's advantage,
  and the four normalisations above differ only in what the sum is divided by.
- *Group std?* Unbiased (Bessel's n - 1), plus 1e-4, as TRL (CS336 adds 1e-6); minimind divides by the biased one.
  ``scale="none"`` (Dr. GRPO) keeps r - mean: dividing by the std gives the groups that are nearly all right
  or all wrong the largest advantages (a difficulty bias).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from minitfm._checks import check_choice, check_number, check_positive_int, check_tensor, check_token_ids
from minitfm.finetuning.answering import left_padded
from minitfm.finetuning.chat import ChatTemplate
from minitfm.generation import generate
from minitfm.generation.sampling import Temperature

__all__ = ["LOSS_TYPES", "SCALES", "Groups", "group_advantages", "k3_kl", "GRPOOutput", "grpo_loss",
           "sample_groups", "completion_log_probs"]

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SCALES = ("group", "batch", "none")
STD_EPS = 1e-4  # added to the std, as TRL (CS336's default is 1e-6; DeepSeekMath's paper writes none)


def group_advantages(rewards: torch.Tensor, *, scale: str = "group", eps: float = STD_EPS) -> torch.Tensor:
    """(N, G) rewards -> (N, G) advantages: r minus its group's mean, divided by (std + ``eps``) where the std is
    the group's (``"group"``, DeepSeekMath), the whole batch's (``"batch"``) or not divided at all (``"none"``,
    Dr. GRPO). TRL's ``scale_rewards`` takes the same three values. Stds are unbiased (n - 1)."""
    check_tensor(rewards, "rewards", ndim=2, floating=True)
    check_choice(scale, "scale", SCALES)
    check_number(eps, "eps", low=0.0)
    if rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (N prompts, G completions) with G >= 2: a group of one has no "
                         f"baseline but itself, got shape {tuple(rewards.shape)}")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards must be finite (a NaN reward would poison its whole group)")
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "none":
        return centred
    std = rewards.std(dim=1, keepdim=True) if scale == "group" else rewards.std()
    return centred / (std + eps)


def k3_kl(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 = exp(ref - lp) - (ref - lp) - 1 >= 0, Schulman's estimator of KL(pi || pi_ref) on tokens
    sampled from pi (shapes broadcast; no masking here)."""
    check_tensor(log_probs, "log_probs", floating=True)
    check_tensor(ref_log_probs, "ref_log_probs", floating=True)
    if log_probs.shape != ref_log_probs.shape:
        raise ValueError(f"log_probs {tuple(log_probs.shape)} and ref_log_probs {tuple(ref_log_probs.shape)} "
                         "must have the same shape")
    delta = ref_log_probs - log_probs
    return torch.exp(delta) - delta - 1


@dataclass(frozen=True)
class GRPOOutput:
    """``loss`` (scalar, with its graph); ``per_token_loss`` (B, C), zero outside the mask; ``kl`` the mean
    k3 per completion token (0.0 without a reference); ``clip_fraction`` the share of completion tokens whose
    ratio was clipped in the direction that matters (their gradient is 0)."""

    loss: torch.Tensor
    per_token_loss: torch.Tensor
    kl: float
    clip_fraction: float


def _check_loss_inputs(log_probs, old_log_probs, advantages, mask, ref_log_probs) -> torch.Tensor:
    check_tensor(log_probs, "log_probs", ndim=2, floating=True)
    shape = tuple(log_probs.shape)
    for name, value in (("old_log_probs", old_log_probs), ("ref_log_probs", ref_log_probs)):
        if value is not None:
            check_tensor(value, name, ndim=2, floating=True)
            if tuple(value.shape) != shape:
                raise ValueError(f"{name} must have log_probs' shape {shape} (B, C), got {tuple(value.shape)}")
    check_tensor(advantages, "advantages", ndim=1, floating=True)
    if advantages.shape[0] != shape[0]:
        raise ValueError(f"advantages must be (B,) = ({shape[0]},), one per completion, got "
                         f"{tuple(advantages.shape)}; flatten (N, G) advantages with .flatten()")
    check_tensor(mask, "mask", ndim=2)
    if tuple(mask.shape) != shape:
        raise ValueError(f"mask must have log_probs' shape {shape}, got {tuple(mask.shape)}")
    mask = mask.to(log_probs.dtype)
    if not bool(((mask == 0) | (mask == 1)).all()) or mask.sum() == 0:
        raise ValueError("mask must be 0/1 (or bool), 1 on completion tokens, with at least one 1")
    return mask


def grpo_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor | None, advantages: torch.Tensor,
              mask: torch.Tensor, *, loss_type: str = "grpo", epsilon: float = 0.2, epsilon_high: float | None = None,
              beta: float = 0.0, ref_log_probs: torch.Tensor | None = None, kl_ratio: bool = False,
              max_length: int | None = None, num_tokens: int | None = None) -> GRPOOutput:
    """The GRPO loss of B completions from per-token log-probabilities (see the module's docstring).

    Args:
        log_probs: (B, C) log pi of each completion token, with its graph (:func:`completion_log_probs`).
        old_log_probs: (B, C) log pi_old, the sampler's (no gradient); ``None`` = on-policy, ``log_probs.detach()``.
        advantages: (B,) one per completion (``group_advantages(...).flatten()``).
        mask: (B, C) 1 on completion tokens (up to and including the end token), 0 on the padding.
        loss_type: ``"grpo"``, ``"bnpo"``, ``"dr_grpo"`` or ``"dapo"`` (the table above).
        epsilon, epsilon_high: the clip range [1 - epsilon, 1 + epsilon_high] (``epsilon_high`` defaults to
            ``epsilon``; DAPO's "clip higher" uses 0.28).
        beta: the weight of the KL penalty; > 0 needs ``ref_log_probs`` (B, C).
        kl_ratio: multiply k3 by the ratio, as TRL 1.16 does by default (``use_bias_correction_kl``).
        max_length: ``dr_grpo``'s constant (default: C, the padded width: pass the ``max_new_tokens``).
        num_tokens: ``dapo``'s normaliser, the completion tokens of the whole generation batch (default: this
            batch's, which makes ``dapo`` equal ``bnpo``).
    """
    mask = _check_loss_inputs(log_probs, old_log_probs, advantages, mask, ref_log_probs)
    check_choice(loss_type, "loss_type", LOSS_TYPES)
    check_number(epsilon, "epsilon", low=0.0, low_open=True, high=1.0, high_open=True)
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    check_number(epsilon_high, "epsilon_high", low=0.0, low_open=True)
    check_number(beta, "beta", low=0.0)
    if beta > 0 and ref_log_probs is None:
        raise ValueError("beta > 0 needs ref_log_probs, the reference model's (B, C) log-probabilities")
    if not isinstance(kl_ratio, bool):
        raise TypeError(f"kl_ratio must be a bool, got {type(kl_ratio).__name__}")
    old = log_probs.detach() if old_log_probs is None else old_log_probs.detach()
    ratio = torch.exp(log_probs - old)  # (B, C), 1 on-policy
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    adv = advantages.detach()[:, None].to(log_probs.dtype)  # (B, 1): a completion's tokens share its advantage
    per_token = -torch.min(ratio * adv, clipped * adv)  # (B, C)
    kl_mean = 0.0
    if beta > 0:
        kl = k3_kl(log_probs, ref_log_probs.detach())
        kl_mean = float((kl.detach() * mask).sum() / mask.sum())
        per_token = per_token + beta * (kl * ratio if kl_ratio else kl)
    per_token = per_token * mask
    if loss_type == "grpo":
        loss = (per_token.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
    elif loss_type == "bnpo":
        loss = per_token.sum() / mask.sum()
    elif loss_type == "dr_grpo":
        width = mask.shape[1] if max_length is None else max_length
        check_positive_int(width, "max_length")
        if width < mask.shape[1]:
            raise ValueError(f"max_length ({width}) must be at least the completions' width C = {mask.shape[1]}")
        loss = per_token.sum() / (mask.shape[0] * width)
    else:  # dapo
        total = int(mask.sum()) if num_tokens is None else num_tokens
        check_positive_int(total, "num_tokens")
        loss = per_token.sum() / total
    gated = ((ratio > 1 + epsilon_high) & (adv > 0)) | ((ratio < 1 - epsilon) & (adv < 0))
    clip_fraction = float((gated.to(mask.dtype) * mask).sum() / mask.sum())
    return GRPOOutput(loss, per_token.detach(), kl_mean, clip_fraction)


@dataclass(frozen=True)
class Groups:
    """G sampled completions for each of N prompts, rows grouped by prompt (rows i*G .. i*G + G - 1 answer
    prompt i). ``prompt`` (B, P) left-padded ids and ``prompt_mask`` (B, P) bool; ``completion`` (B, C) the new
    ids; ``completion_mask`` (B, C) bool, True up to and including the end-of-turn token; ``replies`` the B
    reply texts; ``group_size`` G."""

    prompt: torch.Tensor
    prompt_mask: torch.Tensor
    completion: torch.Tensor
    completion_mask: torch.Tensor
    replies: list
    group_size: int


def sample_groups(model, template: ChatTemplate, conversations: Sequence, group_size: int, *,
                  temperature: float = 1.0, seed: int = 0, max_new_tokens: int = 16) -> Groups:
    """``group_size`` sampled replies to each conversation, in one batch, with the KV cache and one seeded CPU
    generator (the same seed gives the same groups on every device), as
    :func:`minitfm.finetuning.answering.sampled_replies` samples them, keeping the ids that the loss needs."""
    if not isinstance(template, ChatTemplate):
        raise TypeError(f"template must be a ChatTemplate, got {type(template).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a minitfm DecoderOnlyLM, got {type(model).__name__}")
    check_positive_int(group_size, "group_size")
    check_positive_int(max_new_tokens, "max_new_tokens")
    check_number(temperature, "temperature", low=0.0, low_open=True)
    check_number(seed, "seed", integer=True)
    if isinstance(conversations, (str, dict)) or not isinstance(conversations, Sequence) or not conversations:
        raise TypeError("conversations must be a non-empty list of conversations (lists of turns)")
    prompt, prompt_mask = left_padded([template.render(c, add_generation_prompt=True).ids for c in conversations],
                                      next(model.parameters()).device)  # (N, P) each
    out = generate(model, prompt, max_new_tokens, processors=[Temperature(temperature)], do_sample=True,
                   generator=torch.Generator().manual_seed(seed), eos_id=template.end_id, prompt_mask=prompt_mask,
                   num_return_sequences=group_size)  # each prompt read once, its cache copied to its G rows
    prompt, prompt_mask = (x.repeat_interleave(group_size, dim=0) for x in (prompt, prompt_mask))  # (B = N G, P)
    completion = out.new_tokens  # (B, C)
    is_end = completion == template.end_id
    before_end = (torch.cumsum(is_end.long(), dim=1) - is_end.long()) == 0  # True up to the first end token
    replies = [template.reply(row) for row in completion]
    return Groups(prompt, prompt_mask, completion, before_end, replies, group_size)


def completion_log_probs(model, prompt: torch.Tensor, completion: torch.Tensor, *,
                         prompt_mask: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """(B, C) log pi(completion token | everything before it), one forward pass over prompt + completion, with
    the left padding masked as ``generate`` masked it. The logits are divided by ``temperature`` first, as the
    sampler did (and as TRL does), so that the ratio compares the distribution the tokens came from."""
    check_token_ids(prompt, "prompt")
    check_token_ids(completion, "completion")
    check_number(temperature, "temperature", low=0.0, low_open=True)
    if prompt.shape[0] != completion.shape[0]:
        raise ValueError(f"prompt and completion need the same rows B, got {prompt.shape[0]} and "
                         f"{completion.shape[0]}")
    ids = torch.cat([prompt, completion], dim=1)  # (B, P + C)
    key_mask = None
    if prompt_mask is not None:
        if prompt_mask.dtype != torch.bool or prompt_mask.shape != prompt.shape:
            raise ValueError(f"prompt_mask must be bool with the prompt's shape {tuple(prompt.shape)}, got "
                             f"{prompt_mask.dtype} {tuple(prompt_mask.shape)}")
        key_mask = torch.cat([prompt_mask, torch.ones_like(completion, dtype=torch.bool)], dim=1)
    logits = model(ids, key_mask=key_mask)[:, prompt.shape[1] - 1:-1] / temperature  # (B, C, V)
    return F.log_softmax(logits, dim=-1).gather(-1, completion[..., None])[..., 0]
