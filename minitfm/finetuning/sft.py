"""Supervised fine-tuning (SFT): train a base model on conversations, through the book's own training loop.

Glossary: B batch, T the longest conversation in a batch (minus one, after the shift).

No second training loop: a conversation becomes an ordinary :class:`~minitfm.data.Batch` and
:func:`minitfm.training.train` does the rest. The loss mask travels in the targets:

    tgt_in  = ids[:-1]                (what the model reads, right-padded with any valid id)
    tgt_out = labels[1:]              (what it must predict: -100 outside assistant replies and in the padding)
    Batch.pad_id = -100               (the id the loss ignores, so masked positions never count)

Right padding needs no attention mask: under the causal mask a real token never sees the padding after it.
``mask_prompt=False`` trains on every token of the conversation instead (the baseline the chapter measures the
mask against). Only trainable parameters get an optimiser (a LoRA model's frozen base keeps no Adam state).
"""
from __future__ import annotations

from typing import Iterator, Sequence

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.data import Batch, pad_sequences
from minitfm.finetuning.chat import IGNORE_INDEX, RenderedChat
from minitfm.finetuning.packing import pack_conversations, packed_batch
from minitfm.training.loop import History, TrainConfig, train
from minitfm.training.optimizers import param_groups


def _check_chats(chats, mask_prompt: bool) -> None:
    if isinstance(chats, RenderedChat) or not isinstance(chats, Sequence) or not chats:
        raise TypeError(f"chats must be a non-empty list of RenderedChat (ChatTemplate.render), got {chats!r:.60}")
    bad = [type(c).__name__ for c in chats if not isinstance(c, RenderedChat)]
    if bad:
        raise TypeError(f"chats must all be RenderedChat (ChatTemplate.render), got {bad[:3]}")
    if not isinstance(mask_prompt, bool):
        raise TypeError(f"mask_prompt must be a bool, got {type(mask_prompt).__name__}")
    short = [i for i, c in enumerate(chats) if len(c) < 2]
    if short:
        raise ValueError(f"conversations {short[:5]} have fewer than 2 tokens: nothing to predict")
    if mask_prompt:
        silent = [i for i, c in enumerate(chats) if not bool(c.loss_mask[1:].any())]
        if silent:
            raise ValueError(f"conversations {silent[:5]} have no assistant reply, so the masked loss has nothing to "
                             "learn from them; drop them or pass mask_prompt=False")


def sft_batch(chats: Sequence[RenderedChat], *, pad_id: int = 0, mask_prompt: bool = True) -> Batch:
    """One training :class:`Batch` of rendered conversations (see the module's docstring)."""
    _check_chats(chats, mask_prompt)
    check_number(pad_id, "pad_id", low=0, integer=True)
    tgt_in = pad_sequences([c.ids[:-1] for c in chats], pad_id)
    targets = [(c.labels if mask_prompt else c.ids)[1:] for c in chats]
    return Batch(None, tgt_in, pad_sequences(targets, IGNORE_INDEX), IGNORE_INDEX)


def sft_batches(chats: Sequence[RenderedChat], batch_size: int, *, seed: int, pad_id: int = 0,
                mask_prompt: bool = True, row_len: int | None = None) -> Iterator[Batch]:
    """Batches of ``batch_size`` conversations, a fresh seeded shuffle each epoch, without end (``train`` takes
    as many as ``config.steps``). The last batch of an epoch may be smaller.

    ``row_len``: pack each batch's conversations into rows of ``row_len`` tokens (:mod:`minitfm.finetuning.packing`)
    instead of padding each to the longest; the same conversations and the same loss, less padding."""
    _check_chats(chats, mask_prompt)
    check_positive_int(batch_size, "batch_size")
    check_number(seed, "seed", integer=True)
    if row_len is not None:
        check_positive_int(row_len, "row_len")
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(chats), generator=generator).tolist()
        for i in range(0, len(order), batch_size):
            group = [chats[j] for j in order[i:i + batch_size]]
            if row_len is None:
                yield sft_batch(group, pad_id=pad_id, mask_prompt=mask_prompt)
            else:
                yield _packed(group, row_len, pad_id, mask_prompt)


def _packed(chats: Sequence[RenderedChat], row_len: int, pad_id: int, mask_prompt: bool) -> Batch:
    if not mask_prompt:  # the whole sequence: every token but the first of each conversation is a target
        chats = [RenderedChat(c.ids, torch.cat([c.ids.new_tensor([IGNORE_INDEX]), c.ids[1:]]), c.spans) for c in chats]
    return packed_batch(pack_conversations(chats, row_len, pad_id=pad_id))


def supervised_finetune(model: torch.nn.Module, chats: Sequence[RenderedChat], config: TrainConfig, *,
                        pad_id: int = 0, mask_prompt: bool = True, row_len: int | None = None,
                        **train_kwargs) -> History:
    """Fine-tune ``model`` on ``chats`` with :func:`minitfm.training.train` for ``config.steps`` updates of
    ``config.batch_size`` conversations (shuffled with ``config.seed``).

    The optimizer ``config.optimizer`` names (Adam, or AdamW with decoupled decay) is built from ``config`` over the
    parameters that require gradients only; freeze what must not train
    first (``add_lora`` does). ``row_len`` packs each batch into rows (see :func:`sft_batches`). ``train_kwargs``
    go to ``train`` (``callbacks``, ``progress``). The loss is ``train``'s, smoothed by ``config.label_smoothing``:
    ``TrainConfig``'s default is the Transformer paper's 0.1, while SFT recipes (TRL's, torchtune's) smooth
    nothing, so pass ``label_smoothing=0.0`` for their loss (the book's fine-tuning runs do)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if "optimizer" in train_kwargs:
        raise TypeError("supervised_finetune builds its optimizer from config; call train() to pass your own")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no parameter of the model requires gradients: nothing would train")
    common = dict(lr=config.lr, betas=config.betas, eps=config.eps, foreach=True)
    if config.optimizer == "adamw":  # decoupled decay on the trainable Linear matrices only, as train() does
        groups = [dict(g, params=[p for p in g["params"] if p.requires_grad])
                  for g in param_groups(model, config.weight_decay)]
        optimizer = torch.optim.AdamW([g for g in groups if g["params"]], **common)
    else:
        optimizer = torch.optim.Adam(params, weight_decay=config.weight_decay, **common)
    batches = sft_batches(chats, config.batch_size, seed=config.seed, pad_id=pad_id, mask_prompt=mask_prompt,
                          row_len=row_len)
    return train(model, batches, config, optimizer=optimizer, **train_kwargs)
