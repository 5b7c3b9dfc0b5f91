"""Pretrain chapter 15's base model (a byte-level LM on the book's prose and the tasks' facts), or check it.

Usage:  python benchmarks/train_base_lm.py [--threads 2] [--save] [--check]
        python benchmarks/train_base_lm.py --smoke   # seconds: 3 steps, a few paragraphs and facts (tests run this)

Recipe (all in :mod:`minitfm.lm.base_lm`): ``base_corpus(seed=0)`` (the book's prose without its held-out
paragraphs, and every task fact as a sentence, shuffled), ``base_lm_config()`` (4 Pre-RMSNorm layers, d_model 96,
RoPE, SwiGLU, 261 byte and special tokens), ``base_lm_train_config()`` (Adam, warmup + cosine, 32 rows of 128
bytes per step), model seed 0. The script prints the training time, the held-out bits per byte, and how many
facts of each task the model completes correctly when a statement is cut before its answer (greedy), for the
facts fine-tuning trains on and for the held-out ones.

``--save`` writes ``minitfm/lm/assets/base_lm.pt`` and, beside it, ``base_lm.json`` (the figures above, the
threads, torch's version and the CPU). ``--check`` trains again and compares with that JSON: the held-out bits
per byte must agree within TOLERANCE. Another CPU, BLAS or thread count changes every float of a training
run like a new seed does, so the check asks for the same quality, not the same bits.
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
from minitfm.finetuning.answering import statement_recall  # noqa: E402
from minitfm.finetuning.tasks import TASKS, facts, split_of  # noqa: E402
from minitfm.lm.base_lm import CHECKPOINT, byte_tokenizer, heldout_bits_per_byte, train_base_lm  # noqa: E402
from minitfm.training import save_checkpoint  # noqa: E402

TOLERANCE = 0.05  # bits per byte: a rerun on another machine lands within this of the shipped figure
RECORD = CHECKPOINT.with_suffix(".json")


def fact_recall(model, task: str, split: str, limit: int | None = None) -> float:
    """Share of the facts of ``split`` (the first ``limit``) whose statement the model completes greedily."""
    chosen = [f for f in facts(task) if split_of(task, f) == split][:limit]
    hits = statement_recall(model, byte_tokenizer(), task, chosen, bos_id=model.config.bos_id)
    return sum(hits) / len(hits)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", action="store_true", help=f"write {CHECKPOINT.name} and {RECORD.name}")
    parser.add_argument("--check", action="store_true", help=f"compare with {RECORD.name}")
    parser.add_argument("--smoke", action="store_true", help="the smallest setting (3 steps of 4 rows, 3 held-out "
                                                             "paragraphs, 2 facts per task and split, 1 thread): checks "
                                                             "that the script runs; writes and compares nothing")
    args = parser.parse_args()
    train, paragraphs, limit = {}, None, None
    if args.smoke:
        if args.save or args.check:
            parser.error("--smoke trains for 3 steps: nothing worth saving or checking; drop --save and --check")
        args.threads, train, paragraphs, limit = 1, dict(steps=3, batch_size=4, warmup=1), 3, 2
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}; {args.threads} threads")
    start = time.perf_counter()
    def report(history):  # a line every 100 steps, for logs that are not a terminal
        if len(history.loss) % 100 == 0:
            print(f"  step {len(history.loss)}: loss {history.loss[-1]:.3f} ({time.perf_counter() - start:.0f} s)",
                  flush=True)

    model, history = train_base_lm(progress=sys.stderr.isatty(), callbacks=[report], **train)
    seconds = time.perf_counter() - start
    bpb = heldout_bits_per_byte(model, paragraphs)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"trained {len(history.loss)} steps in {seconds:.0f} s, {n_params:,} parameters; training loss "
          f"{sum(history.loss[:10]) / 10:.3f} -> {sum(history.loss[-10:]) / 10:.3f} nats/byte")
    print(f"held-out prose: {bpb:.4f} bits per byte")
    recall = {t: {s: round(fact_recall(model, t, s, limit), 3) for s in ("train", "heldout")} for t in TASKS}
    for task, shares in recall.items():
        print(f"  facts completed, {task:9s}: fine-tuning facts {shares['train']:.0%}, held-out facts "
              f"{shares['heldout']:.0%}")
    record = {"heldout_bits_per_byte": round(bpb, 4), "fact_recall": recall, "steps": len(history.loss),
              "seconds": round(seconds), "threads": args.threads, "torch": torch.__version__,
              "python": platform.python_version(), "cpu": cpu_summary(), "parameters": n_params}
    if args.save:
        save_checkpoint(CHECKPOINT, model)
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
        print(f"saved {CHECKPOINT} ({CHECKPOINT.stat().st_size / 1e6:.1f} MB) and {RECORD.name}")
    if args.check:
        shipped = json.loads(RECORD.read_text())["heldout_bits_per_byte"]
        ok = abs(bpb - shipped) <= TOLERANCE
        print(f"check: held-out bits per byte {bpb:.4f} vs shipped {shipped:.4f}, |difference| "
              f"{abs(bpb - shipped):.4f} {'<=' if ok else '>'} {TOLERANCE}: {'reproduced' if ok else 'NOT reproduced'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
