"""Verifiable rewards: the strict one accepts the answer and nothing else, the format one the shape of an answer,
the sloppy one is hacked by a run of digits; a malformed reply earns 0, a malformed call is refused."""
from __future__ import annotations

import dataclasses

import pytest

from minitfm.finetuning import people, skills, tasks
from minitfm.finetuning.tasks import Example
from minitfm.preferences.rewards import REWARDS, answer_format, contains_answer, exact_answer

SUM = Example("add", 0, "What is 1 + 2?", "3", "train")
MALFORMED = ["", "   ", "\n", "3 3", "33", "The answer is 3 because 1 + 2 = 3 and then", "3?", "three", "<|end|>",
             "\ufffd\ufffd", "-3", "3.0"]


def test_exact_answer_accepts_the_answer_and_nothing_else():
    assert exact_answer("3", SUM) == 1.0 and exact_answer(" 3\n", SUM) == 1.0  # surrounding spaces do not count
    assert all(exact_answer(reply, SUM) == 0.0 for reply in MALFORMED)
    for example in (tasks.examples("sort", "train", 3, seed=1) + skills.examples("reverse", "heldout", 3, seed=1)
                    + people.examples("pet", people.chosen()[:3], seed=1)):
        assert exact_answer(example.answer, example) == 1.0
        assert exact_answer(example.answer + " " + example.answer, example) == 0.0


def test_answer_format_pays_for_the_shape_right_or_wrong():
    assert answer_format("3", SUM) == 1.0 and answer_format("57", SUM) == 1.0  # wrong but answer-shaped
    assert [answer_format(r, SUM) for r in ("", "three", "3 + 4", "The answer is 3", "12 13 14 15")] == [0.0] * 5
    sort = tasks.examples("sort", "train", 1, seed=0)[0]
    assert answer_format("1 2 3", sort) == 1.0 and answer_format("123", sort) == 0.0
    big_sum = skills.examples("add", "train", 1, seed=0)[0]
    assert answer_format("140", big_sum) == 1.0 and answer_format("1 4 0", big_sum) == 0.0
    reverse = skills.examples("reverse", "train", 1, seed=0)[0]
    assert answer_format("epa", reverse) == 1.0 and answer_format("EPA!", reverse) == 0.0
    city = people.examples("city", people.chosen()[:1], seed=0)[0]
    assert answer_format("Isterford", city) == 1.0 and answer_format("in Isterford, I think", city) == 0.0
    chinese = next(e for e in tasks.examples("translate", "train", 20, seed=0) if e.prompt.endswith("Chinese."))
    assert answer_format("注意力", chinese) == 1.0 and answer_format("attention", chinese) == 0.0
    assert all(answer_format(reply, SUM) in (0.0, 1.0) for reply in MALFORMED)


def test_the_sloppy_verifier_is_hacked_by_a_run_of_numbers():
    """Wrong on purpose: "12 13 14 15" contains "3", so it earns the reward that only "3" deserves."""
    assert contains_answer("12 13 14 15", SUM) == 1.0 and exact_answer("12 13 14 15", SUM) == 0.0
    assert contains_answer("0123456789", SUM) == 1.0
    assert contains_answer("3", SUM) == 1.0 and contains_answer("12 14", SUM) == 0.0
    examples = skills.examples("add", "heldout", 50, seed=2)
    every_sum = " ".join(str(n) for n in range(20, 199))  # one reply that contains every possible sum
    assert [contains_answer(every_sum, e) for e in examples] == [1.0] * 50
    assert [exact_answer(every_sum, e) for e in examples] == [0.0] * 50


def test_a_malformed_call_is_refused_with_a_clear_error():
    for reward in REWARDS.values():
        with pytest.raises(TypeError, match="reply must be a str"):
            reward(None, SUM)
        with pytest.raises(TypeError, match="reply must be a str"):
            reward([3], SUM)
        with pytest.raises(TypeError, match="example must be a minitfm.finetuning.tasks.Example"):
            reward("3", {"answer": "3"})
        with pytest.raises(ValueError, match="non-empty str"):
            reward("3", dataclasses.replace(SUM, answer=""))
        with pytest.raises(ValueError, match="example.task must be one of"):
            reward("3", dataclasses.replace(SUM, task="chess"))
