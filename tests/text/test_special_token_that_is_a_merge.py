"""A special token whose bytes are also a merge's result survives save and load (issue 45, item 9): vocab.json alone
cannot tell it from the regular token that shares its id, so ``added_tokens.json`` names it."""
import json

import pytest

from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.bpe_trainer import train_bpe


def _tokenizer(extra=()):
    vocab, merges = train_bpe("the cat the hat the bat " * 20, 270, special_tokens=["<|endoftext|>"])
    merged = (merges[0][0] + merges[0][1]).decode()  # "th": a merge's result
    return Tokenizer(vocab, merges, [merged, "<|endoftext|>", *extra]), merged


def test_a_special_token_that_is_a_merge_result_survives_save_and_load(tmp_path):
    tok, merged = _tokenizer()
    tok.save(tmp_path)
    back = Tokenizer.load(tmp_path)
    assert back.special_tokens == tok.special_tokens  # before: ('<|endoftext|>',), the merge's special was lost
    text = "x" + merged + "at<|endoftext|>"
    assert back.encode(text) == tok.encode(text)
    assert back.encode(text, allowed_special=set()) == tok.encode(text, allowed_special=set())
    assert json.loads((tmp_path / "added_tokens.json").read_text()) == {merged: tok.special_ids[merged]}


def test_a_save_without_such_a_token_writes_no_added_tokens_file_and_clears_an_old_one(tmp_path):
    tok, _ = _tokenizer()
    tok.save(tmp_path)
    vocab, merges = train_bpe("the cat the hat the bat " * 20, 270, special_tokens=["<|endoftext|>"])
    Tokenizer(vocab, merges, ["<|endoftext|>"]).save(tmp_path)  # into the same folder
    assert not (tmp_path / "added_tokens.json").exists()
    assert Tokenizer.load(tmp_path).special_tokens == ("<|endoftext|>",)


def test_an_added_tokens_file_that_does_not_match_vocab_json_is_refused(tmp_path):
    tok, merged = _tokenizer()
    tok.save(tmp_path)
    (tmp_path / "added_tokens.json").write_text(json.dumps({merged: 3}))
    with pytest.raises(ValueError, match="must map special tokens to their ids in vocab.json"):
        Tokenizer.load(tmp_path)
