"""The contamination check on hand-made leaks: whole items, partial items, near-copies and false alarms."""
import pytest

from minitfm.evaluation import ngram_overlap, normalized_words, word_ngrams

CLEAN = ("the small model learned to copy the sequence after a few hundred steps of training "
         "with a warmup that lasted long enough")
LEAKED = ("which continuation is the real next sentence of the story about the fox that crossed "
          "the river at night without a boat")
PARTIAL = ("attention lets every token read every other token through weights that sum to one "
           "and a reader can plot those weights as a map")  # 24 words; its first 15 leak


def training_documents():
    leaked_variant = LEAKED.upper().replace("story", "Story,").replace("night", "night!")  # case and punctuation
    partial_leak = " ".join(PARTIAL.split()[:15])
    return [f"Some unrelated web page. {leaked_variant} More unrelated text follows here.",
            f"A forum post quoting: {partial_leak}; and then something else entirely."]


def test_normalisation_follows_gpt3_grams():
    assert normalized_words("The Cat's  mat — “quoted”, end.") == ["the", "cats", "mat", "quoted", "end"]
    assert word_ngrams(["a", "b", "c"], 2) == {("a", "b"), ("b", "c")} and word_ngrams(["a"], 2) == set()


def test_hand_made_leaks_are_found_with_the_right_fractions():
    result = ngram_overlap(training_documents(), [CLEAN, LEAKED, PARTIAL])
    assert result.n == 13
    assert result.fractions[0] == 0.0
    assert result.fractions[1] == 1.0  # leaked despite the change of case and punctuation
    # PARTIAL has 24 - 13 + 1 = 12 distinct 13-grams; those inside its first 15 words: 15 - 13 + 1 = 3
    assert len(PARTIAL.split()) == 24 and result.fractions[2] == pytest.approx(3 / 12)
    assert result.flagged == [False, True, True] and result.flagged_indices == [1, 2]
    # a threshold flags only items mostly present in the training text
    assert ngram_overlap(training_documents(), [CLEAN, LEAKED, PARTIAL], threshold=0.5).flagged == [False, True, False]


def test_n_changes_what_counts_and_ngrams_never_span_two_documents():
    item = "one two three four five six"
    # split into two documents, the item's 3-grams "two three four" and "three four five" are not in the text
    assert ngram_overlap(["one two three", "four five six"], [item], n=3).fractions == [2 / 4]
    assert ngram_overlap(["one two three four five six"], [item], n=3).fractions == [1.0]
    assert ngram_overlap(["zero one two three four nine"], [item], n=3).fractions == [pytest.approx(2 / 4)]
    assert ngram_overlap("zero one two three four nine", [item], n=5).fractions == [0.0]


def test_items_shorter_than_n_are_matched_whole():
    result = ngram_overlap(["the answer is forty two, said the computer"], ["Forty-two?", "forty two", "fifty"], n=13)
    assert result.fractions == [0.0, 1.0, 0.0]  # "fortytwo" is one word after deleting the hyphen


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="items is empty"):
        ngram_overlap("text", [])
    with pytest.raises(TypeError, match=r"items\[1\] must be a str, got int"):
        ngram_overlap("text", ["a", 3])
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        ngram_overlap("text", ["a"], n=0)
    with pytest.raises(TypeError, match="n must be an int count, got bool"):
        ngram_overlap("text", ["a"], n=True)
    with pytest.raises(ValueError, match=r"threshold must be a probability in \[0, 1\], got 2"):
        ngram_overlap("text", ["a"], threshold=2)
    with pytest.raises(ValueError, match="training_texts is empty"):
        ngram_overlap([], ["a"])
