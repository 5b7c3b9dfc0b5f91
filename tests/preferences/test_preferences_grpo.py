"""GRPO without TRL: the on-policy loss has the plain policy-gradient gradient (while its value is 0), group
advantages match CS336's fixture, k3 is the KL, the clip stops the right gradients, groups are sampled as chapter
15 samples, and bad input gets a clear error."""
from __future__ import annotations

import pytest
import torch

import minitfm as m
from minitfm.finetuning import ChatTemplate
from minitfm.finetuning.answering import sampled_replies
from minitfm.lm.base_lm import base_lm_config
from minitfm.lm.prose import byte_tokenizer
from minitfm.preferences.grpo import (LOSS_TYPES, completion_log_probs, group_advantages, grpo_loss, k3_kl,
                                      sample_groups)

TEMPLATE = ChatTemplate(byte_tokenizer(), bos_id=256)


def policy_inputs(seed=0, lengths=(5, 2, 4, 1, 3, 5)):
    """Leaf logits (B, C, V) and sampled tokens: log-probs with a graph, as a policy's would be."""
    generator = torch.Generator().manual_seed(seed)
    B, C, V = len(lengths), max(lengths), 7
    logits = torch.randn(B, C, V, generator=generator, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, V, (B, C), generator=generator)
    mask = torch.arange(C)[None, :] < torch.tensor(lengths)[:, None]
    return logits, tokens, mask


def log_probs_of(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_on_policy_unclipped_loss_has_the_policy_gradient(loss_type):
    """At pi_old = pi the ratio is 1: the gradient is that of -A * log pi per token, normalised as the loss type
    says (REINFORCE with the group baseline), though the loss's *value* is -mean(A) per the normalisation."""
    logits, tokens, mask = policy_inputs()
    rewards = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    advantages = group_advantages(rewards).flatten()
    out = grpo_loss(log_probs_of(logits, tokens), None, advantages, mask, loss_type=loss_type, max_length=8,
                    num_tokens=40)
    (grad,) = torch.autograd.grad(out.loss, logits)
    lp, w = log_probs_of(logits, tokens), mask.double()
    weighted = advantages[:, None] * lp * w  # (B, C)
    plain = {"grpo": (weighted.sum(1) / w.sum(1)).mean(), "bnpo": weighted.sum() / w.sum(),
             "dr_grpo": weighted.sum() / (len(w) * 8), "dapo": weighted.sum() / 40}[loss_type]
    (expected,) = torch.autograd.grad(-plain, logits)
    assert torch.allclose(grad, expected, atol=1e-12, rtol=0)
    assert grad.abs().max() > 1e-3 and out.clip_fraction == 0.0


def test_the_loss_is_0_while_the_gradient_is_not():
    """"Why is my GRPO loss 0?": on-policy, equal lengths, mean-0 advantages: the value is 0, the gradient is not."""
    logits, tokens, mask = policy_inputs(lengths=(4, 4, 4, 4))
    advantages = group_advantages(torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)).flatten()
    out = grpo_loss(log_probs_of(logits, tokens), None, advantages, mask, loss_type="bnpo")
    (grad,) = torch.autograd.grad(out.loss, logits)
    assert abs(float(out.loss)) < 1e-12 and float(grad.norm()) > 1e-2


def test_group_advantages_match_cs336_and_the_binary_cases():
    """CS336 assignment 5's fixture (unbiased std, eps 1e-6), and binary groups of 4 as TRL scales them."""
    rewards = torch.tensor([[0.2, 0.5, 0.0, 0.4], [0.9, 0.7, 0.2, 0.0]], dtype=torch.float64)
    cs336 = [-0.3382, 1.0147, -1.2402, 0.5637, 1.0706, 0.5948, -0.5948, -1.0706]
    assert group_advantages(rewards, eps=1e-6).flatten().tolist() == pytest.approx(cs336, abs=1e-4)
    binary = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    a = group_advantages(binary, eps=0.0)
    assert a[0].tolist() == pytest.approx([0.866, -0.866] * 2, abs=1e-3)  # the unbiased std is 0.577
    assert group_advantages(binary)[1].tolist() == pytest.approx([0.5, 0.5, 0.5, -1.5], abs=1e-3)
    assert torch.equal(group_advantages(binary)[2], torch.zeros(4))  # identical rewards: nothing to learn
    assert group_advantages(binary, scale="none")[1].tolist() == pytest.approx([0.25, 0.25, 0.25, -0.75])
    batch = group_advantages(binary, scale="batch", eps=0.0)
    by_hand = (binary - binary.mean(1, keepdim=True)) / binary.std()
    assert batch.flatten().tolist() == pytest.approx(by_hand.flatten().tolist())


def test_k3_averages_to_the_exact_kl_over_samples_of_the_policy():
    """sum_x p(x) k3(x) = sum_x q(x) - 1 + KL(p || q) = KL(p || q) exactly; every k3 >= 0."""
    p = torch.softmax(torch.tensor([1.0, 0.2, -0.5, 2.0], dtype=torch.float64), 0)
    q = torch.softmax(torch.tensor([0.3, 0.9, 0.0, 1.0], dtype=torch.float64), 0)
    k3 = k3_kl(p.log(), q.log())
    assert float((p * k3).sum()) == pytest.approx(float((p * (p / q).log()).sum()), abs=1e-12)
    assert (k3 >= 0).all() and float(k3_kl(p.log(), p.log()).abs().max()) == 0.0


def test_the_clip_stops_the_gradient_only_where_it_should():
    """A token already made likelier (ratio 1.5 > 1.2) with A > 0 gets no gradient; with A < 0 it still does
    (the clip is a pessimistic bound, never a licence)."""
    lp = torch.log(torch.tensor([[0.6], [0.6]], dtype=torch.float64)).requires_grad_(True)
    old = torch.log(torch.tensor([[0.4], [0.4]], dtype=torch.float64))
    out = grpo_loss(lp, old, torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(2, 1), loss_type="bnpo")
    (grad,) = torch.autograd.grad(out.loss, lp)
    assert float(grad[0, 0]) == 0.0 and float(grad[1, 0]) != 0.0 and out.clip_fraction == 0.5


def test_the_normalisations_differ_as_documented():
    logits, tokens, mask = policy_inputs()
    lp = log_probs_of(logits, tokens).detach()
    adv = torch.tensor([1.0, -0.5, 0.3, -1.0, 0.2, 0.4], dtype=torch.float64)
    old = lp - 0.1
    losses = {t: float(grpo_loss(lp, old, adv, mask, loss_type=t).loss) for t in LOSS_TYPES}
    assert losses["dapo"] == pytest.approx(losses["bnpo"])  # one batch per generation: the same normaliser
    assert losses["grpo"] != pytest.approx(losses["bnpo"], abs=1e-6)  # varied lengths weigh tokens differently
    total = float(grpo_loss(lp, old, adv, mask, loss_type="dapo", num_tokens=1).loss)
    assert losses["dr_grpo"] == pytest.approx(total / (6 * 5)) and losses["bnpo"] == pytest.approx(total / 20)
    kl = grpo_loss(lp, old, adv, mask, loss_type="bnpo", beta=0.5, ref_log_probs=lp + 0.3)
    assert kl.kl > 0 and float(kl.loss) > losses["bnpo"]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return m.DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=96)).eval()


def test_sample_groups_are_the_chat_samplers_replies_with_their_ids(tiny):
    chats = [[{"role": "user", "content": "What is 1 + 2?"}], [{"role": "user", "content": "Expand KV, please."}]]
    groups = sample_groups(tiny, TEMPLATE, chats, 3, temperature=1.0, seed=5, max_new_tokens=6)
    assert groups.completion.shape == (6, 6) and groups.prompt.shape[0] == 6 and groups.group_size == 3
    chat_way = sampled_replies(tiny, TEMPLATE, chats, 3, seed=5, max_new_tokens=6)  # chapter 15's sampler
    assert groups.replies == [r for rs in chat_way for r in rs]
    assert groups.replies == sample_groups(tiny, TEMPLATE, chats, 3, seed=5, max_new_tokens=6).replies  # seeded
    assert groups.replies != sample_groups(tiny, TEMPLATE, chats, 3, seed=6, max_new_tokens=6).replies
    assert torch.equal(groups.prompt[0][groups.prompt_mask[0]], TEMPLATE.prompt_ids(chats[0])[0])
    ends = groups.completion == TEMPLATE.end_id
    for row, mask, end in zip(groups.completion, groups.completion_mask, ends):  # True up to the first end token
        stop = int(end.nonzero()[0]) + 1 if end.any() else len(row)
        assert mask.tolist() == [True] * stop + [False] * (len(row) - stop)


def test_completion_log_probs_mask_the_left_padding(tiny):
    chats = [[{"role": "user", "content": "Hi"}], [{"role": "user", "content": "What is 10 + 20?"}]]
    groups = sample_groups(tiny, TEMPLATE, chats, 2, seed=1, max_new_tokens=4)
    with torch.no_grad():
        batched = completion_log_probs(tiny, groups.prompt, groups.completion, prompt_mask=groups.prompt_mask,
                                       temperature=0.8)
        for i in range(4):
            alone = completion_log_probs(tiny, groups.prompt[i:i + 1, groups.prompt_mask[i]],
                                         groups.completion[i:i + 1], temperature=0.8)
            assert torch.allclose(batched[i], alone[0], atol=1e-5)


def test_bad_input_is_refused_with_a_clear_error(tiny):
    lp, mask = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(torch.zeros(4, 1))
    with pytest.raises(ValueError, match="finite"):
        group_advantages(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="scale must be one of"):
        group_advantages(torch.zeros(1, 2), scale="std")
    with pytest.raises(ValueError, match="loss_type must be one of"):
        grpo_loss(lp, None, torch.zeros(2), mask, loss_type="ppo")
    with pytest.raises(ValueError, match="one per completion"):
        grpo_loss(lp, None, torch.zeros(3), mask)
    with pytest.raises(ValueError, match="needs ref_log_probs"):
        grpo_loss(lp, None, torch.zeros(2), mask, beta=0.1)
    with pytest.raises(ValueError, match="at least one 1"):
        grpo_loss(lp, None, torch.zeros(2), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="old_log_probs must have"):
        grpo_loss(lp, torch.zeros(2, 4), torch.zeros(2), mask)
    with pytest.raises(ValueError, match="max_length"):
        grpo_loss(lp, None, torch.zeros(2), mask, loss_type="dr_grpo", max_length=2)
    with pytest.raises(TypeError, match="template must be a ChatTemplate"):
        sample_groups(tiny, None, [[{"role": "user", "content": "Hi"}]], 2)
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        sample_groups(tiny, TEMPLATE, [[{"role": "user", "content": "Hi"}]], 0)
