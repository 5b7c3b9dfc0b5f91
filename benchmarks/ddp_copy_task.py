"""Data-parallel copy task: DistributedDataParallel on local CPU processes (gloo), started by torchrun.

Every process (rank) trains the same copy-task encoder-decoder (``ModelConfig.copy_task()``, no dropout) on
its rows of a seeded global batch (rows r, r + W, ...); DDP all-reduces the gradients. Rank 0 prints, per
step, the loss of the global batch, the buckets and bytes all-reduced next to the parameters' bytes, and
the step time. ``--check`` also trains one process on the whole global batch and compares gradients and
weights (they must agree to 1e-6; the script exits with status 1 if they do not).

    torchrun --standalone --nproc_per_node=2 benchmarks/ddp_copy_task.py               # 3 SGD steps
    torchrun --standalone --nproc_per_node=2 benchmarks/ddp_copy_task.py --steps 20 --check
    torchrun --standalone --nproc_per_node=2 benchmarks/ddp_copy_task.py --bucket-cap-mb 0.1
    python benchmarks/ddp_copy_task.py --smoke    # 2 checked updates: starts itself with torchrun (tests run this)

torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; the process group reads them (``env://``).
The worker logic is ``minitfm.training.distributed`` (the same code ``compare_data_parallel`` spawns from a notebook).
Each rank uses one thread; most of the wall time is starting the processes and importing torch (DDP also
imports ``torch._dynamo``), not training. The script sets ``OMP_WAIT_POLICY=PASSIVE`` unless you set it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

START = time.perf_counter()
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # must happen before torch starts OpenMP

from datetime import timedelta  # noqa: E402

import torch.distributed as dist  # noqa: E402

from minitfm.device import set_threads  # noqa: E402
from minitfm.training.distributed import (DataParallelSettings, check_distributed, make_report, train_rank,  # noqa: E402
                                          train_reference)

TOLERANCE = 1e-6


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer updates (default 3)")
    parser.add_argument("--batch-per-rank", type=int, default=16, help="rows per rank (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--lr", type=float, default=None, help="default 0.1 for SGD, 1e-3 for Adam")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket size (default 25)")
    parser.add_argument("--check", action="store_true", help="compare with one process on the whole batch")
    parser.add_argument("--smoke", action="store_true", help="the smallest setting (2 updates of 4 rows per rank, "
                                                             "checked against one process); started without torchrun, "
                                                             "it starts itself with torchrun on 2 processes")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.batch_per_rank, args.check = 2, 4, True
        if "RANK" not in os.environ:  # re-run this script under torchrun: 2 local processes
            os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                      "--nproc_per_node=2", __file__, *sys.argv[1:]])
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        parser.error("start this script with torchrun, which sets RANK and WORLD_SIZE, e.g.\n"
                     "  torchrun --standalone --nproc_per_node=2 benchmarks/ddp_copy_task.py")
    return args


def print_steps(records: list, param_bytes: int) -> None:
    """One line per step: the global loss (mean over ranks), rank 0's all-reduce traffic and step time."""
    first = records[0]
    print(f"{'step':>4} {'loss':>8} {'buckets':>7} {'all-reduced bytes':>17} {'/ param bytes':>13} {'step ms':>8}")
    for step, seconds in enumerate(first["step_seconds"]):
        loss = sum(r["losses"][step] for r in records) / len(records)
        sent = first["allreduce_bytes"][step]
        print(f"{step + 1:>4} {loss:>8.4f} {first['buckets'][step]:>7} {sent:>17,} {sent / param_bytes:>13.3f} "
              f"{1000 * seconds:>8.1f}")


def print_check(records: list, settings: DataParallelSettings) -> bool:
    """Train the single-process reference here (rank 0) and print how far DDP is from it."""
    set_threads(1)
    report = make_report(records, train_reference(settings, len(records)), settings)
    print(f"single process on the whole global batch of {len(records) * settings.batch_per_rank} rows:")
    for step in range(settings.steps):
        print(f"  step {step + 1}: max |grad diff| {report.grad_diff[step]:.2e}, "
              f"max |weight diff| {report.weight_diff[step]:.2e} (in {report.weight_diff_where[step]}), "
              f"loss {report.reference_losses[step]:.4f}")
    worst = max(report.grad_diff + report.weight_diff)
    ok = worst <= TOLERANCE and report.rank_diff == 0.0
    print(f"ranks differ by {report.rank_diff:.1e}; largest difference from one process {worst:.2e} -> "
          f"{'OK' if ok else 'FAILED'} (ranks equal, differences <= {TOLERANCE:g})")
    return ok


def main() -> None:
    args = parse_args()
    settings = DataParallelSettings(steps=args.steps, batch_per_rank=args.batch_per_rank, seed=args.seed,
                                    optimizer=args.optimizer, lr=args.lr, bucket_cap_mb=args.bucket_cap_mb)
    check_distributed()
    set_threads(1)  # the ranks share the cores
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # env://: torchrun's variables
    rank, world_size = dist.get_rank(), dist.get_world_size()
    record = train_rank(settings)
    n_params = record["weights"][0].numel()  # N, a tied matrix counted once
    if not args.check:  # rank 0 only needs the losses of the others; skip sending N floats per step
        record = {**record, "grads": [], "weights": []}
    records = [None] * world_size if rank == 0 else None
    dist.gather_object(record, records, dst=0)
    ok = True
    if rank == 0:
        param_bytes = 4 * n_params  # fp32
        if args.smoke:
            print("--smoke: the smallest setting, to check that the script runs; its figures mean nothing (the check "
                  "against one process still counts)")
        print(f"DDP, gloo, {world_size} processes x {settings.batch_per_rank} rows, {settings.optimizer}, "
              f"{n_params:,} parameters = {param_bytes:,} bytes of fp32 gradients per step")
        print_steps(records, param_bytes)
        if args.check:
            ok = print_check(records, settings)
        print(f"rank 0: {time.perf_counter() - START:.1f} s from the start of this script (imports included), "
              f"{sum(record['step_seconds']):.2f} s of it in the {settings.steps} training steps")
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
