"""minitfm.text.gpt2_files: GPT-2's vocab.json and merges.txt, written and read; every damaged file gets an error that
names it and says what is wrong (issue 34), never a tokenizer built from part of it."""
from __future__ import annotations

import json
import re

import pytest

from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.bpe_trainer import train_bpe
from minitfm.text.gpt2_files import read_gpt2_files, token_text, write_gpt2_files

TEXT = ("the theory of the thing: they then thought that these three were there. " * 20
        + "Tokenizers merge the most frequent pair, then the next. 注意力 12345 " * 10)
SPECIALS = ["<|endoftext|>"]
LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1234\n"
E = re.escape


@pytest.fixture(scope="module")
def trained():
    return train_bpe(TEXT, 330, SPECIALS)


@pytest.fixture
def folder(trained, tmp_path):
    """A folder with a good vocab.json and merges.txt, and their contents (the dict and the lines)."""
    write_gpt2_files(tmp_path, *trained, SPECIALS)
    vocab = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    lines = (tmp_path / "merges.txt").read_text(encoding="utf-8").splitlines()
    return tmp_path, vocab, lines


def test_the_files_round_trip(trained, folder):
    path, _, _ = folder
    vocab, merges, specials = read_gpt2_files(path)
    assert (vocab, merges, specials) == (trained[0], trained[1], SPECIALS)


def _vocab_text(vocab: dict) -> str:
    return json.dumps(vocab, ensure_ascii=False)


def _with_entry(vocab, text):
    """vocab.json's text with one more raw entry spliced in before the closing brace."""
    return _vocab_text(vocab)[:-1] + ", " + text + "}"


# (what, which file, its new content: bytes, str, None for a folder, "missing", or a function of (vocab, lines)),
# exception, pattern
BAD_FILES = [
    ("vocab.json missing", "vocab.json", "missing", FileNotFoundError,
     E("vocab.json does not exist: expected a vocab.json")),
    ("merges.txt missing", "merges.txt", "missing", FileNotFoundError,
     E("merges.txt does not exist: expected a merges.txt")),
    ("vocab.json a folder", "vocab.json", None, ValueError, E("vocab.json is a folder, expected a vocab.json")),
    ("merges.txt a folder", "merges.txt", None, ValueError, E("merges.txt is a folder, expected a merges.txt")),
    ("vocab.json empty", "vocab.json", b"", ValueError, E("vocab.json is empty (0 bytes), expected a vocab.json")),
    ("merges.txt empty", "merges.txt", b"", ValueError, E("merges.txt is empty (0 bytes), expected a merges.txt")),
    ("vocab.json blank", "vocab.json", b"  \n", ValueError, E("vocab.json is empty (3 bytes)")),
    ("vocab.json in Latin-1", "vocab.json", '{"caf\xe9": 0}'.encode("latin-1"), ValueError,
     E("vocab.json is not UTF-8 text (byte 0xe9 at offset 5)")),
    ("merges.txt in UTF-16", "merges.txt", "#version: 0.2\nt h\n".encode("utf-16"), ValueError,
     E("merges.txt is not UTF-8 text (byte 0xff at offset 0)")),
    ("vocab.json cut short", "vocab.json", lambda v, m: _vocab_text(v)[:len(_vocab_text(v)) // 2], ValueError,
     E("vocab.json is not valid JSON (") + ".*" + E("), expected a vocab.json")),
    ("vocab.json an LFS pointer", "vocab.json", LFS, ValueError,
     E("vocab.json is a Git LFS pointer ('version https://git-lfs.github.com/spec/v1 ...'), not a vocab.json")),
    ("merges.txt an LFS pointer", "merges.txt", LFS, ValueError, E("merges.txt is a Git LFS pointer")),
    ("vocab.json a list", "vocab.json", '["a", "b"]', ValueError,
     E("must hold one JSON object (token -> id), got a list")),
    ("vocab.json a string", "vocab.json", '"a"', ValueError, E("must hold one JSON object (token -> id), got a str")),
    ("a repeated token", "vocab.json", lambda v, m: _with_entry(v, '"t": 7'), ValueError,
     E("vocab.json repeats the key 't' (values 116 and 7): JSON would keep the last one silently")),
    ("a repeated id", "vocab.json", lambda v, m: _with_entry(v, '"<|pad|>": 65'), ValueError,
     E("vocab.json gives the id 65 to two tokens, 'A' and '<|pad|>'")),
    ("a float id", "vocab.json", lambda v, m: _with_entry(v, '"<|pad|>": 400.0'), ValueError,
     E("must map each token to an integer id >= 0, got '<|pad|>': 400.0")),
    ("a str id", "vocab.json", lambda v, m: _with_entry(v, '"<|pad|>": "400"'), ValueError, E("got '<|pad|>': '400'")),
    ("a bool id", "vocab.json", lambda v, m: _with_entry(v, '"<|pad|>": true'), ValueError, E("got '<|pad|>': True")),
    ("a negative id", "vocab.json", lambda v, m: _with_entry(v, '"<|pad|>": -1'), ValueError, E("got '<|pad|>': -1")),
    ("a null id", "vocab.json", lambda v, m: _with_entry(v, '"<|pad|>": null'), ValueError, E("got '<|pad|>': None")),
    ("an empty token", "vocab.json", lambda v, m: _with_entry(v, '"": 400'), ValueError,
     E("holds the empty token '' (id 400)")),
    ("a lone surrogate", "vocab.json", lambda v, m: _with_entry(v, '"<|\\ud83d|>": 400'), ValueError,
     E("the token '<|\\ud83d|>' holds a lone surrogate U+D83D")),
    ("merges.txt cut short", "merges.txt", lambda v, m: "\n".join(m[:20]) + "\n", ValueError,
     E("does not match") + ".*" + E("(19 merges): ") + r"\d+" + E(" entries such as ") + ".*"
     + E("merges.txt is truncated or belongs to another vocabulary")),
    ("merges.txt only its version line", "merges.txt", "#version: 0.2\n", ValueError,
     E("(0 merges): ") + r"\d+" + E(" entries such as")),
    ("one token on a line", "merges.txt", lambda v, m: "\n".join(m[:3] + ["Ġthe"] + m[3:]), ValueError,
     E("merges.txt line 4: expected two tokens separated by one space, got 'Ġthe'")),
    ("three tokens on a line", "merges.txt", lambda v, m: "\n".join(m[:3] + ["t h e"] + m[3:]), ValueError,
     E("line 4: expected two tokens separated by one space, got 't h e'")),
    ("two spaces", "merges.txt", lambda v, m: "\n".join(m[:3] + ["t  h"] + m[3:]), ValueError,
     E("line 4: expected two tokens separated by one space, got 't  h'")),
    ("a tab", "merges.txt", lambda v, m: "\n".join(m[:3] + ["t\th x"] + m[3:]), ValueError,
     E("line 4: 't\\th x' holds '\\t', which is not one of GPT-2's 256 byte characters")),
    ("a character that is no byte", "merges.txt", lambda v, m: "\n".join(m[:3] + ["a 中"] + m[3:]), ValueError,
     E("line 4: 'a 中' holds '中', which is not one of GPT-2's 256 byte characters")),
    ("a merge whose result is not in vocab.json", "merges.txt", lambda v, m: "\n".join(m[:3] + ["q z"] + m[3:]),
     ValueError, E("line 4: 'q z' needs 'qz', which is not in vocab.json")),
    ("a blank line", "merges.txt", lambda v, m: "\n".join(m[:3] + [""] + m[3:]), ValueError,
     E("merges.txt line 4 is blank: expected two tokens separated by one space")),
    ("a repeated merge", "merges.txt", lambda v, m: "\n".join(m + [m[1]]), ValueError,
     E(" repeats line 2")),
    ("a byte missing from vocab.json", "vocab.json", lambda v, m: _vocab_text({k: i for k, i in v.items() if k != "~"}),
     ValueError, E("the vocabulary must contain the single byte b'~', it does not")),
]


@pytest.mark.parametrize("name, content, exception, pattern", [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_damaged_files_get_clear_errors(folder, name, content, exception, pattern):
    path, vocab, lines = folder
    target = path / name
    if callable(content):
        content = content(vocab, lines)
    target.unlink()
    if content is None:
        target.mkdir()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    elif content != "missing":
        target.write_text(content, encoding="utf-8")
    with pytest.raises(exception, match=pattern):
        Tokenizer.load(path)


def test_windows_newlines_and_blank_lines_at_the_end_read_as_the_file(trained, folder):
    path, _, lines = folder
    (path / "merges.txt").write_bytes(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
    assert read_gpt2_files(path)[1] == trained[1]


BAD_CALLS = [
    ("write into a file", lambda tr, t: write_gpt2_files(_a_file(t), *tr, SPECIALS), ValueError,
     E("f.txt is a file, expected a folder")),
    ("write to None", lambda tr, t: write_gpt2_files(None, *tr, SPECIALS), TypeError,
     E("directory must be a folder's path (str or pathlib.Path), got NoneType")),
    ("vocab a list", lambda tr, t: write_gpt2_files(t, list(tr[0].values()), tr[1]), TypeError,
     E("vocab must be a dict of id -> bytes, got list")),
    ("merges a str", lambda tr, t: write_gpt2_files(t, tr[0], "t h", SPECIALS), TypeError,
     E("merges must be a list of (bytes, bytes) pairs, got str")),
    ("a special token not in the vocabulary", lambda tr, t: write_gpt2_files(t, *tr, ["<|pad|>"]), ValueError,
     E("must contain special token b'<|pad|>'")),
    ("a special token left out", lambda tr, t: write_gpt2_files(t, *tr), ValueError,
     E("are none of these (missing merges, or a special token not listed in special_tokens)")),
    ("read a missing folder", lambda tr, t: read_gpt2_files(t / "nowhere"), FileNotFoundError, E("no folder")),
    ("read a file", lambda tr, t: read_gpt2_files(_a_file(t)), ValueError, E("f.txt is a file, expected a folder")),
    ("read an int", lambda tr, t: read_gpt2_files(5), TypeError, E("got int")),
    ("token_text of a str", lambda tr, t: token_text("the"), TypeError,
     E("token must be bytes, got str 'the'; encode it first")),
    ("token_text of a list", lambda tr, t: token_text([116, 104]), TypeError, E("token must be bytes, got list")),
]


def _a_file(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("x", encoding="utf-8")
    return path


@pytest.mark.parametrize("call, exception, pattern", [case[1:] for case in BAD_CALLS],
                         ids=[case[0] for case in BAD_CALLS])
def test_bad_arguments_get_clear_errors(trained, tmp_path, call, exception, pattern):
    with pytest.raises(exception, match=pattern):
        call(trained, tmp_path)
    assert not (tmp_path / "vocab.json").exists()  # nothing is written when an argument is wrong
