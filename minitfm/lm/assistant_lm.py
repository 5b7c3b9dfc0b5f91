"""Chapter 15's assistant that ships: the byte-level base model after the chapter's full supervised fine-tuning.

Glossary: B conversations, T tokens.

``assets/assistant_lm.pt`` is written by ``python benchmarks/train_assistant_lm.py --save``, which fine-tunes the
shipped base model (:mod:`minitfm.lm.base_lm`) exactly as chapter 15's full fine-tuning does (its constants, its
tasks and seeds, mask_prompt=True) and stores beside it ``assistant_lm.json``: the recipe, the answer-shaped and
correct shares it reached on the chapter's held-out facts, and the longest conversation it was trained on
(:func:`trained_length`: the book's page generates no further). ``--check`` fine-tunes again and compares.

It answers one template (:func:`chat_template`): ``<|endoftext|><|user|>question<|end|><|assistant|>``, and writes
its reply followed by ``<|end|>``. It was fine-tuned on single questions of five tasks and knows nothing else.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from minitfm.finetuning.chat import ChatTemplate
from minitfm.finetuning.tasks import TASKS, examples
from minitfm.lm._shipped import load_shipped_model
from minitfm.lm.base_lm import ENDOFTEXT, byte_tokenizer
from minitfm.models import DecoderOnlyLM

CHECKPOINT = Path(__file__).parent / "assets" / "assistant_lm.pt"
RECORD = CHECKPOINT.with_suffix(".json")


def load_assistant_lm(path: str | Path = CHECKPOINT) -> DecoderOnlyLM:
    """The fine-tuned assistant that ships with the project (eval mode, on the CPU)."""
    return load_shipped_model(path, "python benchmarks/train_assistant_lm.py --save")


def chat_template() -> ChatTemplate:
    """The template it was fine-tuned on: the byte tokenizer's chat tokens, ``<|endoftext|>`` first."""
    tokenizer = byte_tokenizer()
    return ChatTemplate(tokenizer, bos_id=tokenizer.special_ids[ENDOFTEXT])


def trained_length() -> int:
    """The longest conversation (in tokens) of its fine-tuning set, as ``assistant_lm.json`` records it."""
    return int(json.loads(RECORD.read_text(encoding="utf-8"))["trained_length"])


def heldout_conversations(per_task: int = 4) -> torch.Tensor:
    """(B, T) ids of ``per_task`` held-out facts of each task, asked and answered in the template, right-padded
    with 0 (a byte no question holds): a probe batch of the kind of text the assistant reads."""
    template = chat_template()
    rows = [template.render(e.chat()).ids for task in TASKS for e in examples(task, "heldout", per_task, seed=100)]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=0)
