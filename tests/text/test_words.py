import pytest
import torch

from minitfm.lm.corpus import generate_sentences, make_tokenizer
from minitfm.text.words import WordTokenizer


def test_special_ids_and_round_trip():
    tok = WordTokenizer(["cat", "sleeps", "."])
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.vocab_size == len(tok) == 7
    ids = tok.encode("cat sleeps .", add_bos=True, add_eos=True)
    assert ids == [1, 4, 5, 6, 2]
    assert tok.decode(ids) == "cat sleeps ."
    assert tok.encode("dog sleeps", add_bos=False) == [3, 5]  # unknown word -> <unk>
    assert tok.decode([3, 5]) == "<unk> sleeps"


def test_decode_stops_at_eos_and_drops_padding():
    tok = WordTokenizer(["a", "b"])
    assert tok.decode([0, 0, 1, 4, 2, 5]) == "a"
    assert tok.decode([1, 4, 2, 5], stop_at_eos=False) == "a b"
    assert tok.decode_batch(torch.tensor([[1, 4, 5], [0, 1, 5]])) == ["a b", "b"]


def test_corpus_round_trip():
    tok = make_tokenizer()
    for s in generate_sentences(200, seed=0):
        assert tok.decode(tok.encode(s, add_eos=True)) == s
        assert tok.unk_id not in tok.encode(s)


def test_encode_batch_pads_left_and_right():
    tok = WordTokenizer(["x", "y"])
    right = tok.encode_batch(["x y", "y"], add_eos=True)
    assert right.tolist() == [[1, 4, 5, 2], [1, 5, 2, 0]] and right.dtype == torch.long
    assert tok.encode_batch(["x y", "y"], side="left").tolist() == [[1, 4, 5], [0, 1, 5]]


def test_errors():
    with pytest.raises(ValueError, match="unique"):
        WordTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="special tokens"):
        WordTokenizer(["<pad>"])
    with pytest.raises(ValueError, match="side must be"):
        WordTokenizer(["a"]).encode_batch(["a"], side="middle")
    tok = WordTokenizer(["a"])
    with pytest.raises(ValueError, match=r"token id must be in \[0, 5\)"):
        tok.decode([9])
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(["a"])
    with pytest.raises(ValueError, match="use decode_batch"):
        tok.decode(torch.zeros(2, 2, dtype=torch.long))
