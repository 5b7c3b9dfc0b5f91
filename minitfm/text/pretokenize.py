"""Before BPE merges anything: GPT-2's pre-tokenizer, special tokens, and one merge step (chapters 7c, 13).

A text is cut into pre-tokens by GPT-2's regex (a word with its leading space, a number, a run of punctuation
or of spaces), or by another model's (Llama 3's and Qwen's cut digits and newlines differently), after the
special tokens (such as ``<|endoftext|>``) are cut out whole. BPE never merges across
a pre-token boundary. :func:`merge_pair` is the one step both the trainer (:mod:`minitfm.text.bpe_trainer`) and
the tokenizer (:mod:`minitfm.text.bpe_tokenizer`) repeat; :func:`apply_merges` is how the tokenizers
(:mod:`minitfm.text.bpe_tokenizer`, :mod:`minitfm.text.sentencepiece_bpe`) repeat it fast, by rank.
"""
from __future__ import annotations

import functools
import heapq
from typing import AbstractSet, Iterable, Iterator, Sequence

import regex

# GPT-2's pre-tokenizer: contractions, letters, digits and other symbols (each with at most one leading
# space), then runs of whitespace; ``\s+(?!\S)`` leaves a run's last space to the word that follows it.
GPT2_SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2_SPLIT = regex.compile(GPT2_SPLIT_PATTERN)

Pair = tuple[int, int]
_SURROGATE = regex.compile(r"[\ud800-\udfff]")


def check_no_surrogates(text: str, what: str = "text") -> None:
    """ValueError naming the first lone surrogate of ``text`` (U+D800..U+DFFF), if it holds one.

    A lone surrogate is half of a UTF-16 pair, not a character: it has no UTF-8 bytes, so byte-level BPE
    cannot encode it. Python strings hold them after ``json.loads`` of an escaped half pair (``"\\ud83d"``)
    or ``errors="surrogateescape"``. minitfm refuses them rather than repair them silently (tiktoken
    replaces them by U+FFFD), so that ``decode(encode(text)) == text`` holds for every text it accepts.
    """
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}")
    match = _SURROGATE.search(text)
    if match:
        raise ValueError(f"{what} holds a lone surrogate U+{ord(match.group()):04X} at index {match.start()}: half "
                         "of a UTF-16 pair, not a character, with no UTF-8 bytes. Repair the text first, e.g. "
                         "text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace') (what tiktoken does: "
                         "a valid pair becomes its character, a lone half U+FFFD)")


def pretokenize(text: str, pattern: str | regex.Pattern | None = None) -> list[str]:
    """Cut ``text`` into GPT-2's pre-tokens, or another regex's; ``"".join(pretokenize(text)) == text``.

    ``pattern`` (a str or a compiled ``regex``) replaces GPT-2's, as Llama 3's and Qwen's ``tokenizer.json``
    replace it. Each match is a pre-token, and so is any text between two matches (Hugging Face's ``Split``
    with ``behavior="isolated"``); GPT-2's regex matches every character, so it leaves no such gap."""
    if not isinstance(text, str):
        raise TypeError(f"pretokenize takes a str, got {type(text).__name__}"
                        + (": decode the bytes first" if isinstance(text, (bytes, bytearray)) else ""))
    split = _GPT2_SPLIT if pattern is None else pattern if isinstance(pattern, regex.Pattern) else split_regex(pattern)
    if split is _GPT2_SPLIT:
        return split.findall(text)
    pieces, start = [], 0
    for match in split.finditer(text):
        if match.start() > start:
            pieces.append(text[start:match.start()])
        if match.end() > match.start():
            pieces.append(match.group())
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def split_regex(pattern: str) -> regex.Pattern:
    """``pattern`` compiled (GPT-2's own compiled regex for GPT-2's pattern); ValueError if it is no regex."""
    if not isinstance(pattern, str):
        raise TypeError(f"a split pattern must be a str (a regular expression), got {type(pattern).__name__}")
    return _split_regex(pattern)


@functools.lru_cache(maxsize=16)
def _split_regex(pattern: str) -> regex.Pattern:
    if pattern == GPT2_SPLIT_PATTERN:
        return _GPT2_SPLIT
    try:
        return regex.compile(pattern)
    except regex.error as error:
        raise ValueError(f"the split pattern {pattern!r} is not a valid regular expression ({error})") from None


def check_special_tokens(special_tokens: Sequence[str]) -> tuple[str, ...]:
    """``special_tokens`` as a tuple, after checking each is a non-empty ``str`` and none repeats."""
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError(f"special_tokens must be a list of str, got a single {type(special_tokens).__name__} "
                        f"{special_tokens!r}; write [{special_tokens!r}]")
    if isinstance(special_tokens, (dict, AbstractSet)) or not isinstance(special_tokens, Iterable):
        raise TypeError(f"special_tokens must be a list of str (in the order of their ids), got "
                        f"{type(special_tokens).__name__}")
    special_tokens = tuple(special_tokens)
    for token in special_tokens:
        if not isinstance(token, str):
            raise TypeError(f"each special token must be a str, got {type(token).__name__} {token!r}")
        if not token:
            raise ValueError("each special token must be a non-empty str, got ''")
        check_no_surrogates(token, f"special token {token!r}")
        if len(token.encode("utf-8")) == 1:
            raise ValueError(f"special token {token!r} is the single byte {token.encode()[0]}, which already has its "
                             f"own id among the 256 bytes; a special token needs two bytes or more (e.g. '<|nl|>')")
    repeated = sorted({t for t in special_tokens if special_tokens.count(t) > 1})
    if repeated:
        raise ValueError(f"special tokens must be distinct, got {repeated} more than once")
    return special_tokens


def special_token_regex(special_tokens: Sequence[str]) -> regex.Pattern | None:
    """A regex matching any of ``special_tokens``, the longest first where two start at the same place."""
    return _special_token_regex(check_special_tokens(special_tokens))


@functools.lru_cache(maxsize=64)
def _special_token_regex(special_tokens: tuple[str, ...]) -> regex.Pattern | None:
    if not special_tokens:
        return None
    longest_first = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(t) for t in longest_first))


def split_on_special_tokens(text: str, special_tokens: tuple[str, ...]) -> Iterator[tuple[str, bool]]:
    """Yield ``(piece, is_special)`` in order: the special tokens of ``text`` and the text between them."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    pattern = special_token_regex(special_tokens)
    start = 0
    for match in pattern.finditer(text) if pattern else ():
        if match.start() > start:
            yield text[start:match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def merge_pair(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair`` replaced by ``new_id``, scanning left to right.

    ``merge_pair([5, 5, 5], (5, 5), 9) == [9, 5]``: an occurrence overlapping one already merged is skipped.
    """
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise TypeError(f"ids must be a list of int ids, got {type(ids).__name__}")
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise TypeError(f"pair must be a tuple of two int ids, got {type(pair).__name__} {pair!r}")
    for name, value in (("pair[0]", pair[0]), ("pair[1]", pair[1]), ("new_id", new_id)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int id, got {type(value).__name__} {value!r}")
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def apply_merges(ids: list[int], ranks: dict[Pair, int], merged_ids: dict[Pair, int]) -> list[int]:
    """Fuse the lowest-rank adjacent pair, leftmost first, until no adjacent pair is a merge.

    ``ranks`` maps a pair of ids to its merge's rank, ``merged_ids`` to the id it becomes (two pairs may share a
    rank: the leftmost goes first, as SentencePiece does for pieces of equal score).

    This is Hugging Face ``tokenizers``' loop (``Word::merge_all``): a heap of ``(rank, position,
    result)`` over a linked list of the pre-token's tokens, so a pre-token of n bytes costs O(n log n),
    whatever the number of merges it uses (fusing the best pair everywhere and searching again costs
    O(n) per distinct merge used: 0.24 s for one 1,571-letter word with 544 merges, against 2 ms here).
    An entry whose position no longer holds its pair is skipped when it comes out of the heap."""
    n = len(ids)
    if n < 2:
        return ids
    ids, alive = list(ids), [True] * n
    after, before = [*range(1, n), -1], list(range(-1, n - 1))
    heap = [(ranks[pair], i, merged_ids[pair]) for i, pair in enumerate(zip(ids, ids[1:])) if pair in ranks]
    heapq.heapify(heap)
    while heap:
        _, i, new_id = heapq.heappop(heap)
        j = after[i]
        if not alive[i] or j < 0 or merged_ids.get((ids[i], ids[j])) != new_id:
            continue  # stale: this position was merged away or now holds another pair
        ids[i], alive[j] = new_id, False
        after[i] = k = after[j]
        if k >= 0:
            before[k] = i
        for left, right in ((before[i], i), (i, k)):
            pair = (ids[left], ids[right]) if left >= 0 and right >= 0 else None
            if pair in ranks:
                heapq.heappush(heap, (ranks[pair], left, merged_ids[pair]))
    return [token for token, kept in zip(ids, alive) if kept]

