"""Qwen3-Next's mixture of experts (private to ``minitfm.layers``; :mod:`minitfm.layers.blocks` builds it): routed
experts as :class:`~minitfm.layers.routed_moe.RoutedMoE` routes them, plus one shared expert of its own width whose
output a per-token gate, sigmoid(w . x), scales before it joins the routed ones.

Glossary: B batch, T length, N = B T tokens, D d_model, F_s the shared expert's width.
"""
from __future__ import annotations

import torch
from torch import nn

from minitfm._checks import check_module_input, check_positive_int
from minitfm.layers.feedforward import SwiGLU
from minitfm.layers.moe import Routing
from minitfm.layers.routed_moe import RoutedMoE


class SharedGateMoE(RoutedMoE):
    """:class:`RoutedMoE` (without its own shared experts) plus ``shared_experts`` (a SwiGLU of width ``d_shared``)
    and ``shared_expert_gate`` (D -> 1, no bias): out = routed + sigmoid(gate(x)) shared(x)."""

    def __init__(self, d_model: int, n_experts: int, top_k: int, moe_intermediate_size: int, d_shared: int,
                 **options):
        check_positive_int(d_shared, "d_shared")
        super().__init__(d_model, n_experts, top_k, moe_intermediate_size, **{**options, "n_shared_experts": 0})
        self.shared_experts = SwiGLU(d_model, d_shared)
        self.shared_expert_gate = nn.Linear(d_model, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Routing]:
        check_module_input(x, "x", self, self.d_model, ndim=3)
        tokens = x.reshape(-1, self.d_model)  # (B, T, D) -> (N, D)
        routing = self.route(tokens)
        out = self.experts(tokens, routing.indices, routing.weights, self.weights_on)  # (N, D)
        out = out + torch.sigmoid(self.shared_expert_gate(tokens)) * self.shared_experts(tokens)  # (N, 1) * (N, D)
        return out.reshape(x.shape), routing
