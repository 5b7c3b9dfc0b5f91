"""Copy-task benchmark: how fast the chapter-7 encoder-decoder learns to copy perfectly.

Task: copy random sequences of 10 tokens drawn from 10 symbols, with exactly ``ModelConfig.copy_task()``
and ``TrainConfig.copy_task()``, the settings chapter 7 imports.

    python benchmarks/copy_task.py            # one run, thread count chosen by measurement
    python benchmarks/copy_task.py --runs 3   # three seeds, then the median
    python benchmarks/copy_task.py --full     # train all the recipe's steps, as chapter 7 does

**Time to 100%.** Every ``--check-every`` updates (from update 100) training pauses and the model
greedy-decodes 1,000 validation sequences; it stops at the first check where it copies all of them. The
model is then scored on 1,000 *other* fresh sequences (the test, drawn from a generator that neither
training nor validation used): the target is 100% exact match there, within at most 5 s of training.
Training time is the wall time of the updates and of drawing their batches; the validation checks are
not counted (they are not training). ``--full`` instead trains every step of the recipe and reports that.

**Threads.** ``--threads auto`` (the default) times 30 updates on 1, 2, 4, ... threads (best of 2) and
trains on the fastest; the book's tiny models are usually fastest on one. ``--threads N`` forces N.

Timings depend on the machine's load. OpenMP's wait
policy is chosen from how busy the cores are unless you set ``OMP_WAIT_POLICY`` yourself (see
``benchmarks/_openmp.py``).
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from _openmp import WAIT_POLICY, thread_counts  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import torch  # noqa: E402

from minitfm.config import ModelConfig  # noqa: E402
from minitfm.data import CopyTask  # noqa: E402
from minitfm.decoding import evaluate  # noqa: E402
from minitfm.device import cpu_summary  # noqa: E402
from minitfm.models import EncoderDecoder  # noqa: E402
from minitfm.params import count_params  # noqa: E402
from minitfm.training import TrainConfig, set_seed, train  # noqa: E402

TARGET_SECONDS, N_EVAL, FIRST_CHECK = 5.0, 1000, 100
TASK = CopyTask(n_symbols=10, min_len=10, max_len=10)


def probe(steps: int = 30) -> None:
    """A few updates of the recipe: what the thread probe times."""
    set_seed(0)
    model = EncoderDecoder(ModelConfig.copy_task())
    config = dataclasses.replace(TrainConfig.copy_task(seed=0), steps=steps)
    train(model, TASK.batches(config.batch_size, seed=0), config, progress=False)


def run_once(seed: int, full: bool, check_every: int, progress: bool) -> dict:
    """Train one model from ``seed`` (until it copies the validation set, or every step with ``full``)."""
    set_seed(seed)
    model = EncoderDecoder(ModelConfig.copy_task())
    config = TrainConfig.copy_task(seed=seed)
    valid = TASK.batch(N_EVAL, torch.Generator().manual_seed(2_000_003 + seed))
    paused = [0.0]

    def copies_the_validation_set(history) -> bool:
        step = history.step[-1]
        if full or step < FIRST_CHECK or step % check_every:
            return False
        start = time.perf_counter()
        perfect = evaluate(model, valid)["exact_match"] == 1.0  # evaluate() leaves the model in eval mode
        model.train()
        paused[0] += time.perf_counter() - start
        return perfect

    start = time.perf_counter()
    history = train(model, TASK.batches(config.batch_size, seed=seed), config, callbacks=[copies_the_validation_set],
                    progress=progress)
    seconds = time.perf_counter() - start - paused[0]
    test = TASK.batch(N_EVAL, torch.Generator().manual_seed(1_000_003 + seed))  # never drawn from before
    return {"seconds": seconds, "steps": history.step[-1], **evaluate(model, test),
            "params": count_params(model)["total"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="number of runs (seeds 0, 1, ...); prints the median")
    parser.add_argument("--threads", default="auto", help="'auto' (fastest by measurement) or a thread count")
    parser.add_argument("--full", action="store_true", help="train every step of the recipe instead of stopping at 100%%")
    parser.add_argument("--check-every", type=int, default=10, help="updates between validation checks")
    parser.add_argument("--progress", action="store_true", help="show the tqdm bar")
    args = parser.parse_args()
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}")
    print(f"copy task: {ModelConfig.copy_task()}")
    print(f"training: {TrainConfig.copy_task()}")
    if args.threads == "auto":
        probe(5)  # warm-up
    torch.set_num_threads(thread_counts(args.threads, probe, "30 updates")[0])
    print(f"training on {torch.get_num_threads()} thread(s); "
          + ("every step of the recipe" if args.full else f"stop at the first check (every {args.check_every} "
             f"updates from {FIRST_CHECK}) that copies all {N_EVAL} validation sequences"))
    results = []
    for seed in range(args.runs):
        r = run_once(seed, args.full, args.check_every, args.progress)
        results.append(r)
        print(f"run {seed}: {r['steps']} updates in {r['seconds']:.1f} s of training, test exact match "
              f"{100 * r['exact_match']:.1f}% (token accuracy {100 * r['token_accuracy']:.2f}%) on {N_EVAL} fresh "
              f"sequences, {r['params']:,} parameters")
    seconds = statistics.median(r["seconds"] for r in results)
    exact = min(r["exact_match"] for r in results)
    ok = seconds <= TARGET_SECONDS and exact == 1.0
    print(f"median of {args.runs}: {seconds:.1f} s of training; lowest test exact match {100 * exact:.1f}% -> "
          f"target (100% on {N_EVAL} fresh sequences in <= {TARGET_SECONDS:.0f} s) {'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
