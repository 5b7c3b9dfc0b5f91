"""The optimizer ``train`` builds: the paper's Adam, or AdamW with decoupled weight decay on the Linear matrices.

Two ways to add weight decay lambda to Adam, and they are not the same update:

- ``"adam"`` (``torch.optim.Adam``): L2 inside Adam. lambda * w is added to the gradient, so it passes through
  Adam's per-parameter scaling like any gradient, and a weight with large gradients is barely decayed. This is
  the Transformer paper's optimizer (Adam, betas 0.9 and 0.98, eps 1e-9, no weight decay), chapter 7's recipe,
  and ``TrainConfig``'s default.
- ``"adamw"`` (``torch.optim.AdamW``): decoupled decay (Loshchilov and Hutter, 2019). Every step also multiplies
  each decayed weight by 1 - lr * lambda, outside Adam's scaling, so all of them shrink at the same rate; the
  optimizer of chapter 4 and of language-model pretraining (``lm_train_config``).

With weight decay 0 the two are the same update, step for step.

Which parameters AdamW decays (:func:`param_groups`): the weight matrix of every ``nn.Linear`` (attention
projections, feed-forward layers, an untied output head), and nothing else: no norm gain or bias (LayerNorm,
RMSNorm), no bias of any layer, no token or position embedding, and no tied output head, which *is* the
token embedding. Any other parameter (LoRA's factors, the delta-net's decay rates, a ViT's class token) is not
decayed either. This is minGPT's rule (``configure_optimizers``: Linear weights decay; biases, LayerNorm and
Embedding weights do not); nanoGPT later decays every tensor of two or more dimensions, embeddings included.
Decay pulls a weight towards 0: for a norm's gain, whose neutral value is 1, and for an embedding row, which
only moves when its token appears, that is a pull the recipes leave out.
"""
from __future__ import annotations

import torch
from torch import nn

from minitfm._checks import check_choice, check_number

OPTIMIZERS = ("adam", "adamw")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups: ``[{"params": decayed, "weight_decay": weight_decay}, {"params": rest,
    "weight_decay": 0.0}]``, the weight matrices of ``nn.Linear`` layers first and every other parameter second
    (each parameter once, in ``model.parameters()`` order; an empty group is left out). A parameter that is also
    some other module's (a tied output head is the token embedding) is not decayed."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_number(weight_decay, "weight_decay", low=0.0)
    linear, elsewhere = set(), set()  # ids of Linear weights; ids of parameters any other role holds
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            (linear if isinstance(module, nn.Linear) and name == "weight" else elsewhere).add(id(param))
    decayed_ids = linear - elsewhere
    params = list(model.parameters())  # each parameter once, a tied one included
    groups = [{"params": [p for p in params if id(p) in decayed_ids], "weight_decay": float(weight_decay)},
              {"params": [p for p in params if id(p) not in decayed_ids], "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]


def build_optimizer(model: nn.Module, config) -> torch.optim.Optimizer:
    """The optimizer ``config.optimizer`` names (a :class:`~minitfm.training.TrainConfig`), with its lr, betas,
    eps and weight decay: ``"adam"`` takes ``model.parameters()`` with L2 weight decay on every one of them;
    ``"adamw"`` takes :func:`param_groups` (decoupled decay on the Linear matrices only)."""
    check_choice(config.optimizer, "optimizer", OPTIMIZERS)
    # foreach=True updates all tensors with a few multi-tensor operations instead of a loop of small ones per
    # tensor (PyTorch picks it by default on GPUs only); the arithmetic, and every result, is the same.
    common = dict(lr=config.lr, betas=config.betas, eps=config.eps, foreach=True)
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), weight_decay=config.weight_decay, **common)
    return torch.optim.AdamW(param_groups(model, config.weight_decay), **common)
