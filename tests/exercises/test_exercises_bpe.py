"""The BPE checkers accept a correct function and name each typical mistake.

``CASES`` has the layout of ``tests/exercises/test_exercises.py``'s table (checker -> (correct, [(wrong, words)])),
so that table can take these entries too.
"""
import re
from collections import Counter

import pytest

import minitfm as m
from minitfm import exercises as ex


def count_pairs_ok(words, freqs):
    counts = Counter()
    for word, freq in zip(words, freqs):
        for pair in zip(word, word[1:]):
            counts[pair] += freq
    return counts


def count_pairs_unweighted(words, freqs):
    return Counter(p for w in words for p in zip(w, w[1:]))


def count_pairs_glued(words, freqs):
    flat = [i for w in words for i in w]
    return Counter(zip(flat, flat[1:]))


def count_pairs_distinct(words, freqs):
    counts = Counter()
    for word, freq in zip(words, freqs):
        for pair in set(zip(word, word[1:])):
            counts[pair] += freq
    return counts


def apply_merge_ok(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def apply_merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)


def apply_merge_from_right(ids, pair, new_id):
    return apply_merge_ok(ids[::-1], pair[::-1], new_id)[::-1]


def apply_merge_in_place(ids, pair, new_id):
    out = apply_merge_ok(ids, pair, new_id)
    ids[:] = out
    return out


def encode_ok(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    while len(ids) > 1:
        pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, float("inf")))
        if pair not in ranks:
            break
        ids = apply_merge_ok(ids, pair, 256 + ranks[pair])
    return ids


def encode_sequential(ids, merges):  # every merge once, in rank order: the same result, more slowly
    for k, pair in enumerate(merges):
        ids = apply_merge_ok(ids, pair, 256 + k)
    return ids


def encode_leftmost(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    while True:
        pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
        if not pairs:
            return ids
        ids = apply_merge_ok(ids, pairs[0], 256 + ranks[pairs[0]])


def encode_once(ids, merges):
    ranks = {tuple(p): k for k, p in enumerate(merges)}
    pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
    if not pairs:
        return ids
    pair = min(pairs, key=ranks.get)
    return apply_merge_ok(ids, pair, 256 + ranks[pair])


def encode_reversed(ids, merges):
    for k in reversed(range(len(merges))):
        ids = apply_merge_ok(ids, merges[k], 256 + k)
    return ids


CASES = {
    "check_count_pairs": (count_pairs_ok, [
        (count_pairs_unweighted, "ignore the frequencies"),
        (count_pairs_glued, "across word boundaries"),
        (count_pairs_distinct, "at most once per word"),
        (lambda words, freqs: list(count_pairs_ok(words, freqs)), "is missing from your counts"),
    ]),
    "check_apply_merge": (apply_merge_ok, [
        (apply_merge_first_only, "only the first occurrence"),
        (apply_merge_from_right, "scan from the right"),
        (lambda ids, pair, new_id: apply_merge_ok(ids, pair[::-1], new_id), "wrong order"),
        (apply_merge_in_place, "changed its input `ids` in place"),
    ]),
    "check_encode_by_rank": (encode_ok, [
        (encode_leftmost, "leftmost pair"),
        (encode_once, "stop after one merge"),
        (encode_reversed, "from the last learned to the first"),
        (lambda ids, merges: ids, r"your answer has \d+ ids, expected"),
    ]),
}


def test_the_checkers_are_importable_from_minitfm_exercises():
    assert all(callable(getattr(ex, name)) for name in CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_accepts_a_correct_implementation(name, capsys):
    result = getattr(ex, name)(CASES[name][0])
    assert result.passed, result.message
    assert result.message == f"✓ {name}: all {result.n_cases} cases pass" and result.n_cases >= 5
    assert capsys.readouterr().out.strip() == result.message


def test_accepts_a_counter_a_dict_and_the_slow_sequential_encoder():
    assert ex.check_count_pairs(lambda w, f: dict(count_pairs_ok(w, f)), verbose=False).passed
    assert ex.check_encode_by_rank(encode_sequential, verbose=False).passed
    assert ex.check_apply_merge(lambda ids, pair, new_id: m.text.pretokenize.merge_pair(ids, pair, new_id), verbose=False).passed

# The generic checks (each wrong implementation rejected with its message, a stub reported as not implemented) run
# over these CASES in tests/exercises/test_exercises.py, which adds them to its table.


def test_the_encode_cases_agree_with_the_tokenizer():
    """The checker's expected answers are the library tokenizer's, for merges learned on its text."""
    from minitfm.exercises.bpe import _encode, _toy_merges
    merges = _toy_merges()
    text = ("low lower lowest slow slowly below allow newer newest new news renew wider widest the these "
            "other another mother lower lowest slower ") * 3
    vocab, byte_merges = m.text.bpe_trainer.train_bpe(text, 256 + 40)
    tokenizer = m.text.bpe_tokenizer.Tokenizer(vocab, byte_merges)
    for word in (" lowest", "newer", " slowly", " zebra", "x", " anothermother", "lololo"):
        assert _encode(list(word.encode()), merges) == tokenizer.encode(word)
