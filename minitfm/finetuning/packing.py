"""Packing: several short conversations in one row, with a mask that keeps them apart.

Glossary: T the row length, N the conversations in it; a *segment* is one conversation's tokens.

Padding every conversation to the longest one wastes the compute spent on pad tokens. Packing puts them one
after another in a row of length T instead. Two things keep a packed row computing what each conversation
would compute alone:

- a **block-diagonal causal mask**: token i may attend to token j only if j <= i *and* both belong to the same
  conversation, so nothing leaks across (the plain causal mask would let conversation 2 read conversation 1);
- **positions restart** at 0 for every conversation, so each one sees the positions it would see alone (with
  RoPE this changes nothing, since it only sees differences; learned or sinusoidal positions need it).

The tail of a row that no conversation fills is padding: its own segment (id -1), labels ``-100``.
``packed_logits`` then gives every token the logits it gets alone, to rounding (a test checks it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from minitfm._checks import check_positive_int, check_tensor
from minitfm.finetuning.lora import check_decoder
from minitfm.data import Batch
from minitfm.finetuning.chat import IGNORE_INDEX, RenderedChat
from minitfm.layers.masks import block_diagonal_mask
from minitfm.models import DecoderOnlyLM

PAD_SEGMENT = -1


@dataclass
class PackedRows:
    """Rows of packed conversations, each (B, T): ``ids``, ``labels`` (-100 outside assistant replies and in
    the padding), ``segments`` (the conversation's index in its row, -1 = padding) and ``positions``
    (counting from 0 in every conversation)."""

    ids: torch.Tensor
    labels: torch.Tensor
    segments: torch.Tensor
    positions: torch.Tensor


def pack_conversations(chats: Sequence[RenderedChat], row_len: int, *, pad_id: int = 0) -> PackedRows:
    """Pack rendered conversations, in order, into rows of ``row_len`` tokens (a new row when the next one does
    not fit). A conversation longer than ``row_len`` is an error (cut it or raise ``row_len``)."""
    if isinstance(chats, RenderedChat) or not isinstance(chats, Sequence) or not chats:
        raise TypeError(f"chats must be a non-empty list of RenderedChat (ChatTemplate.render), got {chats!r:.60}")
    bad = [type(c).__name__ for c in chats if not isinstance(c, RenderedChat)]
    if bad:
        raise TypeError(f"chats must all be RenderedChat (ChatTemplate.render), got {bad[:3]}")
    check_positive_int(row_len, "row_len")
    too_long = [(i, len(c)) for i, c in enumerate(chats) if len(c) > row_len]
    if too_long:
        raise ValueError(f"conversations longer than row_len={row_len}: (index, length) {too_long[:3]}")
    rows, current = [], []
    for chat in chats:
        if sum(map(len, current)) + len(chat) > row_len:
            rows.append(current)
            current = []
        current.append(chat)
    rows.append(current)
    shape = (len(rows), row_len)
    out = PackedRows(torch.full(shape, pad_id, dtype=torch.long), torch.full(shape, IGNORE_INDEX, dtype=torch.long),
                     torch.full(shape, PAD_SEGMENT, dtype=torch.long), torch.zeros(shape, dtype=torch.long))
    for r, row in enumerate(rows):
        at = 0
        for s, chat in enumerate(row):
            n = len(chat)
            out.ids[r, at:at + n], out.labels[r, at:at + n] = chat.ids, chat.labels
            out.segments[r, at:at + n], out.positions[r, at:at + n] = s, torch.arange(n)
            at += n
        out.positions[r, at:] = torch.arange(row_len - at)  # the padding's own segment counts from 0 too
    return out


def packed_logits(model: DecoderOnlyLM, rows: PackedRows) -> torch.Tensor:
    """(B, T, V) logits of packed rows: each conversation sees only itself, at its own positions."""
    if not isinstance(rows, PackedRows):
        raise TypeError(f"rows must be PackedRows (pack_conversations), got {type(rows).__name__}")
    check_decoder(model)
    device = model.tok_emb.weight.device
    mask = block_diagonal_mask(rows.segments.to(device))
    return model(rows.ids.to(device), positions=rows.positions.to(device), attn_mask=mask)


def packed_batch(rows: PackedRows) -> Batch:
    """Packed rows as a training :class:`~minitfm.data.Batch` for :func:`minitfm.training.train`: the shifted
    ids and labels, with each row's positions and segments, so the loop's forward builds the block-diagonal
    mask (``forward_batch``) and no conversation attends to another."""
    if not isinstance(rows, PackedRows):
        raise TypeError(f"rows must be PackedRows (pack_conversations), got {type(rows).__name__}")
    return Batch(None, rows.ids[:, :-1], rows.labels[:, 1:], IGNORE_INDEX, positions=rows.positions[:, :-1],
                 segments=rows.segments[:, :-1])
