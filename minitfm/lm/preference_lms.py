"""Chapter 16's two models: chapter 15's assistant (:mod:`minitfm.lm.assistant_lm`) after DPO and after GRPO.

Glossary: N questions, n samples per question, G replies per group.

Both learn on the intermediate task, ``add``, with :mod:`minitfm.preferences.training`, from the assistant alone:

- **DPO** (:data:`DPO_RECIPE`): the assistant samples ``samples`` replies to each of ``questions`` training sums;
  every question whose samples hold a right sum and a wrong one gives a pair, the right one preferred
  (:func:`~minitfm.preferences.training.sampled_pairs`); then :func:`~minitfm.preferences.training.dpo_train`
  trains every parameter on those pairs (beta 1: the probe's beta 0.1 pulled the policy far from the assistant
  and its greedy accuracy collapsed).
- **GRPO** (:data:`GRPO_RECIPE`): :func:`~minitfm.preferences.training.grpo_train` with the exact-answer reward,
  training only the final RMSNorm gain (128 numbers, a per-feature scale of what the output layer reads). It
  sharpens sampling, so its greedy replies may equal the assistant's almost everywhere; the record counts those
  that differ.

:func:`train_dpo_lm` and :func:`train_grpo_lm` make them, seeded, on ``threads`` threads (one by default): on the
same machine, torch version and thread count the weights are bit-equal (:func:`weights_digest`).
``assets/dpo_lm.pt`` and ``assets/grpo_lm.pt`` are written by ``python benchmarks/train_preference_lms.py --save``,
which stores beside each a ``.json`` record: the recipe, the weights' digest and what :func:`measure` found
(held-out greedy accuracy per task, replies that differ from the assistant's, pass@1 and pass@16 on ``add``, KL
per reply from the assistant); ``--check`` trains again and compares.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.evaluation import wilson_interval
from minitfm.finetuning import skills as S
from minitfm.finetuning.answering import replies
from minitfm.lm import assistant_lm as A
from minitfm.lm._shipped import load_shipped_model
from minitfm.preferences.rewards import exact_answer
from minitfm.preferences.training import dpo_train, grpo_train, policy_kl, sampled_pairs

ASSETS = Path(__file__).parent / "assets"
DPO_CHECKPOINT = ASSETS / "dpo_lm.pt"
GRPO_CHECKPOINT = ASSETS / "grpo_lm.pt"
DPO_RECORD, GRPO_RECORD = DPO_CHECKPOINT.with_suffix(".json"), GRPO_CHECKPOINT.with_suffix(".json")
SCRIPT = "python benchmarks/train_preference_lms.py --save"
TASK = A.INTERMEDIATE  # "add": the task with room between pass@1 and pass@16

# questions: training sums S.examples(TASK, "train", questions, seed=questions_seed) (256: the probe's, which gave
# 183 pairs); samples of each at sample_seed, temperature, max_new_tokens make the pairs; then beta, lr, epochs,
# batch_size, seed (the order of the pairs), trainable
DPO_RECIPE = {"task": TASK, "questions": 256, "questions_seed": 5, "samples": 8, "sample_seed": 1,
              "temperature": 1.0, "max_new_tokens": 8, "beta": 1.0, "lr": 1e-4, "epochs": 2, "batch_size": 16,
              "trainable": "all", "seed": 0}
# questions: steps * prompts training sums S.examples(TASK, "train", ..., seed=questions_seed + seed), in order
GRPO_RECIPE = {"task": TASK, "reward": "exact_answer", "questions_seed": 1000, "steps": 20, "prompts": 8,
               "group": 8, "lr": 0.1, "beta": 0.0, "loss_type": "dapo", "temperature": 1.0, "max_new_tokens": 8,
               "trainable": "final_norm", "seed": 0}

EVAL_N, PASS_N, PASS_SAMPLES, SAMPLE_SEED = 200, 100, 32, 0  # as assistant_lm.json: comparable figures
KL_N, KL_SAMPLES, KL_SEED = 100, 8, 0  # KL per reply: 8 replies to each of 100 held-out sums


@dataclasses.dataclass
class Trained:
    """What a training function returns: the model (eval mode), its per-step history, the recipe it followed,
    the DPO pairs (None for GRPO) and the seconds it took (pairs included)."""
    model: torch.nn.Module
    history: object
    recipe: dict
    pairs: list | None
    seconds: float


def _recipe(base: dict, overrides: dict, seed) -> dict:
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise ValueError(f"unknown recipe setting(s) {unknown}; the recipe has {sorted(base)}")
    if "task" in overrides or "reward" in overrides:
        raise ValueError("task and reward are fixed: these models learn on 'add' with exact_answer")
    check_number(seed, "seed", integer=True)
    return {**base, **overrides, "seed": seed}


def _assistant(assistant):
    if assistant is None:
        return A.load_assistant_lm()
    if not isinstance(assistant, torch.nn.Module):
        raise TypeError(f"assistant must be a DecoderOnlyLM (default: the shipped assistant_lm), "
                        f"got {type(assistant).__name__}")
    return assistant


class _threads:
    """Run a block on ``n`` torch threads, then restore the caller's count."""

    def __init__(self, n: int):
        check_positive_int(n, "threads")
        self.n = n

    def __enter__(self):
        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        torch.set_num_threads(self.before)


def dpo_pairs(assistant, recipe: dict = DPO_RECIPE) -> list:
    """The DPO pairs of ``recipe``: (example, right sum, wrong sum) from the assistant's own samples."""
    check_positive_int(recipe["questions"], "questions")
    questions = S.examples(recipe["task"], "train", recipe["questions"], seed=recipe["questions_seed"])
    return sampled_pairs(assistant, A.chat_template(), questions, recipe["samples"], seed=recipe["sample_seed"],
                         temperature=recipe["temperature"], max_new_tokens=recipe["max_new_tokens"])


def train_dpo_lm(seed: int = DPO_RECIPE["seed"], *, assistant=None, threads: int = 1, **overrides) -> Trained:
    """Chapter 16's DPO model: :data:`DPO_RECIPE` (``overrides`` replace its settings, e.g. ``questions=16`` for a
    quick run) on a copy of ``assistant`` (default: the shipped assistant, left unchanged), on ``threads``
    threads; ``seed`` orders the pairs in each epoch."""
    recipe = _recipe(DPO_RECIPE, overrides, seed)
    with _threads(threads):
        assistant = _assistant(assistant)
        start = time.perf_counter()
        pairs = dpo_pairs(assistant, recipe)
        if not pairs:
            raise ValueError(f"no question of {recipe['questions']} had both a right and a wrong sample in "
                             f"{recipe['samples']}: no pair to learn from (ask more questions or samples)")
        model, history = dpo_train(assistant, A.chat_template(), pairs, beta=recipe["beta"], lr=recipe["lr"],
                                   epochs=recipe["epochs"], batch_size=recipe["batch_size"], seed=recipe["seed"],
                                   trainable=recipe["trainable"])
        return Trained(model, history, recipe, pairs, time.perf_counter() - start)


def train_grpo_lm(seed: int = GRPO_RECIPE["seed"], *, assistant=None, threads: int = 1, **overrides) -> Trained:
    """Chapter 16's GRPO model: :data:`GRPO_RECIPE` (``overrides`` replace its settings, e.g. ``steps=2``) on a
    copy of ``assistant`` (default: the shipped assistant, left unchanged), on ``threads`` threads; ``seed``
    picks the training sums (``questions_seed + seed``) and seeds the sampling."""
    recipe = _recipe(GRPO_RECIPE, overrides, seed)
    for name in ("steps", "prompts"):
        check_positive_int(recipe[name], name)
    with _threads(threads):
        assistant = _assistant(assistant)
        start = time.perf_counter()
        questions = S.examples(recipe["task"], "train", recipe["steps"] * recipe["prompts"],
                               seed=recipe["questions_seed"] + recipe["seed"])
        model, history = grpo_train(assistant, A.chat_template(), questions, exact_answer, steps=recipe["steps"],
                                    prompts=recipe["prompts"], group=recipe["group"], lr=recipe["lr"],
                                    beta=recipe["beta"], loss_type=recipe["loss_type"],
                                    temperature=recipe["temperature"], max_new_tokens=recipe["max_new_tokens"],
                                    trainable=recipe["trainable"], seed=recipe["seed"])
        return Trained(model, history, recipe, None, time.perf_counter() - start)


def load_dpo_lm(path: str | Path = DPO_CHECKPOINT):
    """Chapter 16's DPO model as it ships (eval mode, on the CPU)."""
    return load_shipped_model(path, SCRIPT)


def load_grpo_lm(path: str | Path = GRPO_CHECKPOINT):
    """Chapter 16's GRPO model as it ships (eval mode, on the CPU)."""
    return load_shipped_model(path, SCRIPT)


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter and buffer (name, dtype, shape, bytes, in state_dict order): equal digests, equal
    weights, bit for bit."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def greedy_answers(model, examples) -> list[str]:
    """The model's greedy replies (stripped) to ``examples``, up to the assistant's ``MAX_NEW_TOKENS``."""
    return [a.strip() for a in replies(model, A.chat_template(), [e.chat(with_answer=False) for e in examples],
                                       max_new_tokens=A.MAX_NEW_TOKENS)]


def _share(right: int, n: int) -> dict:
    low, high = wilson_interval(right, n)
    return {"accuracy": round(right / n, 4), "interval": [round(low, 4), round(high, 4)], "n": n}


def measure(model, assistant=None, *, n: int = EVAL_N, n_pass: int = PASS_N, samples: int = PASS_SAMPLES,
            kl_n: int = KL_N) -> dict:
    """What a record holds: per task, greedy accuracy on ``n`` held-out questions (95% Wilson interval, the best
    constant reply's share, and how many replies differ from ``assistant``'s); pass@1 and pass@16 on ``n_pass``
    held-out sums from ``samples`` samples at temperature 1 (seed ``SAMPLE_SEED``: as assistant_lm.json); KL per
    reply from the assistant (nats, ``KL_SAMPLES`` of the model's replies to ``kl_n`` held-out sums)."""
    assistant = _assistant(assistant)
    for value, name in ((n, "n"), (n_pass, "n_pass"), (samples, "samples"), (kl_n, "kl_n")):
        check_positive_int(value, name)
    if samples < 16:
        raise ValueError(f"samples must be >= 16 (pass@16 needs 16 samples per question), got {samples}")
    tasks = {}
    for task in A.TASKS:
        examples = A.heldout_examples(task, n)
        mine, theirs = greedy_answers(model, examples), greedy_answers(assistant, examples)
        tasks[task] = {**_share(sum(a == e.answer for a, e in zip(mine, examples)), len(examples)),
                       "best_constant": round(A.best_constant(examples)[1], 4),
                       "differ_from_assistant": sum(a != b for a, b in zip(mine, theirs))}
    sampled = A.pass_at(model, A.heldout_examples(TASK, n_pass), samples, seed=SAMPLE_SEED)
    kl = policy_kl(model, assistant, A.chat_template(), A.heldout_examples(TASK, kl_n), n=KL_SAMPLES, seed=KL_SEED)
    return {"tasks": tasks, "intermediate": {"task": TASK, "questions": n_pass, "samples": samples,
                                             "seed": SAMPLE_SEED, **sampled},
            "kl_per_reply": {"nats": round(kl, 4), "questions": kl_n, "samples": KL_SAMPLES, "seed": KL_SEED}}
