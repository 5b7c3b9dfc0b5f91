"""A classifier on a decoder: last-token pooling that padding cannot move, what trains, and training with ``train``."""
from __future__ import annotations

import pytest
import torch

import minitfm as m
from minitfm.finetuning import (DecoderClassifier, add_lora, classification_batches, classify, collate_classification,
                                set_trainable)

PAD = 0


def backbone(dtype=torch.float64, seed=0, **overrides) -> m.DecoderOnlyLM:
    torch.manual_seed(seed)
    config = m.ModelConfig.small_lm(vocab_size=30, **{**dict(d_model=32, n_layers=3, max_seq_len=32), **overrides})
    return m.DecoderOnlyLM(config).to(dtype).eval()


SEQS = [torch.tensor([1, 5, 6, 7, 8, 9]), torch.tensor([1, 4, 4]), torch.tensor([1, 12, 13, 14])]


def test_the_pooled_vector_is_the_final_norm_output_at_the_last_token():
    clf = DecoderClassifier(backbone(), 3).eval()
    tokens = SEQS[0][None]
    with torch.no_grad():
        _, inter = clf.backbone(tokens, return_intermediates=True)
        want = clf.backbone.final_norm(inter.decoder_hidden[-1])[:, -1]  # (1, D) via the model's own forward
        torch.testing.assert_close(clf.pooled(tokens), want, rtol=0, atol=1e-12)


BACKBONES = {  # what the classifier must read as the model computes it: windows, NoPE layers, local RoPE
    "mistral (window 4)": dict(sliding_window=4),
    "smollm3 (NoPE layer 1)": dict(nope_layers=(1,)),
    "gemma3 (local RoPE, windows)": dict(norm="rms_offset", ffn="geglu_tanh", sublayer_norm="both", qk_norm="head",
                                         sliding_window=4, sliding_layers=(0, 1), rope_local_base=50.0,
                                         rope_base=1e4, rope_scale=2.0),
}


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_the_classifier_reads_the_models_own_forward_on_every_backbone(name):
    model = backbone(torch.float32, n_heads=4, n_kv_heads=2, **BACKBONES[name])
    clf = DecoderClassifier(model, 3, pad_id=PAD).eval()
    seqs = [torch.randint(1, 30, (n,), generator=torch.Generator().manual_seed(n)) for n in (12, 7, 10)]
    batch = m.pad_sequences(seqs, PAD, side="right")
    with torch.no_grad():
        for s, pooled in zip(seqs, clf.pooled(batch)):
            logits, inter = model(s[None], return_intermediates=True)
            want = model.final_norm(inter.decoder_hidden[-1])[0, -1]  # (D,): what lm_head reads at the last token
            assert float((pooled - want).abs().max()) < 1e-5, name
            assert float((model.lm_head(pooled) - logits[0, -1]).abs().max()) < 1e-5, name
            torch.testing.assert_close(model.hidden_states(s[None])[0, -1], want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_on_either_side_does_not_change_the_scores(side):
    clf = DecoderClassifier(backbone(), 3, pad_id=PAD).eval()
    batch = m.pad_sequences(SEQS, PAD, side=side)
    with torch.no_grad():
        padded = clf(batch)
        alone = torch.cat([clf(s[None]) for s in SEQS])
        assert float((padded - alone).abs().max()) < 1e-12
        # the test can fail: pooling the last column (a pad token for the short rows) gives other scores
        last_column = clf(batch, key_mask=torch.ones_like(batch, dtype=torch.bool))
    assert float((last_column[1:] - alone[1:]).abs().max()) > 1e-3


def test_without_pad_id_a_batch_of_several_rows_is_refused_not_read_at_its_padding():
    clf = DecoderClassifier(backbone(), 3).eval()  # pad_id=None: nothing tells a pad from a token
    batch = m.pad_sequences(SEQS, PAD, side="right")
    with pytest.raises(ValueError, match=r"pad_id=None.*3 rows.*key_mask"):
        clf(batch)  # the old code pooled the last column, a pad token for rows 1 and 2
    with torch.no_grad():  # one row, or a key_mask, says where each row ends
        alone = torch.cat([clf(s[None]) for s in SEQS])
        masked = clf(batch, key_mask=batch != PAD)
    assert float((masked - alone).abs().max()) < 1e-12


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_set_trainable_chooses_the_head_the_last_blocks_lora_or_everything():
    clf = DecoderClassifier(backbone(), 4)
    head = 32 * 4 + 4
    assert set_trainable(clf, "head") == head
    assert not any(p.requires_grad for p in clf.backbone.parameters())
    last_two = count(clf.backbone.layers[1]) + count(clf.backbone.layers[2]) + count(clf.backbone.final_norm)
    assert set_trainable(clf, "last_blocks", k=2) == head + last_two
    assert not any(p.requires_grad for p in clf.backbone.layers[0].parameters())
    assert not clf.backbone.tok_emb.weight.requires_grad
    assert set_trainable(clf, "all") == count(clf)
    add_lora(clf.backbone, ("q_proj", "v_proj"), r=2, alpha=4)
    lora = sum(p.numel() for n, p in clf.named_parameters() if "lora_" in n)
    assert lora == 3 * 2 * 2 * (32 + 32)  # 3 layers x 2 targets x r (D_in + D_out)
    assert set_trainable(clf, "lora") == head + lora


def task(n: int, seed: int) -> list[tuple[torch.Tensor, int]]:
    """Class 1 when token 7 occurs in the sequence: something the last token can only know by attending back."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        seq = torch.randint(8, 30, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g)
        label = i % 2
        if label:
            seq[int(torch.randint(0, len(seq), (1,), generator=g))] = 7
        out.append((torch.cat([torch.tensor([1]), seq]), label))
    return out


@pytest.mark.parametrize("what", ["head", "all"])
def test_train_fits_a_classifier_unchanged_and_frozen_parts_stay_frozen(what):
    clf = DecoderClassifier(backbone(torch.float32), 2, pad_id=PAD)
    set_trainable(clf, what)
    before = {k: v.clone() for k, v in clf.backbone.state_dict().items()}
    data = task(64, seed=0)
    batches = [collate_classification([s for s, _ in data[i:i + 16]], [y for _, y in data[i:i + 16]], pad_id=PAD)
               for i in range(0, 64, 16)] * 10
    config = m.TrainConfig(steps=40, lr=3e-3, schedule="constant", warmup=1, label_smoothing=0.0)
    history = m.train(clf, batches, config, progress=False)
    assert sum(history.loss[-4:]) < sum(history.loss[:4])  # it learns, through the book's own loop
    moved = any(not torch.equal(v, clf.backbone.state_dict()[k]) for k, v in before.items())
    assert moved == (what == "all")


def test_bad_classifier_input_is_refused():
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        DecoderClassifier(backbone(), 1)
    with pytest.raises(TypeError, match="model must be a minitfm DecoderOnlyLM, got Linear"):
        DecoderClassifier(torch.nn.Linear(2, 2), 2)
    clf = DecoderClassifier(backbone(), 2, pad_id=PAD)
    with pytest.raises(ValueError, match=r"what must be one of \['head', 'last_blocks', 'lora', 'all'\], got 'everything'"):
        set_trainable(clf, "everything")
    with pytest.raises(ValueError, match="k .* goes with what='last_blocks' only"):
        set_trainable(clf, "head", k=1)
    with pytest.raises(ValueError, match="k .* goes with what='last_blocks' only"):
        set_trainable(clf, "last_blocks")
    with pytest.raises(ValueError, match="k must be <= the backbone's 3 blocks, got 4"):
        set_trainable(clf, "last_blocks", k=4)
    with pytest.raises(ValueError, match="the backbone has none"):
        set_trainable(clf, "lora")
    with pytest.raises(ValueError, match=r"rows \[1\] hold only padding"):
        clf(torch.tensor([[1, 2], [PAD, PAD]]))
    with pytest.raises(ValueError, match="key_mask must be bool of the tokens' shape"):
        clf(torch.tensor([[1, 2]]), key_mask=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="seqs and labels must have the same length, got 3 and 2"):
        collate_classification(SEQS, [0, 1], pad_id=PAD)
    with pytest.raises(ValueError, match=r"labels must be class ids \(ints >= 0\), got \[-1\]"):
        collate_classification(SEQS, [0, 1, -1], pad_id=PAD)


@pytest.mark.parametrize("side", ["right", "left"])
def test_mean_pooling_averages_the_real_tokens_of_the_models_own_forward(side):
    clf = DecoderClassifier(backbone(), 3, pad_id=PAD, pooling="mean").eval()
    batch = m.pad_sequences(SEQS, PAD, side=side)
    with torch.no_grad():
        pooled = clf.pooled(batch)
        for s, row in zip(SEQS, pooled):
            want = clf.backbone.hidden_states(s[None])[0].mean(dim=0)  # (T, D) -> (D,): one row, no padding
            torch.testing.assert_close(row, want, rtol=0, atol=1e-12)
        # the test can fail: averaging over every column (the padding too) gives other vectors for the short rows
        every_column = clf.backbone.hidden_states(batch, key_mask=batch != PAD).mean(dim=1)
    assert float((every_column[1:] - pooled[1:]).abs().max()) > 1e-3
    last = DecoderClassifier(clf.backbone, 3, pad_id=PAD).eval()  # the default still reads the last real token
    with torch.no_grad():
        torch.testing.assert_close(last.pooled(batch)[1], clf.backbone.hidden_states(SEQS[1][None])[0, -1],
                                   rtol=0, atol=1e-12)


def test_classification_batches_go_through_whole_epochs_seeded():
    seqs = [torch.tensor([1, i + 2]) for i in range(10)]
    labels = [i % 3 for i in range(10)]
    stream = classification_batches(seqs, labels, 4, pad_id=PAD, seed=0)
    epochs = [[next(stream) for _ in range(2)] for _ in range(3)]  # 10 // 4 = 2 full batches per pass
    for epoch in epochs:
        ids = [int(x) for b in epoch for x in b.tgt_in[:, 1]]
        assert len(set(ids)) == 8  # no example twice within a pass; the 2 left over are dropped
        for b in epoch:
            assert b.tgt_in.shape == (4, 2) and b.tgt_out.tolist() == [(int(x) - 2) % 3 for x in b.tgt_in[:, 1]]
    assert [int(x) for x in epochs[0][0].tgt_in[:, 1]] != [int(x) for x in epochs[1][0].tgt_in[:, 1]]  # reshuffled
    again = classification_batches(seqs, labels, 4, pad_id=PAD, seed=0)
    assert all(torch.equal(next(again).tgt_in, b.tgt_in) for epoch in epochs for b in epoch)
    with pytest.raises(ValueError, match="batch_size must be <= the 10 examples, got 11"):
        next(classification_batches(seqs, labels, 11, pad_id=PAD, seed=0))
    with pytest.raises(ValueError, match="same length, got 10 and 9"):
        next(classification_batches(seqs, labels[:9], 4, pad_id=PAD, seed=0))


def test_classify_returns_each_rows_argmax_whatever_the_batch_size():
    clf = DecoderClassifier(backbone(), 3, pad_id=PAD)
    torch.nn.init.normal_(clf.head.weight, std=5.0)  # scores far apart: no near-ties
    with torch.no_grad():
        want = torch.stack([clf(s[None])[0].argmax() for s in SEQS])
    for batch_size in (1, 2, 64):
        assert torch.equal(classify(clf, SEQS, batch_size=batch_size), want)
    assert not clf.training
    with pytest.raises(ValueError, match="give the classifier a pad_id"):
        classify(DecoderClassifier(backbone(), 3), SEQS)
    with pytest.raises(TypeError, match="classifier must be a DecoderClassifier, got Linear"):
        classify(torch.nn.Linear(2, 2), SEQS)
    with pytest.raises(ValueError, match=r"pooling must be one of \['last', 'mean'\], got 'max'"):
        DecoderClassifier(backbone(), 3, pooling="max")
