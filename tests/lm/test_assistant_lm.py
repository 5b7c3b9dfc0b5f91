"""The assistant's recipe and its measures: whole epochs, held-out questions, floors, pass@k on samples."""
from __future__ import annotations

import pytest
import torch

from minitfm.finetuning import people as P, skills as S
from minitfm.finetuning.tasks import Example
from minitfm.lm import assistant_lm as A
from minitfm.lm.base_lm import base_lm_config
from minitfm.models import DecoderOnlyLM


def test_fine_tuning_asks_training_instances_and_tune_people_only():
    examples = A.sft_examples()
    assert len(examples) == sum(A.SFT_INSTANCES.values()) + len(P.ATTRIBUTES) * len(P.chosen(split="tune"))
    assert {e.split for e in examples} == {"train", "tune"}
    held_names = {p["name"] for p in P.chosen(split="heldout")}
    assert not any(name in e.prompt for e in examples for name in held_names if e.task.startswith("people/"))


def test_whole_epochs():
    config = A.sft_config(160)
    assert config.steps * config.batch_size == 160 * A.SFT_EPOCHS and config.optimizer == "adamw"


def test_heldout_questions_come_from_the_heldout_side():
    assert all(e.split == "heldout" for t in A.TASKS for e in A.heldout_examples(t, 20))
    assert len(A.heldout_examples("people/city", group="one")) == len(P.chosen("one", "heldout"))
    with pytest.raises(ValueError, match="task"):
        A.heldout_examples("multiply")


def test_best_constant_is_the_most_common_answer():
    examples = [Example("count", 0, "q", a, "heldout") for a in "1121"]
    assert A.best_constant(examples) == ("1", 0.75)


def test_accuracy_and_pass_at_k_on_a_model_that_never_ends_its_turn():
    torch.manual_seed(0)
    model = DecoderOnlyLM(base_lm_config(d_model=32, n_layers=1, d_ff=64, n_heads=2)).eval()
    examples = A.heldout_examples("sort", 3)
    result = A.accuracy(model, examples)
    assert result["accuracy"] == 0 and result["n"] == 3 and 0 <= result["interval"][0] <= result["interval"][1]
    sampled = A.pass_at(model, examples, n=4, ks=(1, 2))
    assert sampled["pass@1"] == sampled["pass@2"] == 0 and sampled["distinct_answers"] > 1  # random bytes vary


def test_count_replies_restate_the_question_and_its_floor_counts_the_number_inside():
    fact, asked = S.instances("count", "train", 1, seed=0)[0], S.examples("count", "train", 1, seed=0)[0]
    assert asked.answer == S.statement("count", fact) == S.reply_text("count", fact)
    assert asked.value == asked.fact_answer == fact["answer"] and asked.answer.endswith(f" {fact['answer']} times.")
    plain = S.examples("add", "train", 1, seed=0)[0]
    assert plain.value == "" and plain.fact_answer == plain.answer  # the other skills reply with the answer alone
    restated = [Example("count", 0, "q", f"The letter a appears in {w} {a} times.", "heldout", a)
                for w, a in zip(["ab", "ba", "aab", "cd"], "1120")]
    assert A.best_constant(restated) == ("1", 0.5)  # every reply differs; the number inside is what a guess hits
