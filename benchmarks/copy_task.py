"""Copy-task benchmark: how fast the chapter-7 encoder-decoder learns to copy perfectly.

Task: copy random sequences of 10 tokens drawn from 10 symbols, with exactly ``ModelConfig.copy_task()``
and ``TrainConfig.copy_task()``, the settings chapter 7 imports.

    python benchmarks/copy_task.py            # one run, thread count chosen by measurement
    python benchmarks/copy_task.py --runs 3   # three seeds, then the median
    python benchmarks/copy_task.py --smoke    # seconds: 20 updates, 50 test sequences (tests run this)

**Time to 100%.** The model trains every step of the recipe. Every ``--check-every`` updates (from update
100) training pauses and the model greedy-decodes 1,000 fresh test sequences (drawn from a generator that
training never used). The time to 100% is the training time up to the first check from which the model
copies all 1,000 at every later check, to the end of the recipe: the moment it became perfect and stayed so.
(An earlier version stopped at the first check that copied a validation set perfectly; with 1,000 or even
3,000 validation sequences it stopped where the model still missed 1 or 2 of 1,000 test sequences, because
training is not monotone and its last errors are rare.) Training time is the wall time of the updates and of
drawing their batches; the checks are not counted. Target: at most 5 s.

**Threads.** ``--threads auto`` (the default) times 30 updates on 1, 2, 4, ... threads (best of 2) and
trains on the fastest. ``--threads N`` forces N.

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
from minitfm.device import cpu_summary  # noqa: E402
from minitfm.generation.greedy import evaluate  # noqa: E402
from minitfm.models import EncoderDecoder  # noqa: E402
from minitfm.params import count_params  # noqa: E402
from minitfm.training import TrainConfig, set_seed, train  # noqa: E402

TARGET_SECONDS, N_TEST, FIRST_CHECK = 5.0, 1000, 100
TASK = CopyTask(n_symbols=10, min_len=10, max_len=10)


def probe(steps: int = 30) -> None:
    """A few updates of the recipe: what the thread probe times."""
    set_seed(0)
    model = EncoderDecoder(ModelConfig.copy_task())
    config = dataclasses.replace(TrainConfig.copy_task(seed=0), steps=steps)
    train(model, TASK.batches(config.batch_size, seed=0), config, progress=False)


def run_once(seed: int, check_every: int, progress: bool, steps: int | None = None, n_test: int = N_TEST) -> dict:
    """Train one model from ``seed`` through the whole recipe (or its first ``steps``), checking the test set as it
    goes."""
    set_seed(seed)
    model = EncoderDecoder(ModelConfig.copy_task())
    config = TrainConfig.copy_task(seed=seed)
    if steps is not None:
        config = dataclasses.replace(config, steps=steps)
    test = TASK.batch(n_test, torch.Generator().manual_seed(1_000_003 + seed))  # never drawn from by training
    checks, paused, start = [], [0.0], time.perf_counter()  # checks: (update, training seconds, exact match)

    def check(history) -> None:
        step = history.step[-1]
        if step == config.steps or (step >= FIRST_CHECK and step % check_every == 0):
            seconds = time.perf_counter() - start - paused[0]
            checks.append((step, seconds, evaluate(model, test)["exact_match"]))  # evaluate() sets eval mode
            model.train()
            paused[0] = time.perf_counter() - start - seconds

    train(model, TASK.batches(config.batch_size, seed=seed), config, callbacks=[check], progress=progress)
    perfect_from = None  # the first check from which every later check copies all of the test set
    for step, seconds, exact in checks:
        if exact < 1.0:
            perfect_from = None
        elif perfect_from is None:
            perfect_from = (step, seconds)
    return {"perfect_from": perfect_from, "final": evaluate(model, test), "steps": checks[-1][0],
            "seconds": checks[-1][1], "params": count_params(model)["total"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="number of runs (seeds 0, 1, ...); prints the median")
    parser.add_argument("--threads", default="auto", help="'auto' (fastest by measurement) or a thread count")
    parser.add_argument("--check-every", type=int, default=10, help="updates between test checks")
    parser.add_argument("--progress", action="store_true", help="show the tqdm bar")
    parser.add_argument("--smoke", action="store_true", help="the smallest setting (20 updates, 50 test sequences, 1 "
                                                             "thread): checks that the script runs")
    args = parser.parse_args()
    steps, n_test = None, N_TEST
    if args.smoke:
        args.runs, args.threads, steps, n_test = 1, "1", 20, 50
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}")
    print(f"copy task: {ModelConfig.copy_task()}")
    print(f"training: {TrainConfig.copy_task()}")
    if args.threads == "auto":
        probe(5)  # warm-up
    torch.set_num_threads(thread_counts(args.threads, probe, "30 updates")[0])
    print(f"training on {torch.get_num_threads()} thread(s), every step of the recipe; the test set of {n_test} "
          f"fresh sequences is checked every {args.check_every} updates from update {FIRST_CHECK}")
    times = []
    for seed in range(args.runs):
        r = run_once(seed, args.check_every, args.progress, steps, n_test)
        final = r["final"]
        reached = "never" if r["perfect_from"] is None else \
            f"from update {r['perfect_from'][0]} on, after {r['perfect_from'][1]:.1f} s of training"
        print(f"run {seed}: {r['steps']} updates in {r['seconds']:.1f} s; all {n_test} test sequences copied {reached}; "
              f"at the end exact match {100 * final['exact_match']:.1f}% (token accuracy "
              f"{100 * final['token_accuracy']:.2f}%), {r['params']:,} parameters")
        times.append(float("inf") if r["perfect_from"] is None else r["perfect_from"][1])
    seconds = statistics.median(times)
    ok = seconds <= TARGET_SECONDS
    print(f"median of {args.runs}: 100% on {n_test} fresh sequences after {seconds:.1f} s of training -> target "
          f"(<= {TARGET_SECONDS:.0f} s) {'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
