"""Asking a chat model many questions at once: batched, left-padded replies equal one-by-one replies, the end of a
reply is reported, and plain-text completions score what a base model knows."""
from __future__ import annotations

import pytest
import torch

import minitfm as m
from minitfm.finetuning import ChatTemplate, completions, replies, reply, score, statement_recall, supervised_finetune
from minitfm.finetuning import tasks as T
from minitfm.lm.base_lm import base_lm_config, byte_tokenizer
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


def test_completions_and_statement_recall_read_plain_text():
    torch.manual_seed(0)
    model = m.DecoderOnlyLM(base_lm_config(d_model=32, n_layers=2, d_ff=64, max_seq_len=64)).eval()
    texts = completions(model, TOKENIZER, ["1 + 1 = ", "a"], 4, bos_id=256)
    assert len(texts) == 2 and all(len(t.encode("utf-8", errors="surrogatepass")) >= 1 for t in texts)
    facts = [dict(a=1, b=1, answer="2"), dict(a=2, b=2, answer="4")]
    greedy = completions(model, TOKENIZER, ["1 + 1 = ", "2 + 2 = "], 2, bos_id=256)
    assert statement_recall(model, TOKENIZER, "add", facts, bos_id=256) == [g == f"{f['answer']}." for g, f in
                                                                            zip(greedy, facts)]
    with pytest.raises(TypeError, match="non-empty list"):
        completions(model, TOKENIZER, "1 + 1 = ", 2, bos_id=256)
