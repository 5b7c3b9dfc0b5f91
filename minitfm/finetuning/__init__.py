"""Fine-tuning a base model (chapter 15): a classifier, a chat model, and LoRA.

==========================  ==============================================================================
``lora``                    ``LoRALinear`` (y = W x + alpha / r * B A x), ``add_lora``, merge and unmerge, the
                            trainable and Adam-state counts
``adapters``                LoRA adapters saved and loaded apart from the base model
``chat``                    ``ChatTemplate``: conversations as ids with special tokens, the span of every turn,
                            and the assistant-only loss mask (labels -100 elsewhere)
``packing``                 several conversations in one row, a block-diagonal mask and restarting positions
                            so that they cannot attend to each other, as a ``Batch`` that ``train`` takes
``classification``          ``DecoderClassifier`` (last-token or mean pooling that respects padding),
                            ``set_trainable`` (the head only, the last k blocks, LoRA, everything), batches in
                            whole epochs and ``classify``
``sft``                     supervised fine-tuning as batches for ``minitfm.training.train``, not a second loop
``tasks``                   five tasks whose answers a program checks (arithmetic, counting letters, sorting,
                            acronyms, glossary terms in English and Chinese), with held-out facts and template
``skills``                  four procedures with many instances (sort digits, reverse letters, count a
                            letter, add two-digit numbers), statements for pretraining, questions for tuning
``people``                  invented people and three facts each, read in one phrasing or in many: the
                            knowledge-extraction experiment's groups and questions
``answering``               greedy replies to many questions at once, scored by the tasks' checks; one reply
                            for the chat widget
``new_tokens``              new special tokens for a published model's tokenizer, and its embedding grown to
                            match (the chat tokens for GPT-2); chosen rows trained in a frozen model
==========================  ==============================================================================

Every model here is a :class:`~minitfm.models.DecoderOnlyLM` (the book's, or a published checkpoint loaded with
``minitfm.pretrained``); the LoRA layers are tested against Hugging Face ``peft`` in ``tests/finetuning``.
``minitfm.finetuning`` re-exports the public names of the modules (``tasks``, ``skills`` and ``people`` are used as
namespaces: ``from minitfm.finetuning import skills``).
"""
from minitfm import _lazy
from minitfm.finetuning.adapters import adapter_config, load_adapters, lora_state_dict, save_adapters
from minitfm.finetuning.chat import (CHAT_SPECIAL_TOKENS, CHAT_TOKENS, IGNORE_INDEX, ROLES, ChatTemplate, RenderedChat,
                                     TurnSpan, check_conversation)
from minitfm.finetuning.classification import (DecoderClassifier, classification_batches, classify,
                                               collate_classification, set_trainable)
from minitfm.finetuning.lora import (LoRALinear, adam_state_numbers, add_lora, linear_names, lora_layers,
                                     merge_and_unload, merge_lora, trainable_parameters, unmerge_lora)
from minitfm.finetuning.new_tokens import resize_token_embeddings, train_token_rows, with_special_tokens
from minitfm.finetuning.packing import (PackedRows, block_diagonal_mask, pack_conversations, packed_batch,
                                        packed_logits)
from minitfm.finetuning.answering import completions, replies, reply, score, statement_recall
from minitfm.finetuning.sft import sft_batch, sft_batches, supervised_finetune

__all__ = [
    "LoRALinear", "add_lora", "merge_lora", "unmerge_lora", "merge_and_unload", "lora_layers", "linear_names",
    "trainable_parameters", "adam_state_numbers", "lora_state_dict", "adapter_config", "save_adapters",
    "load_adapters",
    "ChatTemplate", "RenderedChat", "TurnSpan", "ROLES", "CHAT_TOKENS", "CHAT_SPECIAL_TOKENS", "IGNORE_INDEX",
    "check_conversation",
    "PackedRows", "pack_conversations", "block_diagonal_mask", "packed_logits", "packed_batch",
    "DecoderClassifier", "set_trainable", "collate_classification", "classification_batches", "classify",
    "sft_batch", "sft_batches", "supervised_finetune",
    "with_special_tokens", "resize_token_embeddings", "train_token_rows", "replies", "reply", "score", "completions",
    "statement_recall",
]


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
