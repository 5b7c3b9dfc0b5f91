"""A BPE vocabulary and its merges, checked to fit together (chapters 7c and 13).

A byte-level BPE tokenizer is two tables: ``vocab`` (id -> bytes) and ``merges`` (``(bytes_a, bytes_b)`` in rank
order). They must agree: the vocabulary holds the 256 single bytes, every merge's two parts and its result, and
each special token, and nothing else. :func:`check_vocabulary` checks that and builds the lookup tables that
encoding uses; :class:`minitfm.text.bpe_tokenizer.Tokenizer` and :func:`minitfm.text.gpt2_files.write_gpt2_files`
(which never writes files that could not be read back) both call it.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from minitfm.text.pretokenize import check_special_tokens


class VocabTables(NamedTuple):
    """A checked vocabulary and the lookups built from it."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: tuple[str, ...]
    token_to_id: dict[bytes, int]
    byte_ids: list[int]  # the id of each single byte 0..255
    special_ids: dict[str, int]
    ranks: dict[tuple[int, int], int]  # (id_a, id_b) -> the merge's rank
    merged_ids: dict[tuple[int, int], int]  # (id_a, id_b) -> the id of their merge


def check_vocabulary(vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                     special_tokens: Sequence[str] = ()) -> VocabTables:
    """Check that ``vocab``, ``merges`` and ``special_tokens`` fit together; return their lookup tables.

    Raises TypeError for a wrong type and ValueError, naming the token or merge, for a vocabulary that lacks a
    byte, a merge's part or result, or a special token, gives two ids the same bytes, repeats a merge, or holds
    a token that no merge makes and no special token names."""
    vocab = _checked_vocab(vocab)
    if isinstance(merges, (str, bytes, dict)) or not isinstance(merges, Iterable):
        raise TypeError(f"merges must be a list of (bytes, bytes) pairs, got {type(merges).__name__}")
    merges = [_checked_merge(rank, merge) for rank, merge in enumerate(merges)]
    special_tokens = check_special_tokens(special_tokens)
    token_to_id = {token: i for i, token in vocab.items()}

    def id_of(token: bytes, what: str) -> int:
        if token not in token_to_id:
            raise ValueError(f"the vocabulary must contain {what} {token!r}, it does not ({len(vocab)} tokens)")
        return token_to_id[token]

    byte_ids = [id_of(bytes([b]), "the single byte") for b in range(256)]
    special_ids = {t: id_of(t.encode("utf-8"), "special token") for t in special_tokens}
    ranks, merged_ids = {}, {}
    for rank, merge in enumerate(merges):
        what = f"merge {rank}'s"
        pair = (id_of(merge[0], what + " first part"), id_of(merge[1], what + " second part"))
        if pair in ranks:
            raise ValueError(f"merge {rank} {merge!r} repeats merge {ranks[pair]}: each pair is merged once")
        merged_ids[pair] = id_of(merge[0] + merge[1], what + " result")
        ranks[pair] = rank
    made = set(byte_ids) | set(special_ids.values()) | set(merged_ids.values())
    stray = sorted(i for i in vocab if i not in made)
    if stray:
        raise ValueError(f"the vocabulary does not match its merges: {len(vocab)} tokens, but 256 bytes + "
                         f"{len(set(merged_ids.values()))} merge results + {len(special_ids)} special "
                         f"tokens account for {len(made)}; ids {stray[:5]}{' ...' if len(stray) > 5 else ''} "
                         f"(e.g. {vocab[stray[0]]!r}) are none of these (missing merges, or a special token "
                         f"not listed in special_tokens)")
    return VocabTables(vocab, merges, special_tokens, token_to_id, byte_ids, special_ids, ranks, merged_ids)


def _checked_merge(rank: int, merge) -> tuple[bytes, bytes]:
    if (not isinstance(merge, (tuple, list)) or len(merge) != 2
            or not all(isinstance(part, bytes) and part for part in merge)):
        raise TypeError(f"merge {rank} must be a pair of non-empty bytes (bytes_a, bytes_b), got "
                        f"{type(merge).__name__} {merge!r}")
    return tuple(merge)


def _checked_vocab(vocab) -> dict[int, bytes]:
    if not isinstance(vocab, dict):
        raise TypeError(f"vocab must be a dict of id -> bytes, got {type(vocab).__name__}")
    seen: dict[bytes, int] = {}
    for i, token in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or not isinstance(token, bytes):
            raise TypeError(f"vocab must map int ids to bytes, got {type(i).__name__} {i!r}: "
                            f"{type(token).__name__} {token!r}")
        if i < 0 or not token:
            raise ValueError(f"vocab must map ids >= 0 to non-empty bytes, got {i!r}: {token!r}")
        if token in seen:
            raise ValueError(f"vocab gives the bytes {token!r} two ids, {seen[token]} and {i}")
        seen[token] = i
    return dict(vocab)
