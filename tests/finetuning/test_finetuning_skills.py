"""The four skills: instances are right, balanced where a constant reply must stay weak, split by a fixed hash."""
import collections
import random

import pytest

from minitfm.finetuning import skills as S


@pytest.mark.parametrize("task", S.SKILLS)
def test_every_instance_states_the_right_answer(task):
    rng = random.Random(0)
    for _ in range(300):
        fact = S.draw(task, rng)
        if task == "sort":
            assert fact["answer"].split() == sorted(fact["q"].split())
        elif task == "reverse":
            assert fact["answer"] == fact["q"][::-1]
        elif task == "count":
            assert fact["answer"] == str(fact["word"].count(fact["letter"]))
        else:
            assert int(fact["answer"]) == fact["a"] + fact["b"]
        prefix, rest = S.statement_prefix(task, fact)
        assert prefix + rest == S.statement(task, fact) and rest.startswith(fact["answer"])


@pytest.mark.parametrize("task", S.SKILLS)
def test_no_constant_reply_is_right_more_than_thirty_percent(task):
    answers = collections.Counter(e.answer for e in S.examples(task, "heldout", 2000, seed=1))
    assert answers.most_common(1)[0][1] / 2000 < 0.3


def test_splits_are_disjoint_and_about_a_fifth_is_held_out():
    for task in S.SKILLS:
        train = {repr(sorted(f.items())) for f in S.instances(task, "train", 500, seed=0)}
        held = {repr(sorted(f.items())) for f in S.instances(task, "heldout", 500, seed=0)}
        assert not train & held
    rng = random.Random(3)
    share = sum(S.split_of("add", S.draw("add", rng)) == "heldout" for _ in range(4000)) / 4000
    assert 0.17 < share < 0.23


def test_examples_are_seeded_and_the_last_template_is_kept_out_of_training():
    a = S.examples("sort", "train", 50, seed=4)
    assert a == S.examples("sort", "train", 50, seed=4) and a != S.examples("sort", "train", 50, seed=5)
    assert {e.template for e in a} <= set(range(len(S.TEMPLATES["sort"]) - 1))
    held = S.examples("sort", "heldout", 10, seed=4, templates="heldout")
    assert {e.template for e in held} == {len(S.TEMPLATES["sort"]) - 1}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="task"):
        S.draw("multiply", random.Random(0))
    with pytest.raises(ValueError, match="split"):
        S.instances("add", "test", 3, seed=0)
    with pytest.raises(ValueError, match="templates"):
        S.examples("add", "train", 3, seed=0, templates="new")


def test_the_rule_computes_every_drawn_answer_from_the_question_alone():
    rng = random.Random(0)
    for task in S.SKILLS:
        for _ in range(200):
            fact = S.draw(task, rng)
            assert S.answer_of(task, fact) == fact["answer"], (task, fact)
    asked = S.ask("add", a=25, b=17)
    assert (asked.prompt, asked.answer, asked.value, asked.template) == ("What is 25 + 17?", "42", "", 0)
    counted = S.ask("count", letter="a", word="cabab")
    assert counted.answer == "The letter a appears in cabab 2 times." and counted.fact_answer == "2"
    assert S.ask("sort", q="4 1 3").answer == "1 3 4" and S.ask("reverse", q="cbdaf").answer == "fadbc"
    with pytest.raises(ValueError, match="task"):
        S.answer_of("multiply", {"a": 1, "b": 2})
