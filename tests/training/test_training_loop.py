import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from minitfm.config import ModelConfig
from minitfm.data import CopyTask
from minitfm.models import DecoderOnlyLM, EncoderDecoder
from minitfm.training import (TrainConfig, buggy_noam_lr, label_smoothed_cross_entropy, load_checkpoint, noam_lr,
                              save_checkpoint, set_seed, train, warmup_cosine_lr)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_matches_torch_with_ignore_index(smoothing):
    logits, target = torch.randn(4, 7, 11), torch.randint(0, 11, (4, 7))
    target[1, 3:] = 0  # padding
    ours = label_smoothed_cross_entropy(logits, target, smoothing, ignore_index=0)
    ref = F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=smoothing, ignore_index=0)
    assert_close(ours, ref)


def test_label_smoothing_errors():
    with pytest.raises(ValueError, match="nothing to learn"):
        label_smoothed_cross_entropy(torch.randn(2, 5), torch.zeros(2, dtype=torch.long), ignore_index=0)
    with pytest.raises(ValueError, match=r"target must have shape logits.shape\[:-1\] = \(2,\)"):
        label_smoothed_cross_entropy(torch.randn(2, 5), torch.zeros(3, dtype=torch.long))


def test_noam_by_hand():
    # d_model 512, warmup 4000: the paper's peak 512^-0.5 * 4000^-0.5 = 0.000699 at step 4000
    assert noam_lr(4000, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert noam_lr(4000, 512, 4000) == pytest.approx(6.9877e-4, rel=1e-4)
    assert noam_lr(1000, 512, 4000) == pytest.approx(noam_lr(4000, 512, 4000) / 4)  # linear warmup
    assert noam_lr(16000, 512, 4000) == pytest.approx(noam_lr(4000, 512, 4000) / 2)  # 1/sqrt decay
    assert noam_lr(0, 512, 4000) == 0.0 and noam_lr(100, 512, 4000, factor=2) == 2 * noam_lr(100, 512, 4000)


def test_buggy_noam_has_no_warmup():
    steps = range(1, 8001)
    buggy = [buggy_noam_lr(s, 512, 4000) for s in steps]
    assert max(buggy) == buggy[0] == pytest.approx(512 ** -0.5)  # the largest lr at step 1
    assert buggy[3999] == pytest.approx(512 ** -0.5 * 4000 ** -0.5)  # equal to Noam after the warmup
    assert max(range(8000), key=lambda i: noam_lr(i + 1, 512, 4000)) == 3999


def test_warmup_cosine_by_hand():
    assert warmup_cosine_lr(0, 1e-3, 100, 1100) == 0.0
    assert warmup_cosine_lr(50, 1e-3, 100, 1100) == pytest.approx(5e-4)
    assert warmup_cosine_lr(100, 1e-3, 100, 1100) == pytest.approx(1e-3)  # the peak
    assert warmup_cosine_lr(600, 1e-3, 100, 1100) == pytest.approx(5e-4)  # half way down the cosine
    assert warmup_cosine_lr(1100, 1e-3, 100, 1100, min_lr=1e-5) == pytest.approx(1e-5)
    assert warmup_cosine_lr(5000, 1e-3, 100, 1100, min_lr=1e-5) == pytest.approx(1e-5)


def test_train_config_schedules_peak_at_lr():
    for schedule in ("noam", "cosine", "constant"):
        cfg = TrainConfig(steps=500, lr=2e-3, warmup=40, schedule=schedule)
        lrs = [cfg.lr_at(s) for s in range(1, 501)]
        assert max(lrs) == pytest.approx(2e-3) and lrs.index(max(lrs)) == 39
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainConfig(schedule="step")
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        TrainConfig(clip_norm=0.0)


def run(seed, steps=5, dropout=0.1):
    set_seed(seed)
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13, dropout=dropout))
    cfg = TrainConfig(steps=steps, warmup=2, lr=1e-3, seed=seed)
    return model, train(model, CopyTask(min_len=2, max_len=6).batches(8, seed=seed), cfg, progress=False)


def test_same_seed_same_losses_and_history_fields():
    _, a = run(0)
    _, b = run(0)
    _, c = run(1)
    assert a.loss == b.loss and a.loss != c.loss
    assert a.step == [1, 2, 3, 4, 5] and len(a.lr) == len(a.grad_norm) == len(a.tokens_per_s) == 5
    assert a.lr[1] == pytest.approx(1e-3) and all(t > 0 for t in a.tokens_per_s) and a.seconds > 0


def test_clipping_records_the_norm_before_clipping_and_limits_the_update():
    set_seed(0)
    model = DecoderOnlyLM(ModelConfig.tiny(vocab_size=13))
    before = [p.detach().clone() for p in model.parameters()]
    cfg = TrainConfig(steps=1, warmup=1, lr=1.0, schedule="constant", clip_norm=1e-3, betas=(0.0, 0.0), eps=1.0)
    batch = CopyTask().batch(4, torch.Generator().manual_seed(0))
    batch.src = None
    hist = train(model, [batch], cfg, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), progress=False)
    assert hist.grad_norm[0] > 1e-3  # recorded before clipping
    moved = torch.sqrt(sum(((p - q) ** 2).sum() for p, q in zip(model.parameters(), before)))
    assert moved.item() == pytest.approx(1e-3, rel=1e-3)  # SGD step of lr 1 = the clipped gradient


def test_callbacks_see_history_and_can_stop():
    seen = []

    def callback(history):
        seen.append(history.step[-1])
        return history.step[-1] == 3

    set_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13))
    hist = train(model, CopyTask().batches(4), TrainConfig(steps=10, warmup=2), callbacks=[callback], progress=False)
    assert seen == [1, 2, 3] and hist.step == [1, 2, 3]


def test_autocast_bfloat16_trains_with_finite_loss():
    set_seed(0)
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13))
    cfg = TrainConfig(steps=3, warmup=1, autocast_dtype=torch.bfloat16)
    hist = train(model, CopyTask().batches(4), cfg, progress=False)
    assert all(math.isfinite(v) for v in hist.loss)


@pytest.mark.parametrize("model_cls", [EncoderDecoder, DecoderOnlyLM])
def test_checkpoint_round_trip(tmp_path, model_cls):
    model = model_cls(ModelConfig.tiny(vocab_size=13, pos="learned", tie_embeddings=model_cls is EncoderDecoder)).eval()
    path = tmp_path / "model.pt"
    save_checkpoint(path, model)
    loaded = load_checkpoint(path)
    assert type(loaded) is model_cls and loaded.config == model.config
    x = torch.randint(3, 13, (2, 5))
    args = (x, x) if model_cls is EncoderDecoder else (x,)
    assert torch.equal(loaded(*args), model(*args))
    raw = torch.load(path, weights_only=True)  # safe loading works on the raw file
    assert set(raw) == {"kind", "config", "dtype", "state_dict"} and raw["dtype"] == "float32"


def test_label_smoothing_rejects_target_ids_outside_the_vocabulary():
    logits = torch.randn(2, 3, 5)
    negative = torch.tensor([[1, -1, 2], [0, 1, 2]])  # -1 is not the ignore_index (-100)
    with pytest.raises(ValueError, match=r"target ids must be in \[0, V=5\) or ignore_index=-100, got min -1"):
        label_smoothed_cross_entropy(logits, negative)  # used to be silently scored as id 0
    with pytest.raises(ValueError, match=r"target ids must be in \[0, V=5\).*max 7"):
        label_smoothed_cross_entropy(logits, torch.tensor([[1, 7, 2], [0, 1, 2]]))
    with pytest.raises(TypeError, match="target must hold integer ids, got dtype torch.float32"):
        label_smoothed_cross_entropy(logits, torch.zeros(2, 3))


def test_checkpoint_loads_onto_the_requested_device(tmp_path):
    # "meta" stands in for a GPU: map_location must decide where the returned model lives
    path = tmp_path / "model.pt"
    save_checkpoint(path, DecoderOnlyLM(ModelConfig.tiny(vocab_size=13)))
    loaded = load_checkpoint(path, map_location="meta")
    assert {p.device.type for p in loaded.parameters()} == {"meta"}
    assert loaded.lm_head.weight is loaded.tok_emb.weight  # still tied


def test_train_explains_a_batch_stream_shorter_than_the_steps():
    model = EncoderDecoder(ModelConfig.tiny(vocab_size=13))
    batches = [CopyTask().batch(4, torch.Generator().manual_seed(0))] * 2
    with pytest.raises(ValueError, match="batches ran out after 2 updates; config.steps=5"):
        train(model, batches, TrainConfig(steps=5, warmup=1), progress=False)
