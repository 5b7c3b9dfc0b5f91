"""minitfm.text.sentencepiece_bpe and sentencepiece_model: a SentencePiece BPE model with byte fallback, trained
offline here with `sentencepiece` on text this file writes, read from its .model file, encodes to the same ids as
`sentencepiece` itself and decodes to the same text (issue 38, item 3)."""
from __future__ import annotations

import random
import re

import pytest

from minitfm.text.pretokenize import apply_merges
from minitfm.text.sentencepiece_bpe import SentencePieceBPE
from minitfm.text.sentencepiece_model import read_sentencepiece_model

import sentencepiece as spm  # noqa: E402  requirements.txt installs it: a missing one fails, never skips
E = re.escape

CORPUS = ["The quick brown fox jumps over the lazy dog. It's 5 o'clock; they're late, we'll wait.",
          "Prices rose 3.5% to $1,234,567.89 in 2024, and the theory of things held.",
          "def tokenize(text):", "    for word in text.split():", "        yield word.lower()  # comment",
          "机器学习是人工智能的一个分支。我们今天学习分词器，明天训练模型。",
          "Emoji: 😀😀 🚀 and café, naïve.\tTabs\t\tand spaces   inside.", "<|im_start|>user hello<|im_end|>"] * 25

# Every kind of text above, and characters the model never saw (龍, Ж, 👩‍💻): those take byte fallback.
TEXTS = ["Hello, world! It's a test.",
         "don't   stop\n\n\n  believing\t\tnow\r\n",
         "   leading and trailing   ",
         "机器学习和分词器，龍と東京。Привет, мир!",
         "😀🚀👩‍💻 emoji 🇫🇷 ❤️‍🔥",
         "def f(x):\n    return x ** 2  # square\n\n",
         "1 12 123 1234 12345 1234567890 3.14159",
         "<|im_start|>x<|im_start|> y <|im_end|>",
         "<s></s><unk> are plain text to SentencePiece",
         "line\u2028separator\u0085next\x0bvertical\x0cfeed\u200bzero width\ufeffbom \U0001d400 math",
         "", " ", "a", "▁ already a meta space"]


def train(tmp_path, name, **options):
    """The path of a SentencePiece model trained on CORPUS with ``options`` over Llama 2's settings."""
    settings = dict(model_type="bpe", vocab_size=450, byte_fallback=True, normalization_rule_name="identity",
                    remove_extra_whitespaces=False, character_coverage=0.995, split_digits=True,
                    user_defined_symbols=["<|im_start|>", "<|im_end|>"], minloglevel=2, num_threads=1)
    prefix = str(tmp_path / name)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_prefix=prefix, **(settings | options))
    return prefix + ".model"


@pytest.fixture(scope="module", params=["llama", "no dummy prefix", "no user-defined"])
def pair(request, tmp_path_factory):
    """(sentencepiece's processor, minitfm's tokenizer read from the same .model file)."""
    options = {"no dummy prefix": dict(add_dummy_prefix=False), "no user-defined": dict(user_defined_symbols=[]),
               "llama": {}}[request.param]
    path = train(tmp_path_factory.mktemp("sp"), "m", **options)
    return spm.SentencePieceProcessor(model_file=path), read_sentencepiece_model(path)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_ids_and_text_equal_sentencepiece(pair, text):
    sp, ours = pair
    ids = ours.encode(text)
    assert ids == sp.encode(text)
    assert ours.decode(ids) == sp.decode(ids) == text.replace("▁", " ")


POOL = list("aAbBeéxyzZ019 '.,!?-_*#()\t\n\r") + ["  ", "\n\n", "\u0301", "\u00a0", "\u3000", "▁", "机", "器", "龍",
                                                   "😀", "👩‍💻", "Ж", "<s>", "<|im_start|>", "<|im_end|>", "<|", "|>"]


def test_random_texts_equal_sentencepiece(pair):
    """300 texts drawn from a pool of characters, user-defined symbols and fragments of them, seeded."""
    sp, ours = pair
    rng = random.Random(38)
    for _ in range(300):
        text = "".join(rng.choices(POOL, k=rng.randrange(0, 30)))
        ids = ours.encode(text)
        assert ids == sp.encode(text), text
        assert ours.decode(ids) == sp.decode(ids), text


def test_the_vocabulary_and_byte_fallback(pair):
    sp, ours = pair
    assert ours.vocab == {i: sp.id_to_piece(i) for i in range(sp.get_piece_size())}
    pieces = [ours.vocab[i] for i in ours.encode("龍Ж")]
    assert pieces[-5:] == ["<0xE9>", "<0xBE>", "<0x8D>", "<0xD0>", "<0x96>"]  # after the dummy prefix, if any


def test_a_long_text(pair):
    sp, ours = pair
    text = "\n".join(CORPUS[:8] + TEXTS) * 3
    assert ours.encode(text) == sp.encode(text)


def test_equal_ranks_merge_the_leftmost_pair_first():
    """Two pairs whose results share a score share a rank; SentencePiece merges the leftmost first."""
    ab, a, ba, aba = 1, 2, 3, 4
    merged = {(ab, a): aba, (a, ba): aba}
    assert apply_merges([ab, a, ba], {(ab, a): 0, (a, ba): 0}, merged) == [aba, ba]
    assert apply_merges([ab, a, ba], {(ab, a): 1, (a, ba): 0}, merged) == [ab, aba]


# (what, training options, the ValueError's pattern)
REFUSED = [
    ("Unigram", dict(model_type="unigram"), "'model_type': 'Unigram'"),
    ("no byte fallback", dict(byte_fallback=False), "'byte_fallback': False"),
    ("NFKC", dict(normalization_rule_name="nmt_nfkc"), "'normalization rule': 'nmt_nfkc'"),
    ("extra whitespace", dict(remove_extra_whitespaces=True), "'remove_extra_whitespaces': True"),
]


@pytest.mark.parametrize("what,options,pattern", REFUSED, ids=[r[0] for r in REFUSED])
def test_an_unsupported_model_is_refused_by_name(tmp_path, what, options, pattern):
    with pytest.raises(ValueError, match=E(pattern) + ".*minitfm reads SentencePiece models with"):
        read_sentencepiece_model(train(tmp_path, "bad", hard_vocab_limit=False, **options))


def test_a_file_that_is_no_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a file: expected a SentencePiece .model"):
        read_sentencepiece_model(tmp_path / "tokenizer.model")
    (tmp_path / "tokenizer.model").write_text('{"model": "a tokenizer.json, not a .model"}', encoding="utf-8")
    with pytest.raises(ValueError, match="is not a SentencePiece model"):
        read_sentencepiece_model(tmp_path / "tokenizer.model")
    with pytest.raises(TypeError, match="got NoneType"):
        read_sentencepiece_model(None)


BYTES = {3 + b: f"<0x{b:02X}>" for b in range(256)}


def small(merges=(("▁", "a"), ("▁a", "b")), **kwargs) -> SentencePieceBPE:
    vocab = {0: "<unk>", 1: "<s>", 2: "</s>", **BYTES, 259: "▁", 260: "a", 261: "b", 262: "▁a", 263: "▁ab"}
    return SentencePieceBPE(vocab, merges, **({"special_tokens": ["<s>", "</s>"]} | kwargs))


def test_a_hand_built_tokenizer():
    tok = small()
    assert tok.encode("ab b<s>a") == [263, 259, 261, 1, 260]  # no dummy prefix after a special token
    assert tok.encode("ab<s>", allowed_special=set()) == [263, 3 + 0x3C, 3 + 0x73, 3 + 0x3E]  # <, s, > as bytes
    assert tok.decode(tok.encode("ab b<s>a")) == "ab b<s>a"
    assert small(strip_spaces=0).decode([263]) == " ab"


# (what, the call, exception, pattern)
BAD_ARGUMENTS = [
    ("a byte piece missing", lambda: SentencePieceBPE({0: "a"}, []), ValueError,
     "the vocabulary lacks 256 of them, such as ['<0x00>', '<0x01>', '<0x02>']"),
    ("a merge's piece missing", lambda: SentencePieceBPE({**BYTES, 259: "a"}, [("a", "c")]), ValueError,
     "merge 'a' + 'c' (rank 0) needs the piece 'c'"),
    ("a piece twice", lambda: SentencePieceBPE({**BYTES, 259: "a", 260: "a"}, []), ValueError,
     "gives the piece 'a' two ids, 259 and 260"),
    ("ranks decreasing", lambda: small(merge_ranks=[1, 0]), ValueError, "merge_ranks must be 2 non-decreasing"),
    ("a special token not a piece", lambda: small(special_tokens=["<pad>"]), ValueError,
     "special tokens must be distinct pieces of the vocabulary, got ['<pad>']"),
    ("a merge of three", lambda: small(merges=[("▁", "a", "b")]), TypeError, "each merge must be a pair of str"),
    ("an unknown id", lambda: small().decode([999]), ValueError, "token id 999 is not in the vocabulary"),
    ("a batch", lambda: small().decode([[1, 2]]), TypeError, "decode takes int ids, got list"),
    ("encode bytes", lambda: small().encode(b"ab"), TypeError, "encode takes a str, got bytes"),
    ("a lone surrogate", lambda: small().encode("a\ud83d"), ValueError, "lone surrogate U+D83D"),
    ("allowed_special unknown", lambda: small().encode("a", allowed_special={"<x>"}), ValueError,
     "allowed_special names ['<x>'], which are not special tokens"),
    ("strip_spaces", lambda: small(strip_spaces=-1), ValueError, "strip_spaces must be an int >= 0, got -1"),
]


@pytest.mark.parametrize("what,call,error,pattern", BAD_ARGUMENTS, ids=[b[0] for b in BAD_ARGUMENTS])
def test_bad_arguments_are_named(what, call, error, pattern):
    with pytest.raises(error, match=E(pattern)):
        call()
