"""Asking a chat model many questions at once: batched, left-padded replies equal one-by-one replies, the end of a
reply is reported, and plain-text completions score what a base model knows."""
from __future__ import annotations

import pytest
import torch

import minitfm as m
from minitfm.finetuning import ChatTemplate, RenderedChat, completions, replies, reply, score, statement_recall, supervised_finetune
from minitfm.finetuning import tasks as T
from minitfm.lm.base_lm import base_lm_config
from minitfm.lm.prose import byte_tokenizer
from minitfm.training import TrainConfig

TOKENIZER = byte_tokenizer()
TEMPLATE = ChatTemplate(TOKENIZER, bos_id=256)
QA = [("What is 1 + 1?", "2"), ("Sort these digits: 3 1 2", "1 2 3"), ("Expand KV.", "key-value")]


@pytest.fixture(scope="module")
def tuned():
    torch.manual_seed(0)
    model = m.DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=64))
    chats = [TEMPLATE.render([{"role": "user", "content": q}, {"role": "assistant", "content": a}]) for q, a in QA]
    history = supervised_finetune(model, chats * 4, TrainConfig(steps=150, batch_size=6, lr=1e-2, label_smoothing=0.0, seed=0),
                                  progress=False)
    assert history.loss[-1] < 0.05
    return model.eval()


def test_batched_replies_equal_one_by_one_and_say_that_they_ended(tuned):
    questions = [[{"role": "user", "content": q}] for q, _ in QA]
    texts, ended = replies(tuned, TEMPLATE, questions, max_new_tokens=16, return_finished=True)
    assert texts == [a for _, a in QA] and ended == [True] * len(QA)
    assert [replies(tuned, TEMPLATE, [c], max_new_tokens=16)[0] for c in questions] == texts
    assert replies(tuned, TEMPLATE, questions, max_new_tokens=16, batch_size=2) == texts
    short, ended = replies(tuned, TEMPLATE, questions[2:], max_new_tokens=3, return_finished=True)
    assert short == ["key"] and ended == [False]  # cut before its <|end|>
    assert reply(tuned, TEMPLATE, questions[0], max_new_tokens=8) == "2"
    sampled = [reply(tuned, TEMPLATE, questions[0], temperature=1.0, seed=3, max_new_tokens=8) for _ in range(2)]
    assert sampled[0] == sampled[1]  # a seeded generator: the same sample twice


def test_score_checks_each_reply_against_its_answer(tuned):
    examples = [T.Example("add", 0, "What is 1 + 1?", "2", "train"), T.Example("add", 0, "What is 1 + 1?", "3", "train")]
    assert score(tuned, TEMPLATE, examples) == [True, False]
    with pytest.raises(TypeError, match="Example"):
        score(tuned, TEMPLATE, ["What is 1 + 1?"])


@pytest.fixture(scope="module")
def knows_one_sum():
    """A base model that has read one plain statement, ``1 + 1 = 2.``, and nothing else: it knows that fact and
    not ``2 + 2 = 4.`` (an untrained model knows neither, so an all-False recall would pass on it)."""
    torch.manual_seed(0)
    model = m.DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=64))
    ids = torch.tensor([256] + TOKENIZER.encode("1 + 1 = 2."))
    statement = RenderedChat(ids, ids.clone(), [])
    history = supervised_finetune(model, [statement] * 4, TrainConfig(steps=60, batch_size=4, lr=1e-2,
                                  label_smoothing=0.0, seed=0), mask_prompt=False, progress=False)
    assert history.loss[-1] < 0.05
    return model.eval()


def _greedy_by_hand(model, prefix: str, n: int) -> str:
    """``n`` greedy tokens after ``<bos> prefix``, one full forward pass each, no padding and no cache."""
    ids = torch.tensor([[256] + TOKENIZER.encode(prefix)])
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return TOKENIZER.decode(ids[0, -n:].tolist())


def test_completions_and_statement_recall_read_plain_text(knows_one_sum):
    model = knows_one_sum
    assert completions(model, TOKENIZER, ["1 + 1 = "], 2, bos_id=256) == ["2."]  # the exact text, prompt cut off
    # Prefixes of different lengths share a left-padded batch: each equals its own unpadded greedy loop. Byte 0
    # is id 0, the pad id, so "\x00" is a real token that only the prompt mask tells apart from padding.
    prefixes = ["1 + 1 = ", "a", "\x00 + 1", "2 + "]
    assert completions(model, TOKENIZER, prefixes, 4, bos_id=256) == [_greedy_by_hand(model, p, 4) for p in prefixes]
    facts = [dict(a=1, b=1, answer="2"), dict(a=2, b=2, answer="4")]
    assert _greedy_by_hand(model, "2 + 2 = ", 2) != "4."  # the fact it never read
    assert statement_recall(model, TOKENIZER, "add", facts, bos_id=256) == [True, False]
    assert statement_recall(model, TOKENIZER, "add", facts[::-1], bos_id=256) == [False, True]
    with pytest.raises(TypeError, match="non-empty list"):
        completions(model, TOKENIZER, "1 + 1 = ", 2, bos_id=256)
