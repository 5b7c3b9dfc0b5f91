import json
import pathlib
import random
import re

import numpy as np
import pytest
import torch

from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.bpe_trainer import train_bpe, train_bpe_naive
from minitfm.text.gpt2_files import bytes_to_unicode, read_gpt2_files, token_text
from minitfm.text.pretokenize import merge_pair, pretokenize

SPECIALS = ["<|endoftext|>", "<|a|>", "<|a|><|b|>"]

# A few KB of varied text to train on: prose with contractions, digits, punctuation, code, Chinese, emoji,
# runs of spaces, tabs and newlines, and special tokens between documents.
CORPUS = """The quick brown fox jumps over the lazy dog. It's 5 o'clock, and they're late; we've waited
since 1987 -- or was it 1989? Nobody remembers. "Don't worry," she said, "we'll be there by 10:30."
Prices rose 3.5% in March: $12.99 became $13.45, and 1,000,000 people noticed.<|endoftext|>
def tokenize(text):
    for word in text.split():
        yield word.lower()    # four spaces, then a comment


Two blank lines above; a tab\there, two tabs\t\there, and trailing spaces here   
机器学习是人工智能的一个分支。我们今天学习分词器，明天训练模型。
東京は日本の首都です。카피 바라는 귀엽다. Привет, мир! Ελληνικά γράμματα.
Emoji: 😀😀 🚀 👩‍💻 ❤️ and symbols ©®™ ± × ÷ → ∞ ≠ ≤.<|endoftext|>
""" * 3 + "".join(f"Line {i}: the {w} of {i * 37 % 101} items, {w}s and {w}'s.\n"
                  for i, w in enumerate(["cat", "token", "merge", "byte", "pair", "vocabulary"] * 8))

# What the comparisons encode: every kind of text the corpus has, and some it does not.
SAMPLES = [
    "Hello, world! It's a test.",
    "don't   stop\n\n\n  believing\t\tnow\r\n",
    "   leading and trailing   ",
    "机器学习和分词器 😀🚀👩‍💻 emoji",
    "<|a|><|b|> x <|a|>y<|endoftext|><|endoftext|>",
    "3.14159 $12,000 1987-2024 ٣٤٥",
    "\n\n\n\t \t\n",
    "x" * 50 + " supercalifragilisticexpialidocious",
    "",
]


@pytest.fixture(scope="module")
def trained():
    return train_bpe(CORPUS, 600, SPECIALS)


@pytest.fixture(scope="module")
def tok(trained):
    return Tokenizer(*trained, SPECIALS)


def random_text(rng, n_chars):
    """Characters from several Unicode blocks, spaces and controls included (no surrogates)."""
    blocks = [(0x00, 0x7F), (0x80, 0xFF), (0x370, 0x3FF), (0x400, 0x4FF), (0x600, 0x6FF), (0x3040, 0x30FF),
              (0x4E00, 0x4F00), (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0x2000, 0x206F), (0x300, 0x36F)]
    chars = [chr(rng.randint(*rng.choice(blocks))) for _ in range(n_chars)]
    return "".join(rng.choice([c, c, c, " ", "\n", "  ", "\t"]) for c in chars)


def test_pretokenize_splits_as_gpt2():
    text = "Hello, world! It's 2024.\n\n  ok"
    assert pretokenize(text) == ["Hello", ",", " world", "!", " It", "'s", " 2024", ".", "\n\n ", " ok"]
    assert "".join(pretokenize(CORPUS)) == CORPUS


def test_merge_pair_scans_left_to_right():
    assert merge_pair([5, 5, 5], (5, 5), 9) == [9, 5]
    assert merge_pair([1, 2, 1, 2, 3], (1, 2), 9) == [9, 9, 3]
    assert merge_pair([1, 3], (1, 2), 9) == [1, 3]


def test_train_merges_most_frequent_pair_and_breaks_ties_by_greater_bytes():
    vocab, merges = train_bpe("ab cd", 259)
    # every pair occurs once: (c, d) > (a, b) > (space, c) as byte strings, then " " + "cd" is the only pair
    assert merges == [(b"c", b"d"), (b"a", b"b"), (b" ", b"cd")]
    assert vocab[256] == b"cd" and vocab[258] == b" cd" and len(vocab) == 259
    _, merges = train_bpe("aaab aaab aab", 257)
    assert merges == [(b"a", b"a")]  # 5 of (a, a) beat 3 of (a, b)


def test_train_stops_when_nothing_is_left_to_merge():
    vocab, merges = train_bpe("ab ab", 1000, ["<|endoftext|>"])
    assert merges == [(b"a", b"b"), (b" ", b"ab")]
    assert len(vocab) == 256 + 2 + 1 and vocab[258] == b"<|endoftext|>"


def test_special_tokens_are_kept_whole_never_counted_and_come_last(trained):
    vocab, merges = train_bpe("xy<|endoftext|>xy<|endoftext|>", 300, ["<|endoftext|>"])
    assert merges == [(b"x", b"y")]  # neither (y, <) nor anything inside the special token is counted
    vocab, merges = trained
    assert [vocab[i] for i in range(len(vocab) - 3, len(vocab))] == [s.encode() for s in SPECIALS]
    assert all(b"<|" not in a + b for a, b in merges)
    assert sorted(vocab) == list(range(600)) and all(vocab[i] == bytes([i]) for i in range(256))


def test_incremental_training_equals_naive_recount(trained):
    assert train_bpe_naive(CORPUS, 600, SPECIALS) == trained
    text = random_text(random.Random(1), 3000)
    assert train_bpe(text, 400) == train_bpe_naive(text, 400)


def test_train_reads_a_path_and_treats_a_str_as_text(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(CORPUS, encoding="utf-8")
    assert train_bpe(path, 300) == train_bpe(CORPUS, 300)
    with pytest.warns(UserWarning, match="pass pathlib.Path"):
        vocab, merges = train_bpe(str(path), 300)
    assert len(vocab) < 300 and merges != train_bpe(CORPUS, 300)[1]  # learned from the short file name


def test_encode_decode_round_trip(tok):
    for text in SAMPLES + [CORPUS]:
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("The quick brown fox")) < len("The quick brown fox".encode()) // 2  # merges apply


def test_round_trip_random_unicode_and_bytes(tok):
    rng = random.Random(0)
    for _ in range(200):
        text = random_text(rng, rng.randint(0, 60))
        assert tok.decode(tok.encode(text)) == text
        latin1 = bytes(rng.randrange(256) for _ in range(rng.randint(0, 60))).decode("latin-1")
        assert tok.decode(tok.encode(latin1)) == latin1


def test_special_tokens_take_the_longest_match(tok):
    ids = tok.special_ids
    assert tok.encode("<|a|><|b|>") == [ids["<|a|><|b|>"]]
    assert tok.encode("<|a|><|a|>") == [ids["<|a|>"], ids["<|a|>"]]
    assert tok.encode("<|a|><|b|") == [ids["<|a|>"]] + tok.encode("<|b|")
    assert tok.decode(tok.encode("x<|endoftext|>y")) == "x<|endoftext|>y"


def test_decode_replaces_a_cut_character(tok):
    ids = tok.encode("é")
    assert tok.decode([tok.token_to_id[b"\xc3"]]) == "\ufffd"
    assert tok.decode(ids) == "é"


def test_ids_may_be_laid_out_in_any_order(trained, tok):
    # GPT-2's own vocabulary does not give the bytes ids 0..255: only the id -> bytes table matters
    vocab, merges = trained
    shuffled = list(vocab)
    random.Random(0).shuffle(shuffled)
    new_id = dict(zip(vocab, shuffled))
    moved = Tokenizer({new_id[i]: token for i, token in vocab.items()}, merges, SPECIALS)
    assert moved.encode(CORPUS) == [new_id[i] for i in tok.encode(CORPUS)]
    assert moved.decode(moved.encode(CORPUS)) == CORPUS


def test_cache_does_not_change_ids(trained):
    small = Tokenizer(*trained, SPECIALS, cache_size=1)
    big = Tokenizer(*trained, SPECIALS)
    for text in SAMPLES + [CORPUS, CORPUS]:
        assert small.encode(text) == big.encode(text)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, None])  # None: the text's own lines
def test_encode_iterable_equals_encode(tok, chunk_size):
    text = (CORPUS + "\n".join(SAMPLES) + "end  \n\n   \n\t\nit'\ns<|a|>\n<|b|><|a|><|b|> tail  ")
    chunks = (text.splitlines(keepends=True) if chunk_size is None
              else [text[i:i + chunk_size] for i in range(0, len(text), chunk_size)])
    assert list(tok.encode_iterable(iter(chunks))) == tok.encode(text)


def test_encode_iterable_never_cuts_a_special_token_with_spaces():
    specials = ["<|end of text|>", "<| |>", "x  y"]
    tok = Tokenizer(*train_bpe(CORPUS, 300, specials), specials)
    text = "a <|end of text|> b<| |>  x  y <|end of <| |>x  yy  x y" * 3
    for size in (1, 2, 5):
        chunks = [text[i:i + size] for i in range(0, len(text), size)]
        assert list(tok.encode_iterable(chunks)) == tok.encode(text)
    assert tok.encode(text).count(tok.special_ids["<|end of text|>"]) == 3


def test_encode_iterable_reads_a_file_lazily(tok, tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(CORPUS, encoding="utf-8")
    lines_read = []
    with open(path, encoding="utf-8") as f:
        ids = tok.encode_iterable(line for line in f if not lines_read.append(line))
        first = next(ids)
        assert len(lines_read) == 1  # the first line is encoded up to its newline before the second is read
        assert [first] + list(ids) == tok.encode(CORPUS)


def test_gpt2_byte_table():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
    assert token_text(" the".encode()) == "Ġthe" and token_text("é".encode()) == "Ã©"


def test_save_and_load_gpt2_files(tok, tmp_path):
    vocab_path, merges_path = tok.save(tmp_path / "tokenizer")
    lines = pathlib.Path(merges_path).read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2" and len(lines) == 1 + len(tok.merges)
    assert all(len(line.split(" ")) == 2 for line in lines[1:])
    loaded = Tokenizer.load(tmp_path / "tokenizer")
    assert loaded.vocab == tok.vocab and loaded.merges == tok.merges
    assert loaded.special_tokens == tuple(SPECIALS)
    assert loaded.encode(CORPUS) == tok.encode(CORPUS)


def test_special_token_with_spaces_survives_the_files(tmp_path):
    specials = ["<|end of text|>", "¡hola!"]
    vocab, merges = train_bpe(CORPUS, 300, specials)
    Tokenizer(vocab, merges, specials).save(tmp_path)
    assert read_gpt2_files(tmp_path) == (vocab, merges, specials)


def hf_tokenizer(vocab, merges, specials):
    """Hugging Face's byte-level BPE, given our vocabulary and merges."""
    import tokenizers  # requirements.txt installs it: a missing one fails, never skips
    text_of = {i: (token.decode() if token.decode("utf-8", "replace") in specials else token_text(token))
               for i, token in vocab.items()}
    model = tokenizers.models.BPE(vocab={text: i for i, text in text_of.items()},
                                  merges=[(token_text(a), token_text(b)) for a, b in merges])
    hf = tokenizers.Tokenizer(model)
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = tokenizers.decoders.ByteLevel()
    hf.add_special_tokens(specials)
    return hf


def test_encode_equals_hugging_face_tokenizers(trained, tok):
    hf = hf_tokenizer(*trained, SPECIALS)
    rng = random.Random(2)
    texts = SAMPLES + [CORPUS] + [random_text(rng, 80) for _ in range(100)]
    for text in texts:
        assert tok.encode(text) == hf.encode(text).ids, text
    assert hf.decode(tok.encode(CORPUS), skip_special_tokens=False) == CORPUS


def test_hugging_face_reads_our_files(tok, tmp_path):
    import tokenizers  # requirements.txt installs it: a missing one fails, never skips
    hf = tokenizers.ByteLevelBPETokenizer(*tok.save(tmp_path))
    hf.add_special_tokens(SPECIALS)
    for text in SAMPLES + [CORPUS]:
        ids = hf.encode(text).ids
        assert ids == tok.encode(text) and (ids or not text), text
    assert len(hf.encode(CORPUS).ids) > 100


def test_bad_training_arguments():
    with pytest.raises(ValueError, match=r"at least 256 bytes \+ 2 special tokens = 258, got 257"):
        train_bpe("abc", 257, ["<|a|>", "<|b|>"])
    with pytest.raises(TypeError, match="vocab_size must be an int, got float"):
        train_bpe("abc", 300.0)
    with pytest.raises(ValueError, match="non-empty str, got ''"):
        train_bpe("abc", 300, ["<|a|>", ""])
    with pytest.raises(TypeError, match="each special token must be a str, got bytes"):
        train_bpe("abc", 300, [b"<|a|>"])
    with pytest.raises(TypeError, match=r"must be a list of str, got a single str '<\|a\|>'"):
        train_bpe("abc", 300, "<|a|>")
    with pytest.raises(ValueError, match="distinct"):
        train_bpe("abc", 300, ["<|a|>", "<|a|>"])
    with pytest.raises(TypeError, match="text .a str. or a file .a pathlib.Path., got bytes"):
        train_bpe(b"abc", 300)


def test_bad_tokenizer_input(trained, tok):
    vocab, merges = trained
    with pytest.raises(ValueError, match=r"token id 600 is not in the vocabulary \(vocab_size 600, ids 0..599\)"):
        tok.decode([5, 600])
    with pytest.raises(ValueError, match="token id -1 is not in the vocabulary"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="encode takes a str, got bytes"):
        tok.encode(b"abc")
    with pytest.raises(TypeError, match="an iterable of str, got an item of type bytes"):
        list(tok.encode_iterable([b"abc"]))
    with pytest.raises(TypeError, match="got one str: use encode"):
        list(tok.encode_iterable("abc"))
    with pytest.raises(ValueError, match=re.escape("must contain special token b'<|x|>'")):
        Tokenizer(vocab, merges, ["<|x|>"])
    with pytest.raises(ValueError, match=r"must contain the single byte b'a'"):
        Tokenizer({i: t for i, t in vocab.items() if t != b"a"}, [])
    with pytest.raises(ValueError, match="merge 0's result"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [(b"a", b"b")])
    with pytest.raises(ValueError, match=r"gives the bytes b'a' two ids, 97 and 256"):
        Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"a"}, [])


def test_bad_files(tok, tmp_path):
    tok.save(tmp_path)
    merges_path = tmp_path / "merges.txt"
    lines = merges_path.read_text(encoding="utf-8").splitlines()
    for bad_line, message in [("Ġthe", "line 3: expected two tokens separated by one space, got 'Ġthe'"),
                              ("a  b", "line 3: expected two tokens"),
                              ("a 中", "line 3: 'a 中' holds '中', which is not one of GPT-2's 256 byte"),
                              ("q z", "line 3: 'q z' needs 'qz', which is not in vocab.json")]:
        merges_path.write_text("\n".join(lines[:2] + [bad_line] + lines[2:]) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            Tokenizer.load(tmp_path)
    (tmp_path / "vocab.json").write_text('["not", "an", "object"]', encoding="utf-8")
    with pytest.raises(ValueError, match="must hold one JSON object"):
        Tokenizer.load(tmp_path)


# ---- edge cases: one-byte special tokens, lone surrogates, decode's input, literal special-token text ----------

@pytest.mark.parametrize("special", ["\n", "a", "\x00"])
def test_a_one_byte_special_token_is_refused_up_front(trained, special):
    message = f"special token {special!r} is the single byte {ord(special)}, which already has its own id"
    with pytest.raises(ValueError, match=re.escape(message)):
        train_bpe(CORPUS, 300, [special])
    with pytest.raises(ValueError, match=re.escape(message)):
        Tokenizer(*trained, [special])
    vocab, merges = train_bpe(CORPUS, 300, ["<|nl|>", "é"])  # two bytes are enough, and the result loads
    assert Tokenizer(vocab, merges, ["<|nl|>", "é"]).encode("é<|nl|>") == [299, 298]


@pytest.mark.parametrize("text, index", [("ab\ud83dcd", 2), ("\udc00", 0), ("ok " * 5 + "\udfff", 15)])
def test_lone_surrogates_get_a_clear_error(tok, text, index):
    code = re.escape(f"U+{ord(text[index]):04X}")
    with pytest.raises(ValueError, match=f"lone surrogate {code} at index {index}"):
        tok.encode(text)
    with pytest.raises(ValueError, match=f"training text holds a lone surrogate {code} at index {index}"):
        train_bpe(text, 300)
    with pytest.raises(ValueError, match=f"lone surrogate {code}"):
        list(tok.encode_iterable([text]))
    repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # the repair the message offers
    assert tok.decode(tok.encode(repaired)) == repaired and "\ufffd" in repaired
    assert tok.encode("\ud83d\ude00".encode("utf-16", "surrogatepass").decode("utf-16")) == tok.encode("😀")


@pytest.mark.parametrize("ids, exception, pattern", [
    (torch.tensor(104), ValueError, r"one sequence of shape \(T,\), got shape \(\); wrap one id in a list"),
    (torch.tensor([[104, 105]]), ValueError, r"one sequence of shape \(T,\), got shape \(1, 2\); decode each row"),
    (np.array([[104, 105]]), ValueError, r"got shape \(1, 2\)"),
    (torch.tensor([True, False]), TypeError, "decode takes int ids, got bool True"),
    (torch.tensor([104.0]), TypeError, "decode takes int ids, got float 104.0"),
    ([104, 105.0], TypeError, "decode takes int ids, got float 105.0"),
    ([True], TypeError, "decode takes int ids, got bool True"),
    (104, TypeError, "decode takes one sequence of int ids .* got int 104"),
    ("hi", TypeError, "got str 'hi'"),
    ([104, "i"], TypeError, "decode takes int ids, got str 'i'"),
])
def test_decode_names_what_it_expected(tok, ids, exception, pattern):
    with pytest.raises(exception, match=pattern):
        tok.decode(ids)


def test_decode_takes_lists_tuples_tensors_and_arrays(tok):
    ids = tok.encode("hi there")
    for form in (ids, tuple(ids), torch.tensor(ids), np.array(ids), list(np.array(ids)), iter(ids)):
        assert tok.decode(form) == "hi there"
    assert tok.decode([]) == "" and tok.decode(torch.tensor([], dtype=torch.long)) == ""


def test_allowed_special_chooses_what_literal_special_token_text_becomes(trained, tok):
    text = "a<|endoftext|>b <|a|><|b|>c<|a|>"
    ids = tok.special_ids
    assert tok.encode(text) == tok.encode(text, allowed_special="all")  # the default: today's behaviour
    assert tok.encode(text).count(ids["<|endoftext|>"]) == 1
    as_text = tok.encode(text, allowed_special=set())
    assert not set(as_text) & set(ids.values()) and tok.decode(as_text) == text
    assert as_text == tok.encode("a") + tok.encode("<|endoftext|>b <|a|><|b|>c<|a|>", allowed_special=frozenset())
    only_a = tok.encode(text, allowed_special={"<|a|>"})  # <|a|><|b|> is not allowed, so <|a|> is matched in it
    assert only_a.count(ids["<|a|>"]) == 2 and ids["<|endoftext|>"] not in only_a and tok.decode(only_a) == text
    assert list(tok.encode_iterable(list(text), allowed_special={"<|a|>"})) == only_a
    hf = hf_tokenizer(*trained, SPECIALS)
    assert tok.encode(text) == hf.encode(text).ids  # Hugging Face also turns special-token text into its id
    with pytest.raises(ValueError, match=re.escape("allowed_special names ['<|x|>'], which are not special tokens")):
        tok.encode(text, allowed_special={"<|x|>"})
    with pytest.raises(ValueError, match="allowed_special must be 'all' or a set"):
        tok.encode(text, allowed_special="none")
    with pytest.raises(TypeError, match="allowed_special must be 'all' or a set of special tokens, got list"):
        list(tok.encode_iterable([text], allowed_special=["<|a|>"]))


# ---- tie rules: CS336's (the default) and Hugging Face's BpeTrainer ------------------------------------------

def test_tie_rules_differ_on_equal_counts():
    # every pair of "ab cd" occurs once
    assert train_bpe("ab cd", 259)[1] == [(b"c", b"d"), (b"a", b"b"), (b" ", b"cd")]  # greater bytes first
    vocab, merges = train_bpe("ab cd", 259, tie_break="huggingface")
    assert merges == [(b"a", b"b"), (b"c", b"d"), (b" ", b"cd")]  # smaller BpeTrainer ids first
    # BpeTrainer's ids: the bytes in the order of their byte-level characters (! is first, the space is Ġ, U+0120)
    assert vocab[0] == b"!" and vocab[ord("a") - ord("!")] == b"a" and vocab[188 + 32] == b" "
    assert [vocab[i] for i in (256, 257, 258)] == [b"ab", b"cd", b" cd"] and len(vocab) == 259
    with pytest.raises(ValueError, match=r"tie_break must be one of \('bytes', 'huggingface'\), got 'hf'"):
        train_bpe("ab cd", 259, tie_break="hf")
    with pytest.raises(ValueError, match="tie_break must be one of"):
        train_bpe_naive("ab cd", 259, tie_break="greater")


# Texts written for the comparison with BpeTrainer, each with many pairs of equal counts.
TIE_TEXTS = {
    "english": """It was the best of times; it wasn't the worst. We'd walked 3 miles, they'll say, and we've
no regrets. The tokenizer merges the most frequent pair, then the next, and so on: ties are broken by a rule,
and two rules give two vocabularies. Reading, writing and arithmetic; reader, writer, written, wrote, rewrote.
Don't count your chickens before they hatch. A stitch in time saves nine! Is it 10:45 or 11:15? Prices: $4.99,
$19.95 and 2,500 euros. "Quoted text," she said, 'and single quotes', (parentheses) [brackets] {braces}.
""" * 3 + " ".join(f"word{i} w{i % 7}x{i % 5} the{i % 3}" for i in range(120)),
    "chinese": """机器学习是人工智能的一个分支。分词器把文本切成词元，模型再学习词元之间的关系。
今天的天气很好，我们去公园散步吧！训练数据越多，模型就越强吗？不一定：数据的质量同样重要。
注意力机制让每个词元看到前面的所有词元。字节对编码从单个字节开始，反复合并最常见的相邻对。
""" * 3 + "，".join("中文分词" [i % 4] + "模型训练数据" [i % 6] + "字节" [i % 2] for i in range(150)),
    "emoji": """Emoji: 😀😃😄😁 🚀🚀 🌍🌎🌏 👩‍💻👨‍🔬 ❤️🧡💛💚💙💜 👍🏻👍🏽👍🏿 🇫🇷🇯🇵🇧🇷 ✨🎉🎊 ☕️🍵
happy 😀, rocket 🚀, planet 🌍; love ❤️ and thumbs 👍🏽! 🐍 Python 🦀 Rust 🐹 Go.
""" * 4 + " ".join(chr(0x1F600 + i * 7 % 80) + chr(0x1F300 + i * 11 % 96) * (1 + i % 2)
                   + ("\u200d💻" if i % 5 == 0 else "") for i in range(400)),
    "whitespace": """def train(text,   vocab_size):
    counts = {}
    for word in text.split():\r\n
        counts[word] = counts.get(word, 0) + 1    # count


\t\tindented with tabs\t and\ttabs
        eight spaces        then words        
   \n\n\n   three newlines   \r\n\r\n
""" * 4 + "".join(" " * (i % 13) + ["if x:", "for i in y:", "return", "x", "y = 1", "pass"][i % 6] + " " * (i % 4)
                   + "\t" * (i % 3) + ("\r\n" if i % 5 == 0 else "\n") * (1 + i % 3) for i in range(400)),
}
TIE_SPECIALS = ["<|endoftext|>", "<|pad|>"]


def hf_bpe_trainer(text, vocab_size, specials):
    """Hugging Face's BpeTrainer: ByteLevel pre-tokenizer (GPT-2's regex, no prefix space), every byte in the
    initial alphabet, no min_frequency; returns its vocabulary (text -> id) and merges (pairs of texts)."""
    import tokenizers  # requirements.txt installs it: a missing one fails, never skips
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator([text], trainer)
    model = json.loads(hf.to_str())["model"]
    return hf, model["vocab"], [tuple(merge) for merge in model["merges"]]


@pytest.mark.parametrize("kind", [*TIE_TEXTS, "all"])
def test_huggingface_tie_rule_trains_as_bpe_trainer(kind):
    text = "<|endoftext|>".join(TIE_TEXTS.values()) if kind == "all" else TIE_TEXTS[kind]
    vocab_size = 256 + len(TIE_SPECIALS) + 400
    hf, hf_vocab, hf_merges = hf_bpe_trainer(text, vocab_size, TIE_SPECIALS)
    vocab, merges = train_bpe(text, vocab_size, TIE_SPECIALS, tie_break="huggingface")
    assert len(merges) >= 200  # several hundred merges, most of them decided among pairs of equal counts
    assert [(token_text(a), token_text(b)) for a, b in merges] == hf_merges  # the same merges in the same order
    ours = {token.decode() if i < len(TIE_SPECIALS) else token_text(token): i for i, token in vocab.items()}
    assert ours == hf_vocab  # the same id for every token, special tokens first
    if kind == "all":
        smaller = 256 + len(TIE_SPECIALS) + 150  # the naive recount is slow: fewer merges
        assert (train_bpe_naive(text, smaller, TIE_SPECIALS, tie_break="huggingface")
                == train_bpe(text, smaller, TIE_SPECIALS, tie_break="huggingface"))
        assert train_bpe(text, vocab_size, TIE_SPECIALS)[1] != merges  # the default rule learns other merges here
        tok = Tokenizer(vocab, merges, TIE_SPECIALS)  # the library's own tokenizer takes the vocabulary
        for sample in [text[:2000], *SAMPLES]:
            assert tok.encode(sample) == hf.encode(sample).ids


def test_merges_file_blank_lines_and_truncation(tok, tmp_path):
    import warnings
    tok.save(tmp_path)
    merges_path = tmp_path / "merges.txt"
    lines = merges_path.read_text(encoding="utf-8").splitlines()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete file with <|endoftext|> and other specials: no warning
        assert Tokenizer.load(tmp_path).merges == tok.merges
    merges_path.write_text("\n".join(lines) + "\n\n\n", encoding="utf-8")  # blank lines after the last merge
    assert Tokenizer.load(tmp_path).merges == tok.merges
    merges_path.write_text("\n".join(lines[:2] + [""] + lines[2:]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="merges.txt line 3 is blank: expected two tokens"):
        Tokenizer.load(tmp_path)
    merges_path.write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")  # a truncated file: " the" and others left
    with pytest.raises(ValueError, match=r"entries such as .*'Ġ.*so they are no special tokens; merges.txt is "
                                         r"truncated"):
        Tokenizer.load(tmp_path)


# ---- issue 34: every public function of bpe and bpe_tokenizer names what it expected and what arrived ----------

from minitfm.text.pretokenize import check_no_surrogates, special_token_regex, split_on_special_tokens  # noqa: E402

LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1234\n"


def _file(tmp_path, content, name="corpus.txt"):
    """A file under tmp_path: str content written as UTF-8, bytes as they are, None a folder."""
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _bytes_vocab(extra=()):
    return {**{i: bytes([i]) for i in range(256)}, **{256 + k: t for k, t in enumerate(extra)}}


E = re.escape
# (what, call(tok, trained, tmp_path), exception, pattern): one row per class of bad input
BAD_BPE_INPUTS = [
    # train_bpe / train_bpe_naive: arguments
    ("vocab_size bool", lambda tok, tr, t: train_bpe("abc", True), TypeError, E("vocab_size must be an int, got bool")),
    ("vocab_size str", lambda tok, tr, t: train_bpe("abc", "300"), TypeError, E("vocab_size must be an int, got str")),
    ("vocab_size None", lambda tok, tr, t: train_bpe("abc", None), TypeError,
     E("vocab_size must be an int, got NoneType")),
    ("vocab_size negative", lambda tok, tr, t: train_bpe("abc", -5), ValueError, E("vocab_size must be at least 256")),
    ("specials None", lambda tok, tr, t: train_bpe("abc", 300, None), TypeError,
     E("special_tokens must be a list of str (in the order of their ids), got NoneType")),
    ("specials int", lambda tok, tr, t: train_bpe("abc", 300, 5), TypeError, E("special_tokens must be a list of str")),
    ("specials a set", lambda tok, tr, t: train_bpe("abc", 300, {"<|a|>"}), TypeError,
     E("special_tokens must be a list of str (in the order of their ids), got set")),
    ("specials a dict", lambda tok, tr, t: train_bpe("abc", 300, {"<|a|>": 1}), TypeError, E("got dict")),
    ("specials bytes", lambda tok, tr, t: train_bpe("abc", 300, b"<|a|>"), TypeError, E("got a single bytes")),
    ("special None", lambda tok, tr, t: train_bpe("abc", 300, [None]), TypeError,
     E("each special token must be a str, got NoneType None")),
    ("special surrogate", lambda tok, tr, t: train_bpe("abc", 300, ["<|\ud800|>"]), ValueError,
     E("special token '<|\\ud800|>' holds a lone surrogate U+D800")),
    ("text int", lambda tok, tr, t: train_bpe(5, 300), TypeError, E("text_or_path must be the text (a str) or a file")),
    ("text None", lambda tok, tr, t: train_bpe(None, 300), TypeError, E("got NoneType")),
    ("text a list", lambda tok, tr, t: train_bpe(["abc"], 300), TypeError, E("got list")),
    ("file missing", lambda tok, tr, t: train_bpe(t / "nope.txt", 300), FileNotFoundError,
     E("nope.txt does not exist: expected a training text")),
    ("file a folder", lambda tok, tr, t: train_bpe(_file(t, None), 300), ValueError,
     E("corpus.txt is a folder, expected a training text")),
    ("file empty", lambda tok, tr, t: train_bpe(_file(t, b""), 300), ValueError, E("corpus.txt is empty (0 bytes)")),
    ("file Latin-1", lambda tok, tr, t: train_bpe(_file(t, "café".encode("latin-1")), 300), ValueError,
     E("corpus.txt is not UTF-8 text (byte 0xe9 at offset 3)")),
    ("file an LFS pointer", lambda tok, tr, t: train_bpe(_file(t, LFS), 300), ValueError,
     E("corpus.txt is a Git LFS pointer")),
    ("naive, file a folder", lambda tok, tr, t: train_bpe_naive(_file(t, None), 300), ValueError, E("is a folder")),
    ("tie_break None", lambda tok, tr, t: train_bpe("abc", 300, tie_break=None), ValueError,
     E("tie_break must be one of ('bytes', 'huggingface'), got None")),
    ("tie_break capitalised", lambda tok, tr, t: train_bpe("abc", 300, tie_break="HuggingFace"), ValueError,
     E("got 'HuggingFace'")),
    # pre-tokenisation and the helpers
    ("pretokenize bytes", lambda tok, tr, t: pretokenize(b"abc"), TypeError,
     E("pretokenize takes a str, got bytes: decode the bytes first")),
    ("pretokenize None", lambda tok, tr, t: pretokenize(None), TypeError, E("pretokenize takes a str, got NoneType")),
    ("pretokenize a list", lambda tok, tr, t: pretokenize(["a b"]), TypeError, E("pretokenize takes a str, got list")),
    ("check_no_surrogates int", lambda tok, tr, t: check_no_surrogates(5), TypeError, E("text must be a str, got int")),
    ("merge_pair ids str", lambda tok, tr, t: merge_pair("aab", (97, 97), 256), TypeError,
     E("ids must be a list of int ids, got str")),
    ("merge_pair pair a list", lambda tok, tr, t: merge_pair([1, 2], [1, 2], 9), TypeError,
     E("pair must be a tuple of two int ids, got list [1, 2]")),
    ("merge_pair pair of one", lambda tok, tr, t: merge_pair([1, 2], (1,), 9), TypeError, E("got tuple (1,)")),
    ("merge_pair float id", lambda tok, tr, t: merge_pair([1, 2], (1.0, 2), 9), TypeError,
     E("pair[0] must be an int id, got float 1.0")),
    ("merge_pair new_id bool", lambda tok, tr, t: merge_pair([1, 2], (1, 2), True), TypeError,
     E("new_id must be an int id, got bool True")),
    ("merge_pair new_id None", lambda tok, tr, t: merge_pair([1, 2], (1, 2), None), TypeError,
     E("new_id must be an int id, got NoneType")),
    ("split text bytes", lambda tok, tr, t: list(split_on_special_tokens(b"a", ("<|a|>",))), TypeError,
     E("text must be a str, got bytes")),
    ("split specials str", lambda tok, tr, t: list(split_on_special_tokens("a", "<|a|>")), TypeError,
     E("special_tokens must be a list of str, got a single str")),
    ("special_token_regex empty token", lambda tok, tr, t: special_token_regex(["<|a|>", ""]), ValueError,
     E("each special token must be a non-empty str, got ''")),
    # Tokenizer(vocab, merges, special_tokens, cache_size)
    ("vocab a list", lambda tok, tr, t: Tokenizer([b"a"], []), TypeError,
     E("vocab must be a dict of id -> bytes, got list")),
    ("vocab str ids", lambda tok, tr, t: Tokenizer({"0": b"a"}, []), TypeError,
     E("vocab must map int ids to bytes, got str '0': bytes b'a'")),
    ("vocab str tokens", lambda tok, tr, t: Tokenizer({0: "a"}, []), TypeError, E("got int 0: str 'a'")),
    ("vocab bool id", lambda tok, tr, t: Tokenizer({True: b"a"}, []), TypeError, E("got bool True")),
    ("vocab negative id", lambda tok, tr, t: Tokenizer({**_bytes_vocab(), -1: b"ab"}, []), ValueError,
     E("vocab must map ids >= 0 to non-empty bytes, got -1: b'ab'")),
    ("vocab empty token", lambda tok, tr, t: Tokenizer({**_bytes_vocab(), 256: b""}, []), ValueError,
     E("got 256: b''")),
    ("merges a str", lambda tok, tr, t: Tokenizer(_bytes_vocab(), "ab"), TypeError,
     E("merges must be a list of (bytes, bytes) pairs, got str")),
    ("merges None", lambda tok, tr, t: Tokenizer(_bytes_vocab(), None), TypeError, E("got NoneType")),
    ("merges a dict", lambda tok, tr, t: Tokenizer(_bytes_vocab(), {(b"a", b"b"): 0}), TypeError, E("got dict")),
    ("merge of three", lambda tok, tr, t: Tokenizer(_bytes_vocab([b"ab"]), [(b"a", b"b", b"c")]), TypeError,
     E("merge 0 must be a pair of non-empty bytes (bytes_a, bytes_b), got tuple")),
    ("merge a str", lambda tok, tr, t: Tokenizer(_bytes_vocab([b"ab"]), ["ab"]), TypeError, E("got str 'ab'")),
    ("merge of str parts", lambda tok, tr, t: Tokenizer(_bytes_vocab([b"ab"]), [(b"a", "b")]), TypeError,
     E("merge 0 must be a pair of non-empty bytes")),
    ("merge with an empty part", lambda tok, tr, t: Tokenizer(_bytes_vocab(), [(b"", b"a")]), TypeError,
     E("merge 0 must be a pair of non-empty bytes")),
    ("merge repeated", lambda tok, tr, t: Tokenizer(_bytes_vocab([b"ab"]), [(b"a", b"b"), (b"a", b"b")]), ValueError,
     E("merge 1 (b'a', b'b') repeats merge 0")),
    ("a token no merge makes", lambda tok, tr, t: Tokenizer(_bytes_vocab([b"ab", b"the"]), [(b"a", b"b")]), ValueError,
     E("the vocabulary does not match its merges: 258 tokens, but 256 bytes + 1 merge results + 0 special tokens "
       "account for 257; ids [257] (e.g. b'the') are none of these")),
    ("special left out", lambda tok, tr, t: Tokenizer(*tr, SPECIALS[:1]), ValueError,
     E("1 special tokens account for 598; ids [598, 599] (e.g. b'<|a|>') are none of these")),
    ("cache_size 0", lambda tok, tr, t: Tokenizer(*tr, SPECIALS, cache_size=0), ValueError,
     E("cache_size must be an int >= 1, got 0")),
    ("cache_size float", lambda tok, tr, t: Tokenizer(*tr, SPECIALS, cache_size=1.5), TypeError,
     E("cache_size must be an int >= 1, got float 1.5")),
    ("cache_size bool", lambda tok, tr, t: Tokenizer(*tr, SPECIALS, cache_size=True), TypeError, E("got bool True")),
    ("specials a str", lambda tok, tr, t: Tokenizer(*tr, "<|endoftext|>"), TypeError, E("got a single str")),
    # encode
    ("encode None", lambda tok, tr, t: tok.encode(None), TypeError, E("encode takes a str, got NoneType")),
    ("encode a list", lambda tok, tr, t: tok.encode(["a", "b"]), TypeError, E("encode takes a str, got list")),
    ("encode an int", lambda tok, tr, t: tok.encode(5), TypeError, E("encode takes a str, got int")),
    ("encode a bytearray", lambda tok, tr, t: tok.encode(bytearray(b"a")), TypeError, E("got bytearray")),
    ("allowed_special a list", lambda tok, tr, t: tok.encode("a", allowed_special=["<|a|>"]), TypeError,
     E("allowed_special must be 'all' or a set of special tokens, got list")),
    ("allowed_special None", lambda tok, tr, t: tok.encode("a", allowed_special=None), TypeError, E("got NoneType")),
    ("encode surrogate", lambda tok, tr, t: tok.encode("x\udcff"), ValueError, E("lone surrogate U+DCFF at index 1")),
    # encode_iterable
    ("iterable of bytes", lambda tok, tr, t: list(tok.encode_iterable(b"abc")), TypeError,
     E("got one bytes: use encode(text) after decoding it")),
    ("iterable None", lambda tok, tr, t: list(tok.encode_iterable(None)), TypeError,
     E("encode_iterable takes an iterable of str (lines, a text file), got NoneType")),
    ("iterable int", lambda tok, tr, t: list(tok.encode_iterable(5)), TypeError, E("got int")),
    ("item int", lambda tok, tr, t: list(tok.encode_iterable(["a", 5])), TypeError,
     E("an iterable of str, got an item of type int (item 1)")),
    ("item None", lambda tok, tr, t: list(tok.encode_iterable(iter(["a b", None]))), TypeError,
     E("got an item of type NoneType (item 1)")),
    ("file opened in binary", lambda tok, tr, t: list(tok.encode_iterable(open(_file(t, "a b\nc"), "rb"))), TypeError,
     E("got an item of type bytes (item 0)")),
    ("surrogate in a chunk", lambda tok, tr, t: list(tok.encode_iterable(["ab ", "c\ud800 d"])), ValueError,
     E("lone surrogate U+D800")),
    ("iterable, allowed_special unknown", lambda tok, tr, t: tok.encode_iterable(["a"], allowed_special={"<|x|>"}),
     ValueError, E("allowed_special names ['<|x|>']")),
    # decode
    ("decode a set", lambda tok, tr, t: tok.decode({104, 105}), TypeError, E("decode takes one sequence of int ids")),
    ("decode a dict", lambda tok, tr, t: tok.decode({0: 104}), TypeError, E("got dict {0: 104}")),
    ("decode None", lambda tok, tr, t: tok.decode(None), TypeError, E("got NoneType None")),
    ("decode a float", lambda tok, tr, t: tok.decode(1.5), TypeError, E("got float 1.5")),
    ("decode a float array", lambda tok, tr, t: tok.decode(np.array([104.0])), TypeError,
     E("decode takes int ids, got float 104.0")),
    ("decode a half tensor", lambda tok, tr, t: tok.decode(torch.tensor([104], dtype=torch.float16)), TypeError,
     E("decode takes int ids, got float 104.0")),
    ("decode a bool array", lambda tok, tr, t: tok.decode(np.array([True])), TypeError,
     E("decode takes int ids, got bool True")),
    ("decode 3-D", lambda tok, tr, t: tok.decode(torch.zeros(1, 1, 2, dtype=torch.long)), ValueError,
     E("one sequence of shape (T,), got shape (1, 1, 2)")),
    ("decode None in a list", lambda tok, tr, t: tok.decode([104, None]), TypeError,
     E("decode takes int ids, got NoneType None")),
    ("decode nested lists", lambda tok, tr, t: tok.decode([[104, 105]]), TypeError,
     E("decode takes int ids, got list [104, 105]")),
    ("decode id out of range in a tensor", lambda tok, tr, t: tok.decode(torch.tensor([104, 10_000])), ValueError,
     E("token id 10000 is not in the vocabulary (vocab_size 600, ids 0..599)")),
    # save and load
    ("save into a file", lambda tok, tr, t: tok.save(_file(t, "x", "f.txt")), ValueError,
     E("f.txt is a file, expected a folder")),
    ("save to None", lambda tok, tr, t: tok.save(None), TypeError,
     E("directory must be a folder's path (str or pathlib.Path), got NoneType")),
    ("load a missing folder", lambda tok, tr, t: Tokenizer.load(t / "nowhere"), FileNotFoundError,
     E("no folder") + ".*nowhere" + E("': expected a folder holding vocab.json and merges.txt")),
    ("load a file", lambda tok, tr, t: Tokenizer.load(_file(t, "x", "f.txt")), ValueError, E("f.txt is a file")),
    ("load None", lambda tok, tr, t: Tokenizer.load(None), TypeError, E("got NoneType")),
]


@pytest.mark.parametrize("call, exception, pattern", [case[1:] for case in BAD_BPE_INPUTS],
                         ids=[case[0] for case in BAD_BPE_INPUTS])
def test_bad_bpe_inputs_get_clear_errors(tok, trained, tmp_path, call, exception, pattern):
    with pytest.raises(exception, match=pattern):
        call(tok, trained, tmp_path)


def test_a_special_token_that_is_a_regular_token_reuses_its_id():
    vocab, merges = train_bpe(CORPUS, 400)
    regular = next(t for t in vocab.values() if len(t) > 1 and t.isalpha())  # a merge's result, such as b'th'
    tok = Tokenizer(vocab, merges, [regular.decode()])
    assert tok.special_ids[regular.decode()] == {t: i for i, t in vocab.items()}[regular] and len(tok) == len(vocab)


class _Measured:
    """A compiled regex that adds up the length of text each search or finditer call may scan."""

    def __init__(self, pattern, total):
        self.pattern, self.total = pattern, total

    def _span(self, text, pos=0, endpos=None):
        self.total[0] += (len(text) if endpos is None else min(endpos, len(text))) - pos

    def search(self, text, pos=0, endpos=None, **kwargs):
        self._span(text, pos, endpos)
        return self.pattern.search(text, pos, len(text) if endpos is None else endpos, **kwargs)

    def finditer(self, text, pos=0, endpos=None, **kwargs):
        self._span(text, pos, endpos)
        return self.pattern.finditer(text, pos, len(text) if endpos is None else endpos, **kwargs)


def test_encode_iterable_is_linear_for_any_chunking(monkeypatch):
    """The characters searched for a cut (spaces and special tokens) grow as the text, for text without any
    space fed 1, 3 or 64 characters at a time (before issue 34 every chunk re-searched all the pending text:
    4x the text, 16x the work) and for prose; each result equals encode's."""
    import minitfm.text.bpe_tokenizer as bpe_tokenizer
    vocab, merges = train_bpe(CORPUS, 300, SPECIALS)
    tok = Tokenizer(vocab, merges, SPECIALS)
    scanned = [0]
    monkeypatch.setattr(bpe_tokenizer, "_LAST_SPACE_AFTER_TEXT", _Measured(bpe_tokenizer._LAST_SPACE_AFTER_TEXT, scanned))
    tok._special_regex = _Measured(tok._special_regex, scanned)
    texts = {"no space": lambda n: ('{"k":[1,2],"v":"中文"}' * n)[:n], "CJK": lambda n: ("注意力机制" * n)[:n],
             "prose": lambda n: (CORPUS * (n // len(CORPUS) + 1))[:n]}
    for kind, make in texts.items():
        for size in (1, 3, 64):
            work = []
            for n in (4000, 16000):
                text = make(n)
                scanned[0] = 0
                assert list(tok.encode_iterable(text[i:i + size] for i in range(0, n, size))) == tok.encode(text)
                work.append(scanned[0])
            assert 0 < work[1] <= 4.5 * work[0], (kind, size, work)  # linear: 4x the text, at most 4.5x the work
            assert work[1] <= 8 * 16000, (kind, size, work)  # a few scans per character, whatever the chunking


def test_encode_iterable_equals_encode_for_random_chunkings_around_special_tokens():
    specials = [*SPECIALS, "<|a b|>"]
    tok = Tokenizer(*train_bpe(CORPUS, 400, specials), specials)
    rng = random.Random(0)
    alphabet = [*"ab <|>\n\t中x", "<|a|>", "<|a b|>", "<|endoftext|>", "<|a|><|b|>", "  "]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 15))))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        for allowed in ("all", set(), {"<|a|>"}):
            expected = tok.encode(text, allowed_special=allowed)
            assert list(tok.encode_iterable(chunks, allowed_special=allowed)) == expected


class _CountingDict(dict):
    """A dict that counts its look-ups (``get``, ``[]`` and ``in``)."""

    lookups = 0

    def get(self, key, default=None):
        _CountingDict.lookups += 1
        return super().get(key, default)

    def __getitem__(self, key):
        _CountingDict.lookups += 1
        return super().__getitem__(key)

    def __contains__(self, key):
        _CountingDict.lookups += 1
        return super().__contains__(key)


def test_one_long_pretoken_is_encoded_in_near_linear_time(trained):
    """A word of thousands of letters (unbroken CJK, minified text) is one pre-token: its merges are applied
    with a heap, so the look-ups in the merge table grow as the word, not as the word times the number of
    distinct merges it uses (fusing the best pair everywhere, then searching again, was O(n) per merge)."""
    tok = Tokenizer(*trained, SPECIALS)
    tok._ranks, tok._merged_ids = _CountingDict(tok._ranks), _CountingDict(tok._merged_ids)
    letters = "".join(c for c in CORPUS if c.isalpha())
    counts = []
    for n in (2000, 8000):
        word = (letters * (n // len(letters) + 1))[:n]
        _CountingDict.lookups = 0
        ids = tok.encode(word)
        assert tok.decode(ids) == word and len(ids) < n / 2  # many merges apply
        counts.append(_CountingDict.lookups)
    assert counts[1] <= 4.5 * counts[0] and counts[1] <= 20 * 8000, counts
