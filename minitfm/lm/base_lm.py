"""Chapter 15's base model: a byte-level language model pretrained on the book's prose, four skills and invented people.

Glossary: B batch, T bytes per training row, V = 256 bytes + 5 special tokens.

What it reads (:func:`pretraining_texts`, all written by the project), each text after ``<|endoftext|>``:

- the book's own prose (``assets/book_prose.txt``), minus one paragraph in ten kept aside
  (:func:`minitfm.lm.prose.heldout_prose`: bits per byte on it measure how well the model writes prose, and
  how much of that fine-tuning forgets), ``PROSE_PASSES`` times;
- ``SKILL_STATEMENTS[task]`` fresh statements of each skill of :mod:`minitfm.finetuning.skills`
  (``"47 + 38 = 85."``): procedures it must learn to carry out;
- ``BIOGRAPHIES`` biographies of each invented person of :mod:`minitfm.finetuning.people`: facts it must
  remember, in one phrasing or in many.

The texts are shuffled into one byte stream, cut into rows of ``ROW_LEN + 1`` bytes, and read once, in a seeded
order (:func:`pretraining_batches`): every step sees new text. It never reads a chat: the chat tokens are in its
vocabulary but never in its input, so their embedding rows learn only through the tied output head, which pushes
them toward improbability, until chapter 15 fine-tunes it.

The shipped weights (``assets/base_lm.pt``) are made by ``python benchmarks/train_base_lm.py --save``, which
stores beside them what the model reached; ``--check`` trains again and compares.
"""
from __future__ import annotations

import random
from pathlib import Path

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.config import ModelConfig
from minitfm.data import Batch
from minitfm.finetuning import people as P, skills as S
from minitfm.lm._shipped import load_shipped_model
from minitfm.finetuning.answering import completions
from minitfm.lm.prose import SPECIAL_TOKENS, byte_tokenizer, corpus_ids, is_heldout, prose_paragraphs
from minitfm.models import DecoderOnlyLM
from minitfm.training import History, TrainConfig, lm_train_config, train

CHECKPOINT = Path(__file__).parent / "assets" / "base_lm.pt"
ROW_LEN = 128  # bytes per training row
PROSE_PASSES = 1
SKILL_STATEMENTS = {"sort": 15_000, "reverse": 50_000, "count": 80_000, "add": 120_000}
BIOGRAPHIES = 80  # per person, in both groups


def base_lm_config(**overrides) -> ModelConfig:
    """A small modern decoder over bytes (Pre-RMSNorm, RoPE, SwiGLU, no biases), about 1.2 million parameters;
    ``overrides`` change any field.

    Id 0 (the NUL byte, which no text here holds) pads; ``<|endoftext|>`` (256) begins and ends a text."""
    eot = 256
    base = dict(vocab_size=256 + len(SPECIAL_TOKENS), d_model=128, n_heads=4, n_layers=6, d_ff=352,
                max_seq_len=256, norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=False,
                scale_embeddings=False, attn_impl="fused", pad_id=0, bos_id=eot, eos_id=eot)
    return ModelConfig(**{**base, **overrides})


def base_lm_train_config(steps: int, **overrides) -> TrainConfig:
    """The language models' recipe (:func:`minitfm.training.lm_train_config`: AdamW, decoupled decay 0.1 on the
    linear layers' matrices, betas (0.9, 0.95), warmup + cosine to a tenth) at a peak of 2e-3, 32 rows a step."""
    return lm_train_config(**{**dict(steps=steps, batch_size=32, lr=2e-3, warmup=100, seed=0), **overrides})


def pretraining_texts(seed: int = 0, *, scale: float = 1.0) -> list[str]:
    """Every text of the pretraining run, shuffled; ``scale`` keeps that share of each part (``--smoke`` runs
    read a sliver)."""
    check_number(seed, "seed", integer=True)
    check_number(scale, "scale", low=0.0, low_open=True, high=1.0)
    rng = random.Random(f"pretraining/{seed}")
    prose = [p for _, p in prose_paragraphs() if not is_heldout(p)]
    texts = prose[:max(1, round(len(prose) * scale))] * PROSE_PASSES
    for task, n in SKILL_STATEMENTS.items():
        texts += [S.statement(task, S.draw(task, rng)) for _ in range(max(1, round(n * scale)))]
    texts += P.biographies(max(1, round(BIOGRAPHIES * scale)), seed=seed)
    rng.shuffle(texts)
    return texts


def pretraining_batches(ids: torch.Tensor, batch_size: int, *, seed: int, row_len: int = ROW_LEN):
    """The byte stream ``ids`` cut into rows of ``row_len + 1`` and read once in a seeded order: (B, T) batches,
    ``len(ids) // (row_len + 1) // batch_size`` of them (the rest of the last batch is dropped)."""
    check_positive_int(batch_size, "batch_size")
    check_positive_int(row_len, "row_len")
    rows = ids[: ids.numel() // (row_len + 1) * (row_len + 1)].view(-1, row_len + 1)  # (N, T + 1)
    order = torch.randperm(rows.shape[0], generator=torch.Generator().manual_seed(seed))
    for i in range(rows.shape[0] // batch_size):
        chunk = rows[order[i * batch_size:(i + 1) * batch_size]]  # (B, T + 1)
        yield Batch(None, chunk[:, :-1], chunk[:, 1:], -100)


def train_base_lm(*, seed: int = 0, scale: float = 1.0, progress: bool = False, callbacks=(),
                    config: ModelConfig | None = None, **train_overrides) -> tuple[DecoderOnlyLM, History]:
    """Build and pretrain the model from scratch (minutes of CPU); returns it in eval mode and its history."""
    ids = corpus_ids(pretraining_texts(seed, scale=scale))
    batch_size = train_overrides.get("batch_size", 32)
    steps = ids.numel() // (ROW_LEN + 1) // batch_size
    train_config = base_lm_train_config(steps, **{"seed": seed, **train_overrides})
    torch.manual_seed(seed)
    model = DecoderOnlyLM(config or base_lm_config())
    history = train(model, pretraining_batches(ids, batch_size, seed=seed), train_config, progress=progress,
                    callbacks=callbacks)
    return model.eval(), history


def skill_recall(model: DecoderOnlyLM, task: str, n: int = 200, *, seed: int = 7) -> list[bool]:
    """For ``n`` held-out instances of ``task``, whether the model completes the statement cut before its answer
    (``"47 + 38 = "``) with the rest, greedily: whether it carries out the skill in the form it read."""
    pieces = [S.statement_prefix(task, f) for f in S.instances(task, "heldout", n, seed=seed)]
    longest = max(len(rest.encode("utf-8")) for _, rest in pieces)
    texts = completions(model, byte_tokenizer(), [p for p, _ in pieces], longest, bos_id=model.config.bos_id)
    return [text.startswith(rest) for text, (_, rest) in zip(texts, pieces)]


def people_recall(model: DecoderOnlyLM, persons: list[dict]) -> list[bool]:
    """For every person and attribute, whether the model completes a statement of it in a phrasing it read
    (each phrasing of group "many" counts once: the share over phrasings is the person's recall)."""
    pieces = [(prefix, rest) for p in persons for a in P.ATTRIBUTES for prefix, rest in P.statement_prefixes(p, a)]
    longest = max(len(rest.encode("utf-8")) for _, rest in pieces)
    texts = completions(model, byte_tokenizer(), [p for p, _ in pieces], longest, bos_id=model.config.bos_id)
    return [text.startswith(rest) for text, (_, rest) in zip(texts, pieces)]


def load_base_lm(path: str | Path = CHECKPOINT) -> DecoderOnlyLM:
    """The pretrained base model that ships with the project (eval mode, on the CPU)."""
    return load_shipped_model(path, "python benchmarks/train_base_lm.py --save")
