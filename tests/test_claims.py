import math

import pytest

from minitfm.claims import judge, seed_table


def test_judge_words_follow_the_count_of_seeds_that_held():
    assert judge("loss > 2", [True, True, True]) == "confirmed: the rule held on 3 of 3 seeds (loss > 2)"
    assert judge("loss > 2", [True, False, True]).startswith("mixed: the rule held on 2 of 3 seeds")
    assert judge("loss > 2", [False, False]).startswith("contradicted: the rule held on 0 of 2 seeds")
    assert judge("r", [True], every="refined").startswith("refined:")
    assert judge("r", [False, True], some="not confirmed").startswith("not confirmed:")


def test_judge_accepts_numpy_and_rejects_bad_input():
    np = pytest.importorskip("numpy")
    assert judge("r", list(np.array([1.0, 2.0]) > 0)).startswith("confirmed")
    with pytest.raises(ValueError, match="at least one seed"):
        judge("r", [])
    with pytest.raises(TypeError, match="booleans"):
        judge("r", [1, 0])
    with pytest.raises(TypeError, match="non-empty string"):
        judge("", [True])
    with pytest.raises(TypeError, match="sequence of booleans"):
        judge("r", True)


def test_seed_table_has_each_seed_the_mean_and_the_range():
    table = seed_table({"Post-LN": [2.0, 1.0, 3.0], "Pre-LN": [0.5, math.nan, 0.25]}, seeds=[0, 1, 2], fmt=".2f")
    lines = table.splitlines()
    assert lines[0].split() == ["seed", "0", "seed", "1", "seed", "2", "mean", "range"]
    assert lines[1].split() == ["Post-LN", "2.00", "1.00", "3.00", "2.00", "1.00", "to", "3.00"]
    assert lines[2].split() == ["Pre-LN", "0.50", "nan", "0.25", "0.38", "0.25", "to", "0.50"]


def test_seed_table_rejects_rows_that_do_not_match_the_seeds():
    with pytest.raises(ValueError, match="has 2 values but there are 3 seeds"):
        seed_table({"a": [1.0, 2.0]}, seeds=[0, 1, 2])
    with pytest.raises(TypeError, match="must hold numbers"):
        seed_table({"a": ["x"]}, seeds=[0])
    with pytest.raises(TypeError, match="non-empty mapping"):
        seed_table({}, seeds=[0])
    with pytest.raises(ValueError, match="format spec"):
        seed_table({"a": [1.0]}, seeds=[0], fmt="q")
