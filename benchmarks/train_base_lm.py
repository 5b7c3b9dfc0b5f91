"""Pretrain the base model worth tuning (bytes; the book's prose, four skills, invented people), or check it.

Usage:  python benchmarks/train_base_lm.py [--threads 2] [--save] [--check]
        python benchmarks/train_base_lm.py --smoke   # seconds: a sliver of the corpus (tests run this)

Recipe (all in :mod:`minitfm.lm.base_lm`): ``pretraining_texts(seed=0)`` read once in a seeded order,
``base_lm_config()``, ``base_lm_train_config`` (AdamW with decoupled decay, warmup + cosine), model seed 0.
The script prints the training time and what the model reached:

- bits per byte on the held-out prose paragraphs;
- skill recall: the share of held-out instances of each skill whose statement it completes right, greedily;
- people recall: the share of facts it completes in a phrasing it read, per group ("one", "many") and split.

``--save`` writes ``minitfm/lm/assets/base_lm.pt`` and ``base_lm.json`` (those figures, the threads, torch's
version and the CPU). ``--check`` trains again and compares with that JSON: bits per byte within BPB_TOLERANCE
and each recall share within RECALL_TOLERANCE. Another CPU, BLAS or thread count changes every float of a
training run like a new seed does, so the check asks for the same quality, not the same bits.
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
from minitfm.finetuning import people as P, skills as S  # noqa: E402
from minitfm.lm.base_lm import CHECKPOINT, people_recall, skill_recall, train_base_lm  # noqa: E402
from minitfm.lm.prose import heldout_bits_per_byte  # noqa: E402
from minitfm.training import save_checkpoint  # noqa: E402

BPB_TOLERANCE = 0.05  # bits per byte
RECALL_TOLERANCE = 0.08  # shares of 200 skill instances or of a group's facts
RECORD = CHECKPOINT.with_suffix(".json")


def measure(model, n_skill: int, n_paragraphs: int | None, n_people: int | None) -> dict:
    """The figures the record keeps (rounded shares)."""
    out = {"heldout_bits_per_byte": round(heldout_bits_per_byte(model, n_paragraphs), 4), "skill_recall": {},
           "people_recall": {}}
    for task in S.SKILLS:
        hits = skill_recall(model, task, n_skill)
        out["skill_recall"][task] = round(sum(hits) / len(hits), 3)
    for group in P.GROUPS:
        for split in P.SPLITS:
            hits = people_recall(model, P.chosen(group, split)[:n_people])
            out["people_recall"][f"{group}/{split}"] = round(sum(hits) / len(hits), 3)
    return out


def compare(now: dict, shipped: dict) -> list[str]:
    """The figures of ``now`` that are not within tolerance of ``shipped`` (empty: reproduced)."""
    problems = []
    if abs(now["heldout_bits_per_byte"] - shipped["heldout_bits_per_byte"]) > BPB_TOLERANCE:
        problems.append(f"bits per byte {now['heldout_bits_per_byte']} vs {shipped['heldout_bits_per_byte']}")
    for key in ("skill_recall", "people_recall"):
        for name, share in now[key].items():
            if abs(share - shipped[key][name]) > RECALL_TOLERANCE:
                problems.append(f"{key} {name}: {share} vs {shipped[key][name]}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--save", action="store_true", help=f"write {CHECKPOINT.name} and {RECORD.name}")
    parser.add_argument("--check", action="store_true", help=f"compare with {RECORD.name}")
    parser.add_argument("--smoke", action="store_true", help="a sliver of the corpus, a few measurements, 1 thread: "
                                                             "checks that the script runs; writes and compares nothing")
    args = parser.parse_args()
    scale, n_skill, n_paragraphs, n_people = 1.0, 200, None, None
    if args.smoke:
        if args.save or args.check:
            parser.error("--smoke trains on a sliver: nothing worth saving or checking; drop --save and --check")
        args.threads, scale, n_skill, n_paragraphs, n_people = 1, 0.002, 4, 3, 2
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}; {args.threads} threads")
    start = time.perf_counter()

    def report(history):  # a line every 200 steps, for logs that are not a terminal
        if len(history.loss) % 200 == 0:
            print(f"  step {len(history.loss)}: loss {sum(history.loss[-50:]) / 50:.3f} nats/byte "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)

    model, history = train_base_lm(scale=scale, progress=sys.stderr.isatty(), callbacks=[report])
    seconds = time.perf_counter() - start
    n_params = sum(p.numel() for p in model.parameters())
    print(f"trained {len(history.loss)} steps in {seconds:.0f} s ({seconds / 60:.1f} min), {n_params:,} parameters; "
          f"training loss {history.loss[0]:.3f} -> {sum(history.loss[-20:]) / min(20, len(history.loss)):.3f}")
    figures = measure(model, n_skill, n_paragraphs, n_people)
    print(f"held-out prose: {figures['heldout_bits_per_byte']:.4f} bits per byte")
    for task, share in figures["skill_recall"].items():
        print(f"  skill recall, {task:8s}: {share:.0%} of {n_skill} held-out instances")
    for name, share in figures["people_recall"].items():
        print(f"  people recall, {name:13s}: {share:.0%}")
    record = {**figures, "steps": len(history.loss), "seconds": round(seconds), "threads": args.threads,
              "torch": torch.__version__, "python": platform.python_version(), "cpu": cpu_summary(),
              "parameters": n_params}
    if args.save:
        save_checkpoint(CHECKPOINT, model)
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
        print(f"saved {CHECKPOINT} ({CHECKPOINT.stat().st_size / 1e6:.1f} MB) and {RECORD.name}")
    if args.check:
        problems = compare(figures, json.loads(RECORD.read_text()))
        print(f"check against {RECORD.name} (bits per byte within {BPB_TOLERANCE}, shares within "
              f"{RECALL_TOLERANCE}): {'reproduced' if not problems else 'NOT reproduced: ' + '; '.join(problems)}; "
              f"{seconds / 60:.1f} min of training")
        return 0 if not problems else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
