"""The optimizer ``train`` builds: the paper's Adam (weight decay as L2) or AdamW (decoupled decay on the Linear
matrices only), and the language models' recipe ``lm_train_config``."""
import copy

import pytest
import torch
from torch import nn

from minitfm.config import ModelConfig
from minitfm.data import Batch
from minitfm.models import DecoderOnlyLM, EncoderDecoder
from minitfm.training import TrainConfig, label_smoothed_cross_entropy, lm_train_config, param_groups, train


def _lm(tie=True, norm="layer", pos="learned", seed=0):
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=13, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_seq_len=12, dropout=0.0,
                         norm=norm, norm_first=True, pos=pos, tie_embeddings=tie)
    return DecoderOnlyLM(config)


def _batches(n=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        tokens = torch.randint(1, 13, (4, 9), generator=g)
        out.append(Batch(None, tokens[:, :-1], tokens[:, 1:], pad_id=0))
    return out


def _one_step_config(**kw):  # lr_at(1) == lr, no clipping, no smoothing: one step is easy to redo by hand
    return TrainConfig(steps=1, lr=1e-2, schedule="constant", warmup=1, clip_norm=None, label_smoothing=0.0, **kw)


def _by_hand(model, batch, optimizer):
    loss = label_smoothed_cross_entropy(model(batch.tgt_in), batch.tgt_out, 0.0, ignore_index=0)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _linear_weight_names(model):
    """Names (as ``named_parameters`` gives them, a tied head once, as the embedding) of the Linear matrices."""
    names = {f"{m}.weight" for m, module in model.named_modules() if isinstance(module, nn.Linear)}
    return names & dict(model.named_parameters()).keys()


@pytest.mark.parametrize("tie", [True, False])
def test_adamw_is_torch_adamw_on_the_linear_matrices_and_not_adam_l2(tie):
    model, batch = _lm(tie=tie), _batches(1)[0]
    reference = copy.deepcopy(model)
    decayed = _linear_weight_names(reference)
    assert ("lm_head.weight" in decayed) == (not tie)
    groups = [{"params": [p for n, p in reference.named_parameters() if n in decayed], "weight_decay": 0.1},
              {"params": [p for n, p in reference.named_parameters() if n not in decayed], "weight_decay": 0.0}]
    _by_hand(reference.train(), batch, torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.98), eps=1e-9))
    l2 = copy.deepcopy(model)
    train(l2, [batch], _one_step_config(optimizer="adam", weight_decay=0.1), progress=False)
    train(model, [batch], _one_step_config(optimizer="adamw", weight_decay=0.1), progress=False)
    ours, ref, adam = (dict(m.named_parameters()) for m in (model, reference, l2))
    for name in ours:
        torch.testing.assert_close(ours[name], ref[name], rtol=0, atol=1e-7, msg=name)
    gap = max((ours[n] - adam[n]).abs().max().item() for n in ours)
    assert gap > 1e-5, f"AdamW's decoupled decay and Adam's L2 gave the same step (largest gap {gap:.2e})"


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_groups_leave_norms_biases_and_embeddings_undecayed(tie, norm):
    model = _lm(tie=tie, norm=norm)
    decay, rest = param_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and rest["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    undecayed = {names[id(p)] for p in rest["params"]}
    assert len(decay["params"]) + len(rest["params"]) == len(names)  # each parameter once, a tied head too
    assert not decayed & undecayed
    norm_params = {f"{m}.{n}" for m, module in model.named_modules()
                   if isinstance(module, (nn.LayerNorm, nn.RMSNorm)) or type(module).__name__ == "RMSNorm"
                   for n, _ in module.named_parameters(recurse=False)}
    assert norm_params and norm_params <= undecayed, norm_params - undecayed
    biases = {n for n in names.values() if n.endswith(".bias")}
    assert biases and biases <= undecayed
    assert {"tok_emb.weight", "pos_emb.emb.weight"} <= undecayed
    assert ("lm_head.weight" in decayed) == (not tie)
    assert decayed == _linear_weight_names(model) and all(p.dim() == 2 for p in decay["params"])
    assert undecayed == set(names.values()) - decayed


def test_groups_of_an_encoder_decoder_and_of_a_model_without_linear_layers():
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_seq_len=8))
    decay, rest = param_groups(model, 0.05)
    assert {n for n, p in model.named_parameters() if any(p is q for q in decay["params"])} == \
        _linear_weight_names(model)
    embedding = nn.Embedding(5, 3)
    (only,) = param_groups(embedding, 0.1)  # no Linear layer: the decayed group is empty and left out
    assert only["weight_decay"] == 0.0 and len(only["params"]) == 1 and only["params"][0] is embedding.weight


def test_with_no_weight_decay_adam_and_adamw_are_the_same_run():
    adam, adamw = _lm(tie=False), _lm(tie=False)
    config = dict(steps=3, lr=1e-2, schedule="cosine", warmup=2, weight_decay=0.0)
    train(adam, _batches(3), TrainConfig(optimizer="adam", **config), progress=False)
    train(adamw, _batches(3), TrainConfig(optimizer="adamw", **config), progress=False)
    for (name, a), (_, b) in zip(adam.named_parameters(), adamw.named_parameters()):
        assert torch.equal(a, b), name


def test_the_default_is_still_the_papers_adam_with_l2():
    assert TrainConfig().optimizer == "adam"
    model, batch = _lm(tie=False), _batches(1)[0]
    reference = copy.deepcopy(model)
    _by_hand(reference.train(), batch,
             torch.optim.Adam(reference.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.1))
    train(model, [batch], _one_step_config(weight_decay=0.1), progress=False)
    for (name, a), (_, b) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7, msg=name)


def test_lm_train_config_is_adamw_with_the_gpt3_numbers():
    config = lm_train_config(steps=50, lr=3e-3)
    assert (config.optimizer, config.weight_decay, config.betas, config.eps, config.clip_norm) == \
        ("adamw", 0.1, (0.9, 0.95), 1e-8, 1.0)
    assert config.schedule == "cosine" and config.label_smoothing == 0.0 and config.steps == 50
    assert config.min_lr == 3e-4 and lm_train_config().min_lr == 1e-4  # a tenth of the peak, as written
    assert lm_train_config(min_lr=0.0).min_lr == 0.0 and lm_train_config(weight_decay=0.0).weight_decay == 0.0


@pytest.mark.parametrize("bad", ["sgd", "AdamW", None, 1])
def test_a_bad_optimizer_name_is_refused_naming_the_choices(bad):
    with pytest.raises(ValueError, match=rf"optimizer must be one of 'adam', 'adamw'; got {bad!r}"):
        TrainConfig(optimizer=bad)


def test_param_groups_refuses_bad_input():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got list"):
        param_groups([], 0.1)
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        param_groups(_lm(), -0.1)
