"""regex_extract against lm-eval's RegexFilter, with GSM8K's strict-match and flexible-extract patterns."""
import pytest

from minitfm.evaluation import FLEXIBLE_EXTRACT, STRICT_MATCH, regex_extract

RESPONSES = [
    "Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72",
    "The answer is 72.",
    "So the total is $1,250.50 dollars.",
    "#### -3.5 and then more text 12",
    "no number at all",
    "",
    "7",
    "She has 5 apples and eats 2, so 3 are left.",
    "#### 1,000\n#### 2",
]


def lm_eval_filter(pattern, group_select, responses):
    from lm_eval.filters.extraction import RegexFilter

    return [r[0] for r in RegexFilter(regex_pattern=pattern, group_select=group_select).apply(
        [[x] for x in responses], [None] * len(responses))]


@pytest.mark.parametrize("pattern, group_select", [(STRICT_MATCH, 0), (FLEXIBLE_EXTRACT, -1), (FLEXIBLE_EXTRACT, 0),
                                                   (r"(\w+) (\d+)", 0), (r"\. ", 0)])
def test_equals_lm_eval_regex_filter(pattern, group_select):
    ours = [regex_extract(r, pattern, group_select=group_select) for r in RESPONSES]
    assert ours == lm_eval_filter(pattern, group_select, RESPONSES)


def test_patterns_are_gsm8k_task_config():
    import pathlib

    import yaml
    from lm_eval import tasks

    config = yaml.safe_load((pathlib.Path(tasks.__file__).parent / "gsm8k/gsm8k.yaml").read_text())
    filters = {f["name"]: f["filter"][0] for f in config["filter_list"]}
    assert filters["strict-match"]["regex_pattern"] == STRICT_MATCH
    assert filters["flexible-extract"]["regex_pattern"] == FLEXIBLE_EXTRACT
    assert filters["flexible-extract"]["group_select"] == -1


def test_strict_and_flexible_differ_on_an_unformatted_answer():
    reply = "She sold 48 + 24 = 72 clips."
    assert regex_extract(reply, STRICT_MATCH) == "[invalid]"
    assert regex_extract(reply, FLEXIBLE_EXTRACT, group_select=-1) == "72"
    assert regex_extract("x", STRICT_MATCH, fallback="none") == "none"
    assert regex_extract("#### 1 #### 2", STRICT_MATCH, group_select=5) == "[invalid]"  # past the matches


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="group_select must be an int"):
        regex_extract("1", STRICT_MATCH, group_select="0")
    with pytest.raises(TypeError, match="pattern must be a regex"):
        regex_extract("1", 5)
