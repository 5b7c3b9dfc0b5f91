"""Chapter 16's DPO and GRPO models: the shipped weights are the recorded ones and earn their record's greedy
accuracies, GRPO moved the final norm's gain only, the recipe functions refuse bad input, and a short run of each
is seeded, leaves the assistant unchanged and puts the caller's thread count back. (The full retrain is
``benchmarks/train_preference_lms.py --check``.)"""
from __future__ import annotations

import json

import pytest
import torch

from minitfm.lm import assistant_lm as A, preference_lms as P
from minitfm.lm.base_lm import base_lm_config
from minitfm.models import DecoderOnlyLM

SHIPPED = {"dpo": (P.load_dpo_lm, P.DPO_RECORD, P.DPO_RECIPE), "grpo": (P.load_grpo_lm, P.GRPO_RECORD, P.GRPO_RECIPE)}


@pytest.fixture(scope="module")
def assistant():
    return A.load_assistant_lm()


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_weights_are_the_recorded_ones_and_earn_its_greedy_accuracies(name, assistant):
    """The .pt holds the weights the record measured (same SHA-256), made by the recipe the module states; their
    greedy accuracy on add and sort is the record's here (a reply can flip where two tokens nearly tie on another
    CPU: within 2 points), and so is the count of add replies that differ from the assistant's (within 4)."""
    load, path, recipe = SHIPPED[name]
    record, model = json.loads(path.read_text(encoding="utf-8")), load()
    assert P.weights_digest(model) == record["weights_sha256"]
    assert record["recipe"] == recipe and record["threads"] == 1
    for task in ("add", "sort"):
        then = record["figures"]["tasks"][task]
        examples = A.heldout_examples(task, then["n"])
        mine = P.greedy_answers(model, examples)
        right = sum(a == e.answer for a, e in zip(mine, examples)) / len(examples)
        assert abs(right - then["accuracy"]) <= 0.02, (name, task, right, then)
        if task == "add":
            differ = sum(a != b for a, b in zip(mine, P.greedy_answers(assistant, examples)))
            assert abs(differ - then["differ_from_assistant"]) <= 4, (name, differ, then)
    mid = record["figures"]["intermediate"]
    assert mid["task"] == "add" and mid["seed"] == P.SAMPLE_SEED and 0 <= mid["pass@1"] <= mid["pass@16"] <= 1


def test_grpo_trained_the_final_norm_gain_only_and_dpo_every_parameter(assistant):
    before = dict(assistant.named_parameters())
    grpo = {n: torch.equal(p, before[n]) for n, p in P.load_grpo_lm().named_parameters()}
    assert [n for n, same in grpo.items() if not same] == ["final_norm.weight"]
    dpo = {n: torch.equal(p, before[n]) for n, p in P.load_dpo_lm().named_parameters()}
    assert sum(not same for same in dpo.values()) > len(dpo) // 2  # trainable "all": nearly every tensor moved


def _tiny():
    torch.manual_seed(0)
    return DecoderOnlyLM(base_lm_config(d_model=32, n_layers=1, d_ff=64, n_heads=2)).eval()


def test_the_recipe_functions_refuse_bad_input(tmp_path):
    tiny = _tiny()
    with pytest.raises(ValueError, match=r"unknown recipe setting\(s\) \['betta'\]"):
        P.train_dpo_lm(assistant=tiny, betta=1.0)
    with pytest.raises(ValueError, match="task and reward are fixed"):
        P.train_grpo_lm(assistant=tiny, task="sort")
    with pytest.raises(TypeError, match="seed must be an int"):
        P.train_grpo_lm(1.5, assistant=tiny)
    with pytest.raises(TypeError, match="assistant must be a DecoderOnlyLM.*got str"):
        P.train_dpo_lm(assistant="assistant_lm")
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        P.train_grpo_lm(assistant=tiny, threads=0)
    with pytest.raises(TypeError, match="steps must be an int, got float"):
        P.train_grpo_lm(assistant=tiny, steps=2.0)
    with pytest.raises(ValueError, match="no pair to learn from"):  # a random model never adds right
        P.train_dpo_lm(assistant=tiny, questions=4, samples=2)
    with pytest.raises(FileNotFoundError, match="train_preference_lms.py --save"):
        P.load_dpo_lm(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="samples must be >= 16"):
        P.measure(tiny, tiny, samples=8)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got str"):
        P.weights_digest("dpo_lm")


def test_a_short_grpo_run_is_seeded_trains_the_final_norm_and_leaves_the_assistant_alone(assistant):
    digest, threads = P.weights_digest(assistant), torch.get_num_threads()
    runs = [P.train_grpo_lm(seed, assistant=assistant, steps=2, prompts=2, group=4) for seed in (0, 0, 1)]
    assert P.weights_digest(assistant) == digest and torch.get_num_threads() == threads
    assert P.weights_digest(runs[0].model) == P.weights_digest(runs[1].model) != P.weights_digest(runs[2].model)
    moved = [n for n, p in runs[0].model.named_parameters() if not torch.equal(p, dict(assistant.named_parameters())[n])]
    assert moved == ["final_norm.weight"] and runs[0].recipe["steps"] == 2 and runs[0].pairs is None
    assert len(runs[0].history.reward) == 2


def test_a_short_dpo_run_learns_from_right_versus_wrong_sums(assistant):
    digest = P.weights_digest(assistant)
    run = P.train_dpo_lm(assistant=assistant, questions=16, epochs=1)
    assert P.weights_digest(assistant) == digest and P.weights_digest(run.model) != digest
    assert run.pairs and all(c.strip() == e.answer != r.strip() for e, c, r in run.pairs)  # chosen: the sum; rejected: a wrong one
    assert len(run.history.loss) == -(-len(run.pairs) // P.DPO_RECIPE["batch_size"])
    assert abs(run.history.loss[0] - 0.6931) < 1e-3  # step 0: the policy is the reference, loss log 2
