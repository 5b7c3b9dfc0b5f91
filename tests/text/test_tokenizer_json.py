"""minitfm.text.tokenizer_json: a Hugging Face tokenizer.json, built offline here with `tokenizers` from text this file
writes, encodes to the same ids as `tokenizers` itself and decodes to the same text (issue 38, item 3).

Two kinds: byte-level BPE with Llama 3's or Qwen 2's pre-tokenizer regex (into the book's Tokenizer), and
SentencePiece-style BPE with byte fallback and the ▁ space as Llama 2, Mistral and Gemma write it (into
SentencePieceBPE). Every other kind is refused with a ValueError naming what the file holds."""
from __future__ import annotations

import json
import random
import re

import pytest

import tokenizers  # requirements.txt installs it: a missing one fails, never skips
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

from minitfm.text.bpe_tokenizer import Tokenizer  # noqa: E402
from minitfm.text.pretokenize import GPT2_SPLIT_PATTERN  # noqa: E402
from minitfm.text.sentencepiece_bpe import SentencePieceBPE  # noqa: E402
from minitfm.text.tokenizer_json import read_tokenizer_json  # noqa: E402

# The split patterns of Llama 3's and Qwen 2's tokenizer.json (public; Qwen 3 uses Qwen 2's). They differ from
# GPT-2's in case-insensitive contractions, digits (runs of at most three, or one by one) and newlines.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|begin_of_text|>", "<|eot_id|>", "<|im_start|>"]
E = re.escape

CORPUS = ["The quick brown fox jumps over the lazy dog. It's 5 o'clock; they're late, we'll wait.",
          "IT'S LOUD, WE'VE HEARD. Prices rose 3.5% to $1,234,567.89 in 2024.",
          "def tokenize(text):\n    for word in text.split():\n        yield word.lower()  # comment\n\n\n",
          "机器学习是人工智能的一个分支。我们今天学习分词器，明天训练模型。",
          "Emoji: 😀😀 🚀 👩‍💻 ❤️ and café, naïve, Ünïcödé.\tTabs\t\tand\r\nWindows lines.   "] * 20

# What the comparisons encode: every kind of text above, and characters the corpus never had.
TEXTS = ["Hello, world! It's a test; YOU'RE ready?",
         "don't   stop\n\n\n  believing\t\tnow\r\n",
         "   leading and trailing   ",
         "机器学习和分词器，龍と東京。Привет, мир!",
         "😀🚀👩‍💻 emoji 🇫🇷 flags ❤️‍🔥",
         "def f(x):\n    return x ** 2  # square\n\n\n\n",
         "1 12 123 1234 12345 1234567890 3.14159 1,000,000",
         "café naïve (composed) cafe\u0301 nai\u0308ve (decomposed) \u00a0nbsp \u3000ideographic space",
         "<|eot_id|>hi<|begin_of_text|> there <|im_start|><|im_start|>x",
         "</s>hi<s> there <s>", "text <s>",
         "line\u2028separator\u0085next\x0bvertical\x0cfeed\u200bzero width\ufeffbom \U0001d400 math",
         "", " ", "\n", "a", "Ω≈ç√∫˜µ≤≥÷ ∑´®†¥¨ˆøπ“‘"]


def byte_level(pattern, *, nfc=False, ignore_merges=False):
    """A byte-level BPE trained here, pre-tokenized as Llama 3 / Qwen (a Split) or as GPT-2 (pattern None)."""
    tok = tokenizers.Tokenizer(models.BPE(ignore_merges=ignore_merges))
    byte_step = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pattern is None)
    tok.pre_tokenizer = byte_step if pattern is None else pre_tokenizers.Sequence(
        [pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated", invert=False), byte_step])
    tok.normalizer = normalizers.NFC() if nfc else None
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def sentencepiece_style(kind):
    """A BPE with byte fallback trained here, then given the 256 byte pieces <0x00>..<0xFF> (ids 3..258) as
    Llama 2's vocabulary has them; normalized and pre-tokenized as ``kind`` does."""
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    llama_decoder = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    if kind == "llama2":  # transformers' legacy Llama 2: a dummy prefix on every piece between special tokens
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence(llama_decoder)
    elif kind == "mistral":  # Metaspace: a dummy prefix at the text's start only
        tok.pre_tokenizer = pre_tokenizers.Metaspace("▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Sequence(llama_decoder)
    elif kind == "metaspace-split":
        tok.pre_tokenizer = pre_tokenizers.Metaspace("▁", prepend_scheme="always", split=True)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace("▁", prepend_scheme="always")])
    elif kind == "gemma":  # no dummy prefix
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        tok.decoder = decoders.Sequence(llama_decoder[:3])
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"],
                                                        limit_alphabet=70, show_progress=False))
    data = json.loads(tok.to_str())
    trained = data["model"]["vocab"]
    vocab = {token: i for token, i in trained.items() if i < 3}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    vocab.update({token: i + 256 for token, i in trained.items() if i >= 3})
    data["model"]["vocab"] = vocab
    return tokenizers.Tokenizer.from_str(json.dumps(data))


BYTE_LEVEL = {"llama3": lambda: byte_level(LLAMA3_PATTERN, ignore_merges=True),
              "qwen2": lambda: byte_level(QWEN2_PATTERN, nfc=True), "gpt2": lambda: byte_level(None)}
SP_KINDS = ["llama2", "mistral", "metaspace-split", "gemma"]


@pytest.fixture(scope="module", params=[*BYTE_LEVEL, *SP_KINDS])
def pair(request, tmp_path_factory):
    """(Hugging Face's tokenizer, minitfm's read from its tokenizer.json, the kind)."""
    kind = request.param
    hf = BYTE_LEVEL[kind]() if kind in BYTE_LEVEL else sentencepiece_style(kind)
    path = tmp_path_factory.mktemp(kind) / "tokenizer.json"
    hf.save(str(path))
    return hf, read_tokenizer_json(path), kind


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_ids_and_text_equal_hugging_face(pair, text):
    hf, ours, kind = pair
    ids = ours.encode(text)
    assert ids == hf.encode(text, add_special_tokens=False).ids
    assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)


POOL = list("aAbBeéxyzZ019 '’sStTdDlLmMrRvV.,!?-_*#()[]{}\"\t\n\r") + [
    "  ", "\n\n", " \n", "\r\n", "'s", "'LL", "\u0301", "\u00a0", "\u3000", "\u2028", "▁", "机", "器", "龍", "😀",
    "👩‍💻", "🇫🇷", "Ж", "<s>", "</s>", "<|eot_id|>", "<|im_start|>", "<|", "|>", "1234"]


def test_random_texts_equal_hugging_face(pair):
    """300 texts drawn from a pool of the characters where pre-tokenizers differ, seeded."""
    hf, ours, kind = pair
    rng = random.Random(38)
    for _ in range(300):
        text = "".join(rng.choices(POOL, k=rng.randrange(0, 30)))
        ids = ours.encode(text)
        assert ids == hf.encode(text, add_special_tokens=False).ids, text
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False), text


def test_the_right_class_and_the_file_settings(pair):
    hf, ours, kind = pair
    if kind in BYTE_LEVEL:
        pattern = {"llama3": LLAMA3_PATTERN, "qwen2": QWEN2_PATTERN, "gpt2": GPT2_SPLIT_PATTERN}[kind]
        assert type(ours) is Tokenizer and ours.split_pattern == pattern
        assert (ours.normalization, ours.ignore_merges) == (("NFC" if kind == "qwen2" else None), kind == "llama3")
    else:
        assert type(ours) is SentencePieceBPE and ours.strip_spaces == (0 if kind == "gemma" else 1)
    assert ours.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    assert ours.special_ids == {t: hf.token_to_id(t) for t in ours.special_tokens}


def test_decode_round_trips(pair):
    """decode(encode(text)) == text, except where Hugging Face's own pipeline does not round-trip either: NFC
    composes (Qwen), and a Metaspace dummy prefix is not added to a text that starts with a space, so decoding
    strips the text's own space; Llama 2's legacy prefix after a special token becomes a space."""
    hf, ours, kind = pair
    for text in TEXTS:
        if kind == "qwen2" and "\u0301" in text or kind in SP_KINDS and (
                text.startswith(" ") or kind in ("llama2", "metaspace-split") and "<s>" in text):
            continue
        assert ours.decode(ours.encode(text)) == text


def test_byte_fallback_is_used(pair):
    """A character the training text never had (龍, Ж) is encoded as its UTF-8 bytes' byte pieces."""
    hf, ours, kind = pair
    if kind in BYTE_LEVEL:
        pytest.skip("byte-level BPE has no fallback: every token is bytes")
    ids = ours.encode("龍Ж")
    assert [ours.vocab[i] for i in ids] == ["<0xE9>", "<0xBE>", "<0x8D>", "<0xD0>", "<0x96>"] or (
        [ours.vocab[i] for i in ids] == ["▁", "<0xE9>", "<0xBE>", "<0x8D>", "<0xD0>", "<0x96>"])


def test_the_pattern_and_the_normal_form_matter(tmp_path):
    """Read with GPT-2's regex instead of the file's, Llama 3's tokenizer gives other ids for digits and
    newlines, and Qwen's without NFC others for a decomposed é: both are read from the file, not assumed."""
    for kind, text in (("llama3", "1234567 and\n\n  x"), ("qwen2", "cafe\u0301")):
        hf = BYTE_LEVEL[kind]()
        hf.save(str(tmp_path / "tokenizer.json"))
        ours = read_tokenizer_json(tmp_path)  # the folder is enough
        other = Tokenizer(ours.vocab, ours.merges, ours.special_tokens, ignore_merges=ours.ignore_merges,
                          split_pattern=GPT2_SPLIT_PATTERN if kind == "llama3" else ours.split_pattern)
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids != other.encode(text)


def test_a_sentencepiece_files_normal_form_is_applied(tmp_path):
    """A SentencePiece-style file with an NFC normalizer: a decomposed é is composed first, as `tokenizers` does
    (the ids differ from the same file's without NFC, so the step is not a no-op on this text)."""
    hf = sentencepiece_style("gemma")
    hf.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(" ", "▁")])
    hf.save(str(tmp_path / "tokenizer.json"))
    text = "cafe\u0301 nai\u0308ve"
    want = hf.encode(text, add_special_tokens=False).ids
    assert read_tokenizer_json(tmp_path).encode(text) == want
    assert want != sentencepiece_style("gemma").encode(text, add_special_tokens=False).ids


TRANSFORMERS_FAMILIES = ["Qwen2Tokenizer", "LlamaTokenizer", "LlamaTokenizer legacy", "GemmaTokenizer"]


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
def test_the_files_transformers_writes_for_each_family(tmp_path, family):
    """transformers' own tokenizer classes, given a vocabulary and merges trained here, write each family's
    tokenizer.json (its regex, normalizer, Metaspace or Replace, decoder: transformers' choices, not this
    file's); minitfm reads each and encodes as transformers does."""
    import transformers  # requirements.txt installs it: a missing one fails, never skips
    name, _, legacy = family.partition(" ")
    trained = byte_level(None) if name == "Qwen2Tokenizer" else sentencepiece_style("llama2")
    model = json.loads(trained.to_str())["model"]
    vocab = {t: i for t, i in model["vocab"].items() if name != "Qwen2Tokenizer" or not t.startswith("<|")}
    vocab = {t: i for i, t in enumerate(sorted(vocab, key=vocab.get))}
    merges = [tuple(merge) for merge in model["merges"]]
    extra = {"legacy": True} if legacy else {"pad_token": "<unk>", "mask_token": "<unk>", "bos_token": "<s>",
                                               "eos_token": "</s>"} if name == "GemmaTokenizer" else {}
    theirs = getattr(transformers, name)(vocab=vocab, merges=merges, **extra)
    theirs.save_pretrained(tmp_path)
    ours = read_tokenizer_json(tmp_path)
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == theirs(text, add_special_tokens=False)["input_ids"], text
        assert ours.decode(ids) == theirs.decode(ids), text


def test_template_ids_are_what_the_post_processor_adds(tmp_path):
    """before + encode(text) + after == tokenizers' encode(text) with its special tokens (Llama's BOS)."""
    from tokenizers import processors

    from minitfm.text.tokenizer_json import template_ids

    llama3, llama2, qwen2 = BYTE_LEVEL["llama3"](), sentencepiece_style("llama2"), BYTE_LEVEL["qwen2"]()
    bos, eot = llama3.token_to_id("<|begin_of_text|>"), llama3.token_to_id("<|eot_id|>")
    template = processors.TemplateProcessing(single="<|begin_of_text|> $A <|eot_id|>",
                                             special_tokens=[("<|begin_of_text|>", bos), ("<|eot_id|>", eot)])
    llama3.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), template])
    llama2.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    qwen2.post_processor = processors.ByteLevel(trim_offsets=False)
    for hf, expected in ((llama3, ([bos], [eot])), (llama2, ([1], [])), (qwen2, ([], []))):
        hf.save(str(tmp_path / "tokenizer.json"))
        before, after = template_ids(tmp_path)
        assert (before, after) == expected
        ours = read_tokenizer_json(tmp_path)
        for text in TEXTS:
            assert before + ours.encode(text) + after == hf.encode(text).ids
    qwen2.post_processor = processors.BertProcessing(("</s>", 2), ("<s>", 1))
    qwen2.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="the post-processor BertProcessing is not supported"):
        template_ids(tmp_path)


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_ignore_merges(tmp_path, ignore_merges):
    """Merges a, b -> ab first, then b, c -> bc and a, bc -> abc: "abc" stops at [ab, c] by merges, but is the
    token abc as a whole when the file says ignore_merges (as Llama 3's does)."""
    symbols = pre_tokenizers.ByteLevel.alphabet()
    vocab = {s: i for i, s in enumerate(sorted(symbols))} | {"ab": 256, "bc": 257, "abc": 258}
    hf = tokenizers.Tokenizer(models.BPE(vocab, [("a", "b"), ("b", "c"), ("a", "bc")], ignore_merges=ignore_merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.save(str(tmp_path / "tokenizer.json"))
    ours = read_tokenizer_json(tmp_path / "tokenizer.json")
    assert ours.encode("abc xabc") == hf.encode("abc xabc").ids
    assert ours.encode("abc")[0] == (258 if ignore_merges else 256)


BEHAVIORS = ["isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous"]


@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_split_behaviors_equal_hugging_face(behavior):
    import regex

    from minitfm.text.tokenizer_steps import split

    for pattern, text in (("▁", "▁▁a▁b▁▁▁cd▁"), (r"\d+|-", "ab12-34--5x"), (" ", "no match")):
        hf = pre_tokenizers.Split(tokenizers.Regex(pattern), behavior).pre_tokenize_str(text)
        ours = split(text, regex.compile(pattern), "".join(w.title() for w in behavior.split("_")))
        assert ours == [word for word, _ in hf], (pattern, text)


def test_only_the_first_word_gets_the_first_prefix():
    """A Split before Metaspace(prepend_scheme="first"): only the first word of the text gets the ▁."""
    from minitfm.text.tokenizer_steps import flatten, word_splitter

    hf = pre_tokenizers.Sequence([pre_tokenizers.Split(tokenizers.Regex(r"\d"), "isolated"),
                                  pre_tokenizers.Metaspace("▁", prepend_scheme="first", split=False)])
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = hf
    ours = word_splitter(flatten(json.loads(tok.to_str())["pre_tokenizer"], "pre-tokenizer"))
    for text in ("ab12 cd3", "1a", " x"):
        assert ours(text, True) == [word for word, _ in hf.pre_tokenize_str(text)]


def test_encode_iterable_with_another_pattern(pair):
    hf, ours, kind = pair
    if kind not in BYTE_LEVEL:
        pytest.skip("SentencePieceBPE encodes whole texts")
    text = "".join(TEXTS) * 3
    chunks = [text[i:i + 7] for i in range(0, len(text), 7)]
    assert list(ours.encode_iterable(chunks)) == ours.encode(text)


def test_a_tokenizer_with_another_pattern_is_not_saved_as_gpt2_files(pair, tmp_path):
    hf, ours, kind = pair
    if kind != "llama3":
        pytest.skip("one byte-level tokenizer with another pattern is enough")
    with pytest.raises(ValueError, match=E("vocab.json and merges.txt hold GPT-2's pre-tokenizer only")):
        ours.save(tmp_path)


def _edited(tmp_path, edit, kind="llama3"):
    """The path of a tokenizer.json of ``kind`` after ``edit(data)`` changed its JSON."""
    hf = BYTE_LEVEL[kind]() if kind in BYTE_LEVEL else sentencepiece_style(kind)
    data = json.loads(hf.to_str())
    edit(data)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _model(new):
    return lambda data: data.__setitem__("model", new)


# (what, kind of file, edit, pattern the ValueError must match)
UNSUPPORTED = [
    ("WordPiece", "llama3", _model({"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}}),
     "holds a WordPiece model (BERT's kind of tokenizer); minitfm reads BPE tokenizers"),
    ("Unigram", "llama3", _model({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}),
     "holds a Unigram model (T5's and ALBERT's kind of tokenizer)"),
    ("WordLevel", "llama3", _model({"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}),
     "holds a WordLevel model"),
    ("no model", "llama3", lambda d: d.pop("model"), "has no 'model' object"),
    ("suffix", "llama3", lambda d: d["model"].__setitem__("end_of_word_suffix", "</w>"),
     "end_of_word_suffix='</w>', which minitfm does not support"),
    ("lstrip", "llama3", lambda d: d["added_tokens"][0].__setitem__("lstrip", True),
     "the added token '<|begin_of_text|>' has ['lstrip'] set"),
    ("prefix space", "gpt2", lambda d: d["pre_tokenizer"].__setitem__("add_prefix_space", True),
     "ByteLevel with add_prefix_space=false, got ['ByteLevel'] (add_prefix_space=True)"),
    ("two regexes", "llama3", lambda d: d["pre_tokenizer"]["pretokenizers"][1].__setitem__("use_regex", True),
     "cuts text with one regex"),
    ("lowercase", "qwen2", lambda d: d.__setitem__("normalizer", {"type": "Lowercase"}),
     "no normalizer or one of ('NFC', 'NFD', 'NFKC', 'NFKD'), got ['Lowercase']"),
    ("no byte fallback", "mistral", lambda d: d["model"].__setitem__("byte_fallback", False),
     "neither a ByteLevel pre-tokenizer nor byte_fallback"),
    ("Whitespace", "mistral", lambda d: d.__setitem__("pre_tokenizer", {"type": "Whitespace"}),
     "the pre-tokenizer Whitespace is not supported with byte fallback"),
    ("BertNormalizer", "llama2", lambda d: d.__setitem__("normalizer", {"type": "BertNormalizer"}),
     "the normalizer BertNormalizer is not supported"),
    ("WordPiece decoder", "llama2", lambda d: d.__setitem__("decoder", {"type": "WordPiece", "prefix": "##"}),
     "the decoder WordPiece"),
    ("bad merge", "llama3", lambda d: d["model"]["merges"].append(["a", "b", "c"]), "must be 'a b' or ['a', 'b']"),
]


@pytest.mark.parametrize("what,kind,edit,pattern", UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED])
def test_an_unsupported_file_is_refused_by_name(tmp_path, what, kind, edit, pattern):
    with pytest.raises(ValueError, match=E(pattern)):
        read_tokenizer_json(_edited(tmp_path, edit, kind))


def test_a_missing_or_damaged_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json does not exist"):
        read_tokenizer_json(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="is not valid JSON"):
        read_tokenizer_json(tmp_path / "tokenizer.json")
    with pytest.raises(TypeError, match="got NoneType"):
        read_tokenizer_json(None)


def test_pretokenize_with_another_pattern_keeps_the_text_between_matches():
    from minitfm.text.pretokenize import pretokenize

    assert pretokenize("ab12cd 3", r"\d+") == ["ab", "12", "cd ", "3"]
    assert pretokenize("12345 67", LLAMA3_PATTERN) == ["123", "45", " ", "67"]
    assert pretokenize("12345 67", QWEN2_PATTERN) == ["1", "2", "3", "4", "5", " ", "6", "7"]
    with pytest.raises(TypeError, match="a split pattern must be a str"):
        pretokenize("ab", [r"\d"])


def test_tokenizer_arguments_are_checked():
    vocab = {b: bytes([b]) for b in range(256)}
    with pytest.raises(ValueError, match=E("the split pattern '(' is not a valid regular expression")):
        Tokenizer(vocab, [], split_pattern="(")
    with pytest.raises(ValueError, match=E("normalization must be None or one of ('NFC', 'NFD', 'NFKC', 'NFKD'), "
                                           "got 'nfc'")):
        Tokenizer(vocab, [], normalization="nfc")
    with pytest.raises(TypeError, match="ignore_merges must be a bool, got int"):
        Tokenizer(vocab, [], ignore_merges=1)
