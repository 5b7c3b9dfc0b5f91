"""Supervised fine-tuning through ``minitfm.training.train``: the mask rides in the targets, nothing else changes."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import minitfm as m
from minitfm.finetuning import (CHAT_SPECIAL_TOKENS, IGNORE_INDEX, ChatTemplate, add_lora, lora_layers, sft_batch,
                                sft_batches, supervised_finetune)
from minitfm.training import label_smoothed_cross_entropy

WORDS = "what is two plus three five one four sort yes no the answer".split()
TOKENIZER = m.WordTokenizer(WORDS + list(CHAT_SPECIAL_TOKENS))
TEMPLATE = ChatTemplate(TOKENIZER, bos_id=TOKENIZER.bos_id)
PAIRS = [("what is two plus three", "five"), ("sort four one", "one four"), ("yes", "no"), ("the answer", "yes no")]
CHATS = [TEMPLATE.render([{"role": "user", "content": q}, {"role": "assistant", "content": a}]) for q, a in PAIRS]


def lm(seed=0) -> m.DecoderOnlyLM:
    torch.manual_seed(seed)
    config = m.ModelConfig.small_lm(vocab_size=TOKENIZER.vocab_size, d_model=32, n_layers=2, max_seq_len=32)
    return m.DecoderOnlyLM(config).eval()


def test_a_batch_shifts_ids_and_labels_and_pads_the_targets_with_minus_100():
    batch = sft_batch(CHATS[:2], pad_id=TOKENIZER.pad_id)
    longest = max(len(c) for c in CHATS[:2]) - 1
    assert batch.tgt_in.shape == batch.tgt_out.shape == (2, longest) and batch.pad_id == IGNORE_INDEX
    for row, chat in enumerate(CHATS[:2]):
        n = len(chat) - 1
        assert torch.equal(batch.tgt_in[row, :n], chat.ids[:-1])
        assert torch.equal(batch.tgt_out[row, :n], chat.labels[1:])
        assert bool((batch.tgt_out[row, n:] == IGNORE_INDEX).all()) and bool((batch.tgt_in[row, n:] == 0).all())
    assert batch.n_tokens == sum(int(c.loss_mask.sum()) for c in CHATS[:2])  # the reply tokens, nothing else
    whole = sft_batch(CHATS[:2], mask_prompt=False)
    assert whole.n_tokens == sum(len(c) - 1 for c in CHATS[:2])


def test_train_loss_is_the_cross_entropy_of_the_replies_alone():
    """Computed apart: for every reply token at position i, -log p(token | the logits at i - 1)."""
    model = lm()
    batch = sft_batch(CHATS)
    with torch.no_grad():
        logits = model(batch.tgt_in)
        loss = label_smoothed_cross_entropy(logits, batch.tgt_out, 0.0, ignore_index=batch.pad_id)
        terms = []
        for row, chat in enumerate(CHATS):
            for span in chat.spans:
                if span.role == "assistant":
                    for i in range(span.content_start, span.stop):
                        terms.append(F.cross_entropy(logits[row, i - 1], chat.ids[i]))
    torch.testing.assert_close(loss, torch.stack(terms).mean())
    assert len(terms) == sum(len(a.split()) + 1 for _, a in PAIRS)


def test_batches_cover_every_conversation_each_epoch_in_a_seeded_order():
    stream = sft_batches(CHATS, 3, seed=4)
    epoch = [next(stream) for _ in range(2)]
    assert [b.tgt_in.shape[0] for b in epoch] == [3, 1]
    seen = sorted(tuple(row[row != 0].tolist()) for b in epoch for row in b.tgt_in)
    assert seen == sorted(tuple(c.ids[:-1].tolist()) for c in CHATS)
    again = sft_batches(CHATS, 3, seed=4)
    assert torch.equal(next(again).tgt_in, epoch[0].tgt_in)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_finetuning_teaches_the_replies_and_lora_leaves_the_base_alone(lora):
    model = lm()
    if lora:
        add_lora(model, ("q_proj", "v_proj", "up_proj", "down_proj"), r=4, alpha=8, seed=0)
    base = {k: v.clone() for k, v in model.state_dict().items() if "lora_" not in k}
    config = m.TrainConfig(steps=150, batch_size=4, lr=1e-2, schedule="constant", warmup=1, label_smoothing=0.0)
    history = supervised_finetune(model, CHATS, config, progress=False)
    assert history.loss[-1] < 0.1 * history.loss[0]
    for question, answer in PAIRS:
        prompt = TEMPLATE.prompt_ids([{"role": "user", "content": question}])
        out = m.generate(model, prompt, 4, eos_id=TEMPLATE.end_id)
        assert TEMPLATE.reply(out.new_tokens[0]) == answer
    frozen_kept = all(torch.equal(v, model.state_dict()[k]) for k, v in base.items())
    assert frozen_kept == lora
    if lora:
        assert all(layer.lora_B.abs().sum() > 0 for layer in lora_layers(model).values())


def test_the_optimizer_the_config_names_is_the_one_that_trains():
    """optimizer="adamw" is AdamW with decoupled decay on the trainable Linear matrices, as train() builds it; a
    LoRA model's frozen weights stay out of it."""
    config = m.TrainConfig(steps=3, batch_size=4, lr=1e-2, schedule="constant", warmup=1, label_smoothing=0.0,
                           weight_decay=0.5, optimizer="adamw")
    model, reference = lm(), lm()
    supervised_finetune(model, CHATS, config, progress=False)
    m.train(reference, sft_batches(CHATS, 4, seed=config.seed), config, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))
    adam = lm()
    supervised_finetune(adam, CHATS, m.TrainConfig(**{**config.__dict__, "optimizer": "adam"}), progress=False)
    assert not all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), adam.state_dict().values()))
    lora_model = lm()
    add_lora(lora_model, ("q_proj", "v_proj"), r=2, alpha=4, seed=0)
    base = {k: v.clone() for k, v in lora_model.state_dict().items() if "lora_" not in k}
    supervised_finetune(lora_model, CHATS, config, progress=False)
    assert all(torch.equal(v, lora_model.state_dict()[k]) for k, v in base.items())


def test_bad_sft_input_is_refused():
    no_reply = TEMPLATE.render([{"role": "user", "content": "yes"}])
    with pytest.raises(ValueError, match=r"conversations \[1\] have no assistant reply"):
        sft_batch([CHATS[0], no_reply])
    assert sft_batch([CHATS[0], no_reply], mask_prompt=False).n_tokens > 0
    with pytest.raises(TypeError, match="mask_prompt must be a bool"):
        sft_batch(CHATS, mask_prompt=1)
    with pytest.raises(TypeError, match="chats must be a non-empty list of RenderedChat"):
        sft_batch([])
    with pytest.raises(TypeError, match="chats must all be RenderedChat"):
        sft_batch([PAIRS[0]])
    config = m.TrainConfig(steps=1)
    with pytest.raises(TypeError, match="config must be a TrainConfig, got dict"):
        supervised_finetune(lm(), CHATS, {"steps": 1})
    with pytest.raises(TypeError, match="call train\\(\\) to pass your own"):
        supervised_finetune(lm(), CHATS, config, optimizer=None)
    frozen = lm().requires_grad_(False)
    with pytest.raises(ValueError, match="no parameter of the model requires gradients"):
        supervised_finetune(frozen, CHATS, config)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        next(sft_batches(CHATS, 0, seed=0))


@pytest.mark.parametrize("mask_prompt", [True, False])
def test_packed_batches_carry_the_same_targets_and_loss_as_padded_ones(mask_prompt):
    """``row_len`` packs a batch's conversations into rows: the summed loss is the padded batch's, in both the
    masked and the whole-sequence mode (no target crosses from one conversation into the next)."""
    from minitfm.finetuning.sft import sft_batches
    from minitfm.training.loop import forward_batch
    torch.manual_seed(0)
    config = m.ModelConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_heads=4, d_ff=64, n_layers=2,
                           max_seq_len=64, pos="rope", norm="rms", ffn="swiglu")
    net = m.DecoderOnlyLM(config).double().eval()
    chats = CHATS * 2
    padded = next(sft_batches(chats, len(chats), seed=0, mask_prompt=mask_prompt))
    packed = next(sft_batches(chats, len(chats), seed=0, mask_prompt=mask_prompt, row_len=48))

    def total(batch):
        logits = forward_batch(net, batch)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=-100,
                                                 reduction="sum"), int((batch.tgt_out != -100).sum())

    (loss_padded, n_padded), (loss_packed, n_packed) = total(padded), total(packed)
    assert n_packed == n_padded and packed.segments is not None
    torch.testing.assert_close(loss_packed, loss_padded, rtol=1e-10, atol=1e-10)
