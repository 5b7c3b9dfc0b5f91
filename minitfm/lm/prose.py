"""The book's prose as text a byte-level model reads: the byte tokenizer, the paragraphs, the held-out ones, and
bits per byte on them.

Glossary: B texts in a batch, T bytes, V = 256 bytes + 5 special tokens.

The prose (``assets/book_prose.txt``, chapter 7c's corpus) is the book's own, a paragraph a line under the name of
its notebook. One paragraph in ten, chosen by a hash of its text (:func:`is_heldout`), is never pretrained on: bits
per byte on those (:func:`heldout_bits_per_byte`) measure how well a model writes the book's prose, and how much of
that fine-tuning forgets. Bytes, not BPE merges: a letter is a token, so "how many r are in strawberry" is a
question about the tokens the model sees, and bits per byte is simply the loss per token divided by ln 2.
"""
from __future__ import annotations

import math
import zlib
from pathlib import Path

import torch

from minitfm._checks import check_positive_int
from minitfm.finetuning.chat import CHAT_SPECIAL_TOKENS
from minitfm.models import DecoderOnlyLM
from minitfm.text.bpe_tokenizer import Tokenizer

ENDOFTEXT = "<|endoftext|>"
SPECIAL_TOKENS = (ENDOFTEXT,) + CHAT_SPECIAL_TOKENS  # ids 256, 257, ... in this order
PROSE = Path(__file__).parent / "assets" / "book_prose.txt"
HELDOUT_EVERY = 10  # one paragraph in ten (by a hash of its text) is never trained on


def byte_tokenizer() -> Tokenizer:
    """Bytes as tokens (ids 0-255, no merges) and the special tokens at 256 and up."""
    vocab = {i: bytes([i]) for i in range(256)}
    vocab.update({256 + i: token.encode("utf-8") for i, token in enumerate(SPECIAL_TOKENS)})
    return Tokenizer(vocab, [], SPECIAL_TOKENS)


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


def corpus_ids(texts: list[str]) -> torch.Tensor:
    """One stream of ids: each text as its UTF-8 bytes after ``<|endoftext|>`` (id 256), as GPT-2 was trained."""
    eot = byte_tokenizer().special_ids[ENDOFTEXT]
    stream = bytearray()
    for text in texts:
        stream += b"\x00" + text.encode("utf-8")  # 0 marks the separator, replaced below (no text holds NUL)
    ids = torch.tensor(list(stream), dtype=torch.long)
    ids[ids == 0] = eot
    return ids


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
