"""Packing: conversations side by side in one row compute what each computes alone (nothing leaks across)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import minitfm as m
from minitfm.finetuning import (CHAT_SPECIAL_TOKENS, IGNORE_INDEX, ChatTemplate, PackedRows, block_diagonal_mask,
                                pack_conversations, packed_logits)

WORDS = "what is two plus three five sort one four the answer yes no".split()
TOKENIZER = m.WordTokenizer(WORDS + list(CHAT_SPECIAL_TOKENS))
TEMPLATE = ChatTemplate(TOKENIZER, bos_id=TOKENIZER.bos_id)
CONVERSATIONS = [
    [{"role": "user", "content": "what is two plus three"}, {"role": "assistant", "content": "five"}],
    [{"role": "system", "content": "the answer"}, {"role": "user", "content": "sort four one"},
     {"role": "assistant", "content": "one four"}],
    [{"role": "user", "content": "yes"}, {"role": "assistant", "content": "no"}],
]
CHATS = [TEMPLATE.render(c) for c in CONVERSATIONS]


def model(pos: str, dtype=torch.float64, seed=0) -> m.DecoderOnlyLM:
    torch.manual_seed(seed)
    config = m.ModelConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_heads=4, d_ff=64, n_layers=2,
                           max_seq_len=64, pos=pos, norm="rms", ffn="swiglu")
    return m.DecoderOnlyLM(config).to(dtype).eval()


def test_pack_puts_conversations_one_after_another_with_their_own_positions():
    lengths = [len(c) for c in CHATS]
    rows = pack_conversations(CHATS, row_len=sum(lengths) + 3, pad_id=TOKENIZER.pad_id)
    assert rows.ids.shape == (1, sum(lengths) + 3)
    at = 0
    for s, chat in enumerate(CHATS):
        piece = slice(at, at + len(chat))
        assert torch.equal(rows.ids[0, piece], chat.ids) and torch.equal(rows.labels[0, piece], chat.labels)
        assert bool((rows.segments[0, piece] == s).all())
        assert torch.equal(rows.positions[0, piece], torch.arange(len(chat)))
        at += len(chat)
    assert rows.segments[0, at:].tolist() == [-1] * 3 and rows.labels[0, at:].tolist() == [IGNORE_INDEX] * 3
    split = pack_conversations(CHATS, row_len=lengths[0] + lengths[1])  # the third starts a new row
    assert split.ids.shape == (2, lengths[0] + lengths[1])
    assert torch.equal(split.ids[1, :lengths[2]], CHATS[2].ids) and split.segments[1, 0] == 0


def test_the_mask_is_causal_inside_each_conversation_and_closed_between_them():
    mask = block_diagonal_mask(torch.tensor([[0, 0, 1, 1, 1, -1]]))
    want = torch.tensor([[1, 0, 0, 0, 0, 0],
                         [1, 1, 0, 0, 0, 0],
                         [0, 0, 1, 0, 0, 0],
                         [0, 0, 1, 1, 0, 0],
                         [0, 0, 1, 1, 1, 0],
                         [0, 0, 0, 0, 0, 1]], dtype=torch.bool)
    assert mask.shape == (1, 1, 6, 6) and torch.equal(mask[0, 0], want)


@pytest.mark.parametrize("pos", ["rope", "learned", "sinusoidal", "alibi"])
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)], ids=["float64", "float32"])
def test_a_packed_conversation_gets_the_logits_it_gets_alone(pos, dtype, tol):
    lm = model(pos, dtype)
    rows = pack_conversations(CHATS, row_len=sum(map(len, CHATS)) + 2)
    with torch.no_grad():
        packed = packed_logits(lm, rows)[0]
        at = 0
        for chat in CHATS:
            alone = lm(chat.ids[None])[0]
            assert float((packed[at:at + len(chat)] - alone).abs().max()) < tol
            at += len(chat)


@pytest.mark.parametrize("leak", ["one segment", "positions not restarted"])
def test_without_the_mask_or_the_restarted_positions_conversation_2_changes(leak):
    """The test above can fail: the plain causal mask lets conversation 2 read conversation 1, and positions
    counted along the row move conversation 2 (learned positions see where a token sits)."""
    lm = model("learned")
    rows = pack_conversations(CHATS[:2], row_len=len(CHATS[0]) + len(CHATS[1]))
    if leak == "one segment":
        rows = dataclasses.replace(rows, segments=torch.zeros_like(rows.segments))
    else:
        rows = dataclasses.replace(rows, positions=torch.arange(rows.ids.shape[1])[None])
    start = len(CHATS[0])
    with torch.no_grad():
        second = packed_logits(lm, rows)[0, start:]
        alone = lm(CHATS[1].ids[None])[0]
    assert float((second - alone).abs().max()) > 1e-3


def test_bad_packing_input_is_refused():
    with pytest.raises(ValueError, match=r"longer than row_len=4: \(index, length\) \[\(0, "):
        pack_conversations(CHATS, row_len=4)
    with pytest.raises(TypeError, match="chats must be a non-empty list of RenderedChat"):
        pack_conversations(CHATS[0], row_len=40)
    with pytest.raises(TypeError, match="chats must all be RenderedChat"):
        pack_conversations([CHATS[0], CONVERSATIONS[1]], row_len=40)
    with pytest.raises(ValueError, match="row_len must be >= 1, got 0"):
        pack_conversations(CHATS, row_len=0)
    with pytest.raises(TypeError, match="segments must hold integer segment ids"):
        block_diagonal_mask(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="segments must have 2 dimensions"):
        block_diagonal_mask(torch.zeros(4, dtype=torch.long))
    with pytest.raises(TypeError, match="rows must be PackedRows"):
        packed_logits(model("rope"), CHATS[0])
    with pytest.raises(TypeError, match="model must be a minitfm DecoderOnlyLM, got Linear"):
        packed_logits(torch.nn.Linear(2, 2), PackedRows(*(torch.zeros(1, 2, dtype=torch.long),) * 4))


def test_packed_rows_train_through_the_books_loop_as_each_conversation_alone():
    """``packed_batch`` through ``train``'s own forward: the loss and the gradients of a packed row equal those
    of the conversations run one by one (token-weighted), so packing changes the speed, not what is learned."""
    from minitfm.finetuning import packed_batch, sft_batch
    from minitfm.training.loop import forward_batch
    net = model("learned")
    rows = pack_conversations(CHATS, row_len=sum(len(c) for c in CHATS) + 2, pad_id=TOKENIZER.pad_id)
    packed = packed_batch(rows)

    def loss_and_grads(batch):
        net.zero_grad()
        logits = forward_batch(net, batch)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(),
                                                 ignore_index=IGNORE_INDEX, reduction="sum")
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in net.parameters()]

    loss, grads = loss_and_grads(packed)
    alone = [loss_and_grads(sft_batch([chat])) for chat in CHATS]
    torch.testing.assert_close(loss, sum(a for a, _ in alone), rtol=1e-10, atol=1e-10)
    for i, g in enumerate(grads):
        torch.testing.assert_close(g, sum(gs[i] for _, gs in alone), rtol=1e-8, atol=1e-10)
    # without the segments (one plain causal row) the later conversations read the earlier ones: not equal
    leaky = dataclasses.replace(packed, segments=None)
    assert not torch.allclose(loss_and_grads(leaky)[0], loss)


def test_a_packed_batch_trains_with_train():
    from minitfm.finetuning import packed_batch
    from minitfm.training import TrainConfig, train
    net = model("rope", dtype=torch.float32).train()
    batch = packed_batch(pack_conversations(CHATS * 4, row_len=40, pad_id=TOKENIZER.pad_id))
    history = train(net, iter([batch] * 30), TrainConfig(steps=30, batch_size=batch.tgt_in.shape[0], lr=3e-3,
                                                         seed=0), progress=False)
    assert history.loss[-1] < 0.5 * history.loss[0]


def test_the_models_attn_mask_narrows_never_widens_and_refuses_a_wrong_shape():
    net = model("rope")
    ids = CHATS[0].ids[None]
    t = ids.shape[1]
    everything = torch.ones(1, 1, t, t, dtype=torch.bool)  # "attend everywhere" stays causal
    torch.testing.assert_close(net(ids, attn_mask=everything), net(ids))
    with pytest.raises(ValueError, match="attn_mask must be bool"):
        net(ids, attn_mask=everything[..., :-1])
    with pytest.raises(ValueError, match="attn_mask must be bool"):
        net(ids, attn_mask=everything.float())
    with pytest.raises(ValueError, match="Batch.segments must have tgt_in's shape"):
        m.Batch(None, ids, ids, segments=torch.zeros(1, t + 1, dtype=torch.long))
