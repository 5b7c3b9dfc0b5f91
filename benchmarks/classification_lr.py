"""Chapter 15b's learning rates: a small grid per fine-tuning method, scored on a validation split of the training texts.

Usage:  python benchmarks/classification_lr.py [--steps 40] [--seeds 0,1]
        python benchmarks/classification_lr.py --smoke   # seconds: one rate per method, a few steps

Chapter 15b fine-tunes the shipped base model (:func:`minitfm.lm.base_lm.load_base_lm`) as a topic classifier
(:mod:`minitfm.lm.topics`, mean pooling) four ways: the head only, the last half of the blocks, everything, and
LoRA (rank 16, alpha 32, every linear layer of the blocks). Each way has its own learning rate. This script
chooses them without looking at the chapter's held-out texts: it trains on the first ``TRAIN_PER_CLASS`` training
paragraphs of each topic and scores on the next ``VAL_PER_CLASS`` (the chapter trains on all of them and scores on
the test split). Everything else is the chapter's recipe: batches of 16, cosine schedule with 5 warmup steps, the
same number of steps, the texts' first 64 bytes. For each method it prints the validation accuracy of every rate,
per seed and pooled, and the rate with the best pooled accuracy.
"""
from __future__ import annotations

import argparse
import copy
import platform
import sys
import time

from _openmp import WAIT_POLICY  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import torch  # noqa: E402

from minitfm.device import cpu_summary  # noqa: E402
from minitfm.finetuning import (DecoderClassifier, add_lora, classification_batches, classify,  # noqa: E402
                                linear_names, set_trainable)
from minitfm.lm.base_lm import load_base_lm  # noqa: E402
from minitfm.lm.prose import byte_tokenizer  # noqa: E402
from minitfm.lm.topics import TOPICS, topic_examples  # noqa: E402
from minitfm.training import TrainConfig, train  # noqa: E402

TRAIN_PER_CLASS, VAL_PER_CLASS = 56, 24  # the chapter's 80 training paragraphs per topic, split 56 / 24
N_BYTES, BATCH, LORA_RANK = 64, 16, 16
GRID = {  # method: (what trains, learning rates tried)
    "head only": ("head", (1e-2, 3e-2, 1e-1, 3e-1)),
    "last blocks": ("last_blocks", (1e-3, 3e-3, 1e-2)),
    "full": ("all", (3e-4, 1e-3, 3e-3)),
    "LoRA": ("lora", (1e-3, 3e-3, 1e-2, 3e-2)),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", default="0,1", help="comma-separated training seeds")
    parser.add_argument("--methods", default=",".join(GRID), help=f"comma-separated, of {list(GRID)}")
    parser.add_argument("--smoke", action="store_true", help="seconds: one rate per method, 3 steps, 1 seed")
    args = parser.parse_args()
    if args.smoke:
        print("--smoke: the smallest setting, to check that the script runs; its figures mean nothing")
    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    steps = 3 if args.smoke else args.steps
    torch.set_num_threads(1)
    print(f"machine: {cpu_summary()}; python {platform.python_version()}; 1 thread; {WAIT_POLICY}")

    base = load_base_lm()
    config = base.config
    tokenizer = byte_tokenizer()
    examples = topic_examples("train", TRAIN_PER_CLASS + VAL_PER_CLASS, n_bytes=N_BYTES)
    per = TRAIN_PER_CLASS + VAL_PER_CLASS
    fit = [e for i, e in enumerate(examples) if i % per < TRAIN_PER_CLASS]
    val = [e for i, e in enumerate(examples) if i % per >= TRAIN_PER_CLASS]

    def encode(text):
        return torch.tensor([config.bos_id] + tokenizer.encode(text))

    fit_ids, fit_labels = [encode(e.text) for e in fit], [e.label for e in fit]
    val_ids, val_labels = [encode(e.text) for e in val], torch.tensor([e.label for e in val])
    k_last = max(1, config.n_layers // 2)
    targets = [name for name in linear_names(base) if name != "lm_head"]
    print(f"{len(fit)} training texts, {len(val)} validation texts (from the training split); {steps} steps of "
          f"{BATCH}; seeds {seeds}; last blocks = the last {k_last}; best constant answer 25%")

    def run(what: str, lr: float, seed: int) -> float:
        backbone = copy.deepcopy(base)
        if what == "lora":
            add_lora(backbone, targets=targets, r=LORA_RANK, alpha=2 * LORA_RANK, seed=seed)
        torch.manual_seed(seed)
        classifier = DecoderClassifier(backbone, len(TOPICS), pad_id=config.pad_id, pooling="mean")
        set_trainable(classifier, what, k_last if what == "last_blocks" else None)
        settings = TrainConfig(steps=steps, batch_size=BATCH, lr=lr, schedule="cosine", warmup=min(5, steps - 1),
                               label_smoothing=0.0, seed=seed)
        batches = classification_batches(fit_ids, fit_labels, BATCH, pad_id=config.pad_id, seed=seed)
        train(classifier, batches, settings, progress=False)
        return float((classify(classifier, val_ids) == val_labels).float().mean())

    start = time.perf_counter()
    methods = args.methods.split(",")
    if unknown := [name for name in methods if name not in GRID]:
        parser.error(f"--methods must name methods of {list(GRID)}, got {unknown}")
    for method in methods:
        what, rates = GRID[method]
        rates = rates[1:2] if args.smoke else rates
        pooled = {}
        for lr in rates:
            accs = [run(what, lr, seed) for seed in seeds]
            pooled[lr] = sum(accs) / len(accs)
            print(f"{method:12} lr {lr:.0e}: validation accuracy {pooled[lr]:.1%} "
                  f"(seeds: {', '.join(f'{a:.1%}' for a in accs)})", flush=True)
        best = max(pooled, key=pooled.get)
        print(f"{method:12} best rate {best:.0e}")
    print(f"took {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
