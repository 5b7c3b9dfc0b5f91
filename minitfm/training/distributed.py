"""Data-parallel training with the real engine: torch.distributed, DistributedDataParallel and gloo on CPU.

Glossary: W world_size (processes, called ranks), r one rank in 0..W-1, b batch_per_rank, B = W b the global
batch, S source length, T target length, N parameters of the model.

Every rank holds a full copy of the model, runs forward and backward on its shard of the global batch, and
DDP averages the gradients over the ranks with an all-reduce while backward still runs (a bucket of gradients
is sent as soon as all of its gradients exist). Every rank then takes the same optimizer step on the same
averaged gradient, so the copies stay identical without ever sending weights.

Shards: every rank builds the same global batch from the same seed and keeps rows r, r + W, r + 2W, ...
(``rows[r::W]``), the interleaving ``torch.utils.data.DistributedSampler`` uses.

Loss normalisation: DDP *averages* gradients, so the mean over ranks of the per-rank losses must equal the
single-process loss on the whole global batch, the mean over all its target tokens. Each rank therefore
uses ``(sum of its token losses) / (global tokens / W)``; the mean over ranks is then (sum over every token)
/ (global tokens). With fixed-length copy sequences (no padding, the default) every shard holds the same
number of tokens and the factor is exactly 1. ``loss_norm="per_shard"`` uses each shard's own mean instead,
which is wrong as soon as shards hold different numbers of tokens (``min_len < max_len``).

Traffic: DDP copies the gradients into flat buckets and all-reduces each bucket once per step, so the
bytes handed to all-reduce per step equal the bytes of the trainable parameters' gradients, 4 N in fp32
(a tied matrix counts once), whatever the batch size. A comm hook (:func:`_counting_allreduce`) counts them.

Why DDP and one process agree to about 1e-7 (fp32), not bit for bit: the mathematics is the same, but one
process sums each gradient over B rows at once, while DDP sums b rows per rank, divides by W and adds the
ranks' results; float addition is not associative, so the last bits differ (with W = 1 they are equal).
The ranks themselves agree exactly: they all receive the same all-reduced numbers and take the same step.
SGD keeps the weights as close as the gradients (lr times the difference). Adam divides each gradient by
its own running size, so a gradient that is zero in exact arithmetic but rounding noise in floats (the key
projection's bias: adding one vector to every key shifts all scores of a query equally, and softmax ignores
that) becomes a full step of size lr, with a sign that depends on the rounding: the weights then differ by
up to about lr.
"""
from __future__ import annotations

import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from minitfm._checks import check_choice, check_number, check_positive_int
from minitfm.config import ModelConfig
from minitfm.data import Batch, CopyTask
from minitfm.device import set_threads
from minitfm.models import EncoderDecoder
from minitfm.training.loop import set_seed
from minitfm.training.losses import label_smoothed_cross_entropy

OPTIMIZERS = ("adam", "sgd")
LOSS_NORMS = ("global", "per_shard")
MAX_WORLD_SIZE = 16  # each rank is a process that imports torch: more than this only floods the machine


@dataclass
class DataParallelSettings:
    """What every rank (and the single-process reference) trains: the copy-task model, seeded and tiny."""

    steps: int = 3  # optimizer updates
    batch_per_rank: int = 16  # b rows per rank; the global batch has W b rows
    seed: int = 0  # model initialisation and the stream of global batches
    optimizer: str = "sgd"  # "sgd" (differences stay ~1e-7) or "adam" (see DataParallelReport.weight_diff_where)
    lr: Optional[float] = None  # None = 0.1 for SGD, 1e-3 for Adam
    min_len: int = 10  # copy sequences are min_len..10 symbols; 10 = fixed length, no padding
    loss_norm: str = "global"  # "global" (correct, see the module docstring) or "per_shard" (the naive mean)
    bucket_cap_mb: float = 25.0  # DDP's gradient bucket size (its default); smaller means more buckets

    def __post_init__(self):
        for name in ("steps", "batch_per_rank", "min_len"):
            check_positive_int(getattr(self, name), name)
        check_number(self.seed, "seed", integer=True)
        check_choice(self.optimizer, "optimizer", OPTIMIZERS)
        check_choice(self.loss_norm, "loss_norm", LOSS_NORMS)
        if self.lr is not None:
            check_number(self.lr, "lr", low=0.0, low_open=True)
        check_number(self.bucket_cap_mb, "bucket_cap_mb", low=0.0, low_open=True)
        CopyTask(min_len=self.min_len, max_len=10)  # raises if min_len > 10


@dataclass
class DataParallelReport:
    """DDP on W processes against one process on the concatenated batch. Differences are max |a - b|."""

    world_size: int
    steps: int
    grad_diff: list  # per step: DDP's averaged gradients vs the single-process gradients
    weight_diff: list  # per step: weights after the optimizer step, DDP vs single process
    weight_diff_where: list  # per step: the parameter holding that largest difference (None if all equal)
    rank_diff: float  # largest difference between any rank and rank 0 (gradients and weights, all steps)
    losses: list  # per step: mean over ranks of the rank losses (= the global batch's loss)
    reference_losses: list  # per step: the single-process loss
    n_params: int  # N, trainable parameters (a tied matrix counts once)
    param_bytes: int  # N times 4 bytes (fp32)
    allreduce_bytes_per_step: list  # bytes the comm hook handed to all-reduce in each step
    buckets_per_step: list  # gradient buckets all-reduced in each step
    step_seconds: list = field(default_factory=list)  # rank 0's forward + backward + all-reduce + update
    reference_step_seconds: list = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole comparison (starting the processes included)


def check_distributed() -> None:
    """Raise ``RuntimeError`` unless this PyTorch build has torch.distributed with the gloo backend."""
    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed (torch.distributed.is_available() is "
                           "False); install a standard PyTorch wheel from pytorch.org")
    if not dist.is_gloo_available():
        raise RuntimeError("this PyTorch build has torch.distributed but not its gloo backend, which CPU "
                           "training needs (torch.distributed.is_gloo_available() is False)")


def _check_settings(settings) -> None:
    if not isinstance(settings, DataParallelSettings):
        raise TypeError(f"settings must be a DataParallelSettings, got {type(settings).__name__}")


def global_batches(settings: DataParallelSettings, world_size: int) -> list[Batch]:
    """The ``steps`` global batches, each src (W b, S), tgt (W b, T), identical on every rank."""
    _check_settings(settings)
    check_positive_int(world_size, "world_size")
    task = CopyTask(min_len=settings.min_len, max_len=10)
    stream = task.batches(world_size * settings.batch_per_rank, seed=settings.seed)
    return [next(stream) for _ in range(settings.steps)]


def shard(batch: Batch, rank: int, world_size: int) -> Batch:
    """Rank r's rows r, r + W, r + 2W, ... of a (B, ...) batch -> (B / W, ...)."""
    if not isinstance(batch, Batch) or batch.src is None:
        raise TypeError(f"batch must be a minitfm.Batch with a source (CopyTask.batch), got {batch!r:.60}")
    check_positive_int(world_size, "world_size")
    check_number(rank, "rank", low=0, high=world_size - 1, integer=True)
    if batch.tgt_out.shape[0] % world_size:
        raise ValueError(f"the global batch must split evenly over world_size={world_size} ranks, "
                         f"got {batch.tgt_out.shape[0]} rows")
    rows = slice(rank, None, world_size)
    return Batch(batch.src[rows], batch.tgt_in[rows], batch.tgt_out[rows], batch.pad_id)


def shard_loss(model, part: Batch, global_tokens: int, world_size: int, loss_norm: str = "global"):
    """The loss one rank backpropagates; its mean over the W ranks is the global batch's mean token loss.

    ``model`` maps src (b, S), tgt_in (b, T) to logits (b, T, V); ``global_tokens`` counts the target tokens
    of the whole global batch (``Batch.n_tokens``).
    """
    check_positive_int(global_tokens, "global_tokens")
    check_positive_int(world_size, "world_size")
    check_choice(loss_norm, "loss_norm", LOSS_NORMS)
    logits = model(part.src, part.tgt_in)  # (b, T, V)
    mean = label_smoothed_cross_entropy(logits, part.tgt_out, 0.0, ignore_index=part.pad_id)
    if loss_norm == "per_shard":
        return mean
    # mean * n_shard = this shard's summed token loss; dividing by global_tokens / W makes the DDP average
    # (sum over ranks / W) equal to the sum over every token / global_tokens
    return mean * (part.n_tokens * world_size / global_tokens)


def _new_model(settings: DataParallelSettings) -> EncoderDecoder:
    set_seed(settings.seed)  # the same initial weights on every rank and in the reference
    return EncoderDecoder(ModelConfig.copy_task(dropout=0.0)).train()  # no dropout: deterministic runs


def _new_optimizer(params, settings: DataParallelSettings) -> torch.optim.Optimizer:
    if settings.optimizer == "adam":
        return torch.optim.Adam(params, lr=1e-3 if settings.lr is None else settings.lr)
    return torch.optim.SGD(params, lr=0.1 if settings.lr is None else settings.lr)


def _flat(model, what: str) -> torch.Tensor:
    """Every parameter (or its gradient) flattened into one (N,) vector."""
    return torch.cat([(p.grad if what == "grad" else p).detach().flatten() for p in model.parameters()])


def _counting_allreduce(counts: list, bucket):
    """DDP comm hook: note the bucket's size in bytes, then run DDP's default (divide by W, all-reduce sum).

    Returns a ``torch.futures.Future`` of the averaged bucket. (No return annotation: DDP compares it with
    ``Future[Tensor]`` and rejects the string that ``from __future__ import annotations`` makes of it.)
    """
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    buffer = bucket.buffer()  # the bucket's gradients, flattened into one tensor
    counts.append(buffer.numel() * buffer.element_size())
    return allreduce_hook(None, bucket)  # None: the default process group


def _train(model, optimizer, batches, step_loss, counts=None) -> dict:
    """Run the updates; record the loss, gradients, weights, seconds (and what the hook counted) per step."""
    record = {"losses": [], "grads": [], "weights": [], "step_seconds": [], "buckets": [], "allreduce_bytes": []}
    for batch in batches:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if counts is not None:
            counts.clear()
        loss = step_loss(batch)
        loss.backward()  # under DDP this also averages the gradients over the ranks
        record["grads"].append(_flat(model, "grad"))
        optimizer.step()
        record["step_seconds"].append(time.perf_counter() - start)
        record["weights"].append(_flat(model, "param"))
        record["losses"].append(loss.item())
        if counts is not None:
            record["buckets"].append(len(counts))
            record["allreduce_bytes"].append(sum(counts))
    return record


def train_rank(settings: DataParallelSettings) -> dict:
    """Train this rank's DDP copy; needs an initialised process group (``torch.distributed.init_process_group``).

    Returns plain values: ``losses`` (this rank's loss per step), ``grads`` and ``weights`` (one (N,) vector
    per step), ``step_seconds``, ``buckets`` and ``allreduce_bytes`` (per step, counted by the comm hook).
    """
    _check_settings(settings)
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("train_rank runs inside a process group: call torch.distributed.init_process_group "
                           "first (compare_data_parallel and benchmarks/ddp_copy_task.py do)")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = _new_model(settings)
    # DDP's defaults otherwise: it also broadcasts rank 0's buffers (here the (T_max, D) sinusoidal table) before
    # every forward, a second, smaller message that the comm hook below does not see
    ddp = DistributedDataParallel(model, bucket_cap_mb=settings.bucket_cap_mb)
    counts = []  # the hook appends one size per bucket
    ddp.register_comm_hook(counts, _counting_allreduce)

    def step_loss(batch):
        return shard_loss(ddp, shard(batch, rank, world_size), batch.n_tokens, world_size, settings.loss_norm)

    optimizer = _new_optimizer(ddp.parameters(), settings)
    return _train(model, optimizer, global_batches(settings, world_size), step_loss, counts)


def train_reference(settings: DataParallelSettings, world_size: int) -> dict:
    """One process, no DDP: the same initial model and optimizer on each whole (W b)-row global batch.

    Returns the same record as :func:`train_rank` (``buckets`` and ``allreduce_bytes`` empty).
    """
    model = _new_model(settings)
    optimizer = _new_optimizer(model.parameters(), settings)
    batches = global_batches(settings, world_size)
    return _train(model, optimizer, batches, lambda batch: shard_loss(model, batch, batch.n_tokens, 1))


def make_report(records: list, reference: dict, settings: DataParallelSettings,
                seconds: float = 0.0) -> DataParallelReport:
    """Compare the ranks' records (rank 0 first, as :func:`train_rank` returns them) with each other and with
    the single-process reference (:func:`train_reference`)."""
    _check_settings(settings)
    if not isinstance(records, (list, tuple)) or not records or not all(isinstance(r, dict) for r in records):
        raise TypeError(f"records must be a non-empty list of train_rank's dicts, one per rank, got {records!r:.60}")
    def max_diff(a, b):
        return max(float((x - y).abs().max()) for x, y in zip(a, b))

    params = dict(_new_model(settings).named_parameters())  # the order of _flat's vectors
    names = [name for name, p in params.items() for _ in range(p.numel())]
    first, steps = records[0], range(settings.steps)
    gaps = [(first["weights"][s] - reference["weights"][s]).abs() for s in steps]
    where = [names[int(gap.argmax())] if gap.max() > 0 else None for gap in gaps]  # None: identical
    return DataParallelReport(
        world_size=len(records), steps=settings.steps,
        grad_diff=[max_diff([first["grads"][s]], [reference["grads"][s]]) for s in steps],
        weight_diff=[max_diff([first["weights"][s]], [reference["weights"][s]]) for s in steps],
        weight_diff_where=where,
        rank_diff=max([max_diff(r["grads"] + r["weights"], first["grads"] + first["weights"]) for r in records]),
        losses=[sum(r["losses"][s] for r in records) / len(records) for s in steps],
        reference_losses=reference["losses"], n_params=len(names),
        param_bytes=sum(p.numel() * p.element_size() for p in params.values()),
        allreduce_bytes_per_step=first["allreduce_bytes"], buckets_per_step=first["buckets"],
        step_seconds=first["step_seconds"], reference_step_seconds=reference["step_seconds"], seconds=seconds)


def _spawned_rank(rank: int, world_size: int, port: int, out_dir: str, settings: DataParallelSettings) -> None:
    """One process started by :func:`compare_data_parallel` (top level, so that "spawn" can import it)."""
    set_threads(1)  # W processes share the cores; more threads per rank only compete
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=60))
    try:
        torch.save(train_rank(settings), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def compare_data_parallel(world_size: int = 2, steps: int = 3, batch_per_rank: int = 16, seed: int = 0, *,
                          optimizer: str = "sgd", lr: Optional[float] = None, min_len: int = 10,
                          loss_norm: str = "global", bucket_cap_mb: float = 25.0) -> DataParallelReport:
    """Train the copy-task model with DDP on ``world_size`` local CPU processes (gloo) and, in this process,
    on the concatenated global batch; return how far gradients, weights and the ranks differ.

    The processes are started with ``torch.multiprocessing`` ("spawn": fresh interpreters, which works from a
    Jupyter kernel; from a script, call this under ``if __name__ == "__main__":``, since spawn re-imports the
    script). They talk over TCP on 127.0.0.1 and hand their records back as files in a temporary folder;
    the reference then runs here, on one thread like each rank. Most of ``seconds`` is starting the
    processes (each imports torch, and DDP imports ``torch._dynamo``); ``step_seconds`` holds the steps.
    Arguments as in :class:`DataParallelSettings`.
    """
    check_positive_int(world_size, "world_size")
    if world_size > MAX_WORLD_SIZE:
        raise ValueError(f"world_size must be <= {MAX_WORLD_SIZE} (each rank is a process), got {world_size}")
    settings = DataParallelSettings(steps=steps, batch_per_rank=batch_per_rank, seed=seed, optimizer=optimizer,
                                    lr=lr, min_len=min_len, loss_norm=loss_norm, bucket_cap_mb=bucket_cap_mb)
    check_distributed()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="minitfm-ddp-") as out_dir:
        torch.multiprocessing.spawn(_spawned_rank, args=(world_size, _free_port(), out_dir, settings),
                                    nprocs=world_size, join=True, start_method="spawn")
        records = [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=True) for r in range(world_size)]
    threads = torch.get_num_threads()
    set_threads(1)  # as on each rank: then only the split of the batch changes the float sums
    try:
        reference = train_reference(settings, world_size)
    finally:
        torch.set_num_threads(threads)
    return make_report(records, reference, settings, time.perf_counter() - start)
