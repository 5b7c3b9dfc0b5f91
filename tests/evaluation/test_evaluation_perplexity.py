"""Bits per byte: exact values on models whose answer is known, and lm-eval's formula."""
import math

import pytest
import torch
import torch.nn.functional as F

from minitfm import DecoderOnlyLM, ModelConfig
from minitfm.evaluation import bits_per_byte, model_bits_per_byte, next_token_log_probs, utf8_length

TEXT = "Attention is all you need — même en français, 也可以用中文."


class ByteTokenizer:
    """One token per UTF-8 byte (ids 0..255)."""

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


def uniform_byte_model(max_seq_len=128):
    model = DecoderOnlyLM(ModelConfig(vocab_size=256, d_model=16, n_heads=2, n_layers=1, max_seq_len=max_seq_len))
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: p = 1/256 for every byte
    return model.eval()


def test_utf8_length_counts_bytes_not_characters():
    assert utf8_length("aé中😀") == 1 + 2 + 3 + 4
    assert utf8_length(TEXT) == len(TEXT.encode("utf-8")) > len(TEXT)


def test_formula_and_lm_eval_aggregation_agree():
    from lm_eval.api.metrics import bits_per_byte as lm_eval_bits_per_byte  # items: (loglikelihood, n_bytes)

    assert bits_per_byte(math.log(2) * 80, 10) == pytest.approx(8.0, rel=1e-15)
    for nats, n_bytes in [(12.5, 7), (0.0, 3), (1234.5, 999)]:
        assert bits_per_byte(nats, n_bytes) == pytest.approx(lm_eval_bits_per_byte([(-nats, n_bytes)]), rel=1e-13)


def test_uniform_model_over_256_bytes_scores_exactly_8_bits_per_byte():
    model = uniform_byte_model()
    with_bos = model_bits_per_byte(model, ByteTokenizer(), TEXT, bos_id=0)  # NUL as the start token
    assert with_bos.n_bytes == utf8_length(TEXT) and with_bos.n_tokens == utf8_length(TEXT)
    without_bos = model_bits_per_byte(model, ByteTokenizer(), TEXT)  # first byte is context only
    assert without_bos.n_bytes == utf8_length(TEXT) - 1
    for result in (with_bos, without_bos):
        assert result.bits_per_byte == pytest.approx(8.0, abs=1e-12)
        assert result.perplexity == pytest.approx(256.0, rel=1e-12)


def test_the_books_word_tokenizer_works_as_it_is_and_its_bos_costs_no_byte():
    from minitfm import WordTokenizer

    tokenizer = WordTokenizer(["the", "cat", "sat", "on", "mat"])  # encode() starts with <bos>
    model = DecoderOnlyLM(ModelConfig(vocab_size=tokenizer.vocab_size, d_model=16, n_heads=2, n_layers=1))
    with torch.no_grad():
        model.lm_head.weight.zero_()  # uniform over the 9 ids
    text = "the cat sat on the mat"
    result = model_bits_per_byte(model.eval(), tokenizer, text)
    assert result.n_tokens == 6 and result.n_bytes == len(text)
    assert result.bits_per_byte == pytest.approx(6 * math.log2(tokenizer.vocab_size) / len(text), rel=1e-12)


def test_total_nats_is_the_summed_cross_entropy_of_a_trained_looking_model():
    torch.manual_seed(1)
    model = DecoderOnlyLM(ModelConfig(vocab_size=256, d_model=16, n_heads=2, n_layers=2, max_seq_len=128)).eval()
    ids = [7] + ByteTokenizer().encode(TEXT)
    result = model_bits_per_byte(model, ByteTokenizer(), TEXT, bos_id=7)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    expected = F.cross_entropy(logits[:-1].double(), torch.tensor(ids[1:]), reduction="sum").item()
    assert result.total_nats == pytest.approx(expected, rel=1e-10)
    assert result.bits_per_byte == pytest.approx(expected / math.log(2) / utf8_length(TEXT), rel=1e-10)
    assert result.bits_per_byte != pytest.approx(8.0, abs=0.01)  # a random model is not the uniform one


# An exact model of a first-order Markov chain over four letters, seen through two tokenizers: one letter per token,
# or two letters per token. Both give the text the same probability, so the same bits per byte.
ALPHABET = "abcd"
START = torch.tensor([0.4, 0.3, 0.2, 0.1])
MOVE = torch.tensor([[0.1, 0.6, 0.2, 0.1], [0.5, 0.1, 0.3, 0.1], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])


class LetterTokenizer:
    def encode(self, text):
        return [ALPHABET.index(ch) for ch in text]


class PairTokenizer:
    def encode(self, text):
        assert len(text) % 2 == 0
        return [4 * ALPHABET.index(text[i]) + ALPHABET.index(text[i + 1]) for i in range(0, len(text), 2)]


def letter_model(tokens):  # (1, T) -> (1, T, 5): row = log p(next letter | this token); id 4 is the start token
    table = torch.cat([MOVE.log(), START.log()[None]])  # (5, 4)
    return torch.cat([table, torch.full((5, 1), -1e9)], dim=1)[tokens]  # the start token is never predicted


def pair_model(tokens):  # (1, T) -> (1, T, 17): log p(next pair | this pair); id 16 is the start token
    last = torch.arange(16) % 4  # a pair's last letter
    pair_first, pair_second = torch.arange(16) // 4, torch.arange(16) % 4
    from_pair = MOVE.log()[last][:, pair_first] + MOVE.log()[pair_first, pair_second]  # (16, 16)
    from_start = START.log()[pair_first] + MOVE.log()[pair_first, pair_second]  # (16,)
    table = torch.cat([from_pair, from_start[None]])  # (17, 16)
    return torch.cat([table, torch.full((17, 1), -1e9)], dim=1)[tokens]


def test_two_tokenizations_of_the_same_text_by_an_exact_model_agree():
    generator = torch.Generator().manual_seed(3)
    letters = [int(torch.multinomial(START, 1, generator=generator))]
    for _ in range(199):
        letters.append(int(torch.multinomial(MOVE[letters[-1]], 1, generator=generator)))
    text = "".join(ALPHABET[i] for i in letters)
    exact_nats = -(START[letters[0]].log() + sum(MOVE[a, b].log() for a, b in zip(letters, letters[1:]))).item()
    by_letter = model_bits_per_byte(letter_model, LetterTokenizer(), text, bos_id=4)
    by_pair = model_bits_per_byte(pair_model, PairTokenizer(), text, bos_id=16)
    assert by_letter.total_nats == pytest.approx(exact_nats, rel=1e-5)
    assert by_letter.bits_per_byte == pytest.approx(by_pair.bits_per_byte, rel=1e-5)
    # ...while per-token perplexity ranks them apart: the pair model makes half as many, harder predictions.
    assert by_pair.perplexity > 1.5 * by_letter.perplexity


class WithContextLimit:
    """The Markov letter model behind a context limit, as a model with ``config.max_seq_len`` presents it."""

    def __init__(self, max_seq_len):
        self.config = type("Config", (), {"max_seq_len": max_seq_len})()

    def __call__(self, tokens):
        assert tokens.shape[1] <= self.config.max_seq_len
        return letter_model(tokens)


def test_windows_score_every_token_once_and_agree_with_one_pass_when_context_suffices():
    ids = [4] + LetterTokenizer().encode("abcadbcabdacbdabcadbcabdacbd" * 3)  # 85 tokens
    whole = next_token_log_probs(letter_model, ids)
    for limit, stride in [(16, 8), (16, 15), (10, 1), (84, 3)]:
        windowed = next_token_log_probs(WithContextLimit(limit), ids, stride=stride)
        assert windowed.shape == whole.shape  # each of the 84 targets scored exactly once
        torch.testing.assert_close(windowed, whole)  # a first-order chain needs one token of context
    model = uniform_byte_model(max_seq_len=16)
    result = model_bits_per_byte(model, ByteTokenizer(), TEXT, bos_id=0, stride=8)
    assert result.n_tokens == utf8_length(TEXT) and result.bits_per_byte == pytest.approx(8.0, abs=1e-12)


def test_next_token_log_probs_is_causal():
    model = uniform_byte_model()
    torch.nn.init.normal_(model.lm_head.weight)
    a = next_token_log_probs(model, [1, 2, 3, 4, 5])
    b = next_token_log_probs(model, [1, 2, 3, 9, 9])
    torch.testing.assert_close(a[:2], b[:2])  # predictions of tokens 1 and 2 never see tokens 3 and 4
    assert a.shape == (4,) and bool((a <= 0).all())


def test_bad_input_is_refused_with_a_clear_message():
    model = uniform_byte_model(max_seq_len=8)
    with pytest.raises(ValueError, match="text is empty"):
        model_bits_per_byte(model, ByteTokenizer(), "", bos_id=0)
    with pytest.raises(TypeError, match="tokenizer must have encode"):
        model_bits_per_byte(model, object(), "abc", bos_id=0)
    with pytest.raises(TypeError, match="has no decode"):
        model_bits_per_byte(model, LetterTokenizer(), "abc")
    with pytest.raises(ValueError, match="exceed the model's max_seq_len=8: pass stride"):
        model_bits_per_byte(model, ByteTokenizer(), "more than eight bytes", bos_id=0)
    with pytest.raises(ValueError, match="stride must be < max_seq_len=8 so windows overlap, got 8"):
        model_bits_per_byte(model, ByteTokenizer(), "more than eight bytes", bos_id=0, stride=8)
    with pytest.raises(ValueError, match="single token"):
        model_bits_per_byte(model, ByteTokenizer(), "a")
    with pytest.raises(TypeError, match="n_bytes must be an int count, got bool"):
        bits_per_byte(3.0, True)
    with pytest.raises(ValueError, match="n_bytes must be >= 1, got 0"):
        bits_per_byte(3.0, 0)
    with pytest.raises(ValueError, match="total_nats is a sum of -ln p >= 0"):
        bits_per_byte(-1.0, 4)
    with pytest.raises(ValueError, match="1-D sequence of >= 2 integer ids"):
        next_token_log_probs(model, [1])
    dropout_model = DecoderOnlyLM(ModelConfig(vocab_size=256, d_model=16, n_heads=2, n_layers=1, dropout=0.1))
    with pytest.raises(ValueError, match=r"training mode with dropout active.*call model.eval\(\)"):
        next_token_log_probs(dropout_model, [1, 2, 3])
    assert next_token_log_probs(dropout_model.eval(), [1, 2, 3]).shape == (2,)
    with pytest.raises(ValueError, match="must return logits"):
        next_token_log_probs(lambda t: torch.zeros(1, 3), [1, 2, 3])


def test_without_bos_the_first_tokens_bytes_are_its_bytes_not_its_texts():
    """Review 2026-12b M1: "注意力机制" in byte tokens starts with byte 0xE6, a third of "注", which decodes to
    U+FFFD (3 bytes). 15 bytes minus the 1 unscored byte leave 14 bytes for the 14 scored tokens."""
    from minitfm.lm.prose import byte_tokenizer

    tokenizer, text = byte_tokenizer(), "注意力机制"
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig(vocab_size=261, d_model=16, n_heads=2, n_layers=1, max_seq_len=32)).eval()
    result = model_bits_per_byte(model, tokenizer, text)
    assert tokenizer.decode(tokenizer.encode(text)[:1]) == "\ufffd"  # the trap: 3 bytes of text for 1 byte
    assert (result.n_tokens, result.n_bytes) == (14, 14)
    assert result.bits_per_byte == pytest.approx(result.total_nats / (math.log(2) * 14), rel=1e-12)
    # a tokenizer without a vocab of bytes cannot say how many bytes U+FFFD stood for: refused, not miscounted
    with pytest.raises(ValueError, match=r"part of a character.*pass bos_id"):
        model_bits_per_byte(uniform_byte_model(), ByteTokenizer(), text)
    whole = model_bits_per_byte(uniform_byte_model(), ByteTokenizer(), "a" + text)  # a whole first character
    assert (whole.n_tokens, whole.n_bytes) == (15, 15)
