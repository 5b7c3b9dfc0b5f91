"""Checkers for chapter 16: the DPO loss from per-token log-probabilities, and GRPO's group advantages.

Glossary: B preference pairs (2B rows, the chosen replies first, as TRL batches them), T the padded reply length,
N prompts, G replies per prompt (a group).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.preferences.dpo import dpo_loss
from minitfm.preferences.grpo import STD_EPS, group_advantages


def _dpo(policy, ref, mask, beta, *, mean=False, use_mask=True, where="inside", swap=False, no_ref=False,
         reduce="mean"):
    """The DPO loss of [chosen; rejected] rows, or one of its typical mistakes (the keywords)."""
    keep = mask.to(policy.dtype) if use_mask else torch.ones_like(policy)
    count = keep.sum(dim=1) if mean else 1.0
    seq, seq_ref = (policy * keep).sum(dim=1) / count, (ref * keep).sum(dim=1) / count  # (2B,)
    n = seq.shape[0] // 2
    chosen, rejected = (seq[n:], seq[:n]) if swap else (seq[:n], seq[n:])
    ref_c, ref_r = (seq_ref[n:], seq_ref[:n]) if swap else (seq_ref[:n], seq_ref[n:])
    delta = (chosen - rejected) - (0.0 if no_ref else ref_c - ref_r)  # (B,)
    if where == "inside":
        losses = -F.logsigmoid(beta * delta)
    elif where == "divided":
        losses = -F.logsigmoid(delta / beta)
    else:  # beta outside the log-sigmoid
        losses = -beta * F.logsigmoid(delta)
    return losses.mean() if reduce == "mean" else losses.sum()


def check_dpo_loss(dpo_loss_fn, verbose: bool = True) -> CheckResult:
    """Check ``dpo_loss_fn(policy_logps, ref_logps, mask, beta) -> loss``.

    ``policy_logps`` and ``ref_logps`` (2B, T): each reply token's log-probability under the policy and under the
    reference, the B chosen replies in the first B rows and their rejected replies in the last B (row i and row
    B + i answer the same prompt); ``mask`` (2B, T) bool, True on the reply's tokens (its end token included),
    False on the padding; ``beta`` > 0. Return the loss, a scalar tensor: the mean over the B pairs of
    -log sigma(beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))]), where log pi(y) is
    the *sum* of the reply's token log-probabilities.
    """
    mistakes = [
        Mistake("you averaged each reply's token log-probabilities; log pi(y|x) is their sum (the chain rule), "
                "which is what DPO's derivation uses and what TRL and the paper's code compute",
                lambda i: _dpo(**i, mean=True)),
        Mistake("you summed the padding too: keep only the positions where mask is True",
                lambda i: _dpo(**i, use_mask=False)),
        Mistake("you divided the log-ratio difference by beta; beta multiplies it, so a larger beta makes a small "
                "step from the reference cost more and keeps the policy closer to it",
                lambda i: _dpo(**i, where="divided")),
        Mistake("you put beta outside the log-sigmoid; it multiplies the log-ratio difference inside it "
                "(-log sigma(beta * delta))", lambda i: _dpo(**i, where="outside")),
        Mistake("you swapped chosen and rejected: the first B rows are the chosen replies",
                lambda i: _dpo(**i, swap=True)),
        Mistake("you left out the reference: DPO's logits are differences of log-ratios log pi - log pi_ref",
                lambda i: _dpo(**i, no_ref=True)),
        Mistake("you summed the loss over the pairs; take the mean, so that the loss does not grow with the batch",
                lambda i: _dpo(**i, reduce="sum")),
    ]
    specs = [("step 0: the policy is the reference (the loss is ln 2 whatever the replies)", 2, 5, 0.1, True, 1),
             ("two pairs, replies of different lengths, beta = 0.1 (TRL's default)", 2, 6, 0.1, False, 2),
             ("one pair, beta = 0.5", 1, 4, 0.5, False, 3),
             ("three pairs, a large beta = 2", 3, 7, 2.0, False, 4)]
    cases = []
    for what, pairs, length, beta, same, seed in specs:
        def make(pairs=pairs, length=length, beta=beta, same=same, seed=seed):
            policy = -randn(2 * pairs, length, seed=seed).abs()  # log-probabilities are <= 0
            ref = policy.clone() if same else -randn(2 * pairs, length, seed=seed + 10).abs()
            lengths = torch.tensor([(seed * 3 + 2 * row) % length + 1 for row in range(2 * pairs)])
            mask = torch.arange(length)[None, :] < lengths[:, None]  # (2B, T), right padding
            return {"policy": policy, "ref": ref, "mask": mask, "beta": beta}
        i = make()
        sums = [(x * i["mask"]).sum(dim=1) for x in (i["policy"], i["ref"])]
        expected = dpo_loss(sums[0][:pairs], sums[0][pairs:], sums[1][:pairs], sums[1][pairs:], beta=beta).loss
        if same:
            assert abs(float(expected) - math.log(2)) < 1e-6  # the library's loss at step 0
        cases.append(Case(what, make, expected, mistakes, normalize=_scalar))
    return run_cases("check_dpo_loss", dpo_loss_fn, cases, verbose=verbose)


def _scalar(got):
    """A one-element tensor of any shape counts as the scalar loss (a (1,) answer is not a mistake)."""
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        return got.reshape(()).to(torch.float32)
    return got


def _advantages(rewards, *, unbiased=True, divide=True, over="group", eps=STD_EPS, centre="group"):
    mean = rewards.mean(dim=1, keepdim=True) if centre == "group" else rewards.mean()
    centred = rewards - mean
    if not divide:
        return centred
    if over == "group":
        std = rewards.std(dim=1, keepdim=True, unbiased=unbiased)
    elif over == "batch":
        std = rewards.std(unbiased=unbiased)
    else:  # down the columns: over prompts instead of over each prompt's replies
        return (rewards - rewards.mean(dim=0, keepdim=True)) / (rewards.std(dim=0, keepdim=True) + eps)
    return centred / (std + eps)


def check_group_advantages(advantages_fn, verbose: bool = True) -> CheckResult:
    """Check ``advantages_fn(rewards) -> advantages``.

    ``rewards`` (N, G) float: the rewards of G sampled replies to each of N prompts (row i = prompt i's group).
    Return (N, G): each reward minus its group's mean, divided by the group's standard deviation (unbiased, n - 1,
    as TRL and Stanford CS336's assignment compute it) plus 1e-4, so that a group whose rewards are all equal gets
    advantages 0.
    """
    mistakes = [
        Mistake("you divided by the biased standard deviation (dividing by G); GRPO as TRL and CS336 "
                "compute it uses the unbiased one (G - 1: torch.std's default, numpy's ddof=1)",
                lambda i: _advantages(i["rewards"], unbiased=False)),
        Mistake("you did not normalise by the group's standard deviation: r - mean is Dr. GRPO's choice "
                "(scale='none'); GRPO divides by std + 1e-4", lambda i: _advantages(i["rewards"], divide=False)),
        Mistake("you divided by the standard deviation of the whole batch; GRPO divides by each group's own",
                lambda i: _advantages(i["rewards"], over="batch")),
        Mistake("you subtracted the mean of the whole batch; the baseline is each group's own mean (the other "
                "replies to the same prompt)", lambda i: _advantages(i["rewards"], centre="batch")),
        Mistake("you normalised down the columns (over prompts); a group is a row: the G replies to one prompt",
                lambda i: _advantages(i["rewards"], over="columns")),
        Mistake("your advantages differ from the expected ones by about 1e-4 relative: check the constant added to "
                "the standard deviation (this exercise adds 1e-4, as TRL; CS336's default is 1e-6). With none at "
                "all, a group whose rewards are all equal divides 0 by 0 and gets NaN instead of advantages 0 (it "
                "teaches nothing)",
                lambda i: _advantages(i["rewards"], eps=0.0)),
    ]
    specs = [("0/1 rewards, groups of 4: [1, 0, 1, 0], [1, 1, 1, 0], [0, 1, 0, 0]",
              lambda: torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])),
             ("a group whose rewards are all equal: [1, 1, 1, 1] beside [1, 0, 0, 0]",
              lambda: torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])),
             ("graded rewards, 3 prompts x 8 replies", lambda: randn(3, 8, seed=5).sigmoid()),
             ("groups of 2 (the smallest group)", lambda: torch.tensor([[1.0, 0.0], [0.25, 0.75], [0.0, 0.0]]))]
    cases = [Case(what, lambda make=make: {"rewards": make()}, group_advantages(make()), mistakes, atol=1e-4)
             for what, make in specs]
    return run_cases("check_group_advantages", advantages_fn, cases, verbose=verbose)
