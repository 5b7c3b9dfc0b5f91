"""Proposed additions to ``minitfm.preferences`` for chapter 16 (draft; NOT part of the library yet).

Why each is needed (found while probing, see ``probe.py``):

- ``grpo_train``: the chapter runs the GRPO loop four times (success, sloppy verifier, sloppy + KL, control);
  a notebook should not carry a 40-line training loop four times, and the loop has choices a test should pin
  (on-policy, which parameters train, grad clipping, the per-step curves). ``trainable`` names the parameters
  that train: the probe found that at this budget (seconds) full-parameter GRPO on ``add`` hurts or does
  nothing at every learning rate tried, while GRPO on the final RMSNorm gain (128 numbers) raises pass@1 in
  every seed; the chapter needs to say which parameters moved.
- ``sampled_correct``: ``assistant_lm.pass_at`` returns only means; a *paired* test of pass@1 before and after
  needs each question's count of correct samples (c of n), and ``pass_at`` always generates
  ``MAX_NEW_TOKENS = 48`` bytes (count's sentence) where ``add`` needs 8, which costs time.
- ``policy_kl``: KL(pi || pi_ref) per reply on the policy's own samples (k1, unbiased), the drift measure for
  both DPO and GRPO.
- ``sampled_pairs``: DPO pairs from the model's own samples, a verified answer against a wrong one.
Each needs tests (seeded reproducibility, shapes, refusal of bad input) before it moves into ``minitfm``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from minitfm.preferences import grpo as G, rewards as R

TRAINABLE = {"all": lambda name: True,
             "final_norm": lambda name: name.startswith("final_norm"),
             "norms": lambda name: "norm" in name}


@dataclass
class GRPOHistory:
    """Per step: mean reward, mean exact reward, mean k3 KL per token, share of zero-variance groups, mean
    completion length (tokens)."""
    reward: list = field(default_factory=list)
    exact: list = field(default_factory=list)
    kl: list = field(default_factory=list)
    zero_var: list = field(default_factory=list)
    length: list = field(default_factory=list)


def grpo_train(model, template, examples, reward, *, steps, prompts=8, group=8, lr=0.1, beta=0.0,
               loss_type="dapo", temperature=1.0, max_new_tokens=8, trainable="all", seed=0, clip=1.0):
    """On-policy GRPO (one gradient step per sampled batch, so the ratio is 1) on a *copy* of ``model``.

    ``examples``: at least ``steps * prompts`` training examples, used in order. ``reward(reply, example)``.
    ``trainable``: "all", "final_norm" or "norms". Adam, gradients clipped to ``clip``. Returns
    (policy in eval mode, GRPOHistory). The reference is ``model`` itself (never trained here)."""
    if trainable not in TRAINABLE:
        raise ValueError(f"trainable must be one of {sorted(TRAINABLE)}, got {trainable!r}")
    if len(examples) < steps * prompts:
        raise ValueError(f"need steps * prompts = {steps * prompts} examples, got {len(examples)}")
    policy = copy.deepcopy(model)
    keep = TRAINABLE[trainable]
    params = []
    for name, p in policy.named_parameters():
        p.requires_grad_(keep(name))
        if keep(name):
            params.append(p)
    opt = torch.optim.Adam(params, lr=lr)
    hist = GRPOHistory()
    for step in range(steps):
        batch = examples[step * prompts:(step + 1) * prompts]
        with torch.no_grad():
            g = G.sample_groups(policy, template, [e.chat(with_answer=False) for e in batch], group,
                                temperature=temperature, seed=seed * 100003 + step, max_new_tokens=max_new_tokens)
            ref_lp = G.completion_log_probs(model, g.prompt, g.completion, prompt_mask=g.prompt_mask,
                                            temperature=temperature)
        r = torch.tensor([reward(x, batch[i // group]) for i, x in enumerate(g.replies)]).view(prompts, group)
        exact = [R.exact_answer(x, batch[i // group]) for i, x in enumerate(g.replies)]
        lp = G.completion_log_probs(policy, g.prompt, g.completion, prompt_mask=g.prompt_mask,
                                    temperature=temperature)
        out = G.grpo_loss(lp, None, G.group_advantages(r).flatten(), g.completion_mask, loss_type=loss_type,
                          beta=beta, ref_log_probs=ref_lp, max_length=max_new_tokens)
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        m = g.completion_mask.float()
        hist.reward.append(float(r.mean()))
        hist.exact.append(float(np.mean(exact)))
        hist.kl.append(float((G.k3_kl(lp.detach(), ref_lp) * m).sum() / m.sum()))
        hist.zero_var.append(float((r.std(dim=1) == 0).float().mean()))
        hist.length.append(float(m.sum(1).mean()))
    for p in policy.parameters():
        p.requires_grad_(True)
    return policy.eval(), hist


def sampled_replies_grid(model, template, examples, n, *, seed, temperature=1.0, max_new_tokens=8):
    """(N lists of n replies), sampled in one seeded batch with the KV cache."""
    with torch.no_grad():
        g = G.sample_groups(model, template, [e.chat(with_answer=False) for e in examples], n,
                            temperature=temperature, seed=seed, max_new_tokens=max_new_tokens)
    return [g.replies[i * n:(i + 1) * n] for i in range(len(examples))]


def sampled_correct(model, template, examples, n, *, seed, temperature=1.0, max_new_tokens=8, check=None):
    """(N,) int array: how many of each question's ``n`` samples are right (``check(reply, example)``, default
    the exact answer), plus the replies. Per-question counts are what a paired pass@1 test needs."""
    check = check or R.exact_answer
    rows = sampled_replies_grid(model, template, examples, n, seed=seed, temperature=temperature,
                                max_new_tokens=max_new_tokens)
    return np.array([sum(check(x, e) > 0 for x in row) for row, e in zip(rows, examples)]), rows


def policy_kl(policy, reference, template, examples, *, n=4, seed=0, max_new_tokens=8):
    """Mean over the policy's sampled replies of sum_t (log pi - log pi_ref): KL(pi || pi_ref) per reply, nats."""
    with torch.no_grad():
        g = G.sample_groups(policy, template, [e.chat(with_answer=False) for e in examples], n, seed=seed,
                            max_new_tokens=max_new_tokens)
        lp = G.completion_log_probs(policy, g.prompt, g.completion, prompt_mask=g.prompt_mask)
        ref = G.completion_log_probs(reference, g.prompt, g.completion, prompt_mask=g.prompt_mask)
    m = g.completion_mask.float()
    return float(((lp - ref) * m).sum(1).mean())


def sampled_pairs(model, template, examples, n, *, seed, max_new_tokens=8):
    """[(example, chosen, rejected)]: for each question whose ``n`` samples hold both a right and a wrong
    answer, the first right one (sorted) against the first wrong one. Questions without both give no pair."""
    out = []
    for e, row in zip(examples, sampled_replies_grid(model, template, examples, n, seed=seed,
                                                     max_new_tokens=max_new_tokens)):
        right = sorted({x for x in row if R.exact_answer(x, e)})
        wrong = sorted({x for x in row if not R.exact_answer(x, e)})
        if right and wrong:
            out.append((e, right[0], wrong[0]))
    return out
