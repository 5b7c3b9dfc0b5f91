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


def test_the_shipped_assistant_earns_its_record_and_the_record_meets_issue_46s_targets():
    """The accuracies ``train_assistant_lm.py --save`` stored are what these weights earn here (greedy replies can
    flip where two tokens nearly tie on another CPU: within 2 points), and the record meets the targets: three tasks
    at 80% or more, an intermediate task with pass@1 in 20-70% and pass@16 20 points above, every floor at most 30%."""
    import json

    record = json.loads(A.RECORD.read_text(encoding="utf-8"))
    model = A.load_assistant_lm()
    for task in S.SKILLS:
        now = A.accuracy(model, A.heldout_examples(task, record["tasks"][task]["n"]))
        assert abs(now["accuracy"] - record["tasks"][task]["accuracy"]) <= 0.02, (task, now, record["tasks"][task])
        assert now["best_constant"] == record["tasks"][task]["best_constant"]
    tasks = record["tasks"]
    assert sum(f["accuracy"] >= 0.8 for f in tasks.values()) >= 3
    assert max(f["best_constant"] for f in tasks.values()) <= 0.3
    mid = record["intermediate"]
    assert mid["task"] == A.INTERMEDIATE and 0.2 <= mid["pass@1"] <= 0.7 and mid["pass@16"] >= mid["pass@1"] + 0.2
    assert mid["distinct_answers"] > 2  # answers spread over many values, not one constant reply
