"""Checkers for byte-level BPE: count the pairs, apply one merge, encode a word by merge rank.

Token ids as in :mod:`minitfm.text.bpe_trainer`: 0..255 are the single bytes, merge ``k`` (rank ``k``) makes id ``256 + k``.
"""
from __future__ import annotations

from collections import Counter

from minitfm.exercises._core import Case, CheckResult, Mistake, run_cases
from minitfm.text.bpe_trainer import train_bpe
from minitfm.text.pretokenize import merge_pair


def _pairs(words, freqs, *, weighted=True, across=False, distinct=False, overlapping=True):
    """Pair counts, right (the defaults) or with one of the typical mistakes."""
    counts = Counter()
    if across:  # the words glued into one sequence
        words, freqs = [[i for w in words for i in w]], [1]
        weighted = False
    for word, freq in zip(words, freqs):
        pairs = list(zip(word, word[1:]))
        if not overlapping:  # (a, a, a) counted once, as if merged
            pairs, i = [], 0
            while i + 1 < len(word):
                pairs.append((word[i], word[i + 1]))
                i += 2 if word[i] == word[i + 1] else 1
        for pair in set(pairs) if distinct else pairs:
            counts[pair] += freq if weighted else 1
    return dict(counts)


def _as_counts(got):
    """Accept a dict or Counter with int values (zero counts dropped), or a list of (pair, count)."""
    if isinstance(got, list) and all(isinstance(x, tuple) and len(x) == 2 for x in got):
        got = dict(got)
    if isinstance(got, dict):
        try:
            return {tuple(k): int(v) for k, v in got.items() if v}
        except (TypeError, ValueError):
            return got
    return got


def _compare_counts(got, expected):
    if not isinstance(got, dict):
        return f"your function should return a dict mapping (id_a, id_b) -> count, got {type(got).__name__}"
    missing = [p for p in expected if p not in got]
    if missing:
        return f"the pair {missing[0]} is missing from your counts (it occurs {expected[missing[0]]} times)"
    extra = [p for p in got if p not in expected]
    if extra:
        return f"your counts hold the pair {extra[0]}, which never occurs inside a word"
    wrong = [p for p in expected if got[p] != expected[p]]
    if wrong:
        p = wrong[0]
        return f"the pair {p} occurs {expected[p]} times, your count is {got[p]}"
    return None


def check_count_pairs(count_pairs, verbose: bool = True) -> CheckResult:
    """Check ``count_pairs(words, freqs) -> dict``: ``{(id_a, id_b): count}``.

    ``words`` is a list of pre-tokens, each a list of token ids; ``freqs[i]`` is how often ``words[i]``
    occurs in the text. A pair is two adjacent ids inside one word; it counts ``freqs[i]`` times for each
    place it occurs in ``words[i]``. Pairs never span two words.
    """
    specs = [
        ("one word, every pair once", [[104, 101, 108, 112]], [1]),
        ("two words with frequencies 3 and 2", [[116, 104, 101], [32, 116, 104, 101, 109]], [3, 2]),
        ("a repeated byte: 'aaa' holds the pair (97, 97) twice", [[97, 97, 97], [32, 97, 98]], [1, 4]),
        ("a one-byte word has no pair", [[32], [108, 111, 119], [108, 111, 119, 101, 114]], [9, 5, 2]),
        ("merged ids above 255", [[256, 108, 257], [32, 256, 108], [257, 257]], [2, 1, 3]),
    ]
    cases = []
    for what, words, freqs in specs:
        mistakes = [
            Mistake("your counts ignore the frequencies: a pair inside a word that occurs freqs[i] times counts "
                    "freqs[i] times", lambda i: _pairs(i["words"], i["freqs"], weighted=False)),
            Mistake("your counts include pairs across word boundaries: the last id of one word and the first of "
                    "the next are not a pair (pre-tokens are never merged together)",
                    lambda i: _pairs(i["words"], i["freqs"], across=True)),
            Mistake("you count each pair at most once per word; a pair that occurs twice in a word counts twice",
                    lambda i: _pairs(i["words"], i["freqs"], distinct=True)),
            Mistake("you skip overlapping occurrences: in (97, 97, 97) the pair (97, 97) occurs twice, at "
                    "positions 0 and 1 (counting is not merging)",
                    lambda i: _pairs(i["words"], i["freqs"], overlapping=False)),
        ]
        cases.append(Case(what, lambda w=words, f=freqs: {"words": [list(x) for x in w], "freqs": list(f)},
                          _pairs(words, freqs), mistakes, compare=_compare_counts, normalize=_as_counts,
                          after_call=_unchanged(words, freqs)))
    return run_cases("check_count_pairs", count_pairs, cases, verbose=verbose)


def _unchanged(*originals):
    names = ("words", "freqs") if len(originals) == 2 else ("ids",)

    def after_call(inputs, got):
        for name, original in zip(names, originals):
            if inputs[name] != original:
                return (f"your function changed its input `{name}` in place; build a new list instead "
                        "(the caller still needs the original)")
        return None
    return after_call


def _merge(ids, pair, new_id, *, right_to_left=False, first_only=False, swapped=False):
    if swapped:
        pair = pair[::-1]
    if right_to_left:
        return merge_pair(ids[::-1], pair[::-1], new_id)[::-1]
    if first_only:
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) == tuple(pair):
                return ids[:i] + [new_id] + ids[i + 2:]
        return list(ids)
    return merge_pair(list(ids), tuple(pair), new_id)


def _as_list(got):
    if isinstance(got, tuple) or type(got).__name__ in ("Tensor", "ndarray"):
        got = list(got.tolist() if hasattr(got, "tolist") else got)
    return got


def _compare_ids(got, expected):
    if not isinstance(got, list):
        return f"your function should return a list of ids, got {type(got).__name__}"
    if len(got) != len(expected):
        return f"your answer has {len(got)} ids, expected {len(expected)}: {expected}"
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            return f"your answer differs at position {i}: expected id {e}, got {g} (expected {expected})"
    return None


def check_apply_merge(apply_merge, verbose: bool = True) -> CheckResult:
    """Check ``apply_merge(ids, pair, new_id) -> list``: every occurrence of ``pair`` replaced by ``new_id``.

    Scan left to right; an occurrence that overlaps one just merged is skipped, so ``[5, 5, 5]`` with the
    pair ``(5, 5)`` becomes ``[new_id, 5]``. ``ids`` itself must not change.
    """
    specs = [
        ("one occurrence in the middle", [104, 101, 108, 108, 111], (108, 108), 256),
        ("two occurrences", [116, 104, 101, 32, 116, 104, 101], (116, 104), 300),
        ("the pair overlaps itself: (5, 5) in [5, 5, 5]", [5, 5, 5], (5, 5), 256),
        ("four in a row: [7, 7, 7, 7] gives two merges", [7, 7, 7, 7, 9], (7, 7), 260),
        ("the pair does not occur (its reverse does)", [1, 2, 1, 2], (2, 3), 256),
        ("the pair at the very end, after a merged id", [256, 97, 98, 97, 98], (97, 98), 257),
    ]
    cases = []
    for what, ids, pair, new_id in specs:
        mistakes = [
            Mistake("you merge only the first occurrence; replace every occurrence in one pass",
                    lambda i: _merge(i["ids"], i["pair"], i["new_id"], first_only=True)),
            Mistake("you scan from the right: where occurrences overlap, the leftmost one is merged first, so "
                    "[5, 5, 5] becomes [new_id, 5]", lambda i: _merge(i["ids"], i["pair"], i["new_id"], right_to_left=True)),
            Mistake("you merge the pair in the wrong order: (a, b) means a followed by b, not b followed by a",
                    lambda i: _merge(i["ids"], i["pair"], i["new_id"], swapped=True)),
        ]
        cases.append(Case(what, lambda x=ids, p=pair, n=new_id: {"ids": list(x), "pair": p, "new_id": n},
                          _merge(ids, pair, new_id), mistakes, compare=_compare_ids, normalize=_as_list,
                          after_call=_unchanged(ids)))
    return run_cases("check_apply_merge", apply_merge, cases, verbose=verbose)


def _encode(ids, merges, *, how="rank"):
    """Encode with the merges (id pairs in rank order, merge k makes 256 + k), or a typical mistake."""
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    ids = list(ids)
    if how == "one pass":  # each merge of the list tried once, in reverse order
        for k in reversed(range(len(merges))):
            ids = merge_pair(ids, tuple(merges[k]), 256 + k)
        return ids
    while len(ids) > 1:
        pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
        if not pairs:
            break
        if how == "rank":
            pair = min(pairs, key=ranks.get)
        elif how == "leftmost":
            pair = pairs[0]
        elif how == "frequent":
            pair = max(pairs, key=lambda p: (pairs.count(p), -ranks[p]))
        else:  # "once": a single merge
            pair = min(pairs, key=ranks.get)
            return merge_pair(ids, pair, 256 + ranks[pair])
        ids = merge_pair(ids, pair, 256 + ranks[pair])
    return ids


def _toy_merges():
    """Merges learned on a small text, as id pairs in rank order."""
    text = ("low lower lowest slow slowly below allow newer newest new news renew wider widest the these "
            "other another mother lower lowest slower ") * 3
    vocab, merges = train_bpe(text, 256 + 40)
    ids = {token: i for i, token in vocab.items()}
    return [(ids[a], ids[b]) for a, b in merges]


def check_encode_by_rank(encode_by_rank, verbose: bool = True) -> CheckResult:
    """Check ``encode_by_rank(ids, merges) -> list``: one pre-token's byte ids, merged as the tokenizer does.

    ``merges`` lists id pairs ``(id_a, id_b)`` in the order they were learned; merge ``k`` (its rank) makes
    the id ``256 + k``. Repeatedly fuse, everywhere it occurs, the adjacent pair with the **lowest rank**,
    until no adjacent pair is a merge.
    """
    merges = _toy_merges()
    specs = [("' lowest'", " lowest"), ("'newer'", "newer"), ("' slowly'", " slowly"),
             ("a word the merges never saw, ' zebra'", " zebra"), ("one byte, 'x'", "x"),
             ("' anothermother', two known words glued", " anothermother"), ("'lololo'", "lololo")]
    specs = [(what, word, merges) for what, word in specs]
    # 'b'+'c' was learned before 'a'+'b': the lowest rank is not the leftmost pair
    specs.insert(1, ("'abcd' with the merges (b, c), (a, b), (c, d), (256, 100)", "abcd",
                     [(98, 99), (97, 98), (99, 100), (256, 100)]))
    cases = []
    for what, word, merges in specs:
        ids = list(word.encode("utf-8"))
        mistakes = [
            Mistake("you merge the leftmost pair that is a merge; the tokenizer fuses the pair with the lowest "
                    "rank (learned first), wherever it is", lambda i: _encode(i["ids"], i["merges"], how="leftmost")),
            Mistake("you merge the most frequent pair of the word, as training does; encoding replays the "
                    "merges by rank (lowest first)", lambda i: _encode(i["ids"], i["merges"], how="frequent")),
            Mistake("you stop after one merge; repeat until no adjacent pair is a merge",
                    lambda i: _encode(i["ids"], i["merges"], how="once")),
            Mistake("you apply the merges from the last learned to the first; the lowest rank (learned first) "
                    "goes first", lambda i: _encode(i["ids"], i["merges"], how="one pass")),
        ]
        cases.append(Case(f"the bytes of {what}", lambda x=ids, ms=merges: {"ids": list(x), "merges": list(ms)},
                          _encode(ids, merges), mistakes, compare=_compare_ids, normalize=_as_list,
                          after_call=_unchanged(ids)))
    return run_cases("check_encode_by_rank", encode_by_rank, cases, verbose=verbose)
