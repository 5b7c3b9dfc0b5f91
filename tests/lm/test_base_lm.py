"""Chapter 15's base model: its pretraining mix, batches that read the stream once, its recall probes, the shipped weights."""
from __future__ import annotations

import json

import pytest
import torch

from minitfm.finetuning import people as P
from minitfm.lm import base_lm as L
from minitfm.lm.prose import heldout_bits_per_byte, heldout_prose
from minitfm.models import DecoderOnlyLM


def test_the_mix_holds_prose_skills_and_biographies_but_no_heldout_paragraph():
    texts = L.pretraining_texts(seed=0, scale=0.01)
    assert texts == L.pretraining_texts(seed=0, scale=0.01) != L.pretraining_texts(seed=1, scale=0.01)
    lines = set(texts)
    assert not any(p in lines for _, p in heldout_prose())
    for task, marker in (("sort", " sorted is "), ("reverse", " reversed is "), ("count", "The letter ")):
        assert sum(marker in t for t in texts) == round(L.SKILL_STATEMENTS[task] * 0.01)
    first = P.people()[0]["name"]
    assert sum(t.startswith(first) for t in texts) == max(1, round(L.BIOGRAPHIES * 0.01))


def test_batches_read_every_row_once():
    ids = torch.arange(33 * 10)  # 10 rows of 33
    batches = list(L.pretraining_batches(ids, 3, seed=0, row_len=32))
    assert len(batches) == 3  # the tenth row does not fill a batch
    starts = sorted(b.tgt_in[r, 0].item() for b in batches for r in range(3))
    assert len(set(starts)) == 9 and all(s % 33 == 0 for s in starts)
    for b in batches:
        assert torch.equal(b.tgt_in[:, 1:], b.tgt_out[:, :-1])


def test_the_recipe_is_adamw_with_decoupled_decay():
    config = L.base_lm_train_config(100)
    assert config.optimizer == "adamw" and config.weight_decay > 0 and config.label_smoothing == 0


def test_recall_probes_complete_what_a_model_says():
    torch.manual_seed(0)
    model = DecoderOnlyLM(L.base_lm_config(d_model=32, n_layers=1, d_ff=64, n_heads=2)).eval()
    hits = L.skill_recall(model, "add", 5)
    assert len(hits) == 5 and not any(hits)  # a random model does not add
    persons = P.chosen("many", "heldout")[:2]
    assert len(L.people_recall(model, persons)) == 2 * 3 * 4  # four phrasings of each attribute


def test_the_shipped_base_model_loads_with_its_recipe_and_its_record():
    model = L.load_base_lm()
    assert model.config == L.base_lm_config().resolved()
    record = json.loads(L.CHECKPOINT.with_suffix(".json").read_text())
    assert L.CHECKPOINT.stat().st_size < 8e6  # the page asset's limit (issue 46)
    assert sum(p.numel() for p in model.parameters()) == record["parameters"]
    # the figure the training script stored is the one this checkpoint earns (re-measured here, any machine)
    assert heldout_bits_per_byte(model) == pytest.approx(record["heldout_bits_per_byte"], abs=2e-3)
    assert record["heldout_bits_per_byte"] < 3.0  # well below uniform over bytes (8 bits): it learned the prose
