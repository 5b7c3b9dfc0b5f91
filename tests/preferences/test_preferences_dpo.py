"""DPO without TRL: ln 2 at step 0, sums over the reply's tokens only, beta inside the rewards, and clear errors."""
from __future__ import annotations

import copy
import math

import pytest
import torch

import minitfm as m
from minitfm.evaluation.perplexity import next_token_log_probs
from minitfm.finetuning import ChatTemplate, RenderedChat
from minitfm.lm.base_lm import base_lm_config
from minitfm.lm.prose import byte_tokenizer
from minitfm.preferences.dpo import dpo_batch_loss, dpo_loss, preference_pair, response_log_probs, sequence_log_probs

TEMPLATE = ChatTemplate(byte_tokenizer(), bos_id=256)
PAIRS = [("What is 1 + 2?", "3", "4"), ("Sort these digits: 3 1 2", "1 2 3", "3 2 1"),
         ("Expand KV.", "key-value", "kv")]


def model(seed: int = 0):
    torch.manual_seed(seed)
    return m.DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=64)).eval()


def pairs():
    rendered = [preference_pair(TEMPLATE, [{"role": "user", "content": q}], good, bad) for q, good, bad in PAIRS]
    return [c for c, _ in rendered], [r for _, r in rendered]


def test_the_loss_at_step_0_is_ln_2_with_zero_margins():
    """Policy == reference (a copy): every log-ratio is 0 and -log sigma(0) = ln 2, whatever the data and beta."""
    policy = model()
    chosen, rejected = pairs()
    for beta in (0.1, 1.0):
        out = dpo_batch_loss(policy, copy.deepcopy(policy), chosen, rejected, beta=beta)
        assert float(out.loss) == pytest.approx(math.log(2), abs=1e-7)
        assert torch.equal(out.margins, torch.zeros(3)) and out.accuracy == 0.0  # a tie is not a win
        assert torch.equal(out.chosen_rewards, torch.zeros(3))
    with pytest.raises(ValueError, match="same object"):
        dpo_batch_loss(policy, policy, chosen, rejected)


def test_the_log_probability_is_the_sum_over_the_reply_tokens_only():
    """Equal to chapter 14's per-token log-probs summed over the reply and its end token: not a mean, no prompt."""
    policy = model()
    chosen, _ = pairs()
    ours = sequence_log_probs(policy, chosen)
    for chat, value in zip(chosen, ours):
        per_token = next_token_log_probs(policy, chat.ids)  # (T-1,), position t predicts token t + 1
        reply = chat.labels[1:] != -100
        assert int(reply.sum()) == len(TEMPLATE.tokenizer.encode(TEMPLATE.reply(chat.ids[-int(reply.sum()):]))) + 1
        assert float(value) == pytest.approx(float(per_token[reply].sum()), abs=1e-5)
        assert float(value) != pytest.approx(float(per_token[reply].mean()), abs=1e-3)
    same_reply_longer_prompt = TEMPLATE.render([{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": PAIRS[0][0]},
                                                {"role": "assistant", "content": "3"}])
    assert int(same_reply_longer_prompt.loss_mask.sum()) == int(chosen[0].loss_mask.sum())  # the prompt never counts


def test_the_loss_is_minus_log_sigmoid_of_beta_times_the_log_ratio_difference():
    lp = {k: torch.tensor(v, dtype=torch.float64) for k, v in
          dict(c=[-3.0, -5.0], r=[-4.0, -2.0], rc=[-3.5, -4.0], rr=[-3.0, -3.0]).items()}
    out = dpo_loss(lp["c"], lp["r"], lp["rc"], lp["rr"], beta=0.5)
    delta = (lp["c"] - lp["rc"]) - (lp["r"] - lp["rr"])  # [1.5, -2.0]
    assert float(out.loss) == pytest.approx(float(-torch.log(torch.sigmoid(0.5 * delta)).mean()), abs=1e-12)
    assert out.chosen_rewards.tolist() == pytest.approx([0.25, -0.5])  # beta * log-ratio, with beta
    assert out.margins.tolist() == pytest.approx([0.75, -1.0]) and out.accuracy == 0.5


def test_a_larger_beta_stays_closer_to_the_reference():
    """The loss depends on beta * (log-ratio difference) only: a loss level that beta = 0.1 reaches with a drift of
    d nats from the reference, beta = 1 reaches with d / 10. Any given fit of the preferences costs a larger beta
    less drift, so its optimum stays closer to the reference (beta is the price of the KL, not its reward)."""
    ref = torch.tensor([-4.0]), torch.tensor([-4.0])
    drifted = dpo_loss(torch.tensor([-2.0]), torch.tensor([-6.0]), *ref, beta=0.1)  # 4 nats of preference
    closer = dpo_loss(torch.tensor([-3.8]), torch.tensor([-4.2]), *ref, beta=1.0)  # 0.4 nats
    assert float(drifted.loss) == pytest.approx(float(closer.loss), abs=1e-6)
    assert float(drifted.margins) == pytest.approx(float(closer.margins), abs=1e-6)
    same_drift = dpo_loss(torch.tensor([-2.0]), torch.tensor([-6.0]), *ref, beta=1.0)
    assert float(same_drift.loss) < float(drifted.loss)  # the same drift fits the preference better at beta = 1


def test_a_gradient_step_raises_the_margin():
    policy, chosen, rejected = model(), *pairs()
    reference = copy.deepcopy(policy)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    for _ in range(3):
        out = dpo_batch_loss(policy, reference, chosen, rejected, beta=0.1)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    after = dpo_batch_loss(policy, reference, chosen, rejected, beta=0.1)
    assert float(after.margins.mean()) > 0 and float(after.loss) < math.log(2)
    assert all(p.grad is None for p in reference.parameters())


def test_bad_input_is_refused_with_a_clear_error():
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="beta must be > 0"):
        dpo_loss(x, x, x, x, beta=0.0)
    with pytest.raises(TypeError, match="beta must be a number"):
        dpo_loss(x, x, x, x, beta="0.1")
    with pytest.raises(ValueError, match="same B"):
        dpo_loss(x, torch.zeros(3), x, x)
    with pytest.raises(ValueError, match="must have 1 dimensions"):
        dpo_loss(x[None], x[None], x[None], x[None])
    with pytest.raises(TypeError, match="floating-point"):
        dpo_loss(torch.zeros(2, dtype=torch.long), x, x, x)
    chosen, rejected = pairs()
    with pytest.raises(ValueError, match="pair up"):
        dpo_batch_loss(model(), model(1), chosen, rejected[:2])
    with pytest.raises(ValueError, match="prefers nothing"):
        preference_pair(TEMPLATE, [{"role": "user", "content": "Hi"}], "3", "3")
    with pytest.raises(ValueError, match="ending with the user's"):
        preference_pair(TEMPLATE, [{"role": "assistant", "content": "Hi"}], "3", "4")
    with pytest.raises(ValueError, match="no response token"):
        response_log_probs(torch.zeros(1, 3, 5), torch.full((1, 3), -100))
    no_reply = RenderedChat(torch.tensor([1, 2, 3]), torch.full((3,), -100), [])
    with pytest.raises(ValueError, match="no assistant reply"):
        sequence_log_probs(model(), [no_reply])
