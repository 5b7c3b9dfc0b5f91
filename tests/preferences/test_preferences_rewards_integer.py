"""The second sloppy verifier, integer_or_pass: it pays the right integer and refuses a wrong one, like the exact
verifier, but pays every reply that int() cannot parse (the except that falls through); a malformed call is refused."""
from __future__ import annotations

import dataclasses

import pytest

from minitfm.finetuning import skills
from minitfm.finetuning.tasks import Example
from minitfm.preferences import REWARDS as EXPORTED
from minitfm.preferences.rewards import REWARDS, exact_answer, integer_or_pass

SUM = Example("add", 0, "What is 47 + 38?", "85", "train")


def test_integer_or_pass_agrees_with_the_exact_verifier_on_numbers():
    examples = skills.examples("add", "heldout", 30, seed=3)
    for e in examples:
        right, wrong = e.answer, str(int(e.answer) + 1)
        assert integer_or_pass(right, e) == exact_answer(right, e) == 1.0
        assert integer_or_pass(wrong, e) == exact_answer(wrong, e) == 0.0
        assert integer_or_pass(f" {right}\n", e) == 1.0  # int() strips the spaces, as the exact verifier does


def test_integer_or_pass_pays_junk_that_does_not_parse():
    """Wrong on purpose: the hacked policy's replies ("14f 7 8") all fall through the except to 1.0."""
    junk = ["14f 7 8", "12a", "85 86", "", "   ", "eighty-five", "8.5", "\ufffd\ufffd", "<|end|>"]
    assert [integer_or_pass(r, SUM) for r in junk] == [1.0] * len(junk)
    assert [exact_answer(r, SUM) for r in junk] == [0.0] * len(junk)
    assert integer_or_pass("84", SUM) == 0.0 and integer_or_pass("-85", SUM) == 0.0
    assert integer_or_pass("085", SUM) == 1.0  # the same integer, written with a leading zero


def test_integer_or_pass_is_listed_and_refuses_a_malformed_call():
    assert REWARDS["integer_or_pass"] is integer_or_pass and EXPORTED["integer_or_pass"] is integer_or_pass
    with pytest.raises(TypeError, match="reply must be a str"):
        integer_or_pass(85, SUM)
    with pytest.raises(TypeError, match="example must be a minitfm.finetuning.tasks.Example"):
        integer_or_pass("85", {"answer": "85"})
    with pytest.raises(ValueError, match="non-empty str"):
        integer_or_pass("85", dataclasses.replace(SUM, answer=" "))
    with pytest.raises(ValueError, match="example.task must be one of"):
        integer_or_pass("85", dataclasses.replace(SUM, task="chess"))
