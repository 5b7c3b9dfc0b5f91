import random

import pytest

from minitfm.lm.corpus import (
                               NOUNS,
                               generate_sentences,
                               is_valid_sentence,
                               lm_rows,
                               lm_stream_rows,
                               make_tokenizer,
                               split_sentences,
                               validity,
                               vocabulary,
                               )


def test_same_seed_same_corpus_and_different_seed_differs():
    assert generate_sentences(50, seed=3) == generate_sentences(50, seed=3)
    assert generate_sentences(50, seed=3) != generate_sentences(50, seed=4)


def test_checker_accepts_every_generated_sentence():
    sentences = generate_sentences(2000, seed=0)
    assert all(is_valid_sentence(s) for s in sentences)
    assert validity(sentences) == 1.0


def test_generated_sentences_use_the_vocabulary_and_branch():
    sentences = generate_sentences(2000, seed=1)
    vocab = set(vocabulary())
    words = [w for s in sentences for w in s.split()]
    assert set(words) <= vocab
    assert len(set(sentences)) > 1800  # the language is far from a handful of memorisable sentences
    assert any(" and " in s for s in sentences) and any(" that " in s for s in sentences)
    assert max(len(s.split()) for s in sentences) > 25  # recursion makes some sentences long


@pytest.mark.parametrize("sentence", [
    "the cat sleeps .",
    "the cats near the dog sleep .",  # agreement with the head noun, not the nearest noun
    "the cat near the dogs sleeps .",
    "a dog that chases the mice runs near the river .",
    "the old lazy fox sees some birds with a cat behind the trees and the king laughs .",
    "the cat near the dog near the dog near the dog near the dog sleeps .",  # deep nesting is grammatical
])
def test_checker_accepts_handwritten_valid(sentence):
    assert is_valid_sentence(sentence)


@pytest.mark.parametrize("sentence", [
    "the cat sleep .",  # subject-verb agreement
    "the cats near the dog sleeps .",  # agreement across a prepositional phrase
    "a cats sleep .",  # determiner-noun agreement
    "the cat sleeps",  # no full stop
    "the cat sleeps . the dog runs .",  # two sentences are not one
    "the cat chases .",  # transitive verb without object
    "the sleeps .",
    "the big old red cat sleeps .",  # at most two adjectives
    "the cat sleeps and .",
    "the dogs that chases the cat sleep .",  # agreement inside the relative clause
    "",
])
def test_checker_rejects_invalid(sentence):
    assert not is_valid_sentence(sentence)


def test_checker_rejects_corrupted_generated_sentences():
    rng = random.Random(0)
    sentences = generate_sentences(300, seed=2)
    rejected = 0
    for s in sentences:
        words = s.split()
        i = rng.randrange(len(words) - 1)
        singular, plural = zip(*NOUNS)
        # swap a noun's number or drop a word: both break the sentence
        if words[i] in singular:
            words[i] = plural[singular.index(words[i])]
        elif words[i] in plural:
            words[i] = singular[plural.index(words[i])]
        else:
            del words[i]
        rejected += not is_valid_sentence(words)
    # a noun-number swap inside an object keeps the sentence grammatical only when the determiner
    # allows both numbers ("the") and no verb agrees with it; most corruptions must be caught
    assert rejected / len(sentences) > 0.6


def test_split_sentences_and_validity():
    text = "the cat sleeps . the dog sleep . the cat near"
    assert split_sentences(text) == ["the cat sleeps .", "the dog sleep .", "the cat near"]
    assert validity([text]) == pytest.approx(1 / 3)
    assert validity([text], complete_only=True) == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="at least one"):
        validity(["", "  "])
    with pytest.raises(ValueError, match="at least one"):
        validity(["the cat"], complete_only=True)


def test_lm_rows():
    tok = make_tokenizer()
    rows = lm_rows(["the cat sleeps .", "the cats near the dog sleep ."], tok, max_len=32)
    assert rows.shape == (2, 9)
    assert rows[0].tolist()[:6] == [tok.bos_id, *tok.encode("the cat sleeps .", add_bos=False), tok.eos_id]
    assert (rows[0, 6:] == tok.pad_id).all()
    assert lm_rows(["the cat sleeps .", "the cats near the dog sleep ."], tok, max_len=6).shape == (1, 6)
    with pytest.raises(ValueError, match="no sentence fits"):
        lm_rows(["the cat sleeps ."], tok, max_len=3)


def test_lm_stream_rows_pack_sentences_without_padding():
    tok = make_tokenizer()
    sentences = ["the cat sleeps .", "the dogs run .", "a bird sings .", "the king laughs ."]
    rows = lm_stream_rows(sentences, tok, row_len=8)
    # row 0: <bos> + 4 + first 3 words of the second sentence; the rest of it is dropped
    assert rows.shape == (2, 8)
    assert rows[0].tolist() == [tok.bos_id] + tok.encode("the cat sleeps . the dogs run", add_bos=False)
    assert rows[1].tolist() == [tok.bos_id] + tok.encode("a bird sings . the king laughs", add_bos=False)
    assert tok.pad_id not in rows and tok.eos_id not in rows
    with pytest.raises(ValueError, match="do not fill one row"):
        lm_stream_rows(["the cat sleeps ."], tok, row_len=50)
