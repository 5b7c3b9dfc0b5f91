"""Chapter 16's checkers (the DPO loss from per-token log-probabilities, GRPO's group advantages) accept a correct
function and name each typical mistake. ``CASES`` joins ``tests/exercises/test_exercises.py``'s shared table."""
import math

import torch
import torch.nn.functional as F

from minitfm import exercises as ex
from minitfm.preferences.dpo import dpo_loss, response_log_probs
from minitfm.preferences.grpo import group_advantages


def dpo_from_scratch(policy, ref, mask, beta, *, mean=False, where="inside", no_mask=False, swap=False):
    keep = torch.ones_like(policy) if no_mask else mask.float()
    div = keep.sum(1) if mean else 1.0
    lp, lr = (policy * keep).sum(1) / div, (ref * keep).sum(1) / div
    n = lp.shape[0] // 2
    c, r = (slice(n, None), slice(0, n)) if swap else (slice(0, n), slice(n, None))
    delta = (lp[c] - lp[r]) - (lr[c] - lr[r])
    logits = {"inside": beta * delta, "divided": delta / beta}[where]
    return -F.logsigmoid(logits).mean()


def advantages_from_scratch(r, *, unbiased=True, divide=True, eps=1e-4):
    centred = r - r.mean(1, keepdim=True)
    return centred / (r.std(1, keepdim=True, unbiased=unbiased) + eps) if divide else centred


CASES = {
    "check_dpo_loss": (dpo_from_scratch, [
        (lambda p, r, m, b: dpo_from_scratch(p, r, m, b, mean=True), "averaged each reply's token log-prob"),
        (lambda p, r, m, b: dpo_from_scratch(p, r, m, b, where="divided"), "divided the log-ratio difference by beta"),
        (lambda p, r, m, b: dpo_from_scratch(p, r, m, b, no_mask=True), "summed the padding too"),
        (lambda p, r, m, b: dpo_from_scratch(p, r, m, b, swap=True), "swapped chosen and rejected"),
        (lambda p, r, m, b: dpo_from_scratch(p, r, m, b) * (p.shape[0] // 2), "summed the loss over the pairs"),
    ]),
    "check_group_advantages": (advantages_from_scratch, [
        (lambda r: advantages_from_scratch(r, unbiased=False), "biased standard deviation"),
        (lambda r: advantages_from_scratch(r, divide=False), "did not normalise by the group's standard deviation"),
        (lambda r: (r - r.mean(1, keepdim=True)) / (r.std() + 1e-4), "standard deviation of the whole batch"),
        (lambda r: advantages_from_scratch(r, eps=0.0), "check the constant added to the standard deviation"),
    ]),
}


def _delta(p, r, m):
    lp, lr = (p * m).sum(1), (r * m).sum(1)
    n = lp.shape[0] // 2
    return (lp[:n] - lp[n:]) - (lr[:n] - lr[n:])


def test_the_librarys_dpo_loss_passes_the_dpo_check():
    def library(policy, ref, mask, beta):
        # per-token log-probabilities as logits over two "tokens" (log_softmax gives them back, the other token
        # getting the rest), target 0 on the reply and -100 on the padding: the library's masked sum
        targets = torch.where(mask, 0, -100)
        lp, lr = (response_log_probs(torch.stack([x, torch.log1p(-x.exp().clamp(max=1 - 1e-6))], -1), targets)
                  for x in (policy, ref))
        n = lp.shape[0] // 2
        return dpo_loss(lp[:n], lp[n:], lr[:n], lr[n:], beta=beta).loss
    assert ex.check_dpo_loss(library, verbose=False).passed


def test_the_dpo_check_names_the_per_token_mean_and_beta_outside():
    mean = ex.check_dpo_loss(lambda p, r, m, b: dpo_from_scratch(p, r, m, b, mean=True), verbose=False)
    assert not mean.passed and "is their sum" in mean.message and "case 2 of 4" in mean.message
    outside = ex.check_dpo_loss(lambda p, r, m, b: -b * F.logsigmoid(_delta(p, r, m)).mean(),
                                verbose=False)
    assert not outside.passed and "outside the log-sigmoid" in outside.message
    summed = ex.check_dpo_loss(lambda p, r, m, b: dpo_from_scratch(p, r, m, b) * (p.shape[0] // 2), verbose=False)
    assert not summed.passed and "summed the loss over the pairs" in summed.message


def test_a_one_element_loss_is_accepted_and_step_zero_is_ln_2():
    assert ex.check_dpo_loss(lambda p, r, m, b: dpo_from_scratch(p, r, m, b).reshape(1), verbose=False).passed
    policy = -torch.rand(4, 3)
    assert abs(float(dpo_from_scratch(policy, policy, torch.ones(4, 3, dtype=torch.bool), 0.1)) - math.log(2)) < 1e-7


def test_the_librarys_group_advantages_pass_and_the_batch_mean_is_named():
    assert ex.check_group_advantages(group_advantages, verbose=False).passed
    batch_mean = ex.check_group_advantages(lambda r: (r - r.mean()) / (r.std(1, keepdim=True) + 1e-4), verbose=False)
    assert not batch_mean.passed and "mean of the whole batch" in batch_mean.message
    columns = ex.check_group_advantages(lambda r: (r - r.mean(0)) / (r.std(0) + 1e-4), verbose=False)
    assert not columns.passed and "down the columns" in columns.message


def test_another_constant_on_the_std_is_told_to_check_the_constant_not_that_it_was_left_out():
    # CS336's default adds 1e-6: the answer differs by about 1e-4 relative, and leaving nothing out is not the fault
    other = ex.check_group_advantages(lambda r: advantages_from_scratch(r, eps=1e-6), verbose=False)
    assert not other.passed and "check the constant added to the standard deviation" in other.message
    assert "you left out" not in other.message
