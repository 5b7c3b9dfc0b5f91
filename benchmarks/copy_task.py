"""Copy-task benchmark: train the chapter-6 encoder-decoder on 2 CPU threads and check it copies perfectly.

Task: copy random sequences of 10 tokens drawn from 10 symbols. Target: 100% exact match on 1,000
fresh sequences after at most 30 s of training. Uses exactly ``ModelConfig.copy_task()`` and
``TrainConfig.copy_task()``, the settings chapter 7 imports.

    python benchmarks/copy_task.py            # one run
    python benchmarks/copy_task.py --runs 3   # three seeds, then the median

Training time is the wall time of the whole ``train(...)`` call (batch generation included, evaluation
excluded). The timing depends on the machine's load: on a shared machine it is inflated.

OpenMP's threads busy-wait between operations by default; when other processes compete for the cores,
two spinning threads slow tiny models down by up to 10x. The script therefore sets
``OMP_WAIT_POLICY=PASSIVE`` unless you set it yourself (this does not change the thread count).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # must happen before torch starts OpenMP

import torch  # noqa: E402

from minitfm.config import ModelConfig  # noqa: E402
from minitfm.data import CopyTask  # noqa: E402
from minitfm.decoding import evaluate  # noqa: E402
from minitfm.models import EncoderDecoder  # noqa: E402
from minitfm.params import count_params  # noqa: E402
from minitfm.training import TrainConfig, set_seed, train  # noqa: E402

TARGET_SECONDS, N_EVAL = 30.0, 1000


def run_once(seed: int, progress: bool) -> dict:
    """Train one model from ``seed``; score it on 1,000 sequences it has never seen."""
    task = CopyTask(n_symbols=10, min_len=10, max_len=10)
    set_seed(seed)
    model = EncoderDecoder(ModelConfig.copy_task())
    config = TrainConfig.copy_task(seed=seed)
    start = time.perf_counter()
    train(model, task.batches(config.batch_size, seed=seed), config, progress=progress)
    seconds = time.perf_counter() - start
    fresh = task.batch(N_EVAL, torch.Generator().manual_seed(1_000_003 + seed))  # a stream training never drew from
    scores = evaluate(model, fresh)
    return {"seconds": seconds, **scores, "params": count_params(model)["total"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="number of runs (seeds 0, 1, ...); prints the median")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--progress", action="store_true", help="show the tqdm bar")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"copy task: {ModelConfig.copy_task()}")
    print(f"training: {TrainConfig.copy_task()}")
    print(f"threads={torch.get_num_threads()} OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']} "
          f"load average={os.getloadavg()[0]:.1f}")
    results = []
    for seed in range(args.runs):
        r = run_once(seed, args.progress)
        results.append(r)
        print(f"run {seed}: training time {r['seconds']:.1f} s, exact match {100 * r['exact_match']:.1f}% "
              f"(token accuracy {100 * r['token_accuracy']:.2f}%) on {N_EVAL} fresh sequences, "
              f"{r['params']:,} parameters")
    seconds = statistics.median(r["seconds"] for r in results)
    exact = statistics.median(r["exact_match"] for r in results)
    ok = seconds <= TARGET_SECONDS and exact == 1.0
    print(f"median of {args.runs}: training time {seconds:.1f} s, exact match {100 * exact:.1f}%, "
          f"{results[0]['params']:,} parameters -> target (100% in <= {TARGET_SECONDS:.0f} s) "
          f"{'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
