"""Mixture of Experts feed-forward layer: many FFNs, each token uses only the top-k of them.

Glossary: B batch, T length, D d_model, F d_ff, E experts, k experts per token (top_k),
N = B * T tokens.

A small router (one Linear D -> E) scores the experts for every token; the token goes to its k
best experts and their outputs are mixed with the router's probabilities, renormalised over the
chosen k so they sum to 1 (Shazeer et al., 2017; Mixtral), or used as they are (``renormalize=False``:
Qwen3-MoE's ``norm_topk_prob=false``, where a token's weights sum to the k probabilities' total, under 1). Parameters grow with E, compute per token
with k: that is the whole point. Nothing forces the router to spread tokens, so training adds the
Switch Transformer's load-balancing loss (Fedus et al., 2022)

    loss = E * sum_i f_i * P_i,   f_i = share of routed slots sent to expert i,
                                  P_i = mean router probability of expert i,

which equals 1 when routing is uniform and grows as tokens crowd onto fewer experts. No capacity
limit or token dropping here: every token is processed by its k experts.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from minitfm._checks import check_module_input, check_positive_int, check_tensor
from minitfm.layers.feedforward import make_ffn


class Routing(NamedTuple):
    """What the router decided for N tokens."""

    weights: torch.Tensor  # (N, k) mixing weights of the chosen experts (rows sum to 1 when renormalised)
    indices: torch.Tensor  # (N, k) chosen expert ids
    probs: torch.Tensor  # (N, E) router softmax over all experts
    load_balancing_loss: torch.Tensor  # scalar, 1.0 for uniform routing
    expert_load: torch.Tensor  # (E,) share of routed slots per expert, sums to 1


def expert_load(indices: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Share of the N * k routed slots that each expert received: (N, k) -> (E,)."""
    check_positive_int(n_experts, "n_experts")
    check_tensor(indices, "indices")
    if indices.is_floating_point() or indices.dtype == torch.bool or indices.numel() == 0:
        raise TypeError(f"indices must be a non-empty tensor of expert numbers, got {indices.dtype} {tuple(indices.shape)}")
    if int(indices.min()) < 0 or int(indices.max()) >= n_experts:
        raise ValueError(f"indices must be expert numbers in [0, {n_experts}), got min {int(indices.min())}, "
                         f"max {int(indices.max())}")
    counts = torch.bincount(indices.flatten(), minlength=n_experts)
    return counts.float() / indices.numel()


def load_balancing_loss(probs: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Switch Transformer auxiliary loss E * sum_i f_i * P_i from probs (N, E) and indices (N, k).

    f (the dispatch shares) comes from an argmax and carries no gradient; the gradient flows through
    P, pushing probability away from overloaded experts.
    """
    check_tensor(probs, "probs", ndim=2, floating=True)
    n_experts = probs.shape[-1]
    check_tensor(indices, "indices", ndim=2)
    if indices.shape[0] != probs.shape[0]:
        raise ValueError(f"probs (N, E) and indices (N, k) must have the same N, got {tuple(probs.shape)} "
                         f"and {tuple(indices.shape)}")
    f = expert_load(indices, n_experts)  # (E,)
    p = probs.mean(dim=0)  # (N, E) -> (E,)
    return n_experts * (f * p).sum()


class MoEFeedForward(nn.Module):
    """Top-k Mixture-of-Experts FFN: (B, T, D) -> ``(out (B, T, D), Routing)``.

    Args:
        n_experts: E, the number of expert FFNs (each like :func:`minitfm.make_ffn` builds).
        top_k: k experts per token, 1 <= k <= E.
        ffn, d_ff, bias: the kind and size of every expert, passed to ``make_ffn``.
        renormalize: divide the k chosen probabilities by their sum (Mixtral), or keep them (``False``).
    """

    def __init__(self, d_model: int, n_experts: int, top_k: int = 2, d_ff: int | None = None,
                 ffn: str = "gelu", bias: bool = True, renormalize: bool = True):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_experts", n_experts), ("top_k", top_k)):
            check_positive_int(value, name)
        if top_k > n_experts:
            raise ValueError(f"top_k must be <= n_experts, got top_k={top_k}, n_experts={n_experts}")
        if not isinstance(renormalize, bool):
            raise TypeError(f"renormalize must be a bool, got {type(renormalize).__name__}")
        self.d_model, self.n_experts, self.top_k, self.renormalize = d_model, n_experts, top_k, renormalize
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(make_ffn(ffn, d_model, d_ff, bias=bias) for _ in range(n_experts))

    def route(self, tokens: torch.Tensor) -> Routing:
        """tokens (N, D) -> :class:`Routing`."""
        logits = self.router(tokens)  # (N, D) -> (N, E)
        half = logits.dtype in (torch.float16, torch.bfloat16)  # chosen in float32 then, as transformers' MoEs do
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32 if half else None)
        top_probs, indices = probs.topk(self.top_k, dim=-1)  # (N, E) -> (N, k), (N, k)
        weights = top_probs / top_probs.sum(dim=-1, keepdim=True) if self.renormalize else top_probs
        return Routing(weights.to(tokens.dtype), indices, probs, load_balancing_loss(probs, indices),
                       expert_load(indices, self.n_experts))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Routing]:
        check_module_input(x, "x", self, self.d_model, ndim=3)  # shape, and dtype against the weights
        tokens = x.reshape(-1, self.d_model)  # (B, T, D) -> (N, D)
        routing = self.route(tokens)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            token_ids, slot = torch.where(routing.indices == e)  # which tokens chose expert e, in which slot
            if token_ids.numel() == 0:
                continue  # an idle expert costs nothing
            expert_out = expert(tokens[token_ids])  # (N_e, D) -> (N_e, D)
            weighted = expert_out * routing.weights[token_ids, slot, None]  # (N_e, D)
            out.index_add_(0, token_ids, weighted.to(out.dtype))  # autocast may hand back bf16 experts
        return out.reshape(x.shape), routing  # (N, D) -> (B, T, D)

    def parameter_counts(self) -> tuple[int, int]:
        """``(total, active_per_token)``: all parameters, and those one token actually uses
        (the router plus k experts)."""
        router = sum(p.numel() for p in self.router.parameters())
        per_expert = sum(p.numel() for p in self.experts[0].parameters())
        return router + self.n_experts * per_expert, router + self.top_k * per_expert
