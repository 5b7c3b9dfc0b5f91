"""Writes chapter 16, "Preferences and rewards: DPO and GRPO", to drafts/ch16/16_preferences.ipynb.

Run:  python drafts/ch16/build_notebook.py [OUT.ipynb]
then execute it (cell outputs are not written here):
  nice -n 10 env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python tools/notebooks.py execute drafts/ch16/16_preferences.ipynb
Cell ids are fixed strings, so that they stay stable when a cell is edited (the Chinese edition keys on them).
The notebook is not in _toc.yml: the lead decides when it moves to notebooks/16_preferences.ipynb.
"""
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "16_preferences.ipynb"
cells = []


def md(cid, text):
    cells.append(nbformat.v4.new_markdown_cell(text.strip("\n"), id=cid))


def code(cid, text, alt=None, tags=None):
    cell = nbformat.v4.new_code_cell(text.strip("\n"), id=cid)
    if alt:
        cell.metadata["mystnb"] = {"image": {"alt": alt}}
    if tags:
        cell.metadata["tags"] = tags
    cells.append(cell)


REF = "../book/references.md#cite-"

# ------------------------------------------------------------------------------------------------ opening
md("c16-title", rf"""
# 16. Preferences and rewards: DPO and GRPO

[Chapter 15](15_finetuning.ipynb) made an assistant by showing a base model written answers. Chat models are usually
taken one step further ([Ouyang et al., 2022]({REF}ouyang2022training)): the model learns from **judgements of its
own replies**. There are two ways to give
it those judgements, and this chapter builds both, on the assistant that chapter ships:

- **DPO**, direct preference optimisation ([Rafailov et al., 2023]({REF}rafailov2023direct)), learns from pairs:
  "this reply to this question is better than that one". No reward model, no sampling during training: one loss on
  pairs, derived from the same objective that reinforcement learning from human feedback maximises.
- **GRPO**, group relative policy optimisation ([Shao et al., 2024]({REF}shao2024deepseekmath)), learns from a
  reward that a program computes. It samples a group of replies to each question, scores them, and makes the
  replies that scored above their group's average more likely. DeepSeek-R1 was trained this way on math and code
  ([DeepSeek-AI, 2025]({REF}deepseekai2025r1)).

The assistant's intermediate task is the sum of two two-digit numbers. Greedily it gets some of the held-out sums
right and many wrong, while among sixteen samples the right sum is far more often present (the first cell prints
both). That gap, between what the model says first and what it can say, is what learning from judgements works on.
The chapter runs, on your CPU and over seeds, a method that learns from pairs, a method that learns from a verifier,
and a verifier that is wrong on purpose, and tests the rules of thumb people repeat about them. Every verdict is
computed in your run.

**After this chapter you will be able to**

- derive the DPO loss from Bradley-Terry and the KL-regularised objective, compute it from per-token
  log-probabilities (summed over the reply, with the loss mask of supervised fine-tuning), and say why it starts at $\ln 2$, which
  way $\beta$ goes, and why the chosen reply's probability may fall while the loss improves;
- run one GRPO step by hand: sample a group, score it with a verifier, compute group-relative advantages, and
  explain why a group whose rewards are all equal teaches nothing and why the loss's value is not a progress signal;
- measure what either method did with the tools of [chapter 14](14_measuring.ipynb): held-out pass@1 with a paired
  interval beside the best constant reply, pass@k at a larger k, answer diversity, and the drift from the
  reference;
- recognise reward hacking: a verifier that pays for the wrong thing, a proxy reward that rises while the truth
  falls, and what a KL penalty does about it.
""")

code("c16-setup", r"""
# minitfm set-up: install the library when it is missing (Colab); does nothing elsewhere.
import importlib.util, sys
if importlib.util.find_spec("minitfm") is None:
    %pip install -q "minitfm @ git+https://github.com/minitfm/minitfm@v0.3.0"
if "google.colab" in sys.modules:  # Colab needs this to show ipywidgets 8 sliders
    from google.colab import output
    output.enable_custom_widget_manager()
""", tags=["hide-input"])

code("c16-imports", r"""
import copy
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

import minitfm as m
from minitfm.claims import judge, seed_table, verdict
from minitfm.evaluation import paired_bootstrap
from minitfm.finetuning import skills as S
from minitfm.finetuning.answering import replies
from minitfm.lm import assistant_lm as A
from minitfm.lm.base_lm import load_base_lm
from minitfm.lm.prose import heldout_bits_per_byte
from minitfm.preferences import dpo as D, grpo as G, rewards as R
from minitfm.preferences.training import (dpo_train, grpo_train, pass_at_k_counts, policy_kl, sampled_correct,
                                          sampled_pairs)
from minitfm.viz.finetuning_diagrams import dpo_diagram, grpo_diagram

print("torch threads:", m.set_threads(1))
CHAPTER_START = time.perf_counter()
SECONDS = {}  # what each part of the chapter took, printed at the end
""")

md("c16-start", r"""
## The starting point: the assistant on sums

Everything below starts from the same model, `minitfm.lm.assistant_lm` (the base model of
[chapter 15](15_finetuning.ipynb) after supervised fine-tuning), and is measured on the same **held-out** sums, questions fine-tuning never asked. Two
ways to ask:

- **greedy**: the single most likely reply, what the chat box shows;
- **sampled**: sixteen replies per question at temperature 1, scored by the exact-answer verifier. pass@1 is the
  share of right samples (the chance that one sample is right), pass@16 the chance that at least one of sixteen
  is ([Chen et al., 2021](../book/references.md#cite-chen2021evaluating)'s estimator, [chapter 14](14_measuring.ipynb)).

The floor every score must beat is the **best constant reply**: the single answer that is right most often on these
questions. Every sample below uses the same seed before and after training (common random numbers), so that the
before-and-after differences are paired question by question.
""")

code("c16-start-run", r"""
t0 = time.perf_counter()
assistant = A.load_assistant_lm()
template = A.chat_template()
TASK = A.INTERMEDIATE  # "add": the sum of two two-digit numbers
N_SAMPLES, EVAL_SEED = 16, 12345  # samples per question; one sampling seed for every evaluation (paired)
held = A.heldout_examples(TASK, 100)  # held-out sums: never asked in fine-tuning
best_reply, best = A.best_constant(held)


def greedy_replies(model, questions):
    # The model's greedy reply to each question (what the chat box shows).
    return replies(model, template, [e.chat(with_answer=False) for e in questions], max_new_tokens=8)


def greedy_right(model, questions, out=None):
    # 1.0 where the model's greedy reply is exactly the answer, else 0.0 (one per question).
    out = greedy_replies(model, questions) if out is None else out
    return np.array([R.exact_answer(a, e) for a, e in zip(out, questions)])


def distinct(rows):
    # The mean number of different answers among each question's samples.
    return float(np.mean([len({x.strip() for x in row}) for row in rows]))


before_c, before_rows = sampled_correct(assistant, template, held, N_SAMPLES, seed=EVAL_SEED)
before_1, before_16 = pass_at_k_counts(before_c, N_SAMPLES, 1), pass_at_k_counts(before_c, N_SAMPLES, 16)
greedy0_replies = greedy_replies(assistant, held)  # kept: GRPO's greedy replies are compared with these
greedy0 = greedy_right(assistant, held, greedy0_replies).mean()
print(f"the assistant: {sum(p.numel() for p in assistant.parameters()):,} parameters; task {TASK!r}, "
      f"{len(held)} held-out questions, e.g. {held[0].prompt!r} -> {held[0].answer!r}")
print(f"greedy accuracy {greedy0:.3f}; sampled pass@1 {before_1.mean():.3f}, "
      f"pass@16 {before_16.mean():.3f}; {distinct(before_rows):.2f} different answers per question")
print(f"best constant reply {best_reply!r}: right on {best:.3f} of the questions")
print("one question's sixteen samples:", before_rows[0], "answer", held[0].answer)
assert greedy0 < before_16.mean() - 0.2  # the gap this chapter works on: the right sum is sampled far more than said
SECONDS["the starting point"] = time.perf_counter() - t0
""")

# ------------------------------------------------------------------------------------------------ DPO
md("c16-dpo-intro", rf"""
## DPO: a loss from preferences

Suppose people, or a program, prefer reply $y_w$ to reply $y_l$ of the same prompt $x$ with probability

$$P(y_w \succ y_l \mid x) = \sigma\big(r(x, y_w) - r(x, y_l)\big)$$

for some unknown reward $r$, where $\sigma$ is the logistic function: the model of paired comparisons of
[Bradley and Terry (1952)]({REF}bradley1952rank). Reinforcement learning from human feedback fits a reward model to
such comparisons ([Christiano et al., 2017]({REF}christiano2017deep)) and then, for a language model, trains the
policy $\pi$ to maximise that reward minus a price for leaving the reference model $\pi_\text{{ref}}$ (the model
before this step), as InstructGPT did ([Ouyang et al., 2022]({REF}ouyang2022training)):

$$\max_\pi\ \mathbb{{E}}_{{y \sim \pi(\cdot|x)}}\big[r(x, y)\big] - \beta\, \mathrm{{KL}}\big(\pi(\cdot|x)\,\|\,\pi_\text{{ref}}(\cdot|x)\big)$$

This objective has an exact maximiser, known from earlier work on KL-regularised control and recalled by
[Rafailov et al. (2023)]({REF}rafailov2023direct): $\pi^*(y|x) = \pi_\text{{ref}}(y|x)\, e^{{r(x,y)/\beta}} / Z(x)$.
Their step was to read it backwards. Solve it for the reward,
$r(x, y) = \beta \log \frac{{\pi^*(y|x)}}{{\pi_\text{{ref}}(y|x)}} + \beta \log Z(x)$, so that every policy $\pi$
defines a reward, and put that reward into Bradley-Terry. The unknown $Z(x)$ is the same for both replies and
cancels in the difference. Fitting this reward to the preferences means training the policy itself, by the
negative log-likelihood of the preferences:

$$\mathcal{{L}}_\text{{DPO}} = -\log \sigma\Big(\beta\Big[\log\frac{{\pi(y_w|x)}}{{\pi_\text{{ref}}(y_w|x)}} - \log\frac{{\pi(y_l|x)}}{{\pi_\text{{ref}}(y_l|x)}}\Big]\Big)$$

No reward model to train, no sampling while training: a classification loss on pairs. What learners ask about it:

- **Sum or mean over tokens?** The sum. $\log \pi(y|x)$ is the log-probability of the whole reply, the sum of its
  tokens' log-probabilities by the chain rule, over the reply's tokens only ([chapter 15](15_finetuning.ipynb)'s loss mask, its end token
  included). A per-token mean is another objective, which changes how length is paid; TRL and the paper's code sum.
- **Which way does $\beta$ go?** $\beta$ is the price of the KL term, so a **larger $\beta$ keeps the policy closer to
  the reference**. In the loss it multiplies the log-ratio difference: with a large $\beta$ a small difference already
  brings the loss near zero and the pull stops; with a small $\beta$ the loss keeps pulling until the log-ratios
  have moved far. (At the start a larger $\beta$ pulls harder, by the factor $\beta$; it also stops sooner, and with
  finite steps that second effect wins.)
- **Why $\ln 2$?** Before the first step the policy *is* the reference: every log-ratio is 0 and the loss is
  $-\log\sigma(0) = \ln 2$ exactly, whatever the pairs. A loss that stays there means that nothing moved (a frozen
  model, or a "reference" that is the policy object itself).
- **Where is the KL?** Nowhere as a term: it is inside $\beta$, through the derivation.
- $\beta \log \frac{{\pi(y|x)}}{{\pi_\text{{ref}}(y|x)}}$ is called the reply's **implicit reward**, and the difference of the two
  the **margin**. The loss sees only the margin, which is why the next section watches the chosen reply's own
  log-probability too.

The figure draws one pair through the loss, and on the right the loss of a pair against the log-ratio difference
$d$ at two values of $\beta$, from the formula.
""")

code("c16-dpo-diagram", r"""
fig = dpo_diagram(betas=(0.1, 1.0))
plt.show()
""", alt="DPO's pairwise objective: a prompt with a chosen and a rejected reply, each scored by the policy minus the "
         "frozen reference as log-probabilities summed over the reply's tokens; beta times their difference is the "
         "margin and minus log sigma of the margin is the loss. An inset plots the loss against the log-ratio "
         "difference d for beta 0.1 and beta 1: both pass through ln 2 at d = 0, the beta 1 curve is steeper and "
         "is near zero a few nats to the right of 0.")

md("c16-pairs-intro", r"""
### Pairs from the assistant's own samples

Preference data for a chat model is usually collected from people. Here a program makes it, from the assistant's
own replies: for each training sum, eight samples at temperature 1; where they hold both a right sum and a wrong
one, the first right reply (the *chosen*) and the first wrong one (the *rejected*) make a pair. A question whose
samples are all right or all wrong gives no pair: it says nothing about a preference. The held-out pairs come the
same way from held-out sums. These are **on-policy** pairs, replies the model itself writes, and the two sides
often differ in one digit.

The cell also checks the loss at step 0 on every training pair.
""")

code("c16-pairs", r"""
t0 = time.perf_counter()
PAIR_QUESTIONS, PAIR_SAMPLES = 128, 8
train_pairs = sampled_pairs(assistant, template, S.examples(TASK, "train", PAIR_QUESTIONS, seed=5), PAIR_SAMPLES,
                            seed=1)
held_pairs = sampled_pairs(assistant, template, A.heldout_examples(TASK, 200, seed=300), PAIR_SAMPLES, seed=2)


def rendered(pairs):
    # The chosen and the rejected conversations of each (example, chosen, rejected), rendered by the chat template.
    both = [D.preference_pair(template, e.chat(with_answer=False), c, r) for e, c, r in pairs]
    return [c for c, _ in both], [r for _, r in both]


train_c, train_r = rendered(train_pairs)
held_c, held_r = rendered(held_pairs)
print(f"{len(train_pairs)} training pairs from {PAIR_QUESTIONS} training sums, {len(held_pairs)} held-out pairs; "
      "for example:")
for e, c, r in train_pairs[:3]:
    print(f"  {e.prompt!r}: chosen {c!r}, rejected {r!r}")
with torch.no_grad():
    step0 = D.dpo_batch_loss(copy.deepcopy(assistant), assistant, train_c, train_r, beta=0.1)
print(f"DPO loss at step 0: {step0.loss.item():.7f}; ln 2 = {math.log(2):.7f}; "
      f"largest |margin| {step0.margins.abs().max().item():.1e}")
assert abs(step0.loss.item() - math.log(2)) < 1e-6  # the policy is the reference: every log-ratio is 0
SECONDS["DPO pairs"] = time.perf_counter() - t0
""")

md("c16-ex1", r"""
<div class="exercise" id="ex-16-1">

**Exercise 16.1 (build, checked): the DPO loss.** Write `my_dpo_loss(policy_logps, ref_logps, mask, beta)`.
`policy_logps` and `ref_logps` are (2B, T): the log-probability of each reply token under the policy and under the
reference, the B chosen replies in the first B rows and their rejected replies in the last B (rows $i$ and $B + i$
answer the same prompt; this is how TRL batches them); `mask` (2B, T) is True on the reply's tokens and False on
the padding. Return the mean loss over the pairs, a scalar tensor. The checker tries a pair at step 0, replies of
different lengths, one pair, and a large $\beta$, and says what differs: a mean instead of a sum, $\beta$ on the
wrong side, the padding counted, the sides swapped.

</div>
""")

code("c16-ex1-stub", r"""
from minitfm.exercises import check_dpo_loss, check_group_advantages


def my_dpo_loss(policy_logps, ref_logps, mask, beta):
    # -> the mean over the B pairs of -log sigma(beta * (chosen log-ratio - rejected log-ratio))
    raise NotImplementedError  # your code here
""")

code("c16-ex1-check", r"""
check_dpo_loss(my_dpo_loss);
""")

md("c16-ex1-solution", r"""
<details class="solution">
<summary>Solution (click to open)</summary>

```python
import torch.nn.functional as F

def my_dpo_loss(policy_logps, ref_logps, mask, beta):
    seq = (policy_logps * mask).sum(dim=1)  # log pi(y|x): the sum over the reply's tokens
    seq_ref = (ref_logps * mask).sum(dim=1)
    b = seq.shape[0] // 2
    chosen_ratio = seq[:b] - seq_ref[:b]  # log pi(y_w|x) / pi_ref(y_w|x)
    rejected_ratio = seq[b:] - seq_ref[b:]
    return -F.logsigmoid(beta * (chosen_ratio - rejected_ratio)).mean()
```

`F.logsigmoid` is the stable form of `torch.log(torch.sigmoid(...))`, which returns `-inf` for a large negative
margin. The library's `minitfm.preferences.dpo.dpo_loss` takes the four summed log-probabilities and returns the
rewards, margins and accuracy as well; it is tested equal to TRL's `DPOTrainer`.

</details>
""")

md("c16-dpo-rules", r"""
<a id="ch16-claim-beta"></a>
### DPO at two values of β

The run trains a copy of the assistant (every weight, Adam, two epochs over the training pairs in batches of 16)
once with $\beta = 0.1$, TRL's default, and once with $\beta = 1$ (one training run per $\beta$, for the time budget:
the seed only orders the batches; the pairs are fixed above), and measures:

- on the **held-out pairs**: the preference accuracy (the share with a positive margin), the mean margin, and the
  mean margin divided by $\beta$ (the log-ratio difference, which can be compared across $\beta$); and the share of
  pairs whose right sum the model's *own* log-probabilities rank higher, before and after training;
- **task accuracy**: greedy, on 200 held-out sums, before and after, as a paired difference with its 95% bootstrap
  interval;
- **drift from the reference**: the KL divergence per reply, $\mathbb{E}_{y\sim\pi}[\log \pi(y|x) - \log
  \pi_\text{ref}(y|x)]$ on the policy's own samples, and the bits per byte of the held-out prose of
  [chapter 15](15_finetuning.ipynb), beside the base model's;
- the **chosen log-probability**, $\log \pi(y_w|x)$ averaged over the training pairs, and the rejected one.

The rules, each decided in this run (one training run per β):

1. *DPO learns the preference*: at each β, on the held-out pairs, the share that the trained policy's own
   log-probabilities rank the right way, minus the same share for the untrained assistant (which already prefers
   the right sum on most pairs; the cell prints it), with its paired 95% bootstrap interval over the pairs:
   confirmed if above 0, contradicted if below, mixed otherwise. The floor is the assistant's own ranking, not a
   coin's 0.5: a policy that learned nothing scores about that.
2. *A larger β stays closer to the reference*: the β = 1 run's KL per reply is below the β = 0.1 run's.
3. *DPO on right-versus-wrong pairs improves the task* (the rule people state): at β = 0.1, the paired 95%
   interval of the greedy-accuracy change: confirmed if above 0, contradicted if below, mixed if it contains 0.
4. *Likelihood displacement*: at β = 0.1, the chosen log-probability falls while the held-out margin is positive.

These rules were written after a probe on the same held-out sums, so they are not forecasts: what your run tests
is whether the probe's findings hold on your machine. Rule 3 is the rule people state, and the probe found it
false here (its first draft predicted the opposite of what the probe then measured).
""")

code("c16-dpo-run", r"""
t0 = time.perf_counter()
BETAS, DPO_SEEDS, DPO_LR, DPO_EPOCHS = (0.1, 1.0), [0], 1e-4, 2
acc_q = A.heldout_examples(TASK, 200)  # greedy task accuracy before and after
right0 = greedy_right(assistant, acc_q)
with torch.no_grad():
    chosen0 = D.sequence_log_probs(assistant, train_c).mean().item()
    rejected0 = D.sequence_log_probs(assistant, train_r).mean().item()
bpb0 = heldout_bits_per_byte(assistant, 8)
bpb_base = heldout_bits_per_byte(load_base_lm(), 8)  # the model before chapter 15's fine-tuning


def own_ranking(model):
    # 1.0 for each held-out pair whose chosen (right) reply the model gives the higher summed log-probability.
    with torch.no_grad():
        return (D.sequence_log_probs(model, held_c) > D.sequence_log_probs(model, held_r)).double().numpy()


ref_rank = own_ranking(assistant)  # the floor of rule 1: the untrained assistant's own ranking
dpo = {}
for beta in BETAS:
    for seed in DPO_SEEDS:
        policy, hist = dpo_train(assistant, template, train_pairs, beta=beta, lr=DPO_LR, epochs=DPO_EPOCHS, seed=seed)
        with torch.no_grad():
            out = D.dpo_batch_loss(policy, assistant, held_c, held_r, beta=beta)
            chosen = D.sequence_log_probs(policy, train_c).mean().item()
            rejected = D.sequence_log_probs(policy, train_r).mean().item()
        diff = paired_bootstrap(greedy_right(policy, acc_q), right0, rng=np.random.default_rng(seed), n_resamples=2000)
        rank = paired_bootstrap(own_ranking(policy), ref_rank, rng=np.random.default_rng(seed), n_resamples=2000)
        dpo[beta, seed] = dict(pref=out.accuracy, margin=out.margins.mean().item(), task=diff.difference,
                               logratio=out.margins.mean().item() / beta, rank=ref_rank.mean() + rank.difference,
                               rank_change=rank.difference, rank_low=rank.low, rank_high=rank.high,
                               low=diff.low, high=diff.high, chosen=chosen, rejected=rejected, hist=hist,
                               kl=policy_kl(policy, assistant, template, acc_q[:50], n=4, seed=0),
                               bpb=heldout_bits_per_byte(policy, 8))
    if beta == BETAS[0]:
        dpo_policy = policy  # kept for the side-by-side comparison at the end
print(f"before: greedy accuracy {right0.mean():.3f}; chosen log-prob {chosen0:.3f}, rejected {rejected0:.3f}; "
      f"prose {bpb0:.3f} bits per byte (the base model: {bpb_base:.3f}; a uniform guess over the "
      f"{assistant.config.vocab_size} ids: {math.log2(assistant.config.vocab_size):.3f})")
print(f"the assistant's own log-probabilities rank the right sum higher on {ref_rank.mean():.3f} of the "
      f"{len(held_pairs)} held-out pairs (the floor of rule 1)")
rows = {}
for beta in BETAS:
    for key, name in [("rank", "held-out own ranking"), ("rank_change", "  change from the assistant's"),
                      ("rank_low", "  ranking change, low"), ("rank_high", "  ranking change, high"),
                      ("pref", "held-out pref. accuracy"), ("margin", "held-out margin"),
                      ("logratio", "  margin / beta"), ("task", "greedy acc. change"),
                      ("low", "  its interval, low"), ("high", "  its interval, high"), ("kl", "KL per reply (nats)"),
                      ("bpb", "prose bits per byte"), ("chosen", "chosen log-prob"), ("rejected", "rejected log-prob")]:
        rows[f"beta {beta:g}: {name}"] = [dpo[beta, s][key] for s in DPO_SEEDS]
print(seed_table(rows, DPO_SEEDS))
SECONDS["DPO, 2 runs"] = time.perf_counter() - t0
""")

code("c16-dpo-verdict", r"""
s0 = DPO_SEEDS[0]  # one training run per beta: each rule is decided in this run


def three_way(low, high):
    return "confirmed" if low > 0 else "contradicted" if high < 0 else "mixed"


for b in BETAS:
    d = dpo[b, s0]
    print(verdict(three_way(d["rank_low"], d["rank_high"]),
                  f"DPO learns the preference at beta={b:g}: held-out pairs ranked the right way by the model's own "
                  f"log-probabilities {ref_rank.mean():.3f} -> {d['rank']:.3f}, change {d['rank_change']:+.3f} "
                  f"(95% interval {d['rank_low']:+.3f} to {d['rank_high']:+.3f}, paired over {len(held_pairs)} pairs; "
                  "the untrained assistant's own ranking is the floor; above 0 confirmed, below contradicted, else mixed)"))
kl_low, kl_high = dpo[1.0, s0]["kl"], dpo[0.1, s0]["kl"]
print(verdict("confirmed" if kl_low < kl_high else "contradicted",
              f"a larger beta stays closer: KL per reply {kl_low:.3f} nats at beta=1 against {kl_high:.3f} at beta=0.1 "
              "(rule: below confirmed, else contradicted)"))
d = dpo[0.1, s0]
print(verdict(three_way(d["low"], d["high"]),
              f"DPO on right-versus-wrong pairs improves the task at beta=0.1: greedy accuracy change {d['task']:+.3f} "
              f"(95% interval {d['low']:+.3f} to {d['high']:+.3f}, paired over {len(acc_q)} sums; above 0 confirmed, "
              "below contradicted, containing 0 mixed)"))
print(verdict("confirmed" if d["chosen"] < chosen0 and d["margin"] > 0 else "contradicted",
              f"likelihood displacement at beta=0.1: chosen log-probability {chosen0:.3f} -> {d['chosen']:.3f} while the "
              f"held-out margin is {d['margin']:+.3f} (rule: the first falls while the second is positive)"))
""")

code("c16-dpo-curves", r"""
fig, axes = plt.subplots(1, 3, figsize=(12, 3.3))
for beta, style in zip(BETAS, ("-", "--")):
    h = dpo[beta, DPO_SEEDS[0]]["hist"]
    for ax, values in zip(axes, (h.loss, h.margin, h.chosen)):
        ax.plot(values, style, label=f"beta = {beta:g}")
axes[0].axhline(math.log(2), color="grey", lw=0.8)
axes[2].axhline(chosen0, color="grey", lw=0.8)
for ax, title in zip(axes, ("DPO loss (grey: ln 2)", "mean margin of the batch", "chosen log-prob (grey: before)")):
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("optimiser step")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()
""", alt="Three panels against the optimiser step for the first seed, one line per beta (0.1 solid, 1 dashed): the "
         "DPO loss starting at ln 2 (grey line) and falling, the batch's mean margin rising, and the chosen "
         "replies' mean log-probability against its value before training (grey line).")

md("c16-dpo-reading", rf"""
**Reading the run.** Your verdicts are printed above; this paragraph describes the book's run. At $\beta = 0.1$
DPO made the assistant *worse* at the task: the model's ranking of a right sum against a wrong one moved (your
verdict says whether beyond the untrained model's own ranking, which already favoured the right sum), while it
says the right sum first less often than before. This ranking verdict is close to its edge: on other seeds
it can be "mixed" at both values of $\beta$, because much of a held-out preference accuracy above 0.5 is the ranking
the assistant already had. Two things explain the loss on the task.

- **Only the margin is trained.** The chosen log-probability fell while the margins grew: both replies lost
  probability, the rejected one faster. The probability they lost went to replies in neither side of any pair.
  [Razin et al. (2025)]({REF}razin2025unintentional) call this **likelihood displacement** and show that it is
  strongest when the two replies are similar, as here, where the replies are sums that often share a digit. It is
  not a bug in the loss; it is what the loss asks for. (The answer to the common question "the chosen reward goes
  down, is my training broken?" is no: look at the margin, and at what the model now says.)
- **β is the leash.** At $\beta = 1$ the same data moved the policy much less (its KL per reply is the smaller one),
  the chosen log-probability stayed closer to where it was, and the task suffered less (in the book's run it still
  fell): the rule "a larger β stays closer to the reference" held in the book's run, and your verdict above says
  whether it held in yours. The margin carries β, so compare the log-ratio differences (margin / β) across β, not
  the margins.

**Prose cannot show the drift here.** The cell prints the assistant's bits per byte on the book's prose beside
$\log_2 V$ and beside the base model's: in the book's run the assistant writes that prose *worse than a uniform
guess*, where the base model was far better, because the fine-tuning of [chapter 15](15_finetuning.ipynb) spent that
ability ([chapter 15's forgetting verdict](15_finetuning.ipynb#ch15-claim-forgetting)). Whatever DPO changes in that
column is a change in a number that no longer measures anything the model can do, so the KL on the task's own
replies is the measure of drift that can be read here.

A DPO success on these pairs would need a smaller step (fewer epochs, a lower learning rate, a larger $\beta$) or
pairs whose rejected side the model actually prefers; [exercise 16.4](#ex-16-4) tries one. The lesson that transfers
to large models is the measurement: preference accuracy alone cannot tell learning the preference from learning the
task, and a paired task score with its interval can.
""")

# ------------------------------------------------------------------------------------------------ GRPO
md("c16-grpo-intro", rf"""
## GRPO: learning from a reward a program computes

DPO needs pairs that someone ranked. For a sum, a program can do better than rank: it can check. A **verifiable
reward** scores each reply, 1 if it is the answer and 0 otherwise (`minitfm.preferences.rewards.exact_answer`,
the check of [chapter 15](15_finetuning.ipynb)). Reinforcement learning then makes high-reward replies more likely. The policy-gradient
estimate of how to do that is noisy, and PPO ([Schulman et al., 2017]({REF}schulman2017proximal)), as InstructGPT
used it, reduces the noise with a learned value network as a baseline. GRPO
([Shao et al., 2024]({REF}shao2024deepseekmath)) drops the value network and uses the other replies to the same
question as the baseline. One step, as `minitfm.preferences.grpo` runs it:

1. **Sample** a group of $G$ replies to each of a few training questions.
2. **Score** each reply with the verifier.
3. **Advantages relative to the group**: $A_i = (r_i - \bar r)/(\mathrm{{std}}(r) + 10^{{-4}})$, the group's mean and
   (unbiased) standard deviation. A reply that beat its group gets $A > 0$, one that fell short $A < 0$. A group
   whose rewards are all equal has $A = 0$ everywhere.
4. **The loss**: every token $t$ of reply $i$ gets the reply's advantage through PPO's clipped surrogate
   $-\min\big(\rho_t A_i,\ \mathrm{{clip}}(\rho_t, 1-\epsilon, 1+\epsilon)\,A_i\big)$, with the ratio
   $\rho_t = \pi(y_t)/\pi_\text{{old}}(y_t)$, averaged over tokens. The minimum makes the clip one-sided: it removes
   the gradient only where the ratio has already moved past $1 \pm \epsilon$ in the direction the advantage
   favours, never where a step went the wrong way. Here every batch is sampled by the current policy and used for
   one step (on-policy), so $\rho = 1$ and the clip never acts; the loss's gradient is then
   $-A_i \nabla \log \pi(y_t)$ averaged over the tokens, the policy gradient with its sign flipped for descent.
5. **Optionally, a KL penalty**: $\beta$ times an estimate of $\mathrm{{KL}}(\pi \| \pi_\text{{ref}})$ per token
   (the "k3" estimator of a note by John Schulman (2020), as DeepSeekMath's loss uses it
   ([Shao et al., 2024]({REF}shao2024deepseekmath)):
   $\frac{{\pi_\text{{ref}}}}{{\pi}} - \log\frac{{\pi_\text{{ref}}}}{{\pi}} - 1 \ge 0$),
   added to the loss. PPO as InstructGPT ran it put the KL into the reward instead; TRL's default is no KL at all.

Answers to what learners ask:

- **"My GRPO loss is 0."** On-policy, the ratio is 1 and the advantages of each group sum to 0, so the loss's *value*
  is about 0 (exactly 0 when all replies have the same length). Its *gradient* is not 0: it is the policy gradient.
  Watch the reward, the share of groups that teach nothing, and the gradient norm, not the loss.
- **"Sum or mean over tokens?"** A mean, and *which* mean is a choice with consequences. The DeepSeekMath paper
  averages each reply's tokens and then the replies, so a token of a long reply weighs less; Dr. GRPO
  ([Liu et al., 2025]({REF}liu2025understanding)) showed that this favours long wrong replies and divides by a
  constant instead; DAPO ([Yu et al., 2025]({REF}yu2025dapo)) averages over every token of the batch, which is TRL's
  default (`loss_type="dapo"`) and this chapter's.
- **"Where does the KL go?"** Into the loss, per token, if anywhere. Dr. GRPO and DAPO drop it for verifiable
  rewards; DeepSeek-R1 kept a small one. This chapter trains without it, except where the failure below asks what
  it changes.

The figure runs one step's arithmetic on one group, from the formula.
""")

code("c16-grpo-diagram", r"""
fig = grpo_diagram(replies=("85", "85", "75", "86", "85", "8"), answer="85", wrong_group=("84", "86", "75", "8"))
plt.show()
""", alt="One GRPO step: a prompt, the policy samples a group of six replies to 47 + 38, a program scores each 1 or 0, "
         "and each reply's advantage is its reward minus the group mean over the group's standard deviation, "
         "positive cells shaded blue and negative pink; the loss makes the positive replies more likely and the "
         "negative ones less. Beside it a group of four wrong replies has advantage 0 in every cell: it teaches "
         "nothing.")

md("c16-ex2", r"""
<div class="exercise" id="ex-16-2">

**Exercise 16.2 (build, checked): group advantages.** Write `my_advantages(rewards)` for an (N, G) tensor of
rewards, row $i$ the G replies to prompt $i$: subtract each group's mean and divide by the group's standard
deviation plus $10^{-4}$. Which standard deviation? The checker expects the unbiased one (divide by $G - 1$), as
TRL and Stanford CS336's assignment compute it; it tells you if you divided by the biased one, by the whole batch's, by
nothing (that is Dr. GRPO's choice), or if a group of equal rewards gave you NaN. Before you run it, predict the
advantages of the group [1, 1, 1, 0].

</div>
""")

code("c16-ex2-stub", r"""
def my_advantages(rewards):
    # (N, G) rewards -> (N, G) advantages: (r - group mean) / (group std + 1e-4)
    raise NotImplementedError  # your code here
""")

code("c16-ex2-check", r"""
check_group_advantages(my_advantages);
""")

md("c16-ex2-solution", r"""
<details class="solution">
<summary>Solution (click to open)</summary>

```python
def my_advantages(rewards):
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    return centred / (rewards.std(dim=1, keepdim=True) + 1e-4)  # torch.std is unbiased by default
```

For [1, 1, 1, 0] the mean is 0.75 and the unbiased standard deviation 0.5, so the three right replies get
$+0.25/0.5 = +0.5$ and the wrong one $-0.75/0.5 = -1.5$: the rare reply carries the large advantage. With the biased
standard deviation (0.433) they would be $+0.58$ and $-1.73$. Dividing by the standard deviation gives a group that
is nearly all right, or nearly all wrong, as much total weight as a balanced one; Dr. GRPO argues that this biases
training towards the questions that are too easy or too hard, and leaves it out (`scale="none"` in
`minitfm.preferences.grpo.group_advantages`).

</details>
""")

md("c16-flat-rule", r"""
<a id="ch16-claim-flat"></a>
### Rule of thumb: a group whose rewards are all equal teaches nothing

Every reply of such a group has advantage 0, so its tokens add nothing to the policy gradient. That is the rule as
people state it; it is worth checking, because the group is not quite absent: with the DAPO normalisation its
tokens still count in the denominator, so they *dilute* the step that the other groups take. DAPO drops them
and samples more ("dynamic sampling") so that every prompt in a batch carries a gradient. The cell samples a batch of 16 training sums, 8 replies each,
and computes the gradient of the loss three ways: on the all-equal groups alone; on the whole batch; and on the
batch without them. The cell checks the rule (it is algebra, so only a bug could make it fail) and measures what
the algebra hides, the dilution. Rule stated before the run: **confirmed** if the all-equal groups' gradient is exactly zero and
the whole batch's gradient is the gradient without them scaled by the share of tokens they leave (same direction,
smaller step); **contradicted** otherwise. The cell also prints the loss's value and the gradient's norm: the loss
near 0, the gradient not.
""")

code("c16-flat", r"""
t0 = time.perf_counter()
flat_q = S.examples(TASK, "train", 16, seed=77)
g = G.sample_groups(assistant, template, [e.chat(with_answer=False) for e in flat_q], 8, seed=7, max_new_tokens=8)
r = torch.tensor([R.exact_answer(x, flat_q[i // 8]) for i, x in enumerate(g.replies)]).view(16, 8)  # (N, G)
adv = G.group_advantages(r).flatten()
flat_rows = (r.std(dim=1) == 0).repeat_interleave(8)  # the rows of groups whose rewards are all equal
probe = copy.deepcopy(assistant)


def gradient(rows, num_tokens):
    # The GRPO (dapo) loss of the chosen rows, normalised by num_tokens, and its gradient as one flat vector.
    probe.zero_grad()
    lp = G.completion_log_probs(probe, g.prompt[rows], g.completion[rows], prompt_mask=g.prompt_mask[rows])
    out = G.grpo_loss(lp, None, adv[rows], g.completion_mask[rows], loss_type="dapo", num_tokens=num_tokens)
    out.loss.backward()
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in probe.parameters()])
    return out.loss.item(), flat


tokens = g.completion_mask.sum(dim=1)  # completion tokens per row
n_flat = int(flat_rows.sum()) // 8
print(f"{n_flat} of {len(flat_q)} groups have all-equal rewards ({int((r.sum(1) == 8).sum())} all right, "
      f"{int((r.sum(1) == 0).sum())} all wrong)")
if 0 < n_flat < len(flat_q):
    _, grad_flat = gradient(flat_rows, int(tokens.sum()))
    loss_all, grad_all = gradient(torch.ones_like(flat_rows), int(tokens.sum()))
    _, grad_kept = gradient(~flat_rows, int(tokens[~flat_rows].sum()))
    share = tokens[~flat_rows].sum().item() / tokens.sum().item()
    rel = ((grad_all - share * grad_kept).norm() / grad_all.norm()).item()
    print(f"the all-equal groups' gradient: largest |entry| {grad_flat.abs().max().item():.1e}")
    print(f"whole batch: loss {loss_all:+.4f}, gradient norm {grad_all.norm().item():.3f}; without the all-equal "
          f"groups the gradient is {1 / share:.2f} times larger (their share of tokens {1 - share:.2f}), relative "
          f"difference after scaling {rel:.1e}")
    word = "confirmed" if grad_flat.abs().max().item() == 0 and rel < 1e-4 else "contradicted"
    print(verdict(word, "all-equal groups add exactly nothing to the gradient, and with the dapo normalisation they only "
                  f"shrink the step by their share of tokens (rule: zero gradient and a relative difference below 1e-4)"))
    assert grad_flat.abs().max().item() == 0 and rel < 1e-4  # advantages of exactly 0: a gradient of exactly 0
else:
    print(verdict("not testable here", "this batch has no group with all-equal rewards, or only such groups"))
SECONDS["all-equal groups"] = time.perf_counter() - t0
""")

md("c16-grpo-what", rf"""
<a id="ch16-claim-grpo"></a>
### GRPO on sums: what trains, and the rule

**What this run trains, and why not everything.** While writing this chapter we ran GRPO on all 1.2 million
weights of the assistant at learning rates from $3 \times 10^{{-5}}$ to $10^{{-3}}$, at the budget of seconds this
chapter has (20 steps of 64 sampled replies), and none raised held-out pass@1: small rates changed nothing
measurable, larger ones made it worse, and the training reward fell with it. [Exercise 16.3](#ex-16-3) repeats it on
your machine. A step of the policy gradient estimated from 64 replies carries a little signal and a lot of noise;
spread over a million weights, the noise wins. Large-scale runs buy their signal with far larger batches: DeepSeekMath's
GRPO sampled 64 replies to each question, in batches of 1024, each reply up to 1024 tokens long
([Shao et al., 2024]({REF}shao2024deepseekmath), section 4.2). So this run trains only the **gain of the final
RMSNorm**: 128 numbers that scale the features the output layer reads, a policy that can rescale and reweight
those features but has little room to learn new arithmetic.

**The run**: 20 steps, each 8 training sums times a group of 8 replies at temperature 1, the exact-answer reward,
the DAPO loss, Adam at a learning rate of 0.1 (large, because 128 gains move little), no KL; three seeds (each
seed draws other training sums and other samples).

**Rule stated before the run** (the success criterion), decided over the seeds together: for each held-out question,
average the three trained policies' pass@1; **confirmed** if the 95% paired bootstrap interval of that average minus
the untrained pass@1 lies above 0 and the average is above the best constant reply, **contradicted** if the interval
lies below 0, **mixed** otherwise. (The sixteen samples per question before training are one draw; averaging the
seeds after it lowers the noise on one side of the difference, where a rule on every seed alone would let that one
draw decide. The table still shows each seed's own interval.) Beside the
result the cell prints a **control** with no training at all: the assistant sampled at temperature 0.75, on the
same questions with the same seed. If GRPO here only made the model surer of its first choice, the control should
do about as well. Two rules compare them:

- *GRPO raised pass@1 no more than cooling the sampler does*: confirmed if, on every seed, GRPO's pass@1 is within
  0.03 of the control's (about half the width of the success's interval). (0.75 is where the probe's trained
  policies landed, so this checks that finding on your run; finding a temperature that matches is not itself
  evidence: for a small gain in pass@1 some temperature always matches.)
- *…and only like a temperature*: a temperature never changes a greedy reply, so the cell counts the held-out
  questions whose greedy reply the trained policy changed: confirmed if no seed changes more than 5% of them,
  contradicted if every seed changes more than 20%, mixed otherwise. (This rule was added after an outside review
  of the chapter measured the shipped GRPO model's greedy replies, not before any run.)
""")

code("c16-grpo-run", r"""
t0 = time.perf_counter()
GRPO_SEEDS, STEPS, PROMPTS, GROUP, GRPO_LR = [0, 1, 2], 20, 8, 8, 0.1
grpo = {}
for seed in GRPO_SEEDS:
    train = S.examples(TASK, "train", STEPS * PROMPTS, seed=1000 + seed)
    policy, hist = grpo_train(assistant, template, train, R.exact_answer, steps=STEPS, prompts=PROMPTS, group=GROUP,
                              lr=GRPO_LR, trainable="final_norm", seed=seed)
    c, rows = sampled_correct(policy, template, held, N_SAMPLES, seed=EVAL_SEED)
    p1, p16 = pass_at_k_counts(c, N_SAMPLES, 1), pass_at_k_counts(c, N_SAMPLES, 16)
    out = greedy_replies(policy, held)
    grpo[seed] = dict(p1=p1, p16=p16, hist=hist, distinct=distinct(rows), greedy=greedy_right(policy, held, out).mean(),
                      changed=float(np.mean([a != b for a, b in zip(out, greedy0_replies)])),
                      d1=paired_bootstrap(p1, before_1, rng=np.random.default_rng(seed), n_resamples=2000),
                      d16=paired_bootstrap(p16, before_16, rng=np.random.default_rng(seed), n_resamples=2000))
    if seed == GRPO_SEEDS[0]:
        grpo_policy = policy  # kept for the side-by-side comparison at the end
SECONDS["GRPO, 3 runs"] = time.perf_counter() - t0
t0 = time.perf_counter()
CONTROL_T = 0.75
ctrl_c, ctrl_rows = sampled_correct(assistant, template, held, N_SAMPLES, seed=EVAL_SEED, temperature=CONTROL_T)
ctrl_1, ctrl_16 = pass_at_k_counts(ctrl_c, N_SAMPLES, 1), pass_at_k_counts(ctrl_c, N_SAMPLES, 16)
SECONDS["temperature control"] = time.perf_counter() - t0
print(f"before: pass@1 {before_1.mean():.3f}, pass@16 {before_16.mean():.3f}, {distinct(before_rows):.2f} different "
      f"answers, greedy accuracy {greedy0:.3f}; best constant reply {best:.3f}")
print(f"control, no training, sampled at temperature {CONTROL_T}: pass@1 {ctrl_1.mean():.3f}, pass@16 "
      f"{ctrl_16.mean():.3f}, {distinct(ctrl_rows):.2f} different answers")
print(seed_table({"pass@1 after": [grpo[s]["p1"].mean() for s in GRPO_SEEDS],
                  "  rise, 95% interval low": [grpo[s]["d1"].low for s in GRPO_SEEDS],
                  "  rise, 95% interval high": [grpo[s]["d1"].high for s in GRPO_SEEDS],
                  "pass@16 after": [grpo[s]["p16"].mean() for s in GRPO_SEEDS],
                  "  change, interval low": [grpo[s]["d16"].low for s in GRPO_SEEDS],
                  "  change, interval high": [grpo[s]["d16"].high for s in GRPO_SEEDS],
                  "different answers per question": [grpo[s]["distinct"] for s in GRPO_SEEDS],
                  "greedy accuracy after": [grpo[s]["greedy"] for s in GRPO_SEEDS],
                  "greedy replies changed (share)": [grpo[s]["changed"] for s in GRPO_SEEDS],
                  "training reward, first 5 steps": [np.mean(grpo[s]["hist"].reward[:5]) for s in GRPO_SEEDS],
                  "training reward, last 5 steps": [np.mean(grpo[s]["hist"].reward[-5:]) for s in GRPO_SEEDS],
                  "all-equal groups (share)": [np.mean(grpo[s]["hist"].zero_var) for s in GRPO_SEEDS]},
                 GRPO_SEEDS))
""")

code("c16-grpo-curves", r"""
fig, axes = plt.subplots(1, 3, figsize=(12, 3.3))
for s in GRPO_SEEDS:
    h = grpo[s]["hist"]
    axes[0].plot(h.reward, label=f"seed {s}")
    axes[1].plot(h.kl)
    axes[2].plot(h.zero_var)
for ax, title in zip(axes, ("training reward (mean of the batch)", "KL to the reference per token (k3)",
                            "share of groups with all-equal rewards")):
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("GRPO step")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()
""", alt="Three panels against the GRPO step, one line per seed: the mean training reward of each batch, the k3 KL divergence to the reference per token (starting at 0 and growing), and "
         "the share of groups whose eight rewards were all equal.")

code("c16-grpo-verdict", r"""
pooled_1 = np.mean([grpo[s]["p1"] for s in GRPO_SEEDS], axis=0)  # per question, over the seeds
pooled_16 = np.mean([grpo[s]["p16"] for s in GRPO_SEEDS], axis=0)
rise_1 = paired_bootstrap(pooled_1, before_1, rng=np.random.default_rng(0), n_resamples=2000)
rise_16 = paired_bootstrap(pooled_16, before_16, rng=np.random.default_rng(0), n_resamples=2000)
word = ("confirmed" if rise_1.low > 0 and pooled_1.mean() > best else "contradicted" if rise_1.high < 0 else "mixed")
print(verdict(word, f"GRPO raises held-out pass@1: {before_1.mean():.3f} -> {pooled_1.mean():.3f} (mean of "
                    f"{len(GRPO_SEEDS)} seeds), rise {rise_1.difference:+.3f}, 95% interval {rise_1.low:+.3f} to "
                    f"{rise_1.high:+.3f}; best constant reply {best:.3f} (rule: interval above 0 and above the best "
                    "constant: confirmed; below 0: contradicted; else mixed)"))
print(judge(f"GRPO raised pass@1 no more than cooling the sampler does: its pass@1 within 0.03 of the untrained "
            f"model's at temperature {CONTROL_T} ({ctrl_1.mean():.3f})",
            [abs(grpo[s]["p1"].mean() - ctrl_1.mean()) < 0.03 for s in GRPO_SEEDS]))
changed = [grpo[s]["changed"] for s in GRPO_SEEDS]
word = "confirmed" if max(changed) <= 0.05 else "contradicted" if min(changed) > 0.20 else "mixed"
print(verdict(word, "and only like a temperature: the trained policies changed the greedy reply on "
                    + ", ".join(f"{c:.2f}" for c in changed) + f" of the {len(held)} held-out questions (per seed; a "
                    "temperature changes none; rule: no seed above 0.05 confirmed, every seed above 0.20 "
                    "contradicted, else mixed)"))
""")

md("c16-grpo-reading", r"""
**Reading the run.** In the book's run GRPO raised held-out pass@1 by more than its interval and far above the best
constant reply; your verdict is printed above, and the table shows how much each seed's own interval varies. The control puts that success in its place: in the
book's run, sampling the untrained assistant at a lower temperature lands about where GRPO lands. With only the
final gain to train, the cheapest way to raise the reward is to make the likely answers more likely, and cooling the
sampler does much the same to pass@1. It is not only a temperature, though: a temperature never changes a greedy
reply, and the table shows the share of greedy replies that the trained gains did change (your last verdict above
says how many). The 128 gains reweight the features that the output layer reads, so they can reorder the
candidates, mostly among answers the model already gave. The number of different answers per question falls with
it. The curves show the KL to the reference growing from zero while the training reward, measured on new questions
at every step, is too noisy to show a gain of a few hundredths in twenty steps: the held-out evaluation with its
paired interval is what shows it.

That is not a quirk of the toy. Whether RL teaches new abilities or sharpens existing ones is the next claim.
""")

md("c16-yue", rf"""
<a id="ch16-claim-sharpen"></a>
### Does RL add answers, or sharpen the ones the model had?

[Yue et al. (2025)]({REF}yue2025does) compared base models with their RL-trained versions (RL with verifiable
rewards, on math, code and visual reasoning) at many values of $k$: the trained models win at pass@1, and at large
$k$ the base models catch up and pass them. The right answers of the trained model were almost always already among the base
model's samples; RL made them more likely, and narrowed the rest. The test of that here, stated before the run,
with the seeds pooled as in the success rule: **RL sharpens** (confirmed) if pass@1 rises by more than its interval
and the upper end of pass@16's paired interval is below +0.03 (no gain in reach larger than 0.03); it **adds
answers** (contradicted) if pass@16's interval lies above 0; mixed otherwise. (A rule that asked only "pass@16 did
not rise by more than its interval" would say "sharpens" whenever the interval is too wide to see a gain; the
margin of 0.03 bounds what "no gain" means.) Sixteen samples is a small $k$ beside the paper's 256 and more, so this is the weaker, local form of
the question: did the trained model reach any question that sixteen samples of the assistant could not?
""")

code("c16-yue-verdict", r"""
word = ("contradicted" if rise_16.low > 0 else "confirmed" if rise_1.low > 0 and rise_16.high < 0.03 else "mixed")
print(verdict(word, f"RL sharpens: pass@1 rise {rise_1.difference:+.3f} (interval {rise_1.low:+.3f} to "
                    f"{rise_1.high:+.3f}) while pass@16 changes {rise_16.difference:+.3f} (interval {rise_16.low:+.3f} "
                    f"to {rise_16.high:+.3f}); rule: pass@1 up by more than its interval and pass@16's interval below +0.03: "
                    "confirmed; pass@16's interval above 0 (new answers): contradicted; else mixed"))
unreached = np.mean([((before_c == 0) & (grpo[s]["p1"] > 0)).mean() for s in GRPO_SEEDS])
lost = np.mean([((before_c > 0) & (grpo[s]["p1"] == 0)).mean() for s in GRPO_SEEDS])
print(f"share of held-out questions with no right sample before and one after: {unreached:.3f}; with one before and "
      f"none after: {lost:.3f} (mean over the seeds)")
""")

md("c16-yue-reading", r"""
In the book's run, RL sharpened: pass@1 rose while pass@16 did not rise. The line under the verdict shows, for
your run, the share of questions that gained a first right sample and the share that lost their last one; no rule
decides between those two small numbers here. Where the verdict is "confirmed", the trained policies reached no more questions than the
assistant's sixteen samples did (within 0.03), and what changed is mainly how often they say the answers it had. Sixteen is the
largest $k$ this chapter can afford; [Yue et al. (2025)](../book/references.md#cite-yue2025does) went to 256 and
beyond.
""")

md("c16-g2-rule", r"""
<a id="ch16-claim-group"></a>
### Rule of thumb: a group of 8 beats a group of 2 at equal samples

A larger group gives each reply a better baseline and fewer groups whose rewards are all equal; a smaller group,
at the same number of samples per step, sees more questions. The rule people state is that the first effect wins.
The test changes one thing: the group size, 2 instead of 8, with 32 questions per step instead of 8, so that every
step still samples 64 replies (and the G = 2 run sees four times as many distinct training questions, which is
what "at equal samples" means). Same steps, learning rate, trained gain and evaluation, on the first seed of the
run above (one run more is what the time budget allows). Rule, decided before the run: the per-question pass@1
after training of G = 8 minus G = 2, with its paired 95% bootstrap interval over the held-out questions: **confirmed** if the
interval lies above 0, **contradicted** if below, **mixed** if it contains 0. The interval covers the held-out
questions, not the training run: with one training run per arm, and training runs that differ among themselves
(the three G = 8 seeds above show by how much), a "confirmed" or "contradicted" here is one pair of runs' result,
not a finding about group size; the verdict line says so. No primary source states this rule as we test
it; it is the common advice that a larger group is worth its cost.
""")

code("c16-g2-run", r"""
t0 = time.perf_counter()
G2_SEEDS = GRPO_SEEDS[:1]
g2 = {}
for seed in G2_SEEDS:
    train = S.examples(TASK, "train", STEPS * 4 * PROMPTS, seed=1000 + seed)
    policy, hist = grpo_train(assistant, template, train, R.exact_answer, steps=STEPS, prompts=4 * PROMPTS, group=2,
                              lr=GRPO_LR, trainable="final_norm", seed=seed)
    c, _ = sampled_correct(policy, template, held, N_SAMPLES, seed=EVAL_SEED)
    g2[seed] = dict(p1=pass_at_k_counts(c, N_SAMPLES, 1), hist=hist)
eight = np.mean([grpo[s]["p1"] for s in G2_SEEDS], axis=0)
two = np.mean([g2[s]["p1"] for s in G2_SEEDS], axis=0)
gap = paired_bootstrap(eight, two, rng=np.random.default_rng(0), n_resamples=2000)
print(seed_table({"G = 8: pass@1 after": [grpo[s]["p1"].mean() for s in G2_SEEDS],
                  "G = 2: pass@1 after": [g2[s]["p1"].mean() for s in G2_SEEDS],
                  "G = 8: all-equal groups": [np.mean(grpo[s]["hist"].zero_var) for s in G2_SEEDS],
                  "G = 2: all-equal groups": [np.mean(g2[s]["hist"].zero_var) for s in G2_SEEDS]}, G2_SEEDS))
word = "confirmed" if gap.low > 0 else "contradicted" if gap.high < 0 else "mixed"
print(verdict(word, f"group size 8 beats group size 2 at 64 samples per step, in this one pair of training runs: "
                    f"pass@1 difference {gap.difference:+.3f} (95% interval {gap.low:+.3f} to {gap.high:+.3f}, paired "
                    f"over {len(held)} questions, seed {G2_SEEDS}; above 0 confirmed, below contradicted, containing it "
                    "mixed; the interval does not cover the spread between training runs)"))
SECONDS["group size 2, 1 run"] = time.perf_counter() - t0
""")

md("c16-g2-reading", r"""
The share of all-equal groups shows the mechanism: a pair of replies to a question the model gets right about half
the time agrees about half the time, and such a pair teaches nothing, while a group of eight on such a question
almost never agrees; the groups that do agree at G = 8 are the questions the model nearly always gets right or
nearly always gets wrong. Whether
the extra questions make up for it is what the verdict measured; at this budget and with 128 trainable numbers the
difference may be too small to see, and then "mixed" is the honest word.
""")

# ------------------------------------------------------------------------------------------------ the failure
md("c16-hack-intro", r"""
<a id="ch16-claim-hack"></a>
## The failure: a verifier that can be hacked

A verifiable reward is only as good as its verifier. The policy does not learn "add the numbers"; it learns
whatever the verifier pays for, and a verifier is a specification written by a person in a hurry. Three loose
checks that people write:

- `rewards.contains_answer`: the answer appears *anywhere* in the reply (it forgives "The answer is 85", and pays
  "84 85 86" as well);
- a comparison character by character with `zip`, which stops at the shorter string, so that "8" and the empty
  reply are paid for "85";
- `rewards.integer_or_pass`: compare as integers, inside a `try` whose `except ValueError: pass` falls through to
  the success return, so every reply that `int()` cannot parse is paid ("14f 7 8", "12a", "").

GRPO can only reinforce what the policy samples, so the first question is what each check pays on the assistant's
own replies. The cell scores the sixteen samples per held-out question from the start of the chapter with each
check, and counts how many samples are not integers at all, at the usual temperature and at a hotter one.
""")

code("c16-hack-reach", r"""
t0 = time.perf_counter()


def zip_compare(reply, example):
    # Character by character with zip, which stops at the shorter string: "8" and "" are paid for "85".
    return float(all(a == b for a, b in zip(reply.strip(), example.answer)))


CHECKS = {"exact_answer": R.exact_answer, "contains_answer": R.contains_answer, "zip comparison": zip_compare,
          "integer_or_pass": R.integer_or_pass}
flat_before = [(x, e) for row, e in zip(before_rows, held) for x in row]
print(f"what each check pays on the assistant's {len(flat_before)} samples at temperature 1:")
for name, check in CHECKS.items():
    print(f"  {name:16} {np.mean([check(x, e) for x, e in flat_before]):.3f}")
hack_q = held[:64]
_, hot_rows = sampled_correct(assistant, template, hack_q, 8, seed=EVAL_SEED, temperature=1.5)


def not_integer(rows):
    # The share of replies that int() cannot parse.
    flat = [x for row in rows for x in row]
    return sum(not x.strip().lstrip("-").isdigit() for x in flat) / len(flat)


print(f"share of replies that are not an integer: {not_integer(before_rows):.3f} at temperature 1, "
      f"{not_integer(hot_rows):.3f} at temperature 1.5")
SECONDS["what the checks pay"] = time.perf_counter() - t0
""")

md("c16-hack-rule", r"""
The assistant ends every sum with its end token after two or three digits and almost never writes a shorter or a
longer reply, so `contains_answer` and the `zip` comparison pay almost exactly what the exact check pays: their loopholes
are almost never sampled, and training on them is nearly training on the exact reward. `integer_or_pass` is different: a small
share of the assistant's samples are not integers, more of them at a higher temperature, and every one of them is
paid.

The run trains on `integer_or_pass` with the success recipe above (the final gain, the same learning rate, steps and
groups), changing only the verifier and the sampling temperature while training, 1.5 instead of 1, so that junk is
sampled often enough to be found within twenty steps. This setting was chosen for the demonstration: in the probe
behind this chapter, five other loose checks were never hacked, and at training temperature 1 this one was hacked
on only some seeds. It runs once without a KL term and once with a KL penalty of
weight $\beta = 1$ to the assistant, and measures on 64 held-out sums (eight samples each, at temperature 1) both
what the verifier pays (the **proxy**) and the truth (exact-answer pass@1).

Rules stated before the run (a run that does nothing moves both numbers by a few hundredths on this many samples,
hence the margin of 0.10):

1. *The verifier is hacked*: without the KL term, the held-out proxy rises by at least 0.10 while the true pass@1
   falls by at least 0.10.
2. *A KL penalty prevents it*: with $\beta = 1$, the same rule does **not** hold. Its KL per reply is printed beside
   it, so that you can see whether it stopped the hack or every change.
""")

code("c16-hack-run", r"""
t0 = time.perf_counter()
SLOPPY = R.integer_or_pass  # the verifier the policy is trained on; exact_answer stays the truth
HACK_SEEDS, HACK_BETAS, HACK_SAMPLES, HACK_T = [0], (0.0, 1.0), 8, 1.5
HACK = dict(steps=STEPS, prompts=PROMPTS, group=GROUP, lr=GRPO_LR, trainable="final_norm", max_new_tokens=8)


def proxy_and_true(model):
    # Per held-out question: the share of HACK_SAMPLES samples (temperature 1) the sloppy verifier pays, the share
    # that is right, and the mean reply length in characters.
    right, rows = sampled_correct(model, template, hack_q, HACK_SAMPLES, seed=EVAL_SEED)
    proxy = np.array([np.mean([SLOPPY(x, e) for x in row]) for row, e in zip(rows, hack_q)])
    return proxy, right / HACK_SAMPLES, np.mean([len(x) for row in rows for x in row])


proxy0, true0, length0 = proxy_and_true(assistant)
hack = {}
for beta in HACK_BETAS:
    for seed in HACK_SEEDS:
        train = S.examples(TASK, "train", STEPS * PROMPTS, seed=1000 + seed)
        policy, hist = grpo_train(assistant, template, train, SLOPPY, beta=beta, temperature=HACK_T, seed=seed, **HACK)
        proxy, true, length = proxy_and_true(policy)
        hack[beta, seed] = dict(proxy=proxy.mean(), true=true.mean(), length=length, hist=hist, policy=policy,
                                kl=policy_kl(policy, assistant, template, hack_q[:32], n=4, seed=0))
        hack[beta, seed]["hacked"] = (hack[beta, seed]["proxy"] >= proxy0.mean() + 0.10
                                      and hack[beta, seed]["true"] <= true0.mean() - 0.10)
print(f"before: held-out proxy {proxy0.mean():.3f}, true pass@1 {true0.mean():.3f}, reply length {length0:.2f} characters")
print(seed_table({f"beta {b:g}: {name}": [hack[b, s][key] for s in HACK_SEEDS]
                  for b in HACK_BETAS
                  for name, key in [("held-out proxy after", "proxy"), ("true pass@1 after", "true"),
                                    ("reply length (characters)", "length"), ("KL per reply (nats)", "kl")]},
                 HACK_SEEDS))
SECONDS["sloppy verifier, 2 runs"] = time.perf_counter() - t0
""")

code("c16-hack-curves", r"""
fig, axes = plt.subplots(1, len(HACK_BETAS), figsize=(10, 3.3), sharey=True)
for ax, beta in zip(axes, HACK_BETAS):
    for s in HACK_SEEDS:
        h = hack[beta, s]["hist"]
        ax.plot(h.reward, color="C1", label="proxy: what integer_or_pass pays" if s == HACK_SEEDS[0] else None)
        ax.plot(h.exact, color="C0", ls="--", label="truth: the exact answer" if s == HACK_SEEDS[0] else None)
    ax.set_title(f"trained on the sloppy verifier, KL weight {beta:g}", fontsize=10)
    ax.set_xlabel("GRPO step")
axes[0].set_ylabel(f"mean reward of the batch (temperature {HACK_T:g})")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()
""", alt="Two panels against the GRPO step, without and with the KL penalty of weight 1: the proxy reward that "
         "integer_or_pass pays on each training batch (solid orange) and the exact-answer reward of the same "
         "replies (dashed blue).")

code("c16-hack-verdict", r"""
print(judge("the sloppy verifier is hacked without a KL term: held-out proxy up by at least 0.10 while the true "
            "pass@1 falls by at least 0.10", [hack[0.0, s]["hacked"] for s in HACK_SEEDS]))
if any(hack[0.0, s]["hacked"] for s in HACK_SEEDS):
    print(judge("a KL penalty of weight 1 prevents it: the same rule does not hold with beta=1 (KL per reply "
                + ", ".join(f"{hack[1.0, s]['kl']:.3f}" for s in HACK_SEEDS) + " nats against "
                + ", ".join(f"{hack[0.0, s]['kl']:.3f}" for s in HACK_SEEDS) + " without the KL term: a small one "
                "means it stopped every change, not only the hack)",
                [not hack[1.0, s]["hacked"] for s in HACK_SEEDS if hack[0.0, s]["hacked"]]))
else:
    print(verdict("not testable here", "no run without the KL term was hacked, so there was nothing to prevent"))
""")

md("c16-hack-reading", r"""
**Reading the run.** In the book's run the policy trained without a KL term found the loophole: its proxy reward
climbed towards 1 while the exact reward of the same replies fell, and on held-out sums it writes longer replies
that are not numbers at all (the side-by-side table at the end shows some). Nothing in the training numbers looks
wrong from the proxy's side; only the second column, the truth, tells you. Three lessons:

- **A verifier is a specification.** Test it on adversarial replies before training on it: the empty reply, junk,
  a list of guesses, the answer followed by more. The tests of `minitfm.preferences.rewards` do exactly that.
- **A loophole matters only if the policy reaches it.** The two checks this assistant never exploited are just as
  wrong; they were safe here only because the assistant almost never samples the replies they overpay. A stronger model,
  a higher temperature or more steps would find them.
- **The KL term is a leash, not a fix.** In the book's run, with $\beta = 1$ the policy barely moved at all (its KL
  per reply is printed above), so this run cannot tell "prevented the hack" from "prevented everything". In the
  probe behind this chapter, a weight of 0.1 slowed the hack without stopping it. The KL penalty cannot tell a hack
  from learning: it charges for every departure from the reference, the useful ones included.
  DeepSeek-R1 ([DeepSeek-AI, 2025](../book/references.md#cite-deepseekai2025r1)) used rule-based rewards rather than
  a neural reward model partly for this reason, and the verifier still has to be right.
""")

# ------------------------------------------------------------------------------------------------ scale
md("c16-scale", rf"""
## What changes at scale

- **Reward models and PPO, as InstructGPT did them.** [Ouyang et al. (2022)]({REF}ouyang2022training) had people
  rank several replies to each prompt, trained a reward model on the pairs those rankings imply with the
  Bradley-Terry loss, and then ran PPO against it: a per-token KL penalty to the supervised model inside the reward,
  a value network as the baseline, the clipped ratio of [Schulman et al. (2017)]({REF}schulman2017proximal), and a
  pretraining term mixed in to limit forgetting. Learning the reward from people's comparisons goes back to
  [Christiano et al. (2017)]({REF}christiano2017deep), on games and simulated robots.
  It needs four models in memory (policy, reference, reward, value); DPO needs two (policy and reference), and GRPO
  drops the value network.
- **GRPO as DeepSeek ran it.** [Shao et al. (2024)]({REF}shao2024deepseekmath) introduced the group baseline for
  math; [DeepSeek-AI (2025)]({REF}deepseekai2025r1) trained R1-Zero with GRPO directly from a base model, with
  rule-based rewards (an accuracy check of the final answer, a format check) and no neural reward model, which they
  found open to reward hacking at scale; R1 itself adds supervised "cold start" data and further stages.
- **Dr. GRPO and DAPO.** [Liu et al. (2025)]({REF}liu2025understanding) showed that dividing by each reply's length
  and by the group's standard deviation biases what GRPO learns (long wrong replies are punished less per token;
  questions that are nearly always right or wrong weigh more) and removed both. [Yu et al. (2025)]({REF}yu2025dapo)
  (DAPO) average the loss over every token of the batch, clip the ratio higher above 1 than below it to keep
  exploration alive, drop the groups whose rewards are all equal and sample more instead (the rule tested above),
  penalise overlong replies, and use no KL term. Hugging Face TRL's `GRPOTrainer` takes two of these by
  default, DAPO's token-level loss (`loss_type="dapo"`) and no KL (`beta=0.0`), while it keeps the group's standard
  deviation (`scale_rewards="group"`) and a symmetric clip. So "GRPO" in a library is neither the paper's GRPO nor
  DAPO unless you set it so.
- **Why verifiable rewards suit math and code.** A final answer can be compared with the right one, and a program
  can be run against tests: the reward is cheap, exact and cannot be flattered by style, so millions of replies can
  be scored without a person or a reward model to exploit. What remains is the verifier itself, which this
  chapter's failure section probes, and the limit that [Yue et al. (2025)]({REF}yue2025does) measured: RL with such
  rewards mostly makes the right answers a model could already sample more likely.
- **The budget.** This chapter's runs sample a few thousand replies of up to eight tokens on one CPU thread. The
  published runs sample far more: DeepSeekMath's GRPO drew 64 replies to each question, in batches of 1024, each up
  to 1024 tokens long ([Shao et al., 2024]({REF}shao2024deepseekmath), section 4.2), on a model of 7 billion
  weights. That is where a signal strong enough to change every weight comes from.
""")

# ------------------------------------------------------------------------------------------------ side by side
md("c16-compare", r"""
## The models side by side

The assistant, the DPO policy ($\beta = 0.1$), the GRPO policy (first seed) and the policy trained on the sloppy
verifier without a KL term, of this run, greedily, on a few held-out sums and on one question of another task. Greedy replies can differ on another CPU where two tokens are
nearly tied, so this cell's output is not compared by the tests.
""")

code("c16-compare-run", r"""
# NBVAL_IGNORE_OUTPUT
questions = [e.prompt for e in held[:4]] + ["What is 25 + 17?", "Sort these digits: 8 3 5"]
models = {"assistant": assistant, "DPO, beta 0.1": dpo_policy, "GRPO": grpo_policy,
          "GRPO, sloppy": hack[0.0, HACK_SEEDS[0]]["policy"]}
print(f"{'question':26}" + "".join(f"{name:>15}" for name in models))
for q in questions:
    answers = [replies(model, template, [[{"role": "user", "content": q}]], max_new_tokens=8)[0]
               for model in models.values()]
    print(f"{q:26}" + "".join(f"{a!r:>15}" for a in answers))
""")

md("c16-live", r"""
On the book's web page, where no kernel runs, the comparison below runs in your browser on weights the site serves:
type a question and each shipped model answers it greedily. The live box's models are the shipped ones: the base
model, the assistant, `dpo_lm` (β = 1 on 183 pairs of its own right-versus-wrong sums, so gentler than the β = 0.1
run above, and by its training record still a little worse at sums than the assistant) and `grpo_lm` (the GRPO
recipe above, first seed). The sloppy-verifier policy is not shipped.
""")

code("c16-live-run", r"""
# NBVAL_IGNORE_OUTPUT
from minitfm.viz.compare_box import live_compare

live_compare(prompt="What is 25 + 17?")
""")

# ------------------------------------------------------------------------------------------------ closing
md("c16-summary", r"""
## Summary

- **DPO** turns preferences into a loss on the policy alone: $-\log\sigma(\beta[\,\text{chosen log-ratio} -
  \text{rejected log-ratio}\,])$, log-probabilities summed over each reply's tokens. It starts at $\ln 2$; a larger
  $\beta$ keeps the policy closer to the reference; it trains only the margin, so the chosen reply's probability can
  fall (likelihood displacement), and a preference accuracy well above 0.5 can be mostly the ranking the model
  already had before training, while it says its right answer less often. Measure the ranking against the model
  before training, and the task, paired, not only the preference accuracy.
- **GRPO** samples a group per question, scores it with a program, and pushes each reply by its reward relative to
  its group. On-policy its loss is about 0 and its gradient is not; a group whose rewards are all equal adds nothing
  to the gradient and, under the DAPO normalisation, dilutes the rest.
- **GRPO** here trained only the final norm's 128 gains (full-parameter GRPO was too noisy at this budget in our
  probe; [exercise 16.3](#ex-16-3) repeats it). The verdicts above say, for your run, whether held-out pass@1 rose
  beyond its interval and the best constant reply, how it compares with simply sampling cooler, whether it changed
  greedy replies as a temperature cannot, and whether pass@16 rose. In the book's run it sharpened what the model
  could already say, as [Yue et al. (2025)](../book/references.md#cite-yue2025does) found at scale.
- A verifier is a specification. The failure section trains on a sloppy one and measures the proxy against the
  truth; your verdicts above say what your run found, and what a KL penalty changed.
""")

md("c16-exercises", r"""
## Exercises

[Exercise 16.1](#ex-16-1) (the DPO loss) and [exercise 16.2](#ex-16-2) (group advantages) are in the sections they
build on.
""")

md("c16-ex3", r"""
<div class="exercise" id="ex-16-3">

**Exercise 16.3 (investigate): GRPO on every weight.** Run the success experiment again with `trainable="all"` at
learning rates $10^{-4}$ and $3 \times 10^{-4}$, everything else unchanged, and compare held-out pass@1 with its
paired interval, the training reward of the last steps, and the KL per token. State first what result would make
you prefer training every weight. Then find the smallest set of weights that still succeeds: `trainable` also
accepts `"norms"` (every norm gain), `"last_block"` or a function of a parameter's name.

</div>

<details class="solution">
<summary>Solution (click to open)</summary>

```python
for lr in (1e-4, 3e-4):
    train = S.examples(TASK, "train", STEPS * PROMPTS, seed=1000)
    policy, hist = grpo_train(assistant, template, train, R.exact_answer, steps=STEPS, prompts=PROMPTS,
                              group=GROUP, lr=lr, trainable="all", seed=0)
    c, _ = sampled_correct(policy, template, held, N_SAMPLES, seed=EVAL_SEED)
    d = paired_bootstrap(pass_at_k_counts(c, N_SAMPLES, 1), before_1, rng=np.random.default_rng(0), n_resamples=2000)
    print(lr, f"pass@1 {c.mean() / N_SAMPLES:.3f} ({d.low:+.3f} to {d.high:+.3f}); reward {np.mean(hist.reward[-5:]):.2f}; "
          f"KL {hist.kl[-1]:.3f}")
```

In the probe behind this chapter, neither rate raised pass@1: the smaller changed nothing measurable and the larger
made it worse, its training reward falling too. A policy gradient
estimated from 64 replies is mostly noise in a million directions; the run that trains 128 gains averages the same
noise into a handful of directions that matter for confidence. More replies per step, more steps, or a smaller
learning rate with many more steps are the ways out, each paid in time.

</details>
""")

md("c16-ex4", r"""
<div class="exercise" id="ex-16-4">

**Exercise 16.4 (investigate): a gentler DPO.** In the book's run, the DPO run above at $\beta = 0.1$ lost task
accuracy.
Train once more at $\beta = 1$ for one epoch at a learning rate of $3 \times 10^{-5}$, and compare greedy accuracy
(paired, with its interval), the KL per reply and the chosen log-probability with the runs above. Then try training
only the final norm gain, as GRPO did (`trainable="final_norm"`, a larger learning rate). Decide before you run it:
what would count as a DPO success here?

</div>

<details class="solution">
<summary>Solution (click to open)</summary>

```python
for trainable, lr in (("all", 3e-5), ("final_norm", 3e-2)):
    policy, hist = dpo_train(assistant, template, train_pairs, beta=1.0, lr=lr, epochs=1, seed=0, trainable=trainable)
    d = paired_bootstrap(greedy_right(policy, acc_q), right0, rng=np.random.default_rng(0), n_resamples=2000)
    with torch.no_grad():
        chosen = D.sequence_log_probs(policy, train_c).mean().item()
    print(trainable, f"greedy {d.difference:+.3f} ({d.low:+.3f} to {d.high:+.3f}); "
          f"KL {policy_kl(policy, assistant, template, acc_q[:50]):.2f}; chosen {chosen0:.2f} -> {chosen:.2f}")
```

A success would be held-out pairs ranked the right way by the policy's own log-probabilities more often than the
untrained assistant ranks them (`own_ranking(policy)` against `ref_rank`, paired, its interval above 0) *and* greedy
accuracy up by more than its interval. A
smaller step moves less in both directions; whether any step size gets the first without losing the second on these
near-identical pairs is what you measure. The final-gain run can only reweight the features the
output layer reads, so it can help mostly where the chosen sum was already among the model's first choices.

</details>
""")

md("c16-references", rf"""
## References

- [Bradley and Terry (1952)]({REF}bradley1952rank): the model of paired comparisons behind reward models and DPO.
- [Christiano et al. (2017)]({REF}christiano2017deep): a reward model learned from people's comparisons, then
  reinforcement learning against it.
- [Schulman et al. (2017)]({REF}schulman2017proximal): PPO, the clipped ratio that GRPO keeps.
- [Ouyang et al. (2022)]({REF}ouyang2022training): InstructGPT, supervised fine-tuning, a reward model and PPO with a
  KL penalty.
- [Rafailov et al. (2023)]({REF}rafailov2023direct): DPO, the loss derived in this chapter.
- [Razin et al. (2025)]({REF}razin2025unintentional): likelihood displacement, why the chosen reply's probability
  falls.
- [Shao et al. (2024)]({REF}shao2024deepseekmath): GRPO, the group as the baseline.
- [DeepSeek-AI (2025)]({REF}deepseekai2025r1): DeepSeek-R1, GRPO with rule-based rewards at scale.
- [Liu et al. (2025)]({REF}liu2025understanding): Dr. GRPO, the length and standard-deviation biases.
- [Yu et al. (2025)]({REF}yu2025dapo): DAPO, the token-level loss and dropping the groups that teach nothing.
- [Yue et al. (2025)]({REF}yue2025does): pass@k at large k, and whether RL adds answers or sharpens them.
- [Chen et al. (2021)](../book/references.md#cite-chen2021evaluating): the unbiased pass@k estimator.
""")

md("c16-next", r"""
## What's next

Both methods here learned from judgements of the model's own replies, and both showed the same limit on a small
model: they move probability among answers the model can already write. Teaching a new ability still takes data
that shows it, as [chapter 15](15_finetuning.ipynb) did, or far more samples and steps than a CPU gives in a
minute. This is the book's last chapter so far.
""")

code("c16-time", r"""
# NBVAL_IGNORE_OUTPUT
elapsed = time.perf_counter() - CHAPTER_START
for part, seconds in SECONDS.items():
    print(f"{part:28} {seconds:6.1f} s")
print(verdict("confirmed" if elapsed < 90 else "contradicted", f"the chapter ran in {elapsed:.0f} s (budget: 90 s on "
              "one thread)", timing=True))
""")

nb = nbformat.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.metadata["language_info"] = {"name": "python"}
nbformat.write(nb, OUT)
print("wrote", OUT, len(cells), "cells")
