"""Chapter 15's shipped assistant: its loader, its template, its record, and what a wrong path says."""
from __future__ import annotations

import json

import pytest
import torch

from minitfm.finetuning import reply
from minitfm.finetuning import tasks as T
from minitfm.lm import assistant_lm as A
from minitfm.lm.base_lm import load_base_lm
from minitfm.models import DecoderOnlyLM


def test_the_assistant_is_the_base_architecture_with_new_weights():
    assistant, base = A.load_assistant_lm(), load_base_lm()
    assert isinstance(assistant, DecoderOnlyLM) and not assistant.training
    assert assistant.config == base.config
    moved = [k for k, v in assistant.state_dict().items() if not torch.equal(v, base.state_dict()[k])]
    assert len(moved) == len(base.state_dict())  # full fine-tuning: every tensor changed


def test_the_template_and_the_record():
    template = A.chat_template()
    ids = template.prompt_ids([{"role": "user", "content": "Hi"}])[0].tolist()
    assert ids == [256, template.ids["user"], ord("H"), ord("i"), template.end_id, template.ids["assistant"]]
    record = json.loads(A.RECORD.read_text(encoding="utf-8"))
    assert record["recipe"]["steps"] == 60 and record["recipe"]["label_smoothing"] == 0.0
    # the recorded length is recomputed: the longest rendered conversation of the fine-tuning set
    longest = max(len(template.render(e.chat())) for task in T.TASKS for e in T.examples(task, "train", 200, seed=0))
    assert A.trained_length() == record["trained_length"] == longest <= A.load_assistant_lm().config.max_seq_len
    probe = A.heldout_conversations(2)
    assert probe.shape[0] == 10 and (probe[:, 0] == 256).all()


def test_it_ends_its_reply_where_the_base_model_never_does():
    question = [{"role": "user", "content": "What is 12 + 7?"}]
    template = A.chat_template()
    said = reply(A.load_assistant_lm(), template, question, max_new_tokens=16)
    assert said and len(said) < 16  # ended by <|end|> within 16 tokens: digits, not run-on text
    assert len(reply(load_base_lm(), template, question, max_new_tokens=16)) >= 16


def test_a_wrong_path_says_how_to_make_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="train_assistant_lm.py --save"):
        A.load_assistant_lm(tmp_path / "missing.pt")
    with pytest.raises(TypeError, match="path must be a str or a pathlib.Path"):
        A.load_assistant_lm(3)
