import math

import pytest

from minitfm.claims import judge, seed_table


def test_judge_words_follow_the_count_of_seeds_that_held():
    assert judge("loss > 2", [True, True, True]) == "confirmed: the rule held on 3 of 3 seeds (loss > 2)"
    assert judge("loss > 2", [True, False, True]).startswith("mixed: the rule held on 2 of 3 seeds")
    assert judge("loss > 2", [False, False]).startswith("contradicted: the rule held on 0 of 2 seeds")
    assert judge("r", [True], every="refined").startswith("refined:")
    assert judge("r", [False, True], some="not testable here").startswith("not testable here:")


def test_judge_accepts_numpy_and_rejects_bad_input():
    import numpy as np  # requirements.txt installs it: a missing one fails, never skips
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


# ---- one verdict vocabulary ---------------------------------------------------------------------------
import json
from pathlib import Path

from minitfm.claims import VERDICTS, verdict, verdict_problems

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_the_vocabulary_is_small_and_each_word_has_a_meaning():
    assert set(VERDICTS) == {"confirmed", "mixed", "contradicted", "refined", "not testable here"}
    assert all(isinstance(m, str) and len(m) > 20 for m in VERDICTS.values())


def test_judge_and_verdict_refuse_words_outside_the_vocabulary():
    with pytest.raises(ValueError, match="some must be one of the verdict words"):
        judge("r", [True, False], some="not confirmed")
    with pytest.raises(ValueError, match="word must be one of the verdict words"):
        verdict("no difference measured", "eps changed nothing")
    with pytest.raises(TypeError, match="evidence must be a non-empty string"):
        verdict("refined", "")
    assert judge("r", [True] * 5, unit="repeats") == "confirmed: the rule held on 5 of 5 repeats (r)"
    assert verdict("refined", "x") == "verdict: refined: x"
    assert verdict("mixed", "y", timing=True) == "verdict (a timing, this run): mixed: y"


def test_verdict_problems_finds_words_outside_the_vocabulary():
    good = "\n".join([judge("r", [True]), "0.3 too much: " + judge("r", [False]), verdict("refined", "e"),
                      "1. the claim:   " + judge("r", [True, False]), verdict("confirmed", "t", timing=True)])
    assert verdict_problems(good) == []
    assert len(verdict_problems("not confirmed: the rule held on 0 of 5 seeds (r)")) == 2  # word and retired
    assert verdict_problems("verdict: contradicted, and refined") != []
    assert verdict_problems("verdict for this run (a timing): not seen at this size: 1.03x") != []
    assert verdict_problems("refined: clear, not sharp: the rule held on 0 of 3 seeds (r)") != []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_committed_verdict_line_uses_the_vocabulary(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    problems = [f"cell {i}: {p}" for i, cell in enumerate(cells) if cell["cell_type"] == "code"
                for out in cell.get("outputs", []) for p in verdict_problems("".join(out.get("text", "")))]
    assert not problems, "\n".join(problems)


def test_the_committed_check_fails_on_a_deliberately_wrong_verdict(tmp_path):
    cells = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    cells["cells"].append({"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1,
                           "outputs": [{"output_type": "stream", "name": "stdout",
                                        "text": "no difference measured: the rule held on 0 of 3 seeds (r)\n"}]})
    broken = tmp_path / NOTEBOOKS[0].name
    broken.write_text(json.dumps(cells), encoding="utf-8")
    with pytest.raises(AssertionError, match="no difference measured"):
        test_every_committed_verdict_line_uses_the_vocabulary(broken)


# ---- the verdict on a mean over seeds, by its 95% interval ------------------------------------------
from minitfm.claims import interval_verdict, t_quantile_975


def test_t_quantile_matches_the_printed_tables_and_scipy():
    # the 97.5th percentiles every statistics table prints (3 decimals)
    for df, table in {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262, 30: 2.042, 120: 1.980}.items():
        assert abs(t_quantile_975(df) - table) < 5e-4, df
    assert abs(t_quantile_975(10**6) - 1.960) < 1e-3  # the normal's quantile in the limit
    import scipy.stats as stats  # requirements.txt installs it: a missing one fails, never skips
    for df in [*range(1, 40), 99, 1000, 1001, 5000]:
        assert t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-6), df


def test_interval_verdict_gives_the_mean_its_interval_and_the_word():
    # three seeds 1, 2, 3: mean 2, standard error 1/sqrt(3), t = 4.303, half-width 2.484
    line = interval_verdict("gap", [1.0, 2.0, 3.0], above=0)
    assert line == ("verdict: mixed: gap: mean +2.00, 95% interval -0.48 to +4.48 over 3 seeds "
                    "(above 0: confirmed; below: contradicted; containing it: mixed)")
    assert interval_verdict("gap", [2.0, 2.1, 1.9], above=0.5).startswith("verdict: confirmed: gap: mean +2.00")
    assert interval_verdict("gap", [0.1, 0.2, 0.15], above=0.5).startswith("verdict: contradicted:")
    # a deterministic difference: the interval is a point, and a point on the line is not above it
    assert interval_verdict("gap", [0.5, 0.5], above=0.5).startswith("verdict: mixed:")
    assert "mean +1.3%, 95% interval -2.3% to +4.8% over 3 repeats (above 0: " in interval_verdict(
        "exact match", [0.010, 0.0, 0.028], above=0, fmt="+.1%", unit="repeats")
    import numpy as np  # requirements.txt installs it: a missing one fails, never skips
    assert interval_verdict("g", list(np.array([2.0, 2.1, 1.9])), above=0).startswith("verdict: confirmed")
    assert verdict_problems(line) == []


@pytest.mark.parametrize("args, kwargs, error, match", [
    (("gap", [1.0], 0), {}, ValueError, "at least 2 seeds"),
    (("gap", [], 0), {}, ValueError, "at least 2 seeds"),
    (("gap", [1.0, float("nan")], 0), {}, ValueError, "finite"),
    (("gap", [1.0, 2.0], float("inf")), {}, ValueError, "finite"),
    (("gap", [1.0, "2"], 0), {}, TypeError, "values must hold numbers"),
    (("gap", [True, False], 0), {}, TypeError, "values must hold numbers"),
    (("gap", 1.0, 0), {}, TypeError, "sequence with one number per seed"),
    (("gap", "12", 0), {}, TypeError, "sequence with one number per seed"),
    (("gap", [1.0, 2.0], "0"), {}, TypeError, "above must be a number"),
    (("gap", [1.0, 2.0], None), {}, TypeError, "above must be a number"),
    (("", [1.0, 2.0], 0), {}, TypeError, "what must be a non-empty string"),
    (("gap", [1.0, 2.0], 0), {"fmt": "q"}, ValueError, "format spec"),
    (("gap", [1.0, 2.0], 0), {"fmt": 2}, TypeError, "format spec"),
    (("gap", [1.0, 2.0], 0), {"unit": ""}, TypeError, "unit must be"),
])
def test_interval_verdict_refuses_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        interval_verdict(*args, **kwargs)


@pytest.mark.parametrize("df, error", [(0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError)])
def test_t_quantile_refuses_what_is_not_a_count_of_degrees_of_freedom(df, error):
    with pytest.raises(error, match="df must"):
        t_quantile_975(df)
