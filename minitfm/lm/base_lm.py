"""Chapter 15's base model: a byte-level language model pretrained on the book's prose and on stated facts.

Glossary: B batch, T bytes per training row, V = 256 bytes + 5 special tokens.

What it read (:func:`base_corpus`, all written by the project): the book's own prose (``assets/book_prose.txt``,
chapter 7c's corpus), minus one paragraph in ten kept aside (:func:`heldout_prose`, for measuring forgetting),
and every fact of the five tasks of :mod:`minitfm.finetuning.tasks` written as a plain sentence
(``"17 + 25 = 42."``, ``"attention in Chinese is 注意力."``), each text after ``<|endoftext|>``. It never saw a chat: the chat tokens are in its
vocabulary, untrained, until chapter 15 fine-tunes it (as base models ship reserved, untrained special tokens).

Bytes, not BPE merges: a letter is a token, so "how many r are in strawberry" is a question about the tokens
the model sees, and bits per byte is simply the loss per token divided by ln 2.

The shipped weights (``assets/base_lm.pt``) are made by ``python benchmarks/train_base_lm.py --save``, which
also stores the held-out bits per byte it reached; ``--check`` trains again and compares (:func:`train_base_lm`).
"""
from __future__ import annotations

import math
import random
import zlib
from pathlib import Path

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.config import ModelConfig
from minitfm.data import Batch
from minitfm.finetuning.chat import CHAT_SPECIAL_TOKENS
from minitfm.finetuning.tasks import TASKS, statements
from minitfm.lm._shipped import load_shipped_model
from minitfm.models import DecoderOnlyLM
from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.training import History, TrainConfig, train

ENDOFTEXT = "<|endoftext|>"
SPECIAL_TOKENS = (ENDOFTEXT,) + CHAT_SPECIAL_TOKENS  # ids 256, 257, ... in this order
PROSE = Path(__file__).parent / "assets" / "book_prose.txt"
CHECKPOINT = Path(__file__).parent / "assets" / "base_lm.pt"
ROW_LEN = 128  # bytes per training row
HELDOUT_EVERY = 10  # one paragraph in ten (by a hash of its text) is never trained on
FACT_REPEATS = 4  # each task statement appears this many times per pass over the corpus, each paragraph once


def byte_tokenizer() -> Tokenizer:
    """Bytes as tokens (ids 0-255, no merges) and the special tokens at 256 and up."""
    vocab = {i: bytes([i]) for i in range(256)}
    vocab.update({256 + i: token.encode("utf-8") for i, token in enumerate(SPECIAL_TOKENS)})
    return Tokenizer(vocab, [], SPECIAL_TOKENS)


def base_lm_config(**overrides) -> ModelConfig:
    """A small modern decoder (Pre-RMSNorm, RoPE, SwiGLU, no biases), about half a million parameters.

    Id 0 (the NUL byte, which no text here holds) pads; ``<|endoftext|>`` begins and ends a text."""
    eot = 256
    base = dict(vocab_size=256 + len(SPECIAL_TOKENS), d_model=96, n_heads=4, n_layers=4, d_ff=256,
                max_seq_len=256, norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=False,
                scale_embeddings=False, attn_impl="fused", pad_id=0, bos_id=eot, eos_id=eot)
    return ModelConfig(**{**base, **overrides})


def base_lm_train_config(**overrides) -> TrainConfig:
    """Adam with warmup and cosine decay over rows of ``ROW_LEN`` bytes."""
    base = dict(steps=2000, batch_size=32, lr=3e-3, schedule="cosine", warmup=50, label_smoothing=0.0, seed=0)
    return TrainConfig(**{**base, **overrides})


def prose_paragraphs() -> list[tuple[str, str]]:
    """(source notebook, paragraph) for every paragraph of the book's prose corpus."""
    out, source = [], None
    for line in PROSE.read_text(encoding="utf-8").splitlines():
        if line.startswith("<|source|> "):
            source = line.removeprefix("<|source|> ").strip()
        elif line.strip():
            out.append((source, line))
    return out


def is_heldout(paragraph: str) -> bool:
    """Whether a paragraph is kept out of pretraining (the same answer on every machine)."""
    return zlib.crc32(paragraph.encode("utf-8")) % HELDOUT_EVERY == 0


def heldout_prose() -> list[tuple[str, str]]:
    """(source, paragraph) pairs the base model never trained on."""
    return [(s, p) for s, p in prose_paragraphs() if is_heldout(p)]


def base_corpus(seed: int = 0) -> list[str]:
    """The pretraining texts: the training paragraphs once and every task statement ``FACT_REPEATS`` times,
    shuffled (a fact read a handful of times is not remembered by a model this small)."""
    check_number(seed, "seed", integer=True)
    units = [p for _, p in prose_paragraphs() if not is_heldout(p)]
    units += [s for task in TASKS for s in statements(task)] * FACT_REPEATS
    random.Random(seed).shuffle(units)
    return units


def corpus_ids(texts: list[str]) -> torch.Tensor:
    """One stream of ids: each text as its UTF-8 bytes after ``<|endoftext|>`` (id 256), as GPT-2 was trained."""
    eot = byte_tokenizer().special_ids[ENDOFTEXT]
    stream = bytearray()
    for text in texts:
        stream += b"\x00" + text.encode("utf-8")  # 0 marks the separator, replaced below (no text holds NUL)
    ids = torch.tensor(list(stream), dtype=torch.long)
    ids[ids == 0] = eot
    return ids


def corpus_batches(corpus_ids: torch.Tensor, batch_size: int, *, seed: int, row_len: int = ROW_LEN):
    """Endless batches of ``batch_size`` rows cut at seeded random offsets of the byte stream (B, T)."""
    check_positive_int(batch_size, "batch_size")
    check_positive_int(row_len, "row_len")
    if corpus_ids.ndim != 1 or corpus_ids.numel() <= row_len + 1:
        raise ValueError(f"corpus_ids must be 1-D and longer than row_len + 1 = {row_len + 1}, got "
                         f"{tuple(corpus_ids.shape)}")
    generator = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, corpus_ids.numel() - row_len - 1, (batch_size,), generator=generator)
        rows = torch.stack([corpus_ids[s:s + row_len + 1] for s in starts.tolist()])  # (B, T + 1)
        yield Batch(None, rows[:, :-1], rows[:, 1:], -100)


def train_base_lm(*, seed: int = 0, progress: bool = False, callbacks=(),
                  **train_overrides) -> tuple[DecoderOnlyLM, History]:
    """Build and pretrain the base model from scratch (minutes of CPU); returns it in eval mode. ``callbacks``
    go to :func:`minitfm.training.train`; ``train_overrides`` change :func:`base_lm_train_config`."""
    check_number(seed, "seed", integer=True)
    config = base_lm_train_config(**{**train_overrides, "seed": seed})
    ids = corpus_ids(base_corpus(seed))
    torch.manual_seed(seed)
    model = DecoderOnlyLM(base_lm_config())
    history = train(model, corpus_batches(ids, config.batch_size, seed=seed), config, progress=progress,
                    callbacks=callbacks)
    return model.eval(), history


def text_nats(model: DecoderOnlyLM, texts: list[str], batch_size: int = 64) -> list[float]:
    """-ln p(text) of each text, read after ``<|endoftext|>`` (batched, right-padded: a real token never sees the
    padding after it). A text longer than the context (``max_seq_len - 1`` bytes) is refused."""
    if isinstance(texts, str) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise TypeError("texts must be a non-empty list of non-empty str")
    rows = [[model.config.bos_id] + list(t.encode("utf-8")) for t in texts]
    longest = max(map(len, rows))
    if longest > model.config.max_seq_len:
        raise ValueError(f"a text has {longest - 1} bytes; the model reads at most {model.config.max_seq_len - 1}")
    nats, device = [], next(model.parameters()).device
    with torch.no_grad():
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            ids = torch.full((len(chunk), max(map(len, chunk))), -100, dtype=torch.long)  # (B, T)
            for r, row in enumerate(chunk):
                ids[r, :len(row)] = torch.tensor(row)
            ids = ids.to(device)  # built on the CPU, moved once to where the weights are
            targets = ids[:, 1:]  # (B, T - 1): -100 after each row's end
            logits = model(ids[:, :-1].clamp(min=0)).double()  # (B, T - 1, V)
            losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100,
                                                       reduction="none")  # (B, T - 1), 0 where ignored
            nats += losses.sum(dim=1).tolist()
    return nats


def bits_per_byte_of(model: DecoderOnlyLM, texts: list[str], batch_size: int = 64) -> float:
    """Bits per byte of ``texts`` pooled over all their bytes, each read after ``<|endoftext|>``: the same figure as
    :func:`minitfm.evaluation.model_bits_per_byte` over the texts, batched (a test checks it)."""
    nats = text_nats(model, texts, batch_size)
    return sum(nats) / (math.log(2) * sum(len(t.encode("utf-8")) for t in texts))


def cut_to_bytes(text: str, n_bytes: int) -> str:
    """The longest start of ``text`` whose UTF-8 form has at most ``n_bytes`` bytes, cut between characters
    (a cut by characters would let "注意力" keep 3 bytes per character, past the model's context)."""
    return text.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")  # drops a cut character's head


def heldout_bits_per_byte(model: DecoderOnlyLM, n_paragraphs: int | None = None) -> float:
    """Bits per byte of the held-out prose paragraphs (each cut to the context, ``max_seq_len - 1`` bytes after
    ``<|endoftext|>``): how well the model still writes the book's prose, the measure of forgetting."""
    paragraphs = [cut_to_bytes(p, model.config.max_seq_len - 1) for _, p in heldout_prose()]
    if n_paragraphs is not None:
        check_positive_int(n_paragraphs, "n_paragraphs")
        paragraphs = paragraphs[:n_paragraphs]
    return bits_per_byte_of(model, paragraphs)


def load_base_lm(path: str | Path = CHECKPOINT) -> DecoderOnlyLM:
    """The pretrained base model that ships with the project (eval mode, on the CPU)."""
    return load_shipped_model(path, "python benchmarks/train_base_lm.py --save")
