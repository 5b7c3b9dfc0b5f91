"""Multiple-choice scoring against lm-eval's own ``process_results`` on the same choices and log-likelihoods."""
import math
import types

import numpy as np
import pytest
import torch

from minitfm import DecoderOnlyLM, ModelConfig
from minitfm.evaluation import (choice_scores, continuation_log_probs, multiple_choice_metrics, next_token_log_probs,
                                score_choices)

# Choices whose character and byte lengths differ, so acc_norm and acc_bytes can disagree.
CHOICES = ["Paris", "a café in the city", "北京", "the naïve résumé", "Rome, Italy"]


def lm_eval_configurable(choices, gold, lls):
    """lm-eval's ConfigurableTask.process_results (the path of every YAML multiple-choice task), run on a stand-in
    task object that carries only what that method reads."""
    from lm_eval.api.task import ConfigurableTask

    task = types.SimpleNamespace(
        config=types.SimpleNamespace(process_results=None), OUTPUT_TYPE="multiple_choice",
        _metric_fn_list={"acc": None, "acc_norm": None, "acc_bytes": None},
        doc_to_choice=lambda doc: doc["choices"], doc_to_target=lambda doc: doc["gold"],
        multiple_input=False, multiple_target=False)
    doc = {"choices": choices, "gold": gold}
    return ConfigurableTask.process_results(task, doc, [(ll, False) for ll in lls])


def test_metrics_equal_lm_eval_process_results_on_random_log_likelihoods():
    from lm_eval.api.task import MultipleChoiceTask

    rng = np.random.default_rng(0)
    disagreements = 0
    for trial in range(300):
        k = int(rng.integers(2, len(CHOICES) + 1))
        choices = list(rng.permutation(CHOICES)[:k])
        gold = int(rng.integers(k))
        token_lps = [-rng.exponential(1.0, size=int(rng.integers(1, 6))) for _ in choices]
        scores = choice_scores(token_lps, choices)
        ours = multiple_choice_metrics(scores, gold)
        lls = [float(lp.sum()) for lp in token_lps]
        theirs = lm_eval_configurable(choices, gold, lls)
        assert {key: ours[key] for key in theirs} == theirs, (trial, choices, lls)
        legacy = MultipleChoiceTask.process_results(None, {"choices": choices, "gold": gold}, [(x, False) for x in lls])
        assert legacy == {"acc": ours["acc"], "acc_norm": ours["acc_norm"]}
        disagreements += ours["acc"] != ours["acc_norm"]
    assert disagreements > 10  # the normalisation mattered on many items, so the equality above tested it


def test_normalisations_by_hand_and_a_ranking_that_flips():
    # "yes" is short and fairly likely; the gold answer is long, each of its tokens likely.
    scores = choice_scores([[-2.0], [-0.5, -0.4, -0.6, -0.5]], ["yes", "it depends on the context"])
    np.testing.assert_allclose(scores.sum, [-2.0, -2.0 - 0.0])
    np.testing.assert_allclose(scores.per_token, [-2.0, -0.5])
    np.testing.assert_allclose(scores.per_char, [-2.0 / 3, -2.0 / 25])
    assert scores.predict("sum") == 0  # a tie in the sum: the first choice, as numpy.argmax
    assert scores.predict("per_char") == 1 and scores.predict("per_token") == 1
    assert multiple_choice_metrics(scores, 1) == {"acc": 0.0, "acc_norm": 1.0, "acc_bytes": 1.0, "acc_per_token": 1.0}
    chinese = choice_scores([[-3.0], [-2.5]], ["北京", "Rome"])  # 2 characters, 6 bytes; 4 characters, 4 bytes
    assert chinese.predict("per_char") == 1 and chinese.predict("per_byte") == 0  # acc_norm and acc_bytes differ


class CharTokenizer:
    def encode(self, text):
        return [ord(ch) % 64 for ch in text]


def test_score_choices_sums_the_continuation_tokens_of_one_forward_pass():
    torch.manual_seed(2)
    model = DecoderOnlyLM(ModelConfig(vocab_size=64, d_model=16, n_heads=2, n_layers=2, max_seq_len=64)).eval()
    context, choices = "Question: two plus two? Answer:", ["four", "five", "twenty-two"]
    scores = score_choices(model, CharTokenizer(), context, choices)
    for i, choice in enumerate(choices):
        whole = CharTokenizer().encode(context + " " + choice)
        log_probs = next_token_log_probs(model, whole)  # (T-1,)
        n_cont = len(" " + choice)
        assert scores.sum[i] == pytest.approx(float(log_probs[-n_cont:].sum()), rel=1e-12)
        assert scores.per_token[i] == pytest.approx(scores.sum[i] / n_cont, rel=1e-12)  # the space is a token
        assert scores.per_char[i] == pytest.approx(scores.sum[i] / len(choice), rel=1e-12)  # ...not a character


def test_trailing_space_of_the_context_moves_to_the_continuation_as_in_lm_eval():
    torch.manual_seed(3)
    model = DecoderOnlyLM(ModelConfig(vocab_size=64, d_model=16, n_heads=2, n_layers=1, max_seq_len=64)).eval()
    a = continuation_log_probs(model, CharTokenizer(), "The answer is ", "yes")
    b = continuation_log_probs(model, CharTokenizer(), "The answer is", " yes")
    torch.testing.assert_close(a, b)
    assert a.shape == (4,)


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="one list of token log-probs per choice: got 1 lists for 2 choices"):
        choice_scores([[-1.0]], ["a", "b"])
    with pytest.raises(ValueError, match="finite log-probs <= 0"):
        choice_scores([[0.5], [-1.0]], ["a", "b"])
    with pytest.raises(ValueError, match=r"token_log_probs\[1\] must be a non-empty"):
        choice_scores([[-0.5], []], ["a", "b"])
    with pytest.raises(ValueError, match=r"choices\[1\] must be a non-empty str"):
        choice_scores([[-0.5], [-1.0]], ["a", ""])
    with pytest.raises(ValueError, match="non-empty list of strings"):
        choice_scores([[-0.5]], "a")
    scores = choice_scores([[-0.5], [-1.0]], ["a", "b"])
    with pytest.raises(ValueError, match="gold must index one of the 2 choices, got 2"):
        multiple_choice_metrics(scores, 2)
    with pytest.raises(TypeError, match="gold must be an int count, got bool"):
        multiple_choice_metrics(scores, True)
    with pytest.raises(ValueError, match="kind must be"):
        scores.predict("mean")
    with pytest.raises(ValueError, match="context must be a non-empty str"):
        continuation_log_probs(None, CharTokenizer(), "", "yes")
    assert math.isclose(scores.sum[0], -0.5)
