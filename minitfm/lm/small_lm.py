"""The book's small language model: trained on the grammar language of :mod:`minitfm.lm.corpus`.

Glossary: N sentences, B batch, T tokens per row, V vocabulary.

Chapters 8 and 9 generate from this model. One recipe, used by ``benchmarks/train_lm.py`` and by any
notebook that trains it: :func:`small_lm_config` (``ModelConfig.small_lm`` with the corpus vocabulary),
:func:`small_lm_train_config`, :func:`lm_batches` and :func:`train_small_lm`; :func:`load_small_lm`
loads the trained checkpoint that ships in ``minitfm/lm/assets`` (training takes over a minute of CPU). Then
:func:`perplexity_and_loss` scores held-out sentences (``ppl, loss = perplexity_and_loss(model, sentences)``)
and :func:`sample_texts` generates sentences whose validity :func:`minitfm.lm.corpus.validity` measures.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
from pathlib import Path
from typing import Iterable, Iterator, Mapping, NamedTuple, Sequence

import torch

from minitfm._checks import check_number, check_positive_int, check_token_ids
from minitfm.config import ModelConfig
from minitfm.data import Batch, bucket_batches
from minitfm.generation import generate
from minitfm.lm._shipped import load_shipped_model
from minitfm.lm.corpus import generate_sentences, lm_stream_rows, make_tokenizer
from minitfm.models import DecoderOnlyLM
from minitfm.text.words import WordTokenizer
from minitfm.training import History, TrainConfig, label_smoothed_cross_entropy, train

TRAIN_SEED, VALID_SEED = 0, 1  # corpus seeds: training and held-out sentences never share a generator
ROW_LEN = 32  # tokens per training row: <bos> and about three sentences, packed without padding
CHECKPOINT = Path(__file__).parent / "assets" / "small_lm.pt"  # written by benchmarks/train_lm.py --save


def small_lm_config(tokenizer: WordTokenizer | None = None, **overrides) -> ModelConfig:
    """``ModelConfig.small_lm`` sized to the corpus vocabulary (ids 0, 1, 2 = pad, bos, eos); ``overrides`` are
    other ``ModelConfig`` fields (the vocabulary size and the special ids come from the tokenizer)."""
    _check_tokenizer(tokenizer)
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        near = {k: difflib.get_close_matches(k, fields, n=1) for k in unknown}
        hints = "; ".join(f"{k!r}: did you mean {m[0]!r}?" for k, m in near.items() if m)
        raise TypeError(f"small_lm_config got {unknown}, which are not ModelConfig fields" + (f" ({hints})" if hints
                                                                                                else ""))
    fixed = sorted(set(overrides) & {"vocab_size", "pad_id", "bos_id", "eos_id"})
    if fixed:
        raise ValueError(f"small_lm_config takes {fixed} from the tokenizer, so they cannot be overridden; pass "
                         "another WordTokenizer, or use ModelConfig.small_lm directly")
    tokenizer = make_tokenizer() if tokenizer is None else tokenizer
    return ModelConfig.small_lm(vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id,
                                bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, **overrides)


def small_lm_train_config(**overrides) -> TrainConfig:
    """Adam, warmup + cosine, no label smoothing (we want calibrated probabilities to sample from).

    It has no weight decay, so its Adam is the same update as ``optimizer="adamw"``: switching the optimizer
    alone gives the same weights as the shipped ``small_lm.pt``, which this recipe trained. The language models'
    recipe ``minitfm.training.lm_train_config`` (AdamW, weight decay 0.1, betas 0.9 and 0.95) would not."""
    base = dict(steps=800, batch_size=64, lr=3e-3, schedule="cosine", warmup=30, label_smoothing=0.0, seed=0)
    return TrainConfig(**{**base, **overrides})


def _check_tokenizer(tokenizer) -> None:
    if tokenizer is not None and not isinstance(tokenizer, WordTokenizer):
        raise TypeError(f"tokenizer must be a WordTokenizer (minitfm.lm.corpus.make_tokenizer()) or None, "
                        f"got {type(tokenizer).__name__}")


def _check_model(model) -> None:
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be a DecoderOnlyLM, got {type(model).__name__}")


def _check_texts(texts, name: str) -> list[str]:
    """A list (or another iterable) of strings; a lone string would be read character by character, so it is
    refused, and so are a mapping and a tensor."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, got a single {type(texts).__name__} "
                        f"({texts!r:.40}); wrap it in a list: [text]")
    if isinstance(texts, (Mapping, torch.Tensor)) or not isinstance(texts, Iterable):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(text).__name__} ({text!r:.40})")
    return texts


def lm_batches(rows: torch.Tensor, batch_size: int, pad_id: int, seed: int = 0) -> Iterator[Batch]:
    """Endless language-model batches from right-padded (N, T) rows, bucketed by length.

    Each batch is cut to its longest row, so short sentences do not pay for long ones; the input is
    ``row[:, :-1]`` and the target ``row[:, 1:]``. The arguments are checked at the call, not at the first batch.
    """
    check_token_ids(rows, "rows", ndim=2)
    if rows.shape[0] == 0 or rows.shape[1] < 2:
        raise ValueError(f"rows must be (N, T) with N >= 1 rows of T >= 2 tokens (input and target), "
                         f"got shape {tuple(rows.shape)}")
    check_positive_int(batch_size, "batch_size")
    check_number(pad_id, "pad_id", integer=True)
    check_number(seed, "seed", integer=True)
    if bool((rows != pad_id).sum(dim=1).lt(2).any()):
        raise ValueError(f"every row needs at least 2 tokens that are not pad_id={pad_id} (an input and a target)")
    return _lm_batches(rows, batch_size, pad_id, seed)


def _lm_batches(rows: torch.Tensor, batch_size: int, pad_id: int, seed: int) -> Iterator[Batch]:
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
    if steps is not None:
        check_positive_int(steps, "steps")
    check_positive_int(n_sentences, "n_sentences")
    check_number(seed, "seed", integer=True)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be a bool, got {type(progress).__name__}")
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

    It was made by ``python benchmarks/train_lm.py --threads 1 --save minitfm/lm/assets/small_lm.pt``
    (seed 0, :func:`small_lm_train_config`); :func:`train_small_lm` reproduces the recipe (bit for bit only on
    the same CPU and thread count).
    """
    return load_shipped_model(path, "python benchmarks/train_lm.py --save minitfm/lm/assets/small_lm.pt")


class PerplexityAndLoss(NamedTuple):
    """What :func:`perplexity_and_loss` returns, in the order of its name: ``ppl, loss = ...`` or ``.loss``."""

    perplexity: float  # exp(loss)
    loss: float  # mean cross-entropy per predicted token, in nats


def _check_tokenizer_fits(model: DecoderOnlyLM, tokenizer: WordTokenizer) -> None:
    """Refuse a tokenizer whose vocabulary size or special ids differ from the model's config (a silently
    wrong score, or an index error deep inside the embedding, otherwise)."""
    c = model.config
    if c.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"the tokenizer does not fit the model: the model's vocab_size is {c.vocab_size}, the "
                         f"tokenizer has {tokenizer.vocab_size} tokens; pass the tokenizer the model was trained with")
    for name in ("pad_id", "bos_id", "eos_id"):
        ours, theirs = getattr(c, name), getattr(tokenizer, name)
        if ours is not None and ours != theirs:
            raise ValueError(f"the tokenizer does not fit the model: the model's {name} is {ours}, the "
                             f"tokenizer's is {theirs}")


def perplexity_and_loss(model: DecoderOnlyLM, sentences: Sequence[str], batch_size: int = 256, *,
                        tokenizer: WordTokenizer | None = None) -> PerplexityAndLoss:
    """The perplexity and the mean per-token cross-entropy (nats) of ``sentences``, packed like the training
    rows (:func:`~minitfm.lm.corpus.lm_stream_rows`); the perplexity is the exponential of the loss.

    Every predicted token counts once, whatever ``batch_size`` (which only bounds memory). ``tokenizer``
    defaults to the corpus tokenizer (:func:`~minitfm.lm.corpus.make_tokenizer`); one whose vocabulary or special
    ids do not match the model's config raises ``ValueError``. The model is scored in eval mode and left in
    the mode it was in.
    """
    _check_model(model)
    sentences = _check_texts(sentences, "sentences")
    check_positive_int(batch_size, "batch_size")
    _check_tokenizer(tokenizer)
    tokenizer = make_tokenizer() if tokenizer is None else tokenizer
    _check_tokenizer_fits(model, tokenizer)
    rows = lm_stream_rows(sentences, tokenizer, ROW_LEN).to(model.lm_head.weight.device)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(rows), batch_size):
                batch = rows[start:start + batch_size]
                logits = model(batch[:, :-1])  # (B, T - 1, V)
                n = int((batch[:, 1:] != tokenizer.pad_id).sum())
                if n:  # a batch's mean, weighted by its tokens: every token counts once
                    loss = label_smoothed_cross_entropy(logits, batch[:, 1:], 0.0, ignore_index=tokenizer.pad_id)
                    total += loss.item() * n
                    count += n
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("the sentences hold no token to predict")
    loss = total / count
    return PerplexityAndLoss(math.exp(loss), loss)


def sample_texts(model: DecoderOnlyLM, n: int, max_new_tokens: int = ROW_LEN, *, prompts: Sequence[str] | None = None,
                 **generate_kwargs) -> list[str]:
    """``n`` generated texts, each from ``<bos>`` (or ``<bos>`` + a prompt), prompt included.

    The small LM never emits ``<eos>``, so every text has ``max_new_tokens`` new tokens and usually ends
    in an unfinished sentence: measure it with ``validity(texts, complete_only=True)``.
    """
    _check_model(model)
    check_positive_int(n, "n")
    check_positive_int(max_new_tokens, "max_new_tokens")
    tokenizer = make_tokenizer()
    _check_tokenizer_fits(model, tokenizer)
    texts = [""] * n if prompts is None else _check_texts(prompts, "prompts")
    if len(texts) != n:
        raise ValueError(f"got {len(texts)} prompts for n={n} texts; give one prompt per text")
    prompt = tokenizer.encode_batch(texts, side="left").to(model.lm_head.weight.device)  # (n, P) left-padded
    out = generate(model, prompt, max_new_tokens, **generate_kwargs)
    return [(t + " " + tokenizer.decode(row)).strip() for t, row in zip(texts, out.new_tokens)]
