import math

import pytest
import torch

from minitfm.generation.sampling import RepetitionPenalty, Temperature, TopK, TopP, apply_processors

NEG = float("-inf")


def tiny():
    # probabilities of row 0 are exactly (0.5, 0.25, 0.125, 0.125) because the logits are log-probabilities
    logits = torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.125), math.log(0.125)],
                           [2.0, -1.0, 0.5, 3.0]])
    tokens = torch.tensor([[1, 1], [0, 2]])
    return tokens, logits


def test_temperature_divides():
    tokens, logits = tiny()
    out = Temperature(0.5)(tokens, logits)
    torch.testing.assert_close(out, logits * 2)
    # temperature changes the distribution: t < 1 raises the top probability
    assert out.softmax(-1)[0, 0] > logits.softmax(-1)[0, 0]


def test_top_k_hand_computed():
    tokens, logits = tiny()
    out = TopK(2)(tokens, logits)
    expected = torch.tensor([[logits[0, 0], logits[0, 1], NEG, NEG], [2.0, NEG, NEG, 3.0]])
    torch.testing.assert_close(out, expected)


def test_top_k_keeps_ties_and_handles_k_above_vocab():
    logits = torch.tensor([[1.0, 2.0, 2.0, 0.0]])
    tokens = torch.zeros(1, 0, dtype=torch.long)
    assert torch.isfinite(TopK(2)(tokens, logits)).tolist() == [[False, True, True, False]]
    assert torch.isfinite(TopK(1)(tokens, logits)).sum() == 2  # a tie at the top keeps both
    torch.testing.assert_close(TopK(100)(tokens, logits), logits)


def test_top_p_hand_computed():
    tokens, logits = tiny()
    # row 0 probabilities 0.5, 0.25, 0.125, 0.125: p = 0.7 needs 0.5 + 0.25 = 0.75 >= 0.7 -> keep two
    out = TopP(0.7)(tokens, logits)
    assert torch.isfinite(out[0]).tolist() == [True, True, False, False]
    # p = 0.5 is covered exactly by the first token alone
    assert torch.isfinite(TopP(0.5)(tokens, logits)[0]).tolist() == [True, False, False, False]
    # p = 0.8 needs three tokens
    assert torch.isfinite(TopP(0.8)(tokens, logits)[0]).tolist() == [True, True, True, False]
    torch.testing.assert_close(TopP(1.0)(tokens, logits), logits)
    # kept logits are unchanged
    torch.testing.assert_close(out[0, :2], logits[0, :2])


def test_repetition_penalty_hand_computed():
    tokens, logits = tiny()
    out = RepetitionPenalty(2.0)(tokens, logits)
    expected = logits.clone()
    expected[0, 1] = logits[0, 1] * 2  # negative logit of a seen token: multiplied
    expected[1, 0] = 2.0 / 2  # positive logit of a seen token: divided
    expected[1, 2] = 0.5 / 2
    torch.testing.assert_close(out, expected)
    # ignore_ids leaves those tokens alone
    out = RepetitionPenalty(2.0, ignore_ids=[0])(tokens, logits)
    assert out[1, 0] == 2.0 and out[1, 2] == 0.25


def test_repetition_penalty_always_lowers_probability_of_seen_tokens():
    torch.manual_seed(0)
    logits = torch.randn(3, 10)
    tokens = torch.randint(0, 10, (3, 4))
    out = RepetitionPenalty(1.3)(tokens, logits)
    for b in range(3):
        for t in tokens[b].unique():
            assert out[b, t] < logits[b, t]


@pytest.mark.parametrize("processor", [Temperature(0.7), TopK(2), TopP(0.6), RepetitionPenalty(1.5)])
def test_input_unchanged(processor):
    tokens, logits = tiny()
    before_tokens, before_logits = tokens.clone(), logits.clone()
    out = processor(tokens, logits)
    assert out.data_ptr() != logits.data_ptr()
    assert torch.equal(tokens, before_tokens) and torch.equal(logits, before_logits)


def test_extreme_settings_keep_the_best_token():
    torch.manual_seed(0)
    logits = torch.randn(5, 50) * 10
    tokens = torch.randint(0, 50, (5, 30))
    out = apply_processors(tokens, logits, [Temperature(1e-3), TopK(1), TopP(1e-9), RepetitionPenalty(1e6)])
    assert (torch.isfinite(out).sum(-1) >= 1).all()
    probs = out.softmax(-1)
    assert not torch.isnan(probs).any()
    # one-token processors keep exactly the argmax of the input (top-k before penalty here)
    single = apply_processors(tokens, logits, [TopP(1e-9)])
    assert torch.equal(single.argmax(-1), logits.argmax(-1))
    assert (torch.isfinite(single).sum(-1) == 1).all()


def test_apply_processors_composes_in_order():
    tokens, logits = tiny()
    out = apply_processors(tokens, logits, [Temperature(2.0), TopK(1)])
    torch.testing.assert_close(out, TopK(1)(tokens, Temperature(2.0)(tokens, logits)))
    torch.testing.assert_close(apply_processors(tokens, logits, []), logits)


@pytest.mark.parametrize("make, match", [
    (lambda: Temperature(0), "temperature must be > 0"),
    (lambda: Temperature(-1.0), "temperature must be > 0"),
    (lambda: Temperature(float("nan")), "finite"),
    (lambda: TopK(0), "k must be >= 1"),
    (lambda: TopP(0.0), r"top-p p must be in \(0, 1\]"),
    (lambda: TopP(1.5), r"top-p p must be in \(0, 1\]"),
    (lambda: RepetitionPenalty(0.0), "penalty must be > 0"),
    (lambda: RepetitionPenalty(-2), "penalty must be > 0"),
])
def test_invalid_arguments_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_wrong_types_raise():
    with pytest.raises(TypeError, match="k must be an int"):
        TopK(2.5)
    with pytest.raises(TypeError, match="temperature must be a number"):
        Temperature("hot")
    tokens, logits = tiny()
    with pytest.raises(ValueError, match="share B"):
        TopK(1)(tokens[:1], logits)
    with pytest.raises(TypeError, match="processor 0 must be callable"):
        apply_processors(tokens, logits, [3])
