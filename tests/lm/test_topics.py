"""Chapter 15b's classification task: topics of the book's prose, balanced, with a held-out set fixed by a hash."""
from __future__ import annotations

import pytest

from minitfm.lm import topics as P
from minitfm.lm.prose import prose_paragraphs


def test_a_source_belongs_to_the_topic_of_its_chapter_or_to_none():
    assert P.topic_of("notebooks/02_masks.ipynb") == "attention"
    assert P.topic_of("notebooks/07b_training_recipes.ipynb") == "training"
    assert P.topic_of("notebooks/09_sampling.ipynb") == "generation"
    assert P.topic_of("book/glossary.md") is None and P.topic_of("notebooks/11_beyond.ipynb") is None
    stems = [s for stems in P.TOPICS.values() for s in stems]
    assert len(stems) == len(set(stems))  # no chapter in two topics
    with pytest.raises(TypeError, match="source must be a path"):
        P.topic_of(3)


def test_the_split_is_a_fixed_hash_with_about_one_paragraph_in_three_held_out():
    paragraphs = [p for _, p in prose_paragraphs()]
    test = [p for p in paragraphs if P.split_of(p) == "test"]
    assert 0.42 < len(test) / len(paragraphs) < 0.58
    assert P.split_of("The attention weights sum to one.") == P.split_of("The attention weights sum to one.")
    train = {t for t in P.topic_paragraphs("train").values() for t in t}
    held = {t for t in P.topic_paragraphs("test").values() for t in t}
    assert train and held and not train & held


def test_examples_are_balanced_cut_to_bytes_labelled_by_their_chapter_and_repeatable():
    examples = P.topic_examples("test", 30, n_bytes=64)
    assert [e.label for e in examples] == [c for c in range(len(P.TOPICS)) for _ in range(30)]
    paragraphs = dict((p, s) for s, p in prose_paragraphs())
    for e in examples:
        assert len(e.text.encode("utf-8")) <= 64 and P.topic_of(e.source) == e.topic == list(P.TOPICS)[e.label]
        assert any(p.startswith(e.text) and paragraphs[p] == e.source for p in paragraphs)
        assert P.split_of(next(p for p in paragraphs if p.startswith(e.text))) == "test"
    assert examples == P.topic_examples("test", 30, n_bytes=64)
    assert len({e.text for e in examples}) == len(examples)
    assert P.best_constant_accuracy([e.label for e in examples]) == pytest.approx(1 / len(P.TOPICS))


def test_examples_are_taken_from_the_given_paragraphs():
    pairs = [("notebooks/01_attention.ipynb", f"attention paragraph number {i}, long enough to be kept in the task here.")
             for i in range(40)] + [("notebooks/08_kv_cache.ipynb", "x" * 70), ("book/intro.md", "y" * 90)]
    train, test = P.topic_paragraphs("train", pairs), P.topic_paragraphs("test", pairs)
    assert len(train["attention"]) + len(test["attention"]) == 40 and 0 < len(test["attention"]) < 40
    assert len(train["generation"]) + len(test["generation"]) == 1  # the page's paragraph is in no topic
    with pytest.raises(ValueError, match="topic 'the model' has 0 train paragraphs of at least 64 bytes, fewer than "
                                         "per_class=1"):
        P.topic_examples("train", 1, paragraphs=pairs)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="split must be one of 'train', 'test'; got 'heldout'"):
        P.topic_examples("heldout", 3)
    with pytest.raises(ValueError, match="per_class"):
        P.topic_examples("train", 0)
    with pytest.raises(ValueError, match="labels must not be empty"):
        P.best_constant_accuracy([])
    assert P.best_constant_accuracy([0, 1, 1, 2]) == 0.5
