"""Chapter 15's assistant: :mod:`minitfm.lm.base_lm`'s base model after supervised fine-tuning on its tasks.

Glossary: N questions, k samples per question.

Its tasks (:data:`TASKS`): the four skills of :mod:`minitfm.finetuning.skills` and the three questions about
invented people of :mod:`minitfm.finetuning.people` (``"people/city"``, ...). Fine-tuning (:func:`sft_examples`)
asks ``SFT_INSTANCES[task]`` training instances of each skill and every attribute of every "tune" person, in the
fine-tuning templates, for ``SFT_EPOCHS`` whole epochs (every question is batched that often), with the loss on
the replies only. :func:`heldout_examples` draws what it never saw: held-out instances of the skills, held-out
people of both groups.

``assets/assistant_lm.pt`` is written by ``python benchmarks/train_assistant_lm.py --save``, which stores
beside it ``assistant_lm.json``: the recipe and what the assistant reached on held-out questions (accuracy
with a 95% Wilson interval and the best constant reply, per task; pass@1 and pass@16 on the intermediate task).
``--check`` fine-tunes again and compares.
"""
from __future__ import annotations

import collections
import json
import random
from pathlib import Path

import torch

from minitfm._checks import check_choice, check_positive_int
from minitfm.evaluation import mean_pass_at_k, wilson_interval
from minitfm.finetuning import people as P, skills as S
from minitfm.finetuning.answering import replies, sampled_replies
from minitfm.finetuning.chat import ChatTemplate
from minitfm.finetuning.sft import supervised_finetune
from minitfm.lm._shipped import load_shipped_model
from minitfm.lm.prose import ENDOFTEXT, byte_tokenizer
from minitfm.training import History, TrainConfig

CHECKPOINT = Path(__file__).parent / "assets" / "assistant_lm.pt"
RECORD = CHECKPOINT.with_suffix(".json")
TASKS = S.SKILLS + tuple(f"people/{a}" for a in P.ATTRIBUTES)
INTERMEDIATE = "add"  # the task with room between pass@1 and pass@16 (chapter 16 learns from rewards on it)
SFT_INSTANCES = {"sort": 3000, "reverse": 3000, "count": 3000, "add": 2000}  # add: fewer, so that it stays
SFT_EPOCHS, BATCH, LR, SEED = 2, 16, 1e-3, 0                                  # intermediate (above)
MAX_NEW_TOKENS = 48  # count's reply restates its question: about 40 bytes
PAGE_QUESTIONS = (S.ask("add", a=25, b=17), S.ask("sort", q="4 1 3"), S.ask("reverse", q="cbdaf"),
                  S.ask("count", letter="a", word="cabab"))  # the chat's examples in the page: it answers each right


def chat_template() -> ChatTemplate:
    """The template it is fine-tuned on: ``<|endoftext|><|user|>question<|end|><|assistant|>reply<|end|>``."""
    tokenizer = byte_tokenizer()
    return ChatTemplate(tokenizer, bos_id=tokenizer.special_ids[ENDOFTEXT])


def sft_examples(seed: int = SEED) -> list:
    """The fine-tuning questions, shuffled: ``SFT_INSTANCES[task]`` training instances of each skill and every
    attribute of every "tune" person, each asked with one of its fine-tuning templates (drawn)."""
    examples = [e for task in S.SKILLS for e in S.examples(task, "train", SFT_INSTANCES[task], seed=seed)]
    examples += [e for a in P.ATTRIBUTES for e in P.examples(a, P.chosen(split="tune"), seed=seed)]
    random.Random(f"sft/{seed}").shuffle(examples)
    return examples


def sft_config(n_examples: int, **overrides) -> TrainConfig:
    """AdamW without decay, warmup + cosine, ``SFT_EPOCHS`` epochs of ``BATCH`` conversations, no smoothing."""
    base = dict(steps=max(1, n_examples * SFT_EPOCHS // BATCH), batch_size=BATCH, lr=LR, min_lr=LR / 10,
                schedule="cosine", warmup=20, optimizer="adamw", betas=(0.9, 0.95), eps=1e-8, label_smoothing=0.0,
                seed=SEED)
    return TrainConfig(**{**base, **overrides})


def sft_chats(examples=None) -> list:
    """``examples`` (default :func:`sft_examples`) rendered in :func:`chat_template`, question and reply."""
    template = chat_template()
    return [template.render(e.chat()) for e in (sft_examples() if examples is None else examples)]


def fine_tune(model, examples=None, **overrides) -> History:
    """Supervised fine-tuning of ``model`` in place on ``examples`` (default :func:`sft_examples`), prompt masked."""
    chats = sft_chats(examples)
    return supervised_finetune(model.train(), chats, sft_config(len(chats), **overrides), mask_prompt=True,
                               progress=False)


def heldout_examples(task: str, n: int = 200, *, seed: int = 100, group: str | None = None) -> list:
    """Questions the assistant never saw: ``n`` held-out instances of a skill, or the first ``n`` held-out people of
    ``group`` (both groups when None; 192 in all) for a people task."""
    check_choice(task, "task", TASKS)
    check_positive_int(n, "n")
    if task in S.SKILLS:
        return S.examples(task, "heldout", n, seed=seed)
    return P.examples(task.split("/")[1], P.chosen(group, "heldout")[:n], seed=seed)


def best_constant(examples) -> tuple[str, float]:
    """The single answer right most often on ``examples``, and its accuracy: the floor any accuracy must beat. For a
    reply that restates its question (count) it is the answer inside it: a model that copies the question and
    always says one number scores this."""
    answer, count = collections.Counter(e.fact_answer for e in examples).most_common(1)[0]
    return answer, count / len(examples)


def accuracy(model, examples) -> dict:
    """Greedy accuracy on ``examples``: share, 95% Wilson interval, and the best constant reply's share."""
    answers = replies(model, chat_template(), [e.chat(with_answer=False) for e in examples],
                      max_new_tokens=MAX_NEW_TOKENS)
    right = sum(a.strip() == e.answer for a, e in zip(answers, examples))
    low, high = wilson_interval(right, len(examples))
    return {"accuracy": round(right / len(examples), 4), "interval": [round(low, 4), round(high, 4)],
            "n": len(examples), "best_constant": round(best_constant(examples)[1], 4)}


def pass_at(model, examples, n: int = 32, ks=(1, 16), *, temperature: float = 1.0, seed: int = 0) -> dict:
    """pass@k by the unbiased estimator over ``n`` samples per question, and how many distinct answers they
    held per question on average (a collapse to one reply shows as 1)."""
    samples = sampled_replies(model, chat_template(), [e.chat(with_answer=False) for e in examples], n,
                              temperature=temperature, seed=seed, max_new_tokens=MAX_NEW_TOKENS)
    correct = [sum(s.strip() == e.answer for s in row) for row, e in zip(samples, examples)]
    out = {f"pass@{k}": round(mean_pass_at_k([n] * len(examples), correct, k), 4) for k in ks}
    out["distinct_answers"] = round(sum(len({s.strip() for s in row}) for row in samples) / len(samples), 2)
    return out


def load_assistant_lm(path: str | Path = CHECKPOINT):
    """The fine-tuned assistant that ships with the project (eval mode, on the CPU)."""
    return load_shipped_model(path, "python benchmarks/train_assistant_lm.py --save")


def trained_length() -> int:
    """The longest conversation (in tokens) of its fine-tuning set, as ``assistant_lm.json`` records it (the book's
    page generates no further)."""
    return int(json.loads(RECORD.read_text(encoding="utf-8"))["trained_length"])


def heldout_conversations(per_task: int = 4) -> torch.Tensor:
    """(B, T) ids of ``per_task`` held-out questions of each task, asked and answered in the template, right-padded
    with 0 (a byte no question holds): a probe batch of the kind of text the assistant reads."""
    template = chat_template()
    rows = [template.render(e.chat()).ids for task in TASKS for e in heldout_examples(task, per_task)]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=0)
