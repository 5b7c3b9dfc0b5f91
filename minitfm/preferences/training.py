"""Training loops and measurements for chapter 16: GRPO and DPO on a copy of a chat model, and what to measure.

Glossary: N questions (:class:`~minitfm.finetuning.tasks.Example`), n samples per question, G replies per group,
c the correct samples of one question; pi the policy (trained), pi_ref the reference (the model passed in,
never changed).

=========================  =======================================================================================
:func:`grpo_train`         on-policy GRPO (:mod:`~minitfm.preferences.grpo`) on a deep copy; per-step curves in a
                           :class:`GRPOHistory` (reward, exact reward, k3 KL per token, zero-variance groups, length)
:func:`dpo_train`          DPO (:func:`~minitfm.preferences.dpo.dpo_batch_loss`) on (example, chosen, rejected)
                           triples, shuffled by a seeded generator each epoch; curves in a :class:`DPOHistory`
:func:`sampled_correct`    each question's count of correct samples out of n: a *paired* pass@1 test needs these
:func:`sampled_pairs`      DPO pairs from the model's own samples: a verified answer against a wrong one
:func:`policy_kl`          KL(pi || pi_ref) per reply, on the policy's own samples (nats)
:func:`pass_at_k_counts`   per-question pass@k from counts (Chen et al. 2021's unbiased estimator)
=========================  =======================================================================================

``trainable`` picks the parameters that train: ``"all"``, ``"final_norm"`` (the final RMSNorm gain, a per-feature
scale of what the output layer reads: a per-feature rescaling whose effect on pass@1 is similar to cooling the
sampler, though unlike a temperature it can change greedy replies), ``"norms"`` (every norm gain),
``"last_block"`` (the last decoder block and the final norm), or a callable ``name -> bool`` on
``model.named_parameters()``. The others stay bit-equal to the reference. Both loops keep the policy in eval mode
(no dropout): the replies are sampled from, and the gradient taken of, the same distribution.

Everything is seeded: the same ``seed`` gives the same policy and history on the same machine (sampling uses a
seeded CPU generator; Adam and the order of the pairs are deterministic).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from minitfm._checks import check_choice, check_number, check_positive_int
from minitfm.evaluation import pass_at_k
from minitfm.finetuning.chat import ChatTemplate
from minitfm.finetuning.tasks import Example
from minitfm.preferences.dpo import dpo_batch_loss, preference_pair
from minitfm.preferences.grpo import (LOSS_TYPES, completion_log_probs, group_advantages, grpo_loss, k3_kl,
                                      sample_groups)
from minitfm.preferences.rewards import exact_answer

__all__ = ["TRAINABLE", "trainable_names", "GRPOHistory", "grpo_train", "DPOHistory", "dpo_train",
           "sampled_correct", "sampled_pairs", "policy_kl", "pass_at_k_counts"]

TRAINABLE = ("all", "final_norm", "norms", "last_block")


def trainable_names(model: torch.nn.Module, trainable="all") -> list[str]:
    """The names of ``model``'s parameters that ``trainable`` selects (see the module's docstring)."""
    names = [name for name, _ in model.named_parameters()]
    if callable(trainable):
        keep = trainable
    elif not isinstance(trainable, str):
        raise TypeError(f"trainable must be one of {TRAINABLE} or a function name -> bool, got "
                        f"{type(trainable).__name__}")
    else:
        check_choice(trainable, "trainable", TRAINABLE)
        layers = getattr(model, "layers", None)
        last = f"layers.{len(layers) - 1}." if layers is not None and len(layers) else None
        if trainable == "last_block" and last is None:
            raise ValueError("trainable='last_block' needs a model with a non-empty .layers (a DecoderOnlyLM)")
        keep = {"all": lambda n: True, "final_norm": lambda n: n.startswith("final_norm."),
                "norms": lambda n: "norm" in n.rpartition(".")[0].rpartition(".")[2],  # attn_norm, final_norm
                "last_block": lambda n: n.startswith(last) or n.startswith("final_norm.")}[trainable]
    chosen = [n for n in names if keep(n)]
    if not chosen:
        raise ValueError(f"trainable={trainable!r} selects none of the model's {len(names)} parameters "
                         f"(its names look like {names[:3]})")
    return chosen


def _check_model(model, template) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a minitfm DecoderOnlyLM, got {type(model).__name__}")
    if not isinstance(template, ChatTemplate):
        raise TypeError(f"template must be a ChatTemplate, got {type(template).__name__}")


def _check_examples(examples, name: str = "examples", minimum: int = 1) -> list:
    if isinstance(examples, (str, Example)) or not isinstance(examples, Sequence):
        raise TypeError(f"{name} must be a list of Example, got {type(examples).__name__}")
    bad = [type(e).__name__ for e in examples if not isinstance(e, Example)]
    if bad:
        raise TypeError(f"{name} must hold minitfm.finetuning.tasks.Example, got a {bad[0]}")
    if len(examples) < minimum:
        raise ValueError(f"{name}: need at least {minimum}, got {len(examples)}")
    return list(examples)


def _policy(model, trainable, seed, lr, clip) -> tuple[torch.nn.Module, list]:
    """A deep copy of ``model`` in eval mode, only the selected parameters requiring gradients."""
    check_number(seed, "seed", integer=True)
    check_number(lr, "lr", low=0.0, low_open=True)
    check_number(clip, "clip", low=0.0, low_open=True)
    chosen = set(trainable_names(model, trainable))
    policy = copy.deepcopy(model).eval()
    params = []
    for name, p in policy.named_parameters():
        p.requires_grad_(name in chosen)
        if name in chosen:
            params.append(p)
    return policy, params


def _frozen(model) -> torch.nn.Module:
    """The reference as it scores: ``model`` itself when in eval mode, else an eval copy (dropout off, and the
    caller's model keeps its mode)."""
    return copy.deepcopy(model).eval() if model.training else model


def _restore(policy, model) -> torch.nn.Module:
    for p, q in zip(policy.parameters(), model.parameters()):
        p.requires_grad_(q.requires_grad)
    return policy.eval()


@dataclass
class GRPOHistory:
    """Per step: ``reward`` the mean reward of the batch, ``exact`` the mean exact-answer reward (the truth, when
    ``reward`` is a proxy), ``kl`` the mean k3 KL(pi || pi_ref) per completion token (before the step), ``zero_var``
    the share of groups whose rewards were all equal (they teach nothing), ``length`` the mean completion length
    (tokens, the end token included), ``grad_norm`` the gradient norm before clipping."""

    reward: list = field(default_factory=list)
    exact: list = field(default_factory=list)
    kl: list = field(default_factory=list)
    zero_var: list = field(default_factory=list)
    length: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)


def grpo_train(model, template: ChatTemplate, examples: Sequence[Example], reward: Callable, *, steps: int,
               prompts: int = 8, group: int = 8, lr: float, beta: float = 0.0, loss_type: str = "dapo",
               temperature: float = 1.0, max_new_tokens: int = 8, trainable="all", seed: int = 0,
               clip: float = 1.0, progress: bool = False) -> tuple[torch.nn.Module, GRPOHistory]:
    """On-policy GRPO (one gradient step per sampled batch, so the ratio is 1) on a deep copy of ``model``.

    Step s samples ``group`` replies to each of ``examples[s * prompts:(s + 1) * prompts]`` (so ``examples`` needs
    at least ``steps * prompts``, used in order) with seed ``seed * 100003 + s``, scores them with
    ``reward(reply, example)``, and takes one Adam step (learning rate ``lr``, gradients clipped to norm ``clip``)
    on :func:`~minitfm.preferences.grpo.grpo_loss` (``loss_type``; ``beta`` > 0 adds the k3 KL to ``model``).
    Returns (the policy in eval mode, its :class:`GRPOHistory`); ``model`` itself is the reference, unchanged."""
    _check_model(model, template)
    for name, value in (("steps", steps), ("prompts", prompts), ("max_new_tokens", max_new_tokens)):
        check_positive_int(value, name)
    check_positive_int(group, "group")
    if group < 2:
        raise ValueError(f"group must be >= 2: a group of one reply has no baseline but itself, got {group}")
    examples = _check_examples(examples, minimum=steps * prompts)
    if not callable(reward):
        raise TypeError(f"reward must be a function (reply, example) -> float, got {type(reward).__name__}")
    check_number(beta, "beta", low=0.0)
    check_choice(loss_type, "loss_type", LOSS_TYPES)
    check_number(temperature, "temperature", low=0.0, low_open=True)
    policy, params = _policy(model, trainable, seed, lr, clip)
    opt, hist, reference = torch.optim.Adam(params, lr=lr), GRPOHistory(), _frozen(model)
    for step in tqdm(range(steps), desc="GRPO", disable=not progress, mininterval=0.5):
        batch = examples[step * prompts:(step + 1) * prompts]
        with torch.no_grad():
            g = sample_groups(policy, template, [e.chat(with_answer=False) for e in batch], group,
                              temperature=temperature, seed=seed * 100003 + step, max_new_tokens=max_new_tokens)
            ref_lp = completion_log_probs(reference, g.prompt, g.completion, prompt_mask=g.prompt_mask,
                                          temperature=temperature)
        owners = [batch[i // group] for i in range(len(g.replies))]
        r = torch.tensor([float(reward(x, e)) for x, e in zip(g.replies, owners)], device=ref_lp.device)
        r = r.view(prompts, group)  # (N, G)
        lp = completion_log_probs(policy, g.prompt, g.completion, prompt_mask=g.prompt_mask, temperature=temperature)
        out = grpo_loss(lp, None, group_advantages(r).flatten(), g.completion_mask, loss_type=loss_type, beta=beta,
                        ref_log_probs=ref_lp if beta > 0 else None, max_length=max_new_tokens)
        opt.zero_grad()
        out.loss.backward()
        hist.grad_norm.append(float(torch.nn.utils.clip_grad_norm_(params, clip)))
        opt.step()
        mask = g.completion_mask.float()
        hist.reward.append(float(r.mean()))
        hist.exact.append(float(np.mean([exact_answer(x, e) for x, e in zip(g.replies, owners)])))
        hist.kl.append(float((k3_kl(lp.detach(), ref_lp) * mask).sum() / mask.sum()))
        hist.zero_var.append(float((r.std(dim=1) == 0).float().mean()))
        hist.length.append(float(mask.sum(1).mean()))
    return _restore(policy, model), hist


@dataclass
class DPOHistory:
    """Per optimiser step: ``loss``, ``accuracy`` (share of the batch's pairs with a positive margin), ``margin``
    (mean margin), ``chosen`` (mean log pi of the chosen replies, to watch likelihood displacement)."""

    loss: list = field(default_factory=list)
    accuracy: list = field(default_factory=list)
    margin: list = field(default_factory=list)
    chosen: list = field(default_factory=list)


def _rendered_pairs(template, pairs) -> tuple[list, list]:
    if isinstance(pairs, (str, tuple)) or not isinstance(pairs, Sequence) or not pairs:
        raise TypeError(f"pairs must be a non-empty list of (example, chosen, rejected), got {type(pairs).__name__}")
    chosen, rejected = [], []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 3 or not isinstance(pair[0], Example):
            raise TypeError(f"pairs[{i}] must be (Example, chosen reply, rejected reply), got {pair!r:.80}")
        c, r = preference_pair(template, pair[0].chat(with_answer=False), pair[1], pair[2])
        chosen.append(c)
        rejected.append(r)
    return chosen, rejected


def dpo_train(model, template: ChatTemplate, pairs: Sequence, *, beta: float, lr: float, epochs: int = 1,
              batch_size: int = 16, seed: int = 0, trainable="all", clip: float = 1.0,
              progress: bool = False) -> tuple[torch.nn.Module, DPOHistory]:
    """DPO on a deep copy of ``model`` (the reference, unchanged): ``pairs`` are (example, chosen, rejected)
    triples (:func:`sampled_pairs`), each epoch shuffled by a generator seeded with ``seed``, in batches of
    ``batch_size`` (the last may be smaller); Adam at ``lr``, gradients clipped to norm ``clip``.
    Returns (the policy in eval mode, its :class:`DPOHistory`)."""
    _check_model(model, template)
    check_positive_int(epochs, "epochs")
    check_positive_int(batch_size, "batch_size")
    check_number(beta, "beta", low=0.0, low_open=True)
    chosen, rejected = _rendered_pairs(template, pairs)
    policy, params = _policy(model, trainable, seed, lr, clip)
    opt, hist, reference = torch.optim.Adam(params, lr=lr), DPOHistory(), _frozen(model)
    order_gen = torch.Generator().manual_seed(seed)
    starts = [(epoch, i) for epoch in range(epochs) for i in range(0, len(chosen), batch_size)]
    order = []
    for epoch, i in tqdm(starts, desc="DPO", disable=not progress, mininterval=0.5):
        if i == 0:
            order = torch.randperm(len(chosen), generator=order_gen).tolist()
        idx = order[i:i + batch_size]
        out = dpo_batch_loss(policy, reference, [chosen[j] for j in idx], [rejected[j] for j in idx], beta=beta)
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        hist.loss.append(float(out.loss.detach()))
        hist.accuracy.append(out.accuracy)
        hist.margin.append(float(out.margins.mean()))
        hist.chosen.append(float(out.chosen_log_probs.mean()))
    return _restore(policy, model), hist


def _sampled(model, template, examples, n, seed, temperature, max_new_tokens, check) -> list[list[str]]:
    _check_model(model, template)
    examples = _check_examples(examples)
    check_positive_int(n, "n")
    check_positive_int(max_new_tokens, "max_new_tokens")
    check_number(seed, "seed", integer=True)
    if not callable(check):
        raise TypeError(f"check must be a function (reply, example) -> float, got {type(check).__name__}")
    # one batch of N * n rows from one seeded generator, as the loops sample (chapter 15's sampled_replies draws
    # the same replies up to 256 rows, then its batches of 256 take other draws from the generator)
    with torch.no_grad():
        g = sample_groups(model, template, [e.chat(with_answer=False) for e in examples], n, seed=seed,
                          temperature=temperature, max_new_tokens=max_new_tokens)
    return [g.replies[i * n:(i + 1) * n] for i in range(len(examples))]


def sampled_correct(model, template: ChatTemplate, examples: Sequence[Example], n: int, *, seed: int,
                    temperature: float = 1.0, max_new_tokens: int = 8, check: Callable = exact_answer
                    ) -> tuple[np.ndarray, list[list[str]]]:
    """(counts, replies): ``counts`` (N,) int, how many of each question's ``n`` samples ``check(reply, example)``
    scores above 0 (default: the exact answer), and the N lists of n replies. The same ``seed`` before and after
    training gives common random numbers; per-question counts are what a *paired* pass@k test needs
    (:func:`pass_at_k_counts`, then :func:`minitfm.evaluation.paired_bootstrap`)."""
    rows = _sampled(model, template, examples, n, seed, temperature, max_new_tokens, check)
    return np.array([sum(check(x, e) > 0 for x in row) for row, e in zip(rows, examples)], dtype=int), rows


def sampled_pairs(model, template: ChatTemplate, examples: Sequence[Example], n: int, *, seed: int,
                  temperature: float = 1.0, max_new_tokens: int = 8, check: Callable = exact_answer) -> list[tuple]:
    """[(example, chosen, rejected)]: for each question whose ``n`` samples hold both a reply that ``check``
    accepts and one it refuses, the first accepted reply (in sorted order) against the first refused one.
    Questions whose samples are all right or all wrong give no pair (they say nothing about a preference)."""
    out = []
    for e, row in zip(examples, _sampled(model, template, examples, n, seed, temperature, max_new_tokens, check)):
        right = sorted({x for x in row if check(x, e) > 0})
        wrong = sorted({x for x in row if not check(x, e) > 0})
        if right and wrong:
            out.append((e, right[0], wrong[0]))
    return out


def policy_kl(policy, reference, template: ChatTemplate, examples: Sequence[Example], *, n: int = 4, seed: int = 0,
              temperature: float = 1.0, max_new_tokens: int = 8) -> float:
    """KL(pi || pi_ref) per reply, in nats: the mean over the policy's ``n`` sampled replies to each question of
    sum over the reply's tokens of (log pi - log pi_ref), the unbiased k1 estimator (Monte Carlo, so one estimate
    can be below 0). Both distributions are taken at ``temperature`` and replies stop at ``max_new_tokens``."""
    _check_model(policy, template)
    _check_model(reference, template)
    examples = _check_examples(examples)
    with torch.no_grad():
        g = sample_groups(policy, template, [e.chat(with_answer=False) for e in examples], n, seed=seed,
                          temperature=temperature, max_new_tokens=max_new_tokens)
        lp = completion_log_probs(policy, g.prompt, g.completion, prompt_mask=g.prompt_mask, temperature=temperature)
        ref = completion_log_probs(reference, g.prompt, g.completion, prompt_mask=g.prompt_mask,
                                   temperature=temperature)
    mask = g.completion_mask.to(lp.dtype)
    return float(((lp - ref) * mask).sum(1).mean())


def pass_at_k_counts(counts, n: int, k: int) -> np.ndarray:
    """(N,) per-question pass@k from counts of correct samples out of ``n`` each (Chen et al. 2021's unbiased
    ``1 - C(n - c, k) / C(n, k)``, :func:`minitfm.evaluation.pass_at_k`); the mean is the benchmark's pass@k."""
    values = np.asarray(counts)
    if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"counts must be a non-empty 1-D list of ints (one per question), got {values.dtype} "
                        f"{values.shape}")
    return np.array([pass_at_k(n, int(c), k) for c in values])
