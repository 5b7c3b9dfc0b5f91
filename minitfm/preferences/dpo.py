"""Direct preference optimisation (DPO): learning from pairs "this reply is better than that one".

Glossary: B preference pairs; x a prompt, y_w the chosen ("winning") reply, y_l the rejected ("losing") one;
pi the policy being trained, pi_ref the frozen reference (the model before DPO, usually the SFT model);
sigma the logistic function; beta > 0 the strength of the pull towards the reference.

**From preferences to a loss** (Rafailov et al. 2023, "Direct Preference Optimization: Your Language Model is
Secretly a Reward Model", arXiv 2305.18290, sections 3-4):

1. *Bradley-Terry*: people prefer y_w to y_l with probability sigma(r(x, y_w) - r(x, y_l)) for some unknown
   reward r. Only the difference of rewards matters, so any r + f(x) explains the same preferences.
2. *The KL-regularised objective* of RLHF: maximise E[r(x, y)] - beta * KL(pi(.|x) || pi_ref(.|x)). Its exact
   maximiser is pi*(y|x) = pi_ref(y|x) exp(r(x, y) / beta) / Z(x).
3. Solve step 2 for the reward: r(x, y) = beta * log(pi*(y|x) / pi_ref(y|x)) + beta * log Z(x). Put that into
   step 1: the unknown Z(x) cancels in the difference, and the policy *is* the reward model. The loss is the
   negative log-likelihood of the observed preferences:

       loss = -log sigma(beta * [(log pi(y_w|x) - log pi_ref(y_w|x)) - (log pi(y_l|x) - log pi_ref(y_l|x))])

What the names mean, as TRL's ``DPOTrainer`` logs them (``rewards/chosen`` and so on; the tests check ours equal
to TRL's):

- **implicit reward** = beta * log(pi(y|x) / pi_ref(y|x)), *with* beta (one popular notebook logs it without
  beta, so its numbers are not TRL's);
- **margin** = chosen reward - rejected reward; the loss is -log sigma(margin), so only the margin is trained;
- **preference accuracy** = the share of pairs whose margin is > 0 (strictly; a tie counts as wrong).

Answers to what learners ask:

- *Which way does beta go?* beta multiplies the log-ratio inside sigma: a larger beta makes a small step away
  from the reference already move the loss a lot, so the optimum stays *closer* to the reference (in step 2,
  beta is the price of the KL term). A smaller beta lets the policy drift further.
- *Why is the loss stuck at ln 2?* At step 0 the policy is the reference, every log-ratio is 0, and
  -log sigma(0) = ln 2 = 0.6931... exactly, with zero margins. A loss that *stays* there means the log-ratios
  stay 0: the policy does not change (a learning rate too small, frozen weights) or the "policy" and the
  "reference" are one object.
- *The chosen reward goes down: is it broken?* No: only the margin is optimised. Both log-probabilities often
  fall, the rejected one faster; the chosen reply may lose probability to replies that are in neither side
  ("likelihood displacement", Razin et al. 2025 (ICLR), arXiv 2410.08847). Watch ``chosen_log_probs`` for it.
- *Sum or mean over tokens?* The sum: log pi(y|x) is the log-probability of the whole reply, the sum of its
  tokens' log-probabilities (the chain rule), and that is what step 2's derivation needs. A per-token mean is
  another objective (it changes how length is rewarded); TRL, the paper's code and minimind sum.
- *Which tokens?* Only the reply's: the same mask as supervised fine-tuning, labels ``-100`` on the prompt
  (:mod:`minitfm.finetuning.chat`). The end-of-turn token is part of the reply (it is what stops the reply),
  as TRL counts the EOS it appends.
- *Where is the KL?* Nowhere as a term: it is inside beta, through step 2. No sampling, no reward model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from minitfm._checks import check_number, check_tensor
from minitfm.finetuning.chat import IGNORE_INDEX, ChatTemplate, RenderedChat
from minitfm.finetuning.sft import sft_batch
from minitfm.training.loop import forward_batch

__all__ = ["DPOOutput", "response_log_probs", "sequence_log_probs", "dpo_loss", "dpo_batch_loss",
           "preference_pair"]

LN2 = math.log(2.0)  # the DPO loss at step 0, when the policy is the reference


@dataclass(frozen=True)
class DPOOutput:
    """What one DPO step computes; every tensor but ``loss`` is (B,) and detached.

    ``loss``: the mean over pairs of -log sigma(margin) (a scalar with its graph); ``chosen_rewards`` and
    ``rejected_rewards``: beta * log(pi / pi_ref) of each reply; ``margins``: their difference;
    ``accuracy``: the share of pairs with a margin > 0 (a float); ``chosen_log_probs`` and
    ``rejected_log_probs``: log pi(y|x) summed over each reply's tokens."""

    loss: torch.Tensor
    chosen_rewards: torch.Tensor
    rejected_rewards: torch.Tensor
    margins: torch.Tensor
    accuracy: float
    chosen_log_probs: torch.Tensor
    rejected_log_probs: torch.Tensor


def response_log_probs(logits: torch.Tensor, targets: torch.Tensor, *,
                       ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """(B,) log p of each row's targets, summed over the positions whose target is not ``ignore_index``.

    ``logits`` (B, T, V) and ``targets`` (B, T) are already aligned (position t predicts ``targets[t]``): the
    shifted ``tgt_out`` of :func:`minitfm.finetuning.sft.sft_batch`, ``-100`` on the prompt and the padding.
    The sum keeps the logits' dtype (float64 logits give a float64 sum)."""
    check_tensor(logits, "logits", ndim=3, floating=True)
    check_tensor(targets, "targets", ndim=2)
    if targets.shape != logits.shape[:2]:
        raise ValueError(f"targets must have shape logits.shape[:2] = {tuple(logits.shape[:2])}, got "
                         f"{tuple(targets.shape)}")
    keep = targets != ignore_index  # (B, T)
    empty = (~keep).all(dim=1).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"rows {empty[:5]} have no response token (every target is {ignore_index}): a reply's "
                         "log-probability needs at least one token of the reply")
    log_probs = F.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]  # (B, T)
    return (log_probs * keep).sum(dim=1)


def sequence_log_probs(model: torch.nn.Module, chats: Sequence[RenderedChat], *, pad_id: int = 0) -> torch.Tensor:
    """(B,) log pi(reply | prompt) of each rendered conversation: the sum over the tokens whose label is not
    ``-100`` (the assistant's reply and its end-of-turn token). Batched as supervised fine-tuning batches them
    (:func:`~minitfm.finetuning.sft.sft_batch`: right padding, no attention mask needed under the causal mask);
    gradients flow unless the caller wraps it in ``torch.no_grad()``."""
    batch = sft_batch(chats, pad_id=pad_id)  # refuses a conversation without a reply
    device = next(model.parameters()).device
    batch = type(batch)(None, batch.tgt_in.to(device), batch.tgt_out.to(device), batch.pad_id)
    return response_log_probs(forward_batch(model, batch), batch.tgt_out)


def _check_beta(beta) -> float:
    check_number(beta, "beta", low=0.0, low_open=True)
    return float(beta)


def dpo_loss(chosen_log_probs: torch.Tensor, rejected_log_probs: torch.Tensor, ref_chosen_log_probs: torch.Tensor,
             ref_rejected_log_probs: torch.Tensor, *, beta: float = 0.1) -> DPOOutput:
    """The DPO loss of B pairs from the four (B,) sequence log-probabilities (see the module's docstring).

    ``beta`` > 0 (TRL's default 0.1; larger stays closer to the reference). The reference's log-probabilities
    carry no gradient (they are detached here whatever the caller passed)."""
    beta = _check_beta(beta)
    named = {"chosen_log_probs": chosen_log_probs, "rejected_log_probs": rejected_log_probs,
             "ref_chosen_log_probs": ref_chosen_log_probs, "ref_rejected_log_probs": ref_rejected_log_probs}
    for name, value in named.items():
        check_tensor(value, name, ndim=1, floating=True)
    shapes = {name: tuple(v.shape) for name, v in named.items()}
    if len(set(shapes.values())) != 1 or chosen_log_probs.numel() == 0:
        raise ValueError(f"the four log-probabilities must be (B,) with the same B >= 1, got {shapes}")
    chosen_ratio = chosen_log_probs - ref_chosen_log_probs.detach()  # log pi(y_w|x) / pi_ref(y_w|x)
    rejected_ratio = rejected_log_probs - ref_rejected_log_probs.detach()
    logits = beta * (chosen_ratio - rejected_ratio)  # (B,) the margin, with its graph
    loss = -F.logsigmoid(logits).mean()
    chosen_rewards, rejected_rewards = beta * chosen_ratio.detach(), beta * rejected_ratio.detach()
    margins = chosen_rewards - rejected_rewards
    return DPOOutput(loss, chosen_rewards, rejected_rewards, margins, float((margins > 0).float().mean()),
                     chosen_log_probs.detach(), rejected_log_probs.detach())


def dpo_batch_loss(policy: torch.nn.Module, reference: torch.nn.Module, chosen: Sequence[RenderedChat],
                   rejected: Sequence[RenderedChat], *, beta: float = 0.1, pad_id: int = 0) -> DPOOutput:
    """DPO on rendered pairs: ``chosen[i]`` and ``rejected[i]`` are the same prompt with two replies.

    The policy scores both sides in one batch (chosen rows first, as TRL's ``[chosen; rejected]``); the
    reference scores them without gradients. Pass a *copy* of the starting model as ``reference``: the same
    object would move with the policy and the loss would stay at ln 2 forever."""
    beta = _check_beta(beta)
    if policy is reference:
        raise ValueError("policy and reference are the same object: the reference must be a frozen copy "
                         "(copy.deepcopy(model) before training), or every log-ratio stays 0 and the loss ln 2")
    for name, side in (("chosen", chosen), ("rejected", rejected)):
        if isinstance(side, RenderedChat) or not isinstance(side, Sequence) or not side:
            raise TypeError(f"{name} must be a non-empty list of RenderedChat, got {type(side).__name__}")
    if len(chosen) != len(rejected):
        raise ValueError(f"chosen and rejected must pair up: {len(chosen)} chosen, {len(rejected)} rejected")
    both = list(chosen) + list(rejected)
    log_probs = sequence_log_probs(policy, both, pad_id=pad_id)  # (2B,)
    with torch.no_grad():
        ref = sequence_log_probs(reference, both, pad_id=pad_id)
    n = len(chosen)
    return dpo_loss(log_probs[:n], log_probs[n:], ref[:n], ref[n:], beta=beta)


def preference_pair(template: ChatTemplate, conversation, chosen: str, rejected: str
                    ) -> tuple[RenderedChat, RenderedChat]:
    """The two rendered conversations of one pair: ``conversation`` (turns ending with the user's) answered
    with ``chosen``, and with ``rejected``. Their labels are -100 except on each reply and its end token."""
    if not isinstance(template, ChatTemplate):
        raise TypeError(f"template must be a ChatTemplate, got {type(template).__name__}")
    for name, text in (("chosen", chosen), ("rejected", rejected)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str (a reply), got {type(text).__name__}")
    if chosen == rejected:
        raise ValueError(f"chosen and rejected are the same reply {chosen!r}: the pair prefers nothing")
    turns = list(conversation)
    if not turns or not isinstance(turns[-1], dict) or turns[-1].get("role") != "user":
        raise ValueError("conversation must be a list of turns ending with the user's")
    return tuple(template.render(turns + [{"role": "assistant", "content": text}]) for text in (chosen, rejected))
