"""Data for sequence-to-sequence training: the copy task, padding, the decoder shift and length bucketing.

Glossary: N examples, B batch, S source length, T target length, pad/bos/eos the special ids.

Teacher forcing: the decoder reads the target shifted right by one and predicts the target itself,

    tgt_out = [y1, y2, ..., yn, EOS]          (what the decoder must predict)
    tgt_in  = [BOS, y1, ..., yn]              (what it reads: tgt_out shifted right)

so the prediction at position i sees only y1..y(i-1). Padding goes after the end; the loss ignores it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import torch

from minitfm._checks import check_number, check_positive_int, check_tensor, check_token_ids


@dataclass
class Batch:
    """One training batch. ``src`` (B, S) is ``None`` for a decoder-only model; tgt_in/tgt_out (B, T).

    Packed rows (several sequences in one row, chapter 15) also carry ``positions`` (B, T), counting from 0 in
    every sequence, and ``segments`` (B, T), each token's sequence index; the training loop then lets a token
    attend only within its own segment (``minitfm.layers.masks.block_diagonal_mask``)."""

    src: Optional[torch.Tensor]
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    pad_id: int = 0
    positions: Optional[torch.Tensor] = None
    segments: Optional[torch.Tensor] = None

    def __post_init__(self):
        for name in ("positions", "segments"):
            value = getattr(self, name)
            if value is not None:
                check_token_ids(value, name, ndim=2)
                if value.shape != self.tgt_in.shape:
                    raise ValueError(f"Batch.{name} must have tgt_in's shape {tuple(self.tgt_in.shape)}, got "
                                     f"{tuple(value.shape)}")

    @property
    def n_tokens(self) -> int:
        """Target tokens that count in the loss (not padding)."""
        return int((self.tgt_out != self.pad_id).sum())

    def to(self, device) -> "Batch":
        def move(t):
            return None if t is None else t.to(device)
        return Batch(move(self.src), self.tgt_in.to(device), self.tgt_out.to(device), self.pad_id,
                     move(self.positions), move(self.segments))


def pad_sequences(seqs: Sequence[torch.Tensor], pad_id: int, side: str = "right") -> torch.Tensor:
    """Stack 1-D sequences of different lengths into (B, T_max), filling with ``pad_id``.

    ``side="left"`` puts the padding first, which decoder-only generation wants (every prompt then ends
    at the last column, where the next token is predicted).
    """
    if len(seqs) == 0:
        raise ValueError("pad_sequences needs at least one sequence, got an empty list")
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    for i, s in enumerate(seqs):
        check_token_ids(s, f"seqs[{i}]", ndim=1)
    check_number(pad_id, "pad_id", integer=True)
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=seqs[0].dtype, device=seqs[0].device)
    for i, s in enumerate(seqs):
        if side == "right":
            out[i, : len(s)] = s
        elif len(s):
            out[i, -len(s):] = s
    return out


def shift_right(tgt_out: torch.Tensor, bos_id: int) -> torch.Tensor:
    """(B, T) targets -> (B, T) decoder inputs: BOS first, the last column dropped."""
    check_token_ids(tgt_out, "tgt_out", ndim=2)
    check_number(bos_id, "bos_id", low=0, integer=True)
    bos = torch.full_like(tgt_out[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, tgt_out[:, :-1]], dim=1)  # (B, 1) + (B, T - 1) -> (B, T)


def collate_pairs(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], *, pad_id: int, bos_id: int,
                  eos_id: int) -> Batch:
    """(source, target) 1-D id pairs -> a padded :class:`Batch`; EOS is appended to each target."""
    if len(pairs) == 0:
        raise ValueError("cannot collate an empty batch")
    src = pad_sequences([s for s, _ in pairs], pad_id)
    tgt_out = pad_sequences([torch.cat([t, t.new_tensor([eos_id])]) for _, t in pairs], pad_id)
    return Batch(src, shift_right(tgt_out, bos_id), tgt_out, pad_id)


def collate_lm(seqs: Sequence[torch.Tensor], *, pad_id: int) -> Batch:
    """Language-model batch: predict token i + 1 from tokens 0..i (right padding, no source)."""
    tokens = pad_sequences(seqs, pad_id)  # (B, T + 1)
    if tokens.shape[1] < 2:
        raise ValueError(f"language-model sequences need at least 2 tokens, got length {tokens.shape[1]}")
    return Batch(None, tokens[:, :-1], tokens[:, 1:], pad_id)


def padding_fraction(tokens: torch.Tensor, pad_id: int) -> float:
    """Share of the (B, T) grid that is padding: compute spent on nothing."""
    check_token_ids(tokens, "tokens", ndim=None)
    check_number(pad_id, "pad_id", integer=True)
    if tokens.numel() == 0:
        raise ValueError("tokens is empty: there is no grid to measure")
    return float((tokens == pad_id).float().mean())


def random_batches(n: int, batch_size: int, generator: torch.Generator | None = None) -> list[list[int]]:
    """Indices 0..n-1 shuffled and cut into batches (the baseline for :func:`bucket_batches`)."""
    check_positive_int(n, "n")
    check_positive_int(batch_size, "batch_size")
    order = torch.randperm(n, generator=generator).tolist()
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def bucket_batches(lengths: Sequence[int], batch_size: int, generator: torch.Generator | None = None,
                   pool_batches: int = 50) -> list[list[int]]:
    """Batches of indices whose sequences have similar lengths, so little of each batch is padding.

    Shuffle, cut into pools of ``pool_batches * batch_size`` examples, sort each pool by length, cut the
    pool into batches and shuffle the batch order. Pools keep some randomness in which examples meet.
    """
    check_positive_int(pool_batches, "pool_batches")
    lengths = torch.as_tensor(lengths)
    pool = pool_batches * batch_size
    batches = []
    for chunk in random_batches(len(lengths), pool, generator):
        chunk = torch.tensor(chunk)
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)].tolist()  # sort the pool by length
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    order = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in order]


@dataclass
class CopyTask:
    """Copy a random sequence: source ``y1..yn``, target ``y1..yn EOS``.

    Ids: ``pad_id, bos_id, eos_id`` = 0, 1, 2 and symbols ``3 .. 3 + n_symbols - 1``, so
    ``vocab_size = 3 + n_symbols`` (13 for the classic 10 symbols, as in ``ModelConfig.copy_task()``).
    Lengths are drawn uniformly from ``min_len..max_len``. Everything comes from a seeded generator.
    """

    n_symbols: int = 10
    min_len: int = 10
    max_len: int = 10
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self):
        for name in ("n_symbols", "min_len", "max_len"):
            check_positive_int(getattr(self, name), name)
        if self.min_len > self.max_len:
            raise ValueError(f"min_len must be <= max_len, got {self.min_len} > {self.max_len}")

    @property
    def vocab_size(self) -> int:
        return 3 + self.n_symbols

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A fresh random batch: src (B, max_len), tgt_in/tgt_out (B, max_len + 1), right-padded."""
        check_positive_int(batch_size, "batch_size")
        lengths = torch.randint(self.min_len, self.max_len + 1, (batch_size,), generator=generator)
        symbols = torch.randint(3, self.vocab_size, (batch_size, self.max_len), generator=generator)
        cols = torch.arange(self.max_len + 1)[None]  # (1, max_len + 1)
        src = symbols.masked_fill(cols[:, :-1] >= lengths[:, None], self.pad_id)  # (B, max_len)
        tgt_out = torch.cat([src, torch.full((batch_size, 1), self.pad_id)], dim=1)  # (B, max_len + 1)
        tgt_out[torch.arange(batch_size), lengths] = self.eos_id  # EOS right after the last symbol
        return Batch(src, shift_right(tgt_out, self.bos_id), tgt_out, self.pad_id)

    def batches(self, batch_size: int, seed: int = 0) -> Iterator[Batch]:
        """An endless stream of fresh batches, reproducible from ``seed``."""
        generator = torch.Generator().manual_seed(seed)
        while True:
            yield self.batch(batch_size, generator)
