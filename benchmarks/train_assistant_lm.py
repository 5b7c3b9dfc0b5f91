"""Fine-tune chapter 15's base model into the assistant that the book's pages chat with, or check it.

Usage:  python benchmarks/train_assistant_lm.py [--threads 1] [--save] [--check]
        python benchmarks/train_assistant_lm.py --smoke   # seconds: 2 steps, 2 questions a task (tests run this)

Recipe: chapter 15's full fine-tuning, with its constants (``notebooks/15_finetuning.ipynb``, the cell that sets
``SFT_PER_TASK, SFT_STEPS, BATCH`` and defines ``fine_tune``) and the library's functions: the shipped base model
(``load_base_lm``), ``SFT_PER_TASK`` questions per task of ``minitfm.finetuning.tasks`` (training split, training
templates, seed 0) rendered by ``ChatTemplate(byte_tokenizer(), bos_id=<|endoftext|>)``, then
``supervised_finetune`` (Adam, lr 2e-3, warmup 10 + cosine, ``SFT_STEPS`` steps of ``BATCH`` conversations,
label smoothing 0, mask_prompt=True, seed 0). One thread by default, as the notebook runs: on the same CPU the
weights are then the chapter's ``tuned`` model, bit for bit.

The script measures the model on the chapter's held-out facts (``EVAL_N`` questions per task, seed 100, the
training templates) with :func:`minitfm.finetuning.answering.replies` (greedy, at most 32 new tokens): the share
of replies that have the shape of an answer and the share that are correct, each counting only a reply that ended
with ``<|end|>``, as the chapter does. ``--save`` writes ``minitfm/lm/assets/assistant_lm.pt`` and, beside it,
``assistant_lm.json`` (the recipe, those figures, the longest training row, the threads, torch and the CPU).
``--check`` fine-tunes again and compares with that JSON: both shares must agree within TOLERANCE. Another CPU or
thread count changes every float of a fine-tuning run like a new seed does, so the check asks for the same quality,
not the same bits.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from _openmp import WAIT_POLICY  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import torch  # noqa: E402

from minitfm.device import cpu_summary  # noqa: E402
from minitfm.finetuning import supervised_finetune  # noqa: E402
from minitfm.finetuning import tasks as T  # noqa: E402
from minitfm.finetuning.answering import replies  # noqa: E402
from minitfm.lm.assistant_lm import CHECKPOINT as ASSISTANT_CHECKPOINT, RECORD, chat_template  # noqa: E402
from minitfm.lm.base_lm import load_base_lm  # noqa: E402
from minitfm.training import TrainConfig, save_checkpoint  # noqa: E402

SFT_PER_TASK, SFT_STEPS, BATCH = 200, 60, 12  # chapter 15's constants
LR, WARMUP, SEED, EXAMPLE_SEED = 2e-3, 10, 0, 0  # its fine_tune() defaults and its fine-tuning set's seed
EVAL_N, EVAL_SEED, MAX_NEW_TOKENS = 30, 100, 32  # its held-out facts and its evaluate()
TOLERANCE = 0.10  # answer-shaped and correct shares (of 150 questions): a rerun lands within this of the shipped


def recipe() -> dict:
    return {"base": "minitfm/lm/assets/base_lm.pt", "sft_per_task": SFT_PER_TASK, "steps": SFT_STEPS,
            "batch_size": BATCH, "lr": LR, "schedule": "cosine", "warmup": WARMUP, "label_smoothing": 0.0,
            "seed": SEED, "example_seed": EXAMPLE_SEED, "mask_prompt": True, "tasks": list(T.TASKS),
            "template": "ChatTemplate(byte_tokenizer(), bos_id=<|endoftext|>)"}


def fine_tune(per_task: int = SFT_PER_TASK, steps: int = SFT_STEPS):
    """The chapter's full fine-tuning of the shipped base model: (model in eval mode, history, longest row)."""
    template = chat_template()  # ChatTemplate(byte_tokenizer(), bos_id=<|endoftext|>), as the chapter's
    examples = [e for task in T.TASKS for e in T.examples(task, "train", per_task, seed=EXAMPLE_SEED)]
    chats = [template.render(e.chat()) for e in examples]
    config = TrainConfig(steps=steps, batch_size=BATCH, lr=LR, schedule="cosine", warmup=WARMUP,
                         label_smoothing=0.0, seed=SEED)
    model = load_base_lm()
    history = supervised_finetune(model.train(), chats, config, mask_prompt=True, progress=False)
    return model.eval(), history, template, max(len(c) for c in chats)


def heldout_scores(model, template, n: int = EVAL_N, max_new_tokens: int = MAX_NEW_TOKENS) -> dict:
    """Per task and over all: the shares of answer-shaped and of correct replies to the held-out facts."""
    out = {}
    for task in T.TASKS:
        examples = T.examples(task, "heldout", n, seed=EVAL_SEED)
        answers, ended = replies(model, template, [e.chat(with_answer=False) for e in examples],
                                 max_new_tokens=max_new_tokens, return_finished=True)
        out[task] = {"shaped": round(sum(T.looks_like_answer(e, a) and f for e, a, f in zip(examples, answers, ended))
                                     / n, 4),
                     "correct": round(sum(T.is_correct(e, a) and f for e, a, f in zip(examples, answers, ended))
                                      / n, 4)}
    out["all"] = {k: round(sum(out[t][k] for t in T.TASKS) / len(T.TASKS), 4) for k in ("shaped", "correct")}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--save", action="store_true", help=f"write {ASSISTANT_CHECKPOINT.name} and {RECORD.name}")
    parser.add_argument("--check", action="store_true", help=f"compare with {RECORD.name}")
    parser.add_argument("--smoke", action="store_true", help="the smallest setting (2 steps on 4 conversations a task, "
                                                             "2 held-out questions a task, 4 new tokens): checks that "
                                                             "the script runs; writes and compares nothing")
    args = parser.parse_args()
    sizes = dict(tune=dict(per_task=SFT_PER_TASK, steps=SFT_STEPS), score=dict(n=EVAL_N, max_new_tokens=MAX_NEW_TOKENS))
    if args.smoke:
        if args.save or args.check:
            parser.error("--smoke fine-tunes for 2 steps: nothing worth saving or checking; drop --save and --check")
        sizes = dict(tune=dict(per_task=4, steps=2), score=dict(n=2, max_new_tokens=4))
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}; {args.threads} threads")
    start = time.perf_counter()
    model, history, template, longest = fine_tune(**sizes["tune"])
    seconds = time.perf_counter() - start
    scores = heldout_scores(model, template, **sizes["score"])
    print(f"fine-tuned {len(history.loss)} steps in {seconds:.1f} s; loss {history.loss[0]:.3f} -> "
          f"{history.loss[-1]:.3f}; the longest training row has {longest} tokens")
    for task, s in scores.items():
        print(f"  held-out facts, {task:9s}: answer-shaped {s['shaped']:6.1%}, correct {s['correct']:6.1%}")
    record = {"recipe": recipe(), "heldout_facts": {"questions_per_task": EVAL_N, "seed": EVAL_SEED,
                                                    "max_new_tokens": MAX_NEW_TOKENS, "scores": scores},
              "trained_length": longest, "first_loss": round(history.loss[0], 4),
              "last_loss": round(history.loss[-1], 4), "seconds": round(seconds, 1), "threads": args.threads,
              "torch": torch.__version__, "python": platform.python_version(), "cpu": cpu_summary(),
              "parameters": sum(p.numel() for p in model.parameters())}
    if args.save:
        save_checkpoint(ASSISTANT_CHECKPOINT, model)
        RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"saved {ASSISTANT_CHECKPOINT} ({ASSISTANT_CHECKPOINT.stat().st_size / 1e6:.1f} MB) and {RECORD.name}")
    if args.check:
        shipped = json.loads(RECORD.read_text(encoding="utf-8"))["heldout_facts"]["scores"]["all"]
        gaps = {k: abs(scores["all"][k] - shipped[k]) for k in ("shaped", "correct")}
        ok = max(gaps.values()) <= TOLERANCE
        print("check: " + ", ".join(f"{k} {scores['all'][k]:.1%} vs shipped {shipped[k]:.1%}" for k in gaps)
              + f"; largest |difference| {max(gaps.values()):.3f} {'<=' if ok else '>'} {TOLERANCE}: "
              + ("reproduced" if ok else "NOT reproduced"))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
