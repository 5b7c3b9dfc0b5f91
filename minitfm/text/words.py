"""A word-level tokenizer: one id per word, plus four special tokens.

Glossary: B batch, T length (in tokens).

Ids 0..3 are the specials ``<pad>``, ``<bos>`` (beginning of sequence), ``<eos>`` (end of sequence)
and ``<unk>`` (a word outside the vocabulary); the words follow in the order given. Real models split
text into sub-words (BPE); a small grammar-generated language needs nothing more than words, which keeps
every token readable when we print what a model generates.
"""
from __future__ import annotations

import numbers
from typing import Iterable, Sequence

import torch

from minitfm.data import pad_sequences

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")


class WordTokenizer:
    """Maps space-separated words to ids and back.

    Args:
        words: the vocabulary (without the specials); duplicates are an error.
    """

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, words: Iterable[str]):
        words = list(words)
        clash = [w for w in words if w in SPECIALS or not w or any(c.isspace() for c in w)]
        if clash:
            raise ValueError(f"words must be non-empty, contain no spaces and not be special tokens, got {clash[:5]}")
        if len(set(words)) != len(words):
            dupes = sorted({w for w in words if words.count(w) > 1})
            raise ValueError(f"vocabulary words must be unique, got duplicates {dupes[:5]}")
        self.itos = list(SPECIALS) + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, *, add_bos: bool = True, add_eos: bool = False) -> list[int]:
        """Ids of the words of ``text``; unknown words become ``unk_id``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids = [self.stoi.get(w, self.unk_id) for w in text.split()]
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids: Sequence[int] | torch.Tensor, *, stop_at_eos: bool = True) -> str:
        """Words of ``ids`` joined by spaces; padding and <bos> are dropped, decoding stops at <eos>."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode takes one sequence (T,), got shape {tuple(ids.shape)}; use decode_batch")
            if ids.is_floating_point() or ids.dtype == torch.bool:
                raise TypeError(f"ids must hold integer token ids, got a tensor of dtype {ids.dtype}")
            ids = ids.tolist()
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be a sequence of int token ids, got {type(ids).__name__}; encode text first")
        words = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise TypeError(f"token ids must be ints, got {type(i).__name__} {i!r:.30}")
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id must be in [0, {self.vocab_size}), got {i}")
            if i == self.eos_id and stop_at_eos:
                break
            if i not in (self.pad_id, self.bos_id, self.eos_id):
                words.append(self.itos[i])
        return " ".join(words)

    def decode_batch(self, ids: torch.Tensor, **kwargs) -> list[str]:
        """(B, T) ids -> B strings."""
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            raise ValueError(f"decode_batch takes a (B, T) tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
        return [self.decode(row, **kwargs) for row in ids]

    def encode_batch(self, texts: Sequence[str], *, add_bos: bool = True, add_eos: bool = False,
                     side: str = "right") -> torch.Tensor:
        """Encode and pad ``texts`` into one (B, T) tensor (``side="left"`` for generation prompts)."""
        ids = [torch.tensor(self.encode(t, add_bos=add_bos, add_eos=add_eos), dtype=torch.long) for t in texts]
        return pad_sequences(ids, self.pad_id, side=side)

