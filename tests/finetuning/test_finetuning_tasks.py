"""The instruction-tuning tasks: answers a program checks, fixed splits, a held-out template, and facts that the
pretraining text states."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitfm.finetuning import tasks as T

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("task", T.TASKS)
def test_every_answer_is_what_a_program_computes(task):
    for fact in T.facts(task):
        answer = fact["answer"]
        if task == "add":
            assert answer == str(fact["a"] + fact["b"])
        elif task == "count":
            assert answer == str(fact["word"].count(fact["letter"])) and int(answer) >= 1
        elif task == "sort":
            digits = fact["digits"].split()
            assert answer.split() == sorted(digits) and len(set(digits)) == len(digits)
        elif task == "acronym":
            assert T.ACRONYMS[fact["short"]] == answer
        else:
            pairs = dict(T.glossary_pairs())
            assert (pairs.get(fact["term"]) == answer) or (pairs.get(answer) == fact["term"])


@pytest.mark.parametrize("task", T.TASKS)
def test_the_split_is_fixed_disjoint_and_about_a_fifth(task):
    facts = T.facts(task)
    held = [f for f in facts if T.split_of(task, f) == "heldout"]
    assert 0.08 < len(held) / len(facts) < 0.35, (task, len(held), len(facts))
    train_prompts = {e.prompt for e in T.examples(task, "train", 400, seed=0)}
    held_prompts = {e.prompt for e in T.examples(task, "heldout", 400, seed=0)}
    assert not train_prompts & held_prompts  # a held-out fact is never asked during fine-tuning
    again = T.examples(task, "heldout", 20, seed=3)
    assert again == T.examples(task, "heldout", 20, seed=3) and again != T.examples(task, "heldout", 20, seed=4)


@pytest.mark.parametrize("task", T.TASKS)
def test_the_last_template_never_appears_in_fine_tuning(task):
    last = len(T.TEMPLATES[task]) - 1
    trained = T.examples(task, "train", 300, seed=1)
    assert {e.template for e in trained} == set(range(last))
    held = T.examples(task, "heldout", 30, seed=1, templates="heldout")
    assert {e.template for e in held} == {last}
    assert all(e.prompt == T.TEMPLATES[task][last].format(**_fact_of(task, e)) for e in held)


def _fact_of(task, example):
    for fact in T.facts(task):
        if fact["answer"] == example.answer and T.TEMPLATES[task][example.template].format(**fact) == example.prompt:
            return fact
    raise AssertionError(f"no fact asks {example.prompt!r}")


@pytest.mark.parametrize("task", T.TASKS)
def test_statements_state_every_fact_and_the_prefix_stops_before_the_answer(task):
    facts = T.facts(task)
    statements = T.statements(task)
    assert len(statements) == len(facts)
    for fact, statement in zip(facts, statements):
        prefix, rest = T.statement_prefix(task, fact)
        assert prefix + rest == statement and rest.startswith(fact["answer"])


def test_the_check_is_exact_after_stripping_spaces():
    example = T.examples("add", "heldout", 1, seed=0)[0]
    assert T.is_correct(example, f" {example.answer} ") and not T.is_correct(example, example.answer + "0")
    assert example.chat()[-1] == {"role": "assistant", "content": example.answer}
    assert example.chat(with_answer=False) == [{"role": "user", "content": example.prompt}]
    with pytest.raises(TypeError, match="reply must be a str"):
        T.is_correct(example, 42)
    with pytest.raises(ValueError, match="task must be one of"):
        T.examples("divide", "train", 3, seed=0)
    with pytest.raises(ValueError, match="split must be one of"):
        T.examples("add", "test", 3, seed=0)


def test_every_glossary_pair_of_the_tasks_is_still_in_the_book():
    """``assets/glossary_pairs.json`` was written from ``book/glossary.md`` by ``glossary_pairs_from`` when the base
    model was pretrained (its facts are part of the model's training text), so it is frozen: the glossary may gain
    entries, but every pair the tasks ask about must still be a term and its Chinese name in the book."""
    markdown = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    shipped = json.loads(T.GLOSSARY_PAIRS.read_text(encoding="utf-8"))
    in_book = T.glossary_pairs_from(markdown)
    missing = [pair for pair in shipped if pair not in in_book]
    assert not missing, f"glossary pairs the tasks ask about are gone from book/glossary.md: {missing[:5]}"
    assert len(shipped) >= 60 and ["attention", "注意力"] in shipped
    with pytest.raises(ValueError, match="glossary"):
        T.glossary_pairs_from("# not the glossary")


@pytest.mark.parametrize("task", T.TASKS)
def test_every_right_answer_looks_like_an_answer_and_a_sentence_does_not(task):
    for example in T.examples(task, "train", 60, seed=2) + T.examples(task, "heldout", 30, seed=2):
        assert T.looks_like_answer(example, example.answer), example
        assert not T.looks_like_answer(example, f"The answer is {example.answer}. {example.prompt}")
        assert not T.looks_like_answer(example, "")


def test_the_shape_of_a_translation_follows_the_language_asked():
    to_chinese = next(e for e in T.examples("translate", "train", 50, seed=0) if e.prompt.endswith(("Chinese?",
                                                                                                    "Chinese.")))
    assert T.looks_like_answer(to_chinese, "注意力") and not T.looks_like_answer(to_chinese, "attention")
