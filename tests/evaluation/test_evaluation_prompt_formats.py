"""Lettered choices against lm-eval's MMLU template, rendered by lm-eval's own Jinja code."""
import numpy as np
import pytest
import torch

from minitfm import DecoderOnlyLM, ModelConfig
from minitfm.evaluation import LETTERS, lettered_prompt, score_choices, score_lettered


def mmlu_doc_to_text(question, choices):
    import yaml
    from lm_eval import tasks
    from lm_eval.utils import apply_template

    path = __import__("pathlib").Path(tasks.__file__).parent / "mmlu/default/_default_template_yaml"
    config = yaml.safe_load(path.read_text())
    assert config["doc_to_choice"] == list(LETTERS)
    return apply_template(config["doc_to_text"], {"question": question, "choices": choices})


@pytest.mark.parametrize("question, choices", [
    ("What is 2 + 2?", ["3", "4", "five", "22"]),
    ("  Which city is the capital of France?\n", ["Paris", "a café in the city", "北京", "Rome, Italy"]),
])
def test_lettered_prompt_is_lm_eval_mmlu_template(question, choices):
    assert lettered_prompt(question, choices) == mmlu_doc_to_text(question, choices)


def test_custom_labels_separator_and_no_cue():
    assert lettered_prompt("ctx", ["x y", "z"], ("a", "the"), separator=" ", cue="") == "ctx\na x y\nthe z"
    assert lettered_prompt("ctx", ["x", "y"], "AB") == "ctx\nA. x\nB. y\nAnswer:"


class CharTokenizer:
    def encode(self, text):
        return [ord(c) % 64 for c in text]


def test_score_lettered_scores_the_labels_after_the_prompt():
    torch.manual_seed(0)
    model = DecoderOnlyLM(ModelConfig.small_lm(vocab_size=64, d_model=16, n_heads=2, n_layers=1,
                                               max_seq_len=128, pad_id=None)).eval()
    tok = CharTokenizer()
    choices = ["red", "blue fox", "a"]
    got = score_lettered(model, tok, "Which?", choices)
    want = score_choices(model, tok, lettered_prompt("Which?", choices), ["A", "B", "C"])
    np.testing.assert_allclose(got.sum, want.sum)
    # the labels' scores, not the choices': changing a choice's text changes the prompt, not what is scored
    other = score_lettered(model, tok, "Which?", ["red", "blue fox", "aaaaaaaaaaaa"])
    assert got.per_char.tolist() != other.per_char.tolist() and len(got.sum) == 3


@pytest.mark.parametrize("choices, labels, match", [
    ([], LETTERS, "non-empty list"),
    (["a", "b", "c"], ("A", "B"), "a label for each of the 3 choices"),
    (["a", "b"], ("A", "A"), "distinct"),
    (["a", ""], LETTERS, "non-empty strings"),
])
def test_bad_input_is_named(choices, labels, match):
    with pytest.raises(ValueError, match=match):
        lettered_prompt("ctx", choices, labels)
