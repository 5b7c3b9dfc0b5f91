"""The book's small language model: trained on the grammar language of :mod:`minitfm.corpus`.

Glossary: N sentences, B batch, T tokens per row, V vocabulary.

Chapters 8 and 9 generate from this model. One recipe, used by ``benchmarks/train_lm.py`` and by any
notebook that trains it: :func:`small_lm_config` (``ModelConfig.small_lm`` with the corpus vocabulary),
:func:`small_lm_train_config`, :func:`lm_batches` and :func:`train_small_lm`; :func:`load_small_lm`
loads the trained checkpoint that ships in ``minitfm/assets`` (training takes over a minute of CPU). Then
:func:`perplexity_and_loss` scores held-out sentences and :func:`sample_texts` generates sentences whose
validity :func:`minitfm.corpus.validity` measures.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator, Sequence

import torch

from ._checks import check_positive_int
from .config import ModelConfig
from .corpus import generate_sentences, lm_stream_rows, make_tokenizer
from .data import Batch, bucket_batches
from .generation import generate
from .models import DecoderOnlyLM
from .tokenizer import WordTokenizer
from .training import History, TrainConfig, label_smoothed_cross_entropy, load_checkpoint, train

TRAIN_SEED, VALID_SEED = 0, 1  # corpus seeds: training and held-out sentences never share a generator
ROW_LEN = 32  # tokens per training row: <bos> and about three sentences, packed without padding
CHECKPOINT = Path(__file__).parent / "assets" / "small_lm.pt"  # written by benchmarks/train_lm.py --save


def small_lm_config(tokenizer: WordTokenizer | None = None, **overrides) -> ModelConfig:
    """``ModelConfig.small_lm`` sized to the corpus vocabulary (ids 0, 1, 2 = pad, bos, eos)."""
    tokenizer = tokenizer or make_tokenizer()
    return ModelConfig.small_lm(vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id,
                                bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, **overrides)


def small_lm_train_config(**overrides) -> TrainConfig:
    """Adam, warmup + cosine, no label smoothing (we want calibrated probabilities to sample from)."""
    base = dict(steps=800, batch_size=64, lr=3e-3, schedule="cosine", warmup=30, label_smoothing=0.0, seed=0)
    return TrainConfig(**{**base, **overrides})


def lm_batches(rows: torch.Tensor, batch_size: int, pad_id: int, seed: int = 0) -> Iterator[Batch]:
    """Endless language-model batches from right-padded (N, T) rows, bucketed by length.

    Each batch is cut to its longest row, so short sentences do not pay for long ones; the input is
    ``row[:, :-1]`` and the target ``row[:, 1:]``.
    """
    check_positive_int(batch_size, "batch_size")
    generator = torch.Generator().manual_seed(seed)
    lengths = (rows != pad_id).sum(dim=1)  # (N,)
    while True:
        for index in bucket_batches(lengths.tolist(), batch_size, generator):
            batch = rows[index]  # (N, T) -> (B, T)
            batch = batch[:, : int(lengths[index].max())]  # (B, T) -> (B, longest)
            yield Batch(None, batch[:, :-1], batch[:, 1:], pad_id)


def train_small_lm(steps: int | None = None, *, n_sentences: int = 20_000, seed: int = 0,
                   progress: bool = False, **train_overrides) -> tuple[DecoderOnlyLM, History]:
    """Build and train the small LM from scratch; returns the model (eval mode) and its history."""
    tokenizer = make_tokenizer()
    rows = lm_stream_rows(generate_sentences(n_sentences, seed=TRAIN_SEED), tokenizer, ROW_LEN)
    overrides = dict(train_overrides, seed=seed)
    if steps is not None:
        overrides["steps"] = steps
    config = small_lm_train_config(**overrides)
    torch.manual_seed(seed)
    model = DecoderOnlyLM(small_lm_config(tokenizer))
    history = train(model, lm_batches(rows, config.batch_size, tokenizer.pad_id, seed), config, progress=progress)
    return model, history


def load_small_lm(path: str | Path = CHECKPOINT) -> DecoderOnlyLM:
    """The trained small LM that ships with the project (eval mode, on the CPU).

    It was made by ``python benchmarks/train_lm.py --threads 1 --save minitfm/assets/small_lm.pt``
    (seed 0, :func:`small_lm_train_config`); :func:`train_small_lm` reproduces it.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}; create it with "
                                "`python benchmarks/train_lm.py --save minitfm/assets/small_lm.pt`")
    model = load_checkpoint(path)
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"{path} holds a {type(model).__name__}, not the small DecoderOnlyLM")
    return model


@torch.no_grad()
def perplexity_and_loss(model: DecoderOnlyLM, sentences: Sequence[str], batch_size: int = 256) -> tuple[float, float]:
    """Mean per-token cross-entropy (nats) of ``sentences`` (packed like the training rows) and its
    exponential, the perplexity."""
    tokenizer = make_tokenizer()
    rows = lm_stream_rows(list(sentences), tokenizer, ROW_LEN)
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        logits = model(batch[:, :-1])  # (B, T - 1, V)
        n = int((batch[:, 1:] != tokenizer.pad_id).sum())
        total += label_smoothed_cross_entropy(logits, batch[:, 1:], 0.0, ignore_index=tokenizer.pad_id).item() * n
        count += n
    loss = total / count
    return loss, math.exp(loss)


def sample_texts(model: DecoderOnlyLM, n: int, max_new_tokens: int = ROW_LEN, *, prompts: Sequence[str] | None = None,
                 **generate_kwargs) -> list[str]:
    """``n`` generated texts, each from ``<bos>`` (or ``<bos>`` + a prompt), prompt included.

    The small LM never emits ``<eos>``, so every text has ``max_new_tokens`` new tokens and usually ends
    in an unfinished sentence: measure it with ``validity(texts, complete_only=True)``.
    """
    tokenizer = make_tokenizer()
    check_positive_int(n, "n")
    texts = [""] * n if prompts is None else list(prompts)
    if len(texts) != n:
        raise ValueError(f"got {len(texts)} prompts for n={n} texts; give one prompt per text")
    prompt = tokenizer.encode_batch(texts, side="left")  # (n, P) left-padded
    out = generate(model, prompt, max_new_tokens, **generate_kwargs)
    return [(t + " " + tokenizer.decode(row)).strip() for t, row in zip(texts, out.new_tokens)]
