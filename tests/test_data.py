import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.data import (Batch, CopyTask, bucket_batches, collate_lm, collate_pairs, pad_sequences,
                          padding_fraction, random_batches, shift_right)


def test_pad_sequences_right_and_left():
    seqs = [torch.tensor([5, 6, 7]), torch.tensor([8])]
    assert pad_sequences(seqs, 0).tolist() == [[5, 6, 7], [8, 0, 0]]
    assert pad_sequences(seqs, 0, side="left").tolist() == [[5, 6, 7], [0, 0, 8]]
    with pytest.raises(ValueError, match="at least one sequence"):
        pad_sequences([], 0)
    with pytest.raises(ValueError, match="side must be"):
        pad_sequences(seqs, 0, side="middle")


def test_shift_right_and_collate_pairs():
    assert shift_right(torch.tensor([[5, 6, 2]]), bos_id=1).tolist() == [[1, 5, 6]]
    batch = collate_pairs([(torch.tensor([5, 6]), torch.tensor([5, 6])), (torch.tensor([7]), torch.tensor([7]))],
                          pad_id=0, bos_id=1, eos_id=2)
    assert batch.src.tolist() == [[5, 6], [7, 0]]
    assert batch.tgt_out.tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch.tgt_in.tolist() == [[1, 5, 6], [1, 7, 2]]
    assert batch.n_tokens == 5
    with pytest.raises(ValueError, match="empty batch"):
        collate_pairs([], pad_id=0, bos_id=1, eos_id=2)


def test_collate_lm_predicts_the_next_token():
    batch = collate_lm([torch.tensor([1, 5, 6, 2]), torch.tensor([1, 7, 2])], pad_id=0)
    assert batch.src is None
    assert batch.tgt_in.tolist() == [[1, 5, 6], [1, 7, 2]]
    assert batch.tgt_out.tolist() == [[5, 6, 2], [7, 2, 0]]


def test_copy_task_is_reproducible_and_well_formed():
    task = CopyTask(min_len=3, max_len=6)
    a, b = task.batch(50, torch.Generator().manual_seed(3)), task.batch(50, torch.Generator().manual_seed(3))
    assert torch.equal(a.src, b.src) and torch.equal(a.tgt_in, b.tgt_in)
    lengths = (a.src != 0).sum(1)
    assert lengths.min() == 3 and lengths.max() == 6
    assert torch.equal((a.tgt_out == 2).sum(1), torch.ones(50, dtype=torch.long))  # exactly one EOS per row
    for i in range(50):
        n = int(lengths[i])
        assert a.tgt_out[i, :n].tolist() == a.src[i, :n].tolist() and a.tgt_out[i, n] == 2
        assert a.tgt_in[i, 0] == 1 and a.tgt_in[i, 1:n + 1].tolist() == a.src[i, :n].tolist()
    assert int(a.src.max()) < task.vocab_size and int(a.src[a.src != 0].min()) >= 3


def test_copy_task_matches_the_copy_model_config():
    task, cfg = CopyTask(), ModelConfig.copy_task()
    assert (task.vocab_size, task.pad_id, task.bos_id, task.eos_id) == (cfg.vocab_size, cfg.pad_id, cfg.bos_id, cfg.eos_id)


def test_copy_task_rejects_bad_lengths():
    with pytest.raises(ValueError, match="min_len must be <= max_len"):
        CopyTask(min_len=5, max_len=3)


def test_bucketing_covers_every_index_once_and_cuts_padding():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 50, (1000,), generator=g).tolist()
    buckets = bucket_batches(lengths, 32, generator=g)
    flat = sorted(i for batch in buckets for i in batch)
    assert flat == list(range(1000))
    seqs = [torch.ones(n, dtype=torch.long) for n in lengths]

    def mean_padding(batches):
        return sum(padding_fraction(pad_sequences([seqs[i] for i in b], 0), 0) for b in batches) / len(batches)

    assert mean_padding(buckets) < 0.1 < 0.3 < mean_padding(random_batches(1000, 32, g))


def test_batch_to_keeps_everything():
    batch = Batch(None, torch.ones(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long), pad_id=0)
    moved = batch.to("cpu")
    assert moved.src is None and moved.n_tokens == 0 and torch.equal(moved.tgt_in, batch.tgt_in)


def test_pad_sequences_stays_on_the_sequences_device():
    # "meta" stands in for a GPU: the padded batch must not silently come back on the CPU
    seqs = [torch.ones(3, dtype=torch.long, device="meta"), torch.ones(1, dtype=torch.long, device="meta")]
    for side in ("right", "left"):
        out = pad_sequences(seqs, 0, side=side)
        assert out.device.type == "meta" and out.shape == (2, 3)
