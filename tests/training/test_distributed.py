import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.testing import assert_close

from minitfm.config import ModelConfig
from minitfm.data import CopyTask
from minitfm.models import EncoderDecoder
from minitfm.training import distributed as ddp_lib
from minitfm.training import label_smoothed_cross_entropy
from minitfm.training.distributed import (DataParallelSettings, compare_data_parallel, global_batches, shard, shard_loss,
                                          train_reference)

ROOT = Path(__file__).resolve().parents[2]
N_PARAMS = 84_544  # ModelConfig.copy_task(): the tied (V, D) matrix counts once
needs_gloo = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="this PyTorch build has no torch.distributed gloo backend")


@pytest.fixture(scope="module")
def report():
    # A small bucket cap, so that DDP splits the gradients into several buckets after its first step
    return compare_data_parallel(world_size=2, steps=3, batch_per_rank=16, seed=0, bucket_cap_mb=0.1)


@needs_gloo
def test_ddp_matches_one_process_on_the_concatenated_batch(report):
    assert (report.world_size, report.steps) == (2, 3)
    assert len(report.grad_diff) == len(report.weight_diff) == 3
    assert max(report.grad_diff) <= 1e-6 and max(report.weight_diff) <= 1e-6
    assert_close(torch.tensor(report.losses), torch.tensor(report.reference_losses), rtol=0, atol=1e-6)
    assert report.losses[-1] < report.losses[0] - 0.3  # it trained (SGD, lr 0.1)


@needs_gloo
def test_ranks_agree_exactly(report):
    assert report.rank_diff == 0.0


@needs_gloo
def test_allreduce_bytes_equal_the_fp32_gradient_bytes(report):
    # DDP all-reduces every trainable parameter's gradient exactly once per step, packed into flat fp32
    # buckets: the bytes are 4 N, whatever the batch or the number of buckets
    assert report.n_params == N_PARAMS and report.param_bytes == 4 * N_PARAMS
    assert report.allreduce_bytes_per_step == [report.param_bytes] * 3
    # After the first step DDP rebuilds its buckets in the order the gradients became ready. It closes a
    # bucket as soon as it holds >= cap = 0.1 MiB, and the largest gradient is (F, D) = 32,768 bytes, so
    # each bucket but the last holds cap..cap + 32,768 bytes: 338,176 bytes make 3 or 4 buckets.
    cap = int(0.1 * 2 ** 20)
    assert all(b >= 1 for b in report.buckets_per_step)
    assert report.param_bytes // (cap + 32_768) + 1 <= report.buckets_per_step[-1] <= report.param_bytes // cap + 1


@needs_gloo
def test_world_size_one_equals_one_process_bit_for_bit():
    # one rank: the all-reduce divides by 1 and sums one tensor, and the reference runs on one thread too
    report = compare_data_parallel(world_size=1, steps=2, batch_per_rank=8)
    assert report.world_size == 1
    assert report.grad_diff == [0.0, 0.0] and report.weight_diff == [0.0, 0.0]
    assert report.weight_diff_where == [None, None]
    assert report.allreduce_bytes_per_step == [4 * N_PARAMS] * 2


@pytest.mark.parametrize("min_len", [10, 3])
def test_global_loss_norm_makes_the_rank_average_the_global_loss(min_len):
    # Without processes: the mean over ranks of the shard losses (what DDP's averaged gradient differentiates)
    # must be the single-process loss, even when padding gives the shards different token counts
    batch = global_batches(DataParallelSettings(min_len=min_len), 2)[0]
    model = EncoderDecoder(ModelConfig.copy_task())
    parts = [shard(batch, r, 2) for r in range(2)]
    with torch.no_grad():
        full = label_smoothed_cross_entropy(model(batch.src, batch.tgt_in), batch.tgt_out, ignore_index=0)
        averaged = sum(shard_loss(model, p, batch.n_tokens, 2) for p in parts) / 2
        naive = sum(shard_loss(model, p, batch.n_tokens, 2, "per_shard") for p in parts) / 2
    assert_close(averaged, full)
    if min_len == 10:  # no padding, equal token counts: the naive mean is right too
        assert_close(naive, full)
    else:
        assert parts[0].n_tokens != parts[1].n_tokens
        assert abs(float(naive - full)) > 1e-4


def test_shards_interleave_rows():
    batch = CopyTask().batch(6, torch.Generator().manual_seed(0))
    parts = [shard(batch, r, 3) for r in range(3)]
    assert all(p.src.shape == (2, 10) for p in parts)
    assert torch.equal(parts[1].src, batch.src[[1, 4]])
    assert torch.equal(torch.stack([p.tgt_out for p in parts], dim=1).flatten(0, 1), batch.tgt_out)


def test_key_bias_gradient_is_rounding_noise():
    # The docstring's reason why Adam (not SGD) magnifies DDP's rounding differences: softmax ignores the
    # key bias, so its exact gradient is 0 and the computed one is noise, which Adam scales up to lr
    record = train_reference(DataParallelSettings(steps=1), 2)
    params = dict(EncoderDecoder(ModelConfig.copy_task()).named_parameters())  # the order of the flat vectors
    grads = dict(zip(params, torch.split(record["grads"][0], [p.numel() for p in params.values()])))
    key_bias = [g.abs().max() for name, g in grads.items() if name.endswith("k_proj.bias")]
    assert len(key_bias) == 3 and max(key_bias) < 1e-8
    assert min(g.abs().max() for name, g in grads.items() if not name.endswith("k_proj.bias")) > 1e-4


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(world_size=0), ValueError, "world_size must be >= 1, got 0"),
    (dict(world_size=2.0), TypeError, "world_size must be an int, got float"),
    (dict(world_size=64), ValueError, "world_size must be <= 16"),
    (dict(steps=0), ValueError, "steps must be >= 1"),
    (dict(batch_per_rank="16"), TypeError, "batch_per_rank must be an int, got str"),
    (dict(optimizer="lamb"), ValueError, "optimizer must be one of 'adam', 'sgd'; got 'lamb'"),
    (dict(lr=-1.0), ValueError, "lr must be > 0"),
    (dict(min_len=11), ValueError, "min_len must be <= max_len"),
    (dict(loss_norm="sum"), ValueError, "loss_norm must be one of 'global', 'per_shard'"),
    (dict(bucket_cap_mb=0), ValueError, "bucket_cap_mb must be > 0"),
])
def test_bad_arguments_raise_before_any_process_starts(kwargs, error, match):
    with pytest.raises(error, match=match):
        compare_data_parallel(**kwargs)


def test_bad_shard_and_loss_arguments():
    batch = CopyTask().batch(4, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"rank must be in \[0, 1\], got 2"):
        shard(batch, 2, 2)
    with pytest.raises(ValueError, match="must split evenly over world_size=3 ranks, got 4 rows"):
        shard(batch, 0, 3)
    with pytest.raises(TypeError, match="batch must be a minitfm.Batch"):
        shard(batch.src, 0, 2)
    with pytest.raises(TypeError, match="settings must be a DataParallelSettings, got dict"):
        global_batches({"steps": 3}, 2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        ddp_lib.train_rank(DataParallelSettings())


def test_missing_gloo_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(ddp_lib.dist, "is_gloo_available", lambda: False)
    with pytest.raises(RuntimeError, match="not its gloo backend"):
        compare_data_parallel()


@needs_gloo
def test_torchrun_script_checks_against_one_process():
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(ROOT / "benchmarks" / "ddp_copy_task.py"), "--steps", "2", "--check"]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"{N_PARAMS:,} parameters = {4 * N_PARAMS:,} bytes" in out
    steps = re.findall(r"^\s+(\d) +([\d.]+) +(\d+) +([\d,]+) +([\d.]+)", out, flags=re.M)
    assert [s[0] for s in steps] == ["1", "2"]
    assert all(s[3] == f"{4 * N_PARAMS:,}" and s[4] == "1.000" for s in steps)
    assert "ranks differ by 0.0e+00" in out and "-> OK" in out
