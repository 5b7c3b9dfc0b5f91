"""Writes drafts/ch16/16_preferences.ipynb (draft of chapter 16, English only) from the cells below.

Run: python drafts/ch16/build_notebook.py, then execute it with
  cd drafts/ch16 && nice -n 10 env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE jupyter nbconvert --to notebook \
      --execute --inplace 16_preferences.ipynb
Cell ids are fixed strings so that they stay stable (the locale files key on them later).
"""
from pathlib import Path

import nbformat

HERE = Path(__file__).parent
cells = []


def md(cid, text):
    cells.append(nbformat.v4.new_markdown_cell(text.strip("\n"), id=cid))


def code(cid, text):
    cells.append(nbformat.v4.new_code_cell(text.strip("\n"), id=cid))


md("c16-title", r"""
# 16. Preferences and rewards: DPO and GRPO

[Chapter 15](15_finetuning.ipynb) turned a base model into an assistant by showing it answers. This chapter takes
one more step, the one the leading courses take after instruction tuning: the model learns from **judgements of
its own replies** instead of from written answers. Two methods, both in `minitfm.preferences` and both tested
equal to Hugging Face TRL in `tests/preferences`:

- **DPO** (direct preference optimisation) learns from pairs, "this reply is better than that one";
- **GRPO** (group relative policy optimisation) learns from a reward that a program computes, by sampling a
  group of replies to each question and pushing up the ones that scored above their group.

Both start from chapter 15's assistant. Its intermediate task is addition of two-digit numbers: greedy, it gets
about half of the held-out sums right, and among sixteen samples the right sum is usually there. That gap, between
what the model says first and what it can say, is what learning from rewards works on.

The chapter measures, on your CPU and over seeds, one run that works and one run that fails, and checks the rules
of thumb people repeat about these methods. Every verdict is computed in your run.
""")

code("c16-setup", r"""
# minitfm set-up: install the library when it is missing (Colab); does nothing elsewhere.
import importlib.util, sys
if importlib.util.find_spec("minitfm") is None:
    %pip install -q "minitfm @ git+https://github.com/minitfm/minitfm@v0.3.0"
""")

code("c16-imports", r"""
import copy
import math
import time

import numpy as np
import torch

import minitfm as m
from minitfm.claims import judge, seed_table, verdict
from minitfm.evaluation import mean_pass_at_k, paired_bootstrap, pass_at_k
from minitfm.finetuning import skills as S
from minitfm.finetuning.answering import replies
from minitfm.lm import assistant_lm as A
from minitfm.lm.prose import heldout_bits_per_byte
from minitfm.preferences import dpo as D, grpo as G, rewards as R
# DRAFT: these helpers are proposed for minitfm.preferences (drafts/ch16/proposed_library.py)
from proposed_library import grpo_train, policy_kl, sampled_correct, sampled_pairs

print("torch threads:", m.set_threads(1))
CHAPTER_START = time.perf_counter()
assistant = A.load_assistant_lm()
template = A.chat_template()
TASK = A.INTERMEDIATE
print(f"the assistant: {sum(p.numel() for p in assistant.parameters()):,} parameters; intermediate task: {TASK!r}")
""")

md("c16-dpo-intro", r"""
## DPO: a loss from preferences

Suppose people prefer reply $y_w$ to reply $y_l$ with probability $\sigma(r(x, y_w) - r(x, y_l))$ for some
unknown reward $r$ (the Bradley-Terry model; $\sigma$ is the logistic function). RLHF maximises
$\mathbb{E}[r(x, y)] - \beta\,\mathrm{KL}(\pi \,\|\, \pi_\text{ref})$: the reward, minus a price for leaving the
reference model $\pi_\text{ref}$ (the assistant before this step). That objective has an exact maximiser,
$\pi^*(y|x) = \pi_\text{ref}(y|x)\, e^{r(x,y)/\beta} / Z(x)$. Solve it for $r$ and put that into Bradley-Terry:
the unknown $Z(x)$ cancels in the difference, and what remains is a loss on the policy alone
(Rafailov et al. 2023, sections 3-4):

$$\mathcal{L} = -\log \sigma\Big(\beta\big[\log\tfrac{\pi(y_w|x)}{\pi_\text{ref}(y_w|x)} - \log\tfrac{\pi(y_l|x)}{\pi_\text{ref}(y_l|x)}\big]\Big)$$

Each $\log \pi(y|x)$ is the **sum** of the reply's token log-probabilities (the chain rule), over the reply's
tokens only, with chapter 15's mask. $\beta \log(\pi/\pi_\text{ref})$ is the reply's *implicit reward*; the
difference of the two is the *margin*, and the loss sees only the margin.

Before any step the policy *is* the reference, every log-ratio is 0, and the loss is $-\log\sigma(0) = \ln 2$
exactly. A loss that stays there means nothing moved. The cell checks it on real pairs.
""")

code("c16-pairs", r"""
# pairs from the assistant's own samples: a verified sum against a wrong one, on questions where 8 samples hold both
t0 = time.perf_counter()
train_pairs = sampled_pairs(assistant, template, S.examples(TASK, "train", 192, seed=5), 8, seed=1)
held_pairs = sampled_pairs(assistant, template, A.heldout_examples(TASK, 100, seed=300), 8, seed=2)
def rendered(pairs):
    both = [D.preference_pair(template, e.chat(with_answer=False), c, r) for e, c, r in pairs]
    return [a for a, _ in both], [b for _, b in both]
train_c, train_r = rendered(train_pairs)
held_c, held_r = rendered(held_pairs)
e, c, r = train_pairs[0]
print(f"{len(train_pairs)} training pairs, {len(held_pairs)} held-out pairs ({time.perf_counter() - t0:.1f} s)")
print(f"for example: {e.prompt!r}  chosen {c!r}  rejected {r!r}")
with torch.no_grad():
    step0 = D.dpo_batch_loss(copy.deepcopy(assistant), assistant, train_c[:16], train_r[:16], beta=0.1)
print(f"loss at step 0: {step0.loss.item():.6f}   ln 2 = {math.log(2):.6f}   margins all 0: "
      f"{bool((step0.margins == 0).all())}")
assert abs(step0.loss.item() - math.log(2)) < 1e-6
""")

md("c16-dpo-rules", r"""
### DPO at two values of β

The run trains a copy of the assistant on the training pairs, two epochs in batches of 16, once with $\beta = 0.1$
(TRL's default) and once with $\beta = 1$, and measures on the **held-out** pairs and questions:

- **preference accuracy** (the share of held-out pairs with a positive margin) and the mean margin;
- **task accuracy**, greedy, on 200 held-out sums before and after, as a paired difference with its 95% bootstrap
  interval ([chapter 14](14_measuring.ipynb));
- **drift**: the KL divergence from the reference per reply (on the policy's own samples) and the bits per byte of
  held-out prose (what [chapter 15](15_finetuning.ipynb) used to measure forgetting);
- the **chosen log-probability** $\log \pi(y_w|x)$, averaged over the training pairs.

Rule stated before the run, as people state it: **a larger β stays closer to the reference** (β is the price
of the KL term). Confirmed on a seed if the β = 1 run's KL per reply is below the β = 0.1 run's.
""")

code("c16-dpo-run", r"""
DPO_SEEDS, DPO_LR, DPO_EPOCHS, BETAS = [0, 1], 1e-4, 2, (0.1, 1.0)
held_q = A.heldout_examples(TASK, 200)
def greedy_right(model):
    out = replies(model, template, [e.chat(with_answer=False) for e in held_q], max_new_tokens=8)
    return np.array([a.strip() == e.answer for a, e in zip(out, held_q)], dtype=float)
right0 = greedy_right(assistant)
with torch.no_grad():
    chosen0 = D.sequence_log_probs(assistant, train_c).mean().item()
    rejected0 = D.sequence_log_probs(assistant, train_r).mean().item()
bpb0 = heldout_bits_per_byte(assistant, 8)
dpo = {}
t0 = time.perf_counter()
for beta in BETAS:
    for seed in DPO_SEEDS:
        torch.manual_seed(seed)
        policy = copy.deepcopy(assistant)
        opt = torch.optim.Adam(policy.parameters(), lr=DPO_LR)
        order_gen = torch.Generator().manual_seed(seed)
        for epoch in range(DPO_EPOCHS):
            order = torch.randperm(len(train_c), generator=order_gen).tolist()
            for i in range(0, len(order), 16):
                idx = order[i:i + 16]
                out = D.dpo_batch_loss(policy, assistant, [train_c[j] for j in idx], [train_r[j] for j in idx],
                                       beta=beta)
                opt.zero_grad()
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
        policy.eval()
        with torch.no_grad():
            held = D.dpo_batch_loss(policy, assistant, held_c, held_r, beta=beta)
            chosen = D.sequence_log_probs(policy, train_c).mean().item()
            rejected = D.sequence_log_probs(policy, train_r).mean().item()
        diff = paired_bootstrap(greedy_right(policy), right0, rng=np.random.default_rng(seed), n_resamples=2000)
        dpo[beta, seed] = dict(pref_acc=held.accuracy, margin=held.margins.mean().item(), task_diff=diff.difference,
                               low=diff.low, high=diff.high, kl=policy_kl(policy, assistant, template, held_q[:50]),
                               bpb=heldout_bits_per_byte(policy, 8), chosen=chosen, rejected=rejected)
print(f"DPO: {len(BETAS) * len(DPO_SEEDS)} runs in {time.perf_counter() - t0:.1f} s")
print(f"before: greedy accuracy {right0.mean():.3f}, prose {bpb0:.4f} bits per byte, chosen log-prob {chosen0:.3f}, "
      f"rejected {rejected0:.3f}")
for key in ("pref_acc", "margin", "task_diff", "kl", "bpb", "chosen", "rejected"):
    print(seed_table({f"beta={b} {key}": [dpo[b, s][key] for s in DPO_SEEDS] for b in BETAS}, DPO_SEEDS))
""")

code("c16-dpo-verdict", r"""
print(judge("KL per reply at beta=1 below the KL at beta=0.1", [dpo[1.0, s]["kl"] < dpo[0.1, s]["kl"] for s in DPO_SEEDS]))
print(judge("held-out preference accuracy above 0.5 at beta=0.1", [dpo[0.1, s]["pref_acc"] > 0.5 for s in DPO_SEEDS]))
print(judge("task accuracy up, its paired interval above 0 (beta=0.1)", [dpo[0.1, s]["low"] > 0 for s in DPO_SEEDS]))
print(judge("the chosen log-probability falls (beta=0.1)", [dpo[0.1, s]["chosen"] < chosen0 for s in DPO_SEEDS]))
""")

md("c16-dpo-chosen", r"""
If the chosen log-probability falls while the margins rise, nothing is broken: the loss sees only the margin, so
both log-probabilities may fall as long as the rejected one falls faster. The probability the chosen reply loses
goes to replies that are on neither side of any pair (Razin et al. 2024 call this *likelihood displacement*).
""")

md("c16-grpo-intro", r"""
## GRPO: learning from a reward

One GRPO step (Shao et al. 2024, section 4.1), as `minitfm.preferences.grpo` runs it:

1. **sample** a group of $G$ replies to each of a few training questions (`sample_groups`, seeded, KV cache);
2. **score** each with a program (`rewards.exact_answer`: 1 if the reply is the sum, else 0);
3. **advantages relative to the group**: $A_i = (r_i - \bar r)/(\mathrm{std}(r) + 10^{-4})$; a group whose
   replies all scored the same has $A = 0$ and teaches nothing;
4. **the loss**: every token of a reply gets its reply's advantage, $-A \cdot \pi/\pi_\text{old}$, clipped as in PPO;
   on-policy (one step per sample) the ratio is 1, the loss's *value* is about 0, and its *gradient* is the
   policy gradient (the tests check both);
5. optionally **a KL penalty** to the reference, per token, with Schulman's k3 estimator.

**What this run trains.** The probe behind this chapter (`drafts/ch16/probe.py`) found that at a budget of
seconds, GRPO on all 1.2 million parameters of the assistant does not raise its accuracy on sums at any learning
rate it tried: the few hundred sampled replies carry too little signal, and the noise in each step costs more
than the signal gains. Here GRPO trains only the gain of the final RMSNorm, 128 numbers that scale the features
the output layer reads: the smallest policy with room to learn what the reward asks. It can make the model surer
of what it already prefers; it cannot teach it arithmetic.

**Rule stated before the run** (the issue's success rule): on each seed, the held-out pass@1 (16 samples per
question at temperature 1, the same 100 held-out sums) rises, the 95% paired bootstrap interval of the rise lies
above 0, and pass@1 after is above the best constant reply's accuracy.
""")

code("c16-grpo-run", r"""
GRPO_SEEDS, STEPS, PROMPTS, GROUP, GRPO_LR = [0, 1, 2], 20, 8, 8, 0.1
held_grpo = A.heldout_examples(TASK, 100)
_, best = A.best_constant(held_grpo)
N_SAMPLES = 16
before_c, before_rows = sampled_correct(assistant, template, held_grpo, N_SAMPLES, seed=12345)
def pass_k(c, k):
    return np.array([pass_at_k(N_SAMPLES, int(ci), k) for ci in c])
grpo = {}
t0 = time.perf_counter()
for seed in GRPO_SEEDS:
    train = S.examples(TASK, "train", STEPS * PROMPTS, seed=1000 + seed)
    policy, hist = grpo_train(assistant, template, train, R.exact_answer, steps=STEPS, prompts=PROMPTS, group=GROUP,
                              lr=GRPO_LR, trainable="final_norm", seed=seed)
    c, rows = sampled_correct(policy, template, held_grpo, N_SAMPLES, seed=12345)
    d1 = paired_bootstrap(pass_k(c, 1), pass_k(before_c, 1), rng=np.random.default_rng(seed), n_resamples=2000)
    d16 = paired_bootstrap(pass_k(c, 16), pass_k(before_c, 16), rng=np.random.default_rng(seed), n_resamples=2000)
    grpo[seed] = dict(pass1=pass_k(c, 1).mean(), low=d1.low, high=d1.high, pass16=pass_k(c, 16).mean(),
                      low16=d16.low, high16=d16.high, distinct=np.mean([len({x.strip() for x in r}) for r in rows]),
                      hist=hist)
print(f"GRPO: {len(GRPO_SEEDS)} runs of {STEPS} steps x {PROMPTS} questions x {GROUP} replies in "
      f"{time.perf_counter() - t0:.1f} s")
print(f"before: pass@1 {pass_k(before_c, 1).mean():.3f}, pass@16 {pass_k(before_c, 16).mean():.3f}, distinct answers "
      f"{np.mean([len({x.strip() for x in r}) for r in before_rows]):.2f}; best constant reply {best:.3f}")
print(seed_table({"pass@1 after": [grpo[s]["pass1"] for s in GRPO_SEEDS],
                  "rise, interval low": [grpo[s]["low"] for s in GRPO_SEEDS],
                  "rise, interval high": [grpo[s]["high"] for s in GRPO_SEEDS],
                  "pass@16 after": [grpo[s]["pass16"] for s in GRPO_SEEDS],
                  "distinct answers": [grpo[s]["distinct"] for s in GRPO_SEEDS],
                  "reward, first 5 steps": [np.mean(grpo[s]["hist"].reward[:5]) for s in GRPO_SEEDS],
                  "reward, last 5 steps": [np.mean(grpo[s]["hist"].reward[-5:]) for s in GRPO_SEEDS],
                  "KL per token, last step": [grpo[s]["hist"].kl[-1] for s in GRPO_SEEDS],
                  "share of zero-variance groups": [np.mean(grpo[s]["hist"].zero_var) for s in GRPO_SEEDS]},
                 GRPO_SEEDS))
""")

code("c16-grpo-verdict", r"""
print(judge("held-out pass@1 up by more than its interval, and above the best constant reply",
            [grpo[s]["low"] > 0 and grpo[s]["pass1"] > best for s in GRPO_SEEDS]))
""")

md("c16-yue", r"""
### Does RL add answers, or sharpen the ones the model had?

Yue et al. (2025) found that reinforcement learning with verifiable rewards raises pass@1 of large models but not
their pass@k at large k: the RL-trained model's right answers were already among the base model's samples. Rule
stated before the run: **RL sharpens** if, on a seed, pass@1 rises (its interval above 0) while pass@16 does not
rise by more than its interval (the low end of its paired interval is at most 0). It **adds answers** if pass@16
rises by more than its interval. A third line asks the stronger question: does pass@16 *fall* by more than its
interval (the model lost answers it could reach)?
""")

code("c16-yue-verdict", r"""
print(judge("pass@1 up while pass@16 does not rise (sharpening)",
            [grpo[s]["low"] > 0 and grpo[s]["low16"] <= 0 for s in GRPO_SEEDS]))
print(judge("no new answers: pass@16 not up by more than its interval", [grpo[s]["low16"] <= 0 for s in GRPO_SEEDS]))
print(judge("pass@16 down by more than its interval (answers lost)", [grpo[s]["high16"] < 0 for s in GRPO_SEEDS]))
""")

md("c16-hack-intro", r"""
## The failure: a verifier that can be hacked

`rewards.contains_answer` is a sloppy verifier, wrong on purpose: it pays 1 when the sum appears *anywhere* in the
reply. It forgives "The answer is 42", and it also pays for a reply that strings many digits together. The run
below trains on it, with the same GRPO as above but all parameters and longer replies allowed (16 bytes), and once
more with a KL penalty to the reference.

Rule stated before the run: the verifier is **hacked** on a seed if the proxy reward (what `contains_answer`
pays, on held-out questions) rises while the true pass@1 falls with its paired interval below 0.

*Draft note (probe, 2026-12-06):* on this assistant the hack did **not** appear at any budget tried. It ends every
sum with its end token after two or three digits, so `contains_answer` pays exactly what `exact_answer` pays
until the policy samples a longer reply, which it almost never does; and a string of junk digits hits a sum less
often than the assistant's honest guess. The setting of this section is open (see `drafts/ch16/NOTES.md`).
""")

code("c16-hack-run", r"""
HACK_SEEDS, HACK_STEPS, HACK_LR, HACK_BETA = [0, 1], 20, 3e-4, 1.0
hack_q = held_grpo[:50]
def proxy_and_true(model, seed=4321):
    c_true, rows = sampled_correct(model, template, hack_q, 8, seed=seed, max_new_tokens=16)
    proxy = np.array([np.mean([R.contains_answer(x, e) for x in row]) for row, e in zip(rows, hack_q)])
    return proxy, c_true / 8, np.mean([len(x) for row in rows for x in row]), rows
proxy0, true0, len0, _ = proxy_and_true(assistant)
hack = {}
t0 = time.perf_counter()
for beta in (0.0, HACK_BETA):
    for seed in HACK_SEEDS:
        train = S.examples(TASK, "train", HACK_STEPS * 8, seed=2000 + seed)
        policy, hist = grpo_train(assistant, template, train, R.contains_answer, steps=HACK_STEPS, lr=HACK_LR,
                                  beta=beta, max_new_tokens=16, trainable="all", seed=seed)
        proxy, true, length, rows = proxy_and_true(policy)
        d = paired_bootstrap(true, true0, rng=np.random.default_rng(seed), n_resamples=2000)
        hack[beta, seed] = dict(proxy=proxy.mean(), true=true.mean(), high=d.high, length=length,
                                example=rows[0][:3], kl=hist.kl[-1])
print(f"sloppy verifier: {2 * len(HACK_SEEDS)} runs in {time.perf_counter() - t0:.1f} s")
print(f"before: proxy {proxy0.mean():.3f}, true pass@1 {true0.mean():.3f}, reply length {len0:.1f} bytes")
for beta in (0.0, HACK_BETA):
    print(seed_table({f"beta={beta} {k}": [hack[beta, s][k] for s in HACK_SEEDS]
                      for k in ("proxy", "true", "length", "kl")}, HACK_SEEDS))
print("replies after (beta=0, first seed):", hack[0.0, HACK_SEEDS[0]]["example"])
""")

code("c16-hack-verdict", r"""
print(judge("proxy reward up, true pass@1 down by more than its interval (no KL)",
            [hack[0.0, s]["proxy"] > proxy0.mean() and hack[0.0, s]["high"] < 0 for s in HACK_SEEDS]))
hacked = [hack[0.0, s]["proxy"] > proxy0.mean() and hack[0.0, s]["high"] < 0 for s in HACK_SEEDS]
kl_rule = f"with a KL penalty (beta={HACK_BETA}) the hack is prevented: true pass@1 not down by more than its interval"
if any(hacked):
    print(judge(kl_rule, [hack[HACK_BETA, s]["high"] >= 0 for s, h in zip(HACK_SEEDS, hacked) if h]))
else:
    print(verdict("not testable here", f"no run without the KL term was hacked, so nothing to prevent ({kl_rule})"))
""")

md("c16-exercises", r"""
## Exercises

**Exercise 1 (the DPO loss).** Write `my_dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta)` from the
formula above, for (B,) tensors of summed log-probabilities, returning the mean loss and the margins. The checker
(to come: `minitfm.exercises`) compares it with `minitfm.preferences.dpo.dpo_loss` on random inputs, at step 0
(ln 2), and at a large β, and tells you if β went the wrong way or if you averaged instead of summing.

**Exercise 2 (group advantages).** Write `my_advantages(rewards)` for an (N, G) tensor: subtract each group's
mean, divide by its standard deviation plus $10^{-4}$. The checker compares it with `group_advantages` on rewards
such as `[[1, 0, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]]` and says what a group of identical rewards gives, and
whether your standard deviation is the unbiased one (TRL's) or the biased one.
""")

md("c16-scale", r"""
## What changes at scale

- **Reward models and PPO.** InstructGPT (Ouyang et al. 2022) trained a reward model on people's rankings, then
  PPO against it with a per-token KL penalty in the reward and a value network as the baseline.
- **GRPO without a value network.** DeepSeekMath (Shao et al. 2024) replaced the value network by the group mean;
  DeepSeek-R1 (2025) trained with it on verifiable math and code rewards.
- **Dr. GRPO and DAPO.** Liu et al. (2025) removed the per-reply length normalisation and the division by the
  group's standard deviation (both bias what is learned); Yu et al. (2025, DAPO) normalise over all tokens, clip
  higher, and drop groups that teach nothing. TRL's defaults follow them: `loss_type="dapo"`, `beta=0`.
- **Why verifiable rewards suit math and code.** A program that checks an answer cannot be flattered and costs
  nothing per sample, but it is a specification: this chapter's failure shows what a loose one teaches.
""")

code("c16-time", r"""
elapsed = time.perf_counter() - CHAPTER_START
print(verdict("confirmed" if elapsed < 90 else "contradicted",
              f"the chapter ran in {elapsed:.0f} s (budget 90 s on one thread)", timing=True))
""")

nb = nbformat.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, HERE / "16_preferences.ipynb")
print("wrote", HERE / "16_preferences.ipynb", len(cells), "cells")
