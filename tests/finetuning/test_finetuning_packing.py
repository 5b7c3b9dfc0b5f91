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
