"""Chapter 16 probe: do GRPO (success on `add`, sloppy-verifier failure) and DPO work on one CPU thread?

Run:  nice -n 10 env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE python drafts/ch16/probe.py PART [setting ...]
  grpo [i ...]   GRPO on `add` with exact_answer, settings i of the list in part_grpo (default: all), seeds $SEEDS
                 (default 0,1,2); the 20-seed run of the chosen setting: SEEDS=$(seq -s, 0 19) ... probe.py grpo 22
  hack           the sloppy verifier: exact / contains / contains+KL 0.1 / contains+KL 1, env HACK_LR (3e-4),
                 HACK_STEPS (20), HACK_T (1.0), HACK_RUNS (comma list of run names)
  dpo            DPO on self-sampled pairs (verified sum vs wrong sum), beta 0.1 and 1.0; env DPO_LR, DPO_EPOCHS
Seeded; prints everything. Draft for issue 47, not collected by pytest (no test_ prefix, outside tests/ and
notebooks/, which are pyproject's testpaths).
"""
from __future__ import annotations

import copy
import sys
import time

import numpy as np
import torch

from minitfm.evaluation import mean_pass_at_k, paired_bootstrap
from minitfm.finetuning import skills as S
from minitfm.lm import assistant_lm as A
from minitfm.preferences import dpo as D, grpo as G, rewards as R

torch.set_num_threads(1)
TEMPLATE = A.chat_template()
TASK = A.INTERMEDIATE  # "add"
BASE = A.load_assistant_lm()


def sample(model, examples, n, *, seed, temperature=1.0, max_new_tokens=8):
    """(N, n) replies, one seeded generator, via sample_groups (no grad)."""
    with torch.no_grad():
        g = G.sample_groups(model, TEMPLATE, [e.chat(with_answer=False) for e in examples], n,
                            temperature=temperature, seed=seed, max_new_tokens=max_new_tokens)
    return [g.replies[i * n:(i + 1) * n] for i in range(len(examples))]


def evaluate(model, examples, *, n=16, seed=12345, max_new_tokens=8):
    """Per question: sampled correct count c (of n), greedy correct; pass@1, pass@n, distinct answers."""
    rows = sample(model, examples, n, seed=seed, max_new_tokens=max_new_tokens)
    c = np.array([sum(r.strip() == e.answer for r in row) for row, e in zip(rows, examples)])
    with torch.no_grad():
        greedy = A.accuracy(model, examples)["accuracy"]
    return {"c": c, "pass1": c.mean() / n, "passn": mean_pass_at_k([n] * len(c), c.tolist(), n),
            "pass4": mean_pass_at_k([n] * len(c), c.tolist(), 4),
            "distinct": float(np.mean([len({r.strip() for r in row}) for row in rows])), "greedy": greedy,
            "mean_len": float(np.mean([len(r) for row in rows for r in row])), "n": n}


def grpo_run(seed, *, steps=20, prompts=8, group=8, lr=3e-4, beta=0.0, loss_type="dapo", temperature=1.0,
             reward=R.exact_answer, max_new_tokens=8, scale="group", log_every=0, optim="adam", betas=(0.9, 0.999), train_only="all"):
    torch.manual_seed(seed)
    policy = copy.deepcopy(BASE)
    ref = BASE
    keep = {"all": lambda n: True, "last": lambda n: n.startswith(("layers.5.", "final_norm")),
            "norms": lambda n: "norm" in n, "final_norm": lambda n: n.startswith("final_norm")}[train_only]
    params = [p for n, p in policy.named_parameters() if keep(n)]
    for n, p in policy.named_parameters():
        p.requires_grad_(keep(n))
    opt = (torch.optim.Adam(params, lr=lr, betas=betas) if optim == "adam"
           else torch.optim.SGD(params, lr=lr, momentum=0.9 if optim == "sgdm" else 0.0))
    train = S.examples(TASK, "train", steps * prompts, seed=1000 + seed)
    curve = []
    for step in range(steps):
        batch = train[step * prompts:(step + 1) * prompts]
        with torch.no_grad():
            g = G.sample_groups(policy, TEMPLATE, [e.chat(with_answer=False) for e in batch], group,
                                temperature=temperature, seed=seed * 100003 + step, max_new_tokens=max_new_tokens)
        r = torch.tensor([reward(rep, batch[i // group]) for i, rep in enumerate(g.replies)]).view(prompts, group)
        exact = torch.tensor([R.exact_answer(rep, batch[i // group]) for i, rep in enumerate(g.replies)])
        adv = G.group_advantages(r, scale=scale).flatten()
        lp = G.completion_log_probs(policy, g.prompt, g.completion, prompt_mask=g.prompt_mask, temperature=temperature)
        ref_lp = None
        with torch.no_grad():
            ref_lp = G.completion_log_probs(ref, g.prompt, g.completion, prompt_mask=g.prompt_mask,
                                            temperature=temperature)
        out = G.grpo_loss(lp, None, adv, g.completion_mask, loss_type=loss_type, beta=beta,
                          ref_log_probs=ref_lp, max_length=max_new_tokens)
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        m = g.completion_mask.float()
        kl = float((G.k3_kl(lp.detach(), ref_lp) * m).sum() / m.sum())
        zero = float((r.std(dim=1) == 0).float().mean())
        curve.append((float(r.mean()), float(exact.mean()), kl, zero, float(m.sum(1).mean())))
        if log_every and step % log_every == 0:
            print(f"    step {step:3d} reward {curve[-1][0]:.3f} exact {curve[-1][1]:.3f} kl {kl:.4f} "
                  f"zero-var {zero:.2f} len {curve[-1][4]:.1f}")
    return policy.eval(), curve


def paired(after, before, seed=0):
    n = after["n"]
    return paired_bootstrap(after["c"] / n, before["c"] / n, rng=np.random.default_rng(seed), n_resamples=4999)


import os
SEEDS = tuple(int(s) for s in os.environ.get("SEEDS", "0,1,2").split(","))


def part_grpo():
    held = A.heldout_examples(TASK, 100)
    best = A.best_constant(held)
    t = time.time()
    before = evaluate(BASE, held)
    print(f"eval time {time.time() - t:.2f}s")
    print(f"BEFORE pass@1 {before['pass1']:.3f} pass@4 {before['pass4']:.3f} pass@16 {before['passn']:.3f} "
          f"greedy {before['greedy']:.3f} distinct {before['distinct']:.2f} best constant {best}")
    settings = [
        dict(steps=20, prompts=8, group=8, lr=3e-4),
        dict(steps=20, prompts=8, group=8, lr=1e-4),
        dict(steps=20, prompts=8, group=8, lr=1e-3),
        dict(steps=20, prompts=16, group=8, lr=3e-4),
        dict(steps=40, prompts=8, group=8, lr=1e-4),
        dict(steps=20, prompts=8, group=8, lr=3e-4, beta=0.04),
        dict(steps=20, prompts=8, group=8, lr=3e-4, loss_type="grpo"),
        dict(steps=20, prompts=8, group=8, lr=3e-4, loss_type="dr_grpo", scale="none"),
        dict(steps=20, prompts=32, group=2, lr=3e-4),
        dict(steps=20, prompts=8, group=8, lr=0.1, optim="sgd"),
        dict(steps=20, prompts=8, group=8, lr=0.5, optim="sgd"),
        dict(steps=20, prompts=8, group=8, lr=2.0, optim="sgd"),
        dict(steps=20, prompts=8, group=8, lr=3e-5),
        dict(steps=20, prompts=8, group=8, lr=1e-4, betas=(0.9, 0.99)),
        dict(steps=20, prompts=8, group=8, lr=1e-3, train_only="last"),
        dict(steps=20, prompts=8, group=8, lr=1e-2, train_only="norms"),
        dict(steps=20, prompts=8, group=8, lr=3e-3, train_only="norms"),
        dict(steps=10, prompts=32, group=8, lr=1e-4),
        dict(steps=20, prompts=8, group=8, lr=3e-4, train_only="last"),
        dict(steps=20, prompts=8, group=8, lr=3e-2, train_only="final_norm"),
        dict(steps=20, prompts=8, group=8, lr=3e-2, train_only="norms"),
        dict(steps=40, prompts=8, group=8, lr=3e-5),
        dict(steps=20, prompts=8, group=8, lr=0.1, train_only="final_norm"),
        dict(steps=20, prompts=8, group=8, lr=0.3, train_only="final_norm"),
        dict(steps=10, prompts=8, group=8, lr=0.1, train_only="final_norm"),
        dict(steps=20, prompts=16, group=4, lr=0.1, train_only="final_norm"),
        dict(steps=20, prompts=32, group=2, lr=0.1, train_only="final_norm"),
    ]
    only = [int(a) for a in sys.argv[2:]] if len(sys.argv) > 2 else range(len(settings))
    for i in only:
        s = settings[i]
        for seed in SEEDS:
            t = time.time()
            pol, curve = grpo_run(seed, **s)
            tt = time.time() - t
            after = evaluate(pol, held)
            pb = paired(after, before)
            print(f"[{i}] {s} seed {seed}: train {tt:.1f}s | pass@1 {before['pass1']:.3f}->{after['pass1']:.3f} "
                  f"diff {pb.difference:+.3f} [{pb.low:+.3f},{pb.high:+.3f}] | pass@16 {before['passn']:.3f}->"
                  f"{after['passn']:.3f} | greedy {before['greedy']:.3f}->{after['greedy']:.3f} | distinct "
                  f"{after['distinct']:.2f} | reward {np.mean([c[0] for c in curve[:3]]):.2f}->"
                  f"{np.mean([c[0] for c in curve[-3:]]):.2f} kl_end {curve[-1][2]:.4f} "
                  f"zero-var {np.mean([c[3] for c in curve]):.2f}", flush=True)


def part_hack():
    """The sloppy verifier (contains_answer) against the exact one, same setting; and with a KL term."""
    held = A.heldout_examples(TASK, 100)
    before = evaluate(BASE, held, max_new_tokens=16)
    print(f"BEFORE pass@1 {before['pass1']:.3f} greedy {before['greedy']:.3f} mean reply length "
          f"{before['mean_len']:.1f}")
    runs = [("exact", R.exact_answer, 0.0), ("contains", R.contains_answer, 0.0),
            ("contains+kl0.1", R.contains_answer, 0.1), ("contains+kl1", R.contains_answer, 1.0)]
    lr = float(os.environ.get("HACK_LR", "3e-4"))
    steps = int(os.environ.get("HACK_STEPS", "20"))
    temp = float(os.environ.get("HACK_T", "1.0"))
    which = os.environ.get("HACK_RUNS", "exact,contains,contains+kl0.1,contains+kl1").split(",")
    for seed in SEEDS:
        for name, fn, beta in [r for r in runs if r[0] in which]:
            t = time.time()
            pol, curve = grpo_run(seed, steps=steps, prompts=8, group=8, lr=lr, beta=beta, reward=fn,
                                  max_new_tokens=16, temperature=temp)
            tt = time.time() - t
            after = evaluate(pol, held, max_new_tokens=16)
            rows = sample(pol, held[:50], 4, seed=7, max_new_tokens=16)
            proxy = np.mean([R.contains_answer(r, e) for row, e in zip(rows, held) for r in row])
            print(f"hack lr {lr} T {temp} steps {steps} {name:15s} seed {seed}: train {tt:.1f}s | proxy reward (train) "
                  f"{np.mean([c[0] for c in curve[:3]]):.2f}->{np.mean([c[0] for c in curve[-3:]]):.2f} | "
                  f"exact (train) {np.mean([c[1] for c in curve[:3]]):.2f}->{np.mean([c[1] for c in curve[-3:]]):.2f}"
                  f" | held-out proxy {proxy:.2f} pass@1 {before['pass1']:.3f}->{after['pass1']:.3f} greedy "
                  f"{before['greedy']:.2f}->{after['greedy']:.2f} | len {before['mean_len']:.1f}->"
                  f"{after['mean_len']:.1f} | kl_end {curve[-1][2]:.3f} | e.g. {rows[0][:3]}", flush=True)


def dpo_pairs(examples, *, seed, n=8):
    """(example, chosen, rejected): a verified sampled answer against a wrong one, where the samples hold both."""
    out = []
    for e, row in zip(examples, sample(BASE, examples, n, seed=seed)):
        right = sorted({r for r in row if r.strip() == e.answer})
        wrong = sorted({r for r in row if r.strip() != e.answer})
        if right and wrong:
            out.append((e, right[0], wrong[0]))
    return out


def render(pairs):
    chosen, rejected = [], []
    for e, c, r in pairs:
        a, b = D.preference_pair(TEMPLATE, e.chat(with_answer=False), c, r)
        chosen.append(a)
        rejected.append(b)
    return chosen, rejected


def kl_on_samples(policy, examples, *, seed=99, n=4):
    """Mean over sampled replies (from the policy) of sum log pi - log pi_ref: KL(pi || ref) per reply (k1)."""
    with torch.no_grad():
        g = G.sample_groups(policy, TEMPLATE, [e.chat(with_answer=False) for e in examples], n, seed=seed,
                            max_new_tokens=8)
        lp = G.completion_log_probs(policy, g.prompt, g.completion, prompt_mask=g.prompt_mask)
        ref = G.completion_log_probs(BASE, g.prompt, g.completion, prompt_mask=g.prompt_mask)
    m = g.completion_mask.float()
    return float(((lp - ref) * m).sum(1).mean())


def part_dpo():
    from minitfm.evaluation import mcnemar_exact
    from minitfm.lm.prose import heldout_bits_per_byte
    t = time.time()
    train = dpo_pairs(S.examples(TASK, "train", 256, seed=5), seed=1)
    held_pairs = dpo_pairs(A.heldout_examples(TASK, 100, seed=300), seed=2)
    print(f"pairs: {len(train)} train, {len(held_pairs)} held-out ({time.time() - t:.1f}s); e.g. {train[0][1:]}")
    held = A.heldout_examples(TASK, 200)
    greedy_before = [a.strip() == e.answer for a, e in zip(
        __import__("minitfm.finetuning.answering", fromlist=["replies"]).replies(
            BASE, TEMPLATE, [e.chat(with_answer=False) for e in held], max_new_tokens=8), held)]
    bpb0 = heldout_bits_per_byte(BASE, 8)
    tc, tr = render(train)
    hc, hr = render(held_pairs)
    lr = float(os.environ.get("DPO_LR", "1e-4"))
    epochs = int(os.environ.get("DPO_EPOCHS", "2"))
    for beta in (0.1, 1.0):
        for seed in SEEDS:
            torch.manual_seed(seed)
            pol = copy.deepcopy(BASE)
            opt = torch.optim.Adam(pol.parameters(), lr=lr)
            gen = torch.Generator().manual_seed(seed)
            t = time.time()
            with torch.no_grad():
                c0 = D.sequence_log_probs(BASE, tc).mean().item()
            for ep in range(epochs):
                order = torch.randperm(len(tc), generator=gen).tolist()
                for i in range(0, len(order), 16):
                    idx = order[i:i + 16]
                    out = D.dpo_batch_loss(pol, BASE, [tc[j] for j in idx], [tr[j] for j in idx], beta=beta)
                    opt.zero_grad()
                    out.loss.backward()
                    torch.nn.utils.clip_grad_norm_(pol.parameters(), 1.0)
                    opt.step()
            tt = time.time() - t
            with torch.no_grad():
                ho = D.dpo_batch_loss(pol, BASE, hc, hr, beta=beta)
                c1 = D.sequence_log_probs(pol, tc).mean().item()
                r1 = D.sequence_log_probs(pol, tr).mean().item()
                r0 = D.sequence_log_probs(BASE, tr).mean().item()
            from minitfm.finetuning.answering import replies
            after = [a.strip() == e.answer for a, e in zip(replies(pol, TEMPLATE, [e.chat(with_answer=False)
                                                                              for e in held], max_new_tokens=8), held)]
            pb = paired_bootstrap(np.array(after, float), np.array(greedy_before, float),
                                  rng=np.random.default_rng(0), n_resamples=4999)
            print(f"dpo beta {beta} lr {lr} ep {epochs} seed {seed}: train {tt:.1f}s | held-out pref acc "
                  f"{ho.accuracy:.2f} margin {ho.margins.mean():+.3f} loss {ho.loss:.3f} | greedy "
                  f"{np.mean(greedy_before):.3f}->{np.mean(after):.3f} diff {pb.difference:+.3f} "
                  f"[{pb.low:+.3f},{pb.high:+.3f}] | KL/reply {kl_on_samples(pol, held[:50]):.3f} | prose bpb "
                  f"{bpb0:.4f}->{heldout_bits_per_byte(pol, 8):.4f} | chosen logp {c0:.3f}->{c1:.3f} rejected "
                  f"{r0:.3f}->{r1:.3f}", flush=True)


if __name__ == "__main__":
    parts = sys.argv[1:2] or ["grpo"]
    {"grpo": part_grpo, "hack": part_hack, "dpo": part_dpo}[parts[0]]()
