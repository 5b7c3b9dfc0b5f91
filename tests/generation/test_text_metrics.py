import pytest

from minitfm.generation.text_metrics import distinct_n, ngrams, repetition_rate


def test_ngrams():
    assert ngrams("a b c".split(), 2) == [("a", "b"), ("b", "c")]
    assert ngrams(["a"], 2) == []


def test_distinct_n_by_hand():
    # bigrams: (a b) (b a) (a b) | (a b) -> 2 distinct of 4
    assert distinct_n(["a b a b", "a b"], 2) == pytest.approx(2 / 4)
    assert distinct_n(["a b c", "d e f"], 1) == 1.0


def test_repetition_rate_by_hand():
    # trigrams of "x y z x y z": xyz yzx zxy xyz -> the last one repeats: 1 of 4
    assert repetition_rate(["x y z x y z"], 3) == pytest.approx(1 / 4)
    # repetition across different texts does not count
    assert repetition_rate(["x y z", "x y z"], 3) == 0.0


def test_errors():
    with pytest.raises(ValueError, match="at least 3 tokens"):
        repetition_rate(["a b"], 3)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        distinct_n([""], 2)
    with pytest.raises(ValueError, match="n must be >= 1"):
        ngrams(["a"], 0)
