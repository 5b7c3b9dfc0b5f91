"""The invented people: matched groups, one phrasing against many, questions about the right person."""
import collections
import random

import pytest

from minitfm.finetuning import people as P


def test_groups_and_splits_are_matched():
    counts = collections.Counter((p["group"], p["split"]) for p in P.people())
    assert counts[("one", "tune")] == counts[("many", "tune")] == 144
    assert counts[("one", "heldout")] == counts[("many", "heldout")] == 96
    assert len({p["name"] for p in P.people()}) == P.N_PEOPLE
    for one, many in zip(P.chosen("one"), P.chosen("many")):  # twins: the same facts under another name
        assert one["name"] != many["name"] and one["split"] == many["split"]
        assert all(one[a] == many[a] for a in P.ATTRIBUTES)
    for attribute in P.ATTRIBUTES:  # and each attribute spread over its values (no value above a sixth)
        top = collections.Counter(p[attribute] for p in P.people()).most_common(1)[0][1]
        assert top < P.N_PEOPLE / 6


def test_group_one_reads_one_biography_and_group_many_reads_varied_ones():
    one, many = P.chosen("one")[0], P.chosen("many")[0]
    rng = random.Random(0)
    assert len({P.biography(one, rng) for _ in range(20)}) == 1
    texts = {P.biography(many, rng) for _ in range(20)}
    assert len(texts) > 10
    for text in texts:  # every phrasing states the same three facts
        assert all(many[a] in text for a in P.ATTRIBUTES) and text.count(many["name"]) == 3
    assert len(P.biographies(5, seed=0)) == 5 * P.N_PEOPLE


def test_statement_prefixes_cover_the_phrasings_read():
    one, many = P.chosen("one")[0], P.chosen("many")[0]
    assert len(P.statement_prefixes(one, "city")) == 1 and len(P.statement_prefixes(many, "city")) == 4
    for prefix, rest in P.statement_prefixes(many, "job"):
        assert rest.startswith(many["job"]) and many["name"] in prefix


def test_questions_name_the_person_and_answer_their_fact():
    persons = P.chosen("many", "heldout")[:5]
    for example, person in zip(P.examples("pet", persons, seed=0), persons):
        assert person["name"] in example.prompt and example.answer == person["pet"]
        assert example.split == "heldout" and example.task == "people/pet"
    held = P.examples("pet", persons, seed=0, templates="heldout")
    assert {e.template for e in held} == {len(P.QUESTIONS["pet"]) - 1}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="group"):
        P.chosen("some")
    with pytest.raises(ValueError, match="attribute"):
        P.examples("age", P.chosen("one")[:2], seed=0)
    with pytest.raises(TypeError, match="person"):
        P.biography({"name": "x"}, random.Random(0))
