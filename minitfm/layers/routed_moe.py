"""The mixture-of-experts layers of 2024-26 language models: DeepSeek-V2/V3, GLM-4.5, MiniMax-M2, gpt-oss, Llama 4.

Glossary: B batch, T length, N = B T tokens, D d_model, F one expert's hidden size (``moe_intermediate_size``),
E routed experts, k experts per token (``top_k``), G expert groups (``n_group``), G_k groups kept (``topk_group``),
S shared experts (``n_shared_experts``).

Chapter 11's :class:`~minitfm.layers.moe.MoEFeedForward` mixes k of E experts with renormalised softmax
probabilities. These families change four things, each one option of :class:`RoutedMoE`:

- **The score** (``score_func``): softmax over the E logits, or a sigmoid per expert (DeepSeek-V3, GLM-4.5,
  MiniMax-M2, Llama 4), so that one expert's score does not depend on the others'.
- **The choice** (``topk_method``): ``"greedy"`` takes the k best scores. ``"noaux_tc"`` adds the
  ``e_score_correction_bias`` (a buffer, one number per expert) to the scores before choosing and uses the
  unbiased scores as weights: DeepSeek-V3's auxiliary-loss-free balancing (Wang et al. 2024, arXiv 2408.15664;
  DeepSeek-V3 report, arXiv 2412.19437, section 2.1.2) raises the bias of underloaded experts between steps, so
  the bias decides who is picked, never how much they count. With G > 1 groups the choice is group-limited:
  keep the G_k groups with the best group score (``"noaux_tc"``: the sum of a group's two best biased scores;
  ``"group_limited_greedy"``, DeepSeek-V2's device-limited routing: its best score), then the k best inside them.
- **The weights**: the chosen scores, divided by their sum (``norm_topk_prob``), times ``routed_scaling_factor``.
  gpt-oss takes a softmax over the k chosen logits: that is the renormalised softmax, p_i / sum_k p_j.
  Llama 4 multiplies the expert's *input* by the weight (``weights_on="input"``), not its output.
- **The experts**: fine-grained (many small experts, DeepSeekMoE, arXiv 2401.06066) plus S shared experts that
  every token runs, stored as one SwiGLU of width S F. gpt-oss's experts have biases and a clamped SwiGLU
  (``activation="clamped_swiglu"``): (clamp(up, -limit, limit) + 1) * g sigmoid(alpha g), g = min(gate, limit).

The routed experts live in an :class:`ExpertBank` of stacked weights, ``gate_up_proj`` (E, 2F, D) and
``down_proj`` (E, D, F), each expert's matrix in PyTorch's (out, in) layout; gate and up are the two halves of
the 2F rows, or alternate rows (``gate_up_layout="interleaved"``, as gpt-oss stores them).

Which layers are MoE is the model's business: DeepSeek-V2/V3 and GLM-4.5 make layer i a MoE layer when
i >= ``first_k_dense_replace`` (the first ones stay dense, with ``intermediate_size``); Llama 4 when i is in
``moe_layers`` (every ``interleave_moe_layer_step``-th layer, from step - 1; dense ones use
``intermediate_size_mlp``); gpt-oss and MiniMax-M2 in every layer.

Loading transformers' modules (:func:`from_transformers_state_dict`, :data:`TRANSFORMERS_NAMES`): DeepSeek, GLM and
MiniMax's ``gate.weight`` is ``router.weight``; ``gate.e_score_correction_bias`` (MiniMax: the block's own) is
``e_score_correction_bias``; Llama 4's ``shared_expert`` is ``shared_experts``; gpt-oss and Llama 4 store experts
as (E, in, out), so their ``experts.gate_up_proj`` and ``experts.down_proj`` are transposed; the rest is as named.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import check_choice, check_module_input, check_number, check_positive_int
from minitfm.layers.feedforward import SwiGLU
from minitfm.layers.moe import Routing, expert_load, load_balancing_loss

SCORE_FUNCS = ("softmax", "sigmoid")
TOPK_METHODS = ("greedy", "group_limited_greedy", "noaux_tc")  # the names in DeepSeek's config.json
ACTIVATIONS = ("silu", "clamped_swiglu")
GATE_UP_LAYOUTS = ("halves", "interleaved")
WEIGHTS_ON = ("output", "input")

# Each family's fixed choices; the sizes, top_k, n_group, norm_topk_prob, ... come from its config.
FAMILIES = {
    # DeepSeek-V2: topk_method from the config; transformers' block never renormalises (norm_topk_prob=False)
    "deepseek_v2": dict(score_func="softmax", norm_topk_prob=False),
    "deepseek_v3": dict(score_func="sigmoid", topk_method="noaux_tc"),
    "glm4_moe": dict(score_func="sigmoid", topk_method="noaux_tc"),
    "minimax_m2": dict(score_func="sigmoid", topk_method="noaux_tc", norm_topk_prob=True),
    "gpt_oss": dict(score_func="softmax", norm_topk_prob=True, router_bias=True, expert_bias=True,
                    activation="clamped_swiglu", gate_up_layout="interleaved"),
    "llama4": dict(score_func="sigmoid", weights_on="input", n_shared_experts=1),
}
# transformers' parameter names -> this module's, where they differ (everything else keeps its name).
TRANSFORMERS_NAMES = {
    "deepseek_v2": {"gate.weight": "router.weight"},
    "deepseek_v3": {"gate.weight": "router.weight", "gate.e_score_correction_bias": "e_score_correction_bias"},
    "glm4_moe": {"gate.weight": "router.weight", "gate.e_score_correction_bias": "e_score_correction_bias"},
    "minimax_m2": {"gate.weight": "router.weight"},
    "gpt_oss": {},
    "llama4": {"shared_expert.gate_proj.weight": "shared_experts.gate_proj.weight",
               "shared_expert.up_proj.weight": "shared_experts.up_proj.weight",
               "shared_expert.down_proj.weight": "shared_experts.down_proj.weight"},
}
TRANSPOSED_EXPERTS = ("gpt_oss", "llama4")  # experts stored (E, in, out): x @ W rather than x @ W.T


def moe_params(d_model: int, n_experts: int, top_k: int, moe_intermediate_size: int, n_shared_experts: int = 0,
               router_bias: bool = False, expert_bias: bool = False) -> tuple[int, int]:
    """``(total, active)`` parameters of one :class:`RoutedMoE`: the router D E (+ E), E routed SwiGLUs of
    3 D F (+ 2F + D biases) and the shared SwiGLU 3 D S F; a token runs the router, k routed experts and the
    shared ones. The correction bias is a buffer, not a parameter."""
    for name, value in (("d_model", d_model), ("n_experts", n_experts), ("top_k", top_k),
                        ("moe_intermediate_size", moe_intermediate_size)):
        check_positive_int(value, name)
    check_number(n_shared_experts, "n_shared_experts", low=0, integer=True)
    router = d_model * n_experts + (n_experts if router_bias else 0)
    expert = 3 * d_model * moe_intermediate_size + (2 * moe_intermediate_size + d_model if expert_bias else 0)
    shared = 3 * d_model * n_shared_experts * moe_intermediate_size
    return router + n_experts * expert + shared, router + top_k * expert + shared


class ExpertBank(nn.Module):
    """E gated experts in stacked tensors; ``forward(tokens (N, D), indices (N, k), weights (N, k))`` -> (N, D)
    sums each token's k experts, weighted on their output or (``weights_on="input"``) on their input."""

    def __init__(self, d_model: int, n_experts: int, moe_intermediate_size: int, bias: bool = False,
                 activation: str = "silu", swiglu_alpha: float = 1.702, swiglu_limit: float = 7.0,
                 gate_up_layout: str = "halves"):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_experts", n_experts),
                            ("moe_intermediate_size", moe_intermediate_size)):
            check_positive_int(value, name)
        check_choice(activation, "activation", ACTIVATIONS)
        check_choice(gate_up_layout, "gate_up_layout", GATE_UP_LAYOUTS)
        check_number(swiglu_alpha, "swiglu_alpha", low=0, low_open=True)
        check_number(swiglu_limit, "swiglu_limit", low=0, low_open=True)
        e, d, f = n_experts, d_model, moe_intermediate_size
        self.activation, self.gate_up_layout = activation, gate_up_layout
        self.alpha, self.limit = swiglu_alpha, swiglu_limit
        self.gate_up_proj = nn.Parameter(torch.empty(e, 2 * f, d))  # expert e: nn.Linear(D, 2F).weight
        self.down_proj = nn.Parameter(torch.empty(e, d, f))
        self.gate_up_proj_bias = nn.Parameter(torch.empty(e, 2 * f)) if bias else None
        self.down_proj_bias = nn.Parameter(torch.empty(e, d)) if bias else None
        for weight, b, fan_in in ((self.gate_up_proj, self.gate_up_proj_bias, d),
                                  (self.down_proj, self.down_proj_bias, f)):
            bound = 1 / math.sqrt(fan_in)  # nn.Linear's default initialisation, one expert at a time
            nn.init.uniform_(weight, -bound, bound)
            if b is not None:
                nn.init.uniform_(b, -bound, bound)

    def expert(self, e: int, h: torch.Tensor) -> torch.Tensor:
        """Expert ``e`` on its tokens: (N_e, D) -> (N_e, D)."""
        bias = None if self.gate_up_proj_bias is None else self.gate_up_proj_bias[e]
        gate_up = F.linear(h, self.gate_up_proj[e], bias)  # (N_e, D) -> (N_e, 2F)
        if self.gate_up_layout == "halves":
            gate, up = gate_up.chunk(2, dim=-1)  # (N_e, F) each
        else:
            gate, up = gate_up[:, 0::2], gate_up[:, 1::2]
        if self.activation == "silu":
            hidden = F.silu(gate) * up
        else:  # gpt-oss: clipping bounds the activations; the +1 keeps a path open when up is near 0
            gate = gate.clamp(max=self.limit)
            hidden = (up.clamp(-self.limit, self.limit) + 1) * gate * torch.sigmoid(self.alpha * gate)
        bias = None if self.down_proj_bias is None else self.down_proj_bias[e]
        return F.linear(hidden, self.down_proj[e], bias)  # (N_e, F) -> (N_e, D)

    def forward(self, tokens: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor,
                weights_on: str = "output") -> torch.Tensor:
        check_choice(weights_on, "weights_on", WEIGHTS_ON)
        out = torch.zeros_like(tokens)  # (N, D)
        for e in indices.unique().tolist():  # only the experts some token chose
            token_ids, slot = torch.where(indices == e)  # (N_e,), (N_e,)
            w = weights[token_ids, slot, None].to(tokens.dtype)  # (N_e, 1)
            if weights_on == "input":  # Llama 4: silu(w x W_g) * (w x W_u), not linear in w
                expert_out = self.expert(e, tokens[token_ids] * w)
            else:
                expert_out = self.expert(e, tokens[token_ids]) * w
            out.index_add_(0, token_ids, expert_out.to(out.dtype))
        return out


class RoutedMoE(nn.Module):
    """Routed experts plus shared experts: (B, T, D) -> ``(out (B, T, D), Routing)``; see the module docstring.

    Args:
        d_model, n_experts, top_k, moe_intermediate_size: D, E, k and F.
        n_shared_experts: S, experts every token runs (0: none), one SwiGLU of width S F named ``shared_experts``.
        score_func: ``"softmax"`` or ``"sigmoid"``.
        topk_method: ``"greedy"``, ``"group_limited_greedy"`` (DeepSeek-V2) or ``"noaux_tc"`` (chooses with
            the ``e_score_correction_bias`` buffer, weighs without it).
        n_group, topk_group: G groups of E / G experts, the G_k best of them kept (G = 1: no group limit).
        norm_topk_prob: divide the k chosen scores by their sum. routed_scaling_factor: then multiply them.
        router_bias: a bias on the router (gpt-oss). expert_bias, activation, swiglu_alpha, swiglu_limit,
            gate_up_layout: the experts, see :class:`ExpertBank`.
        weights_on: ``"output"`` (most) or ``"input"`` (Llama 4) of the chosen experts.
    """

    def __init__(self, d_model: int, n_experts: int, top_k: int, moe_intermediate_size: int, *,
                 n_shared_experts: int = 0, score_func: str = "softmax", topk_method: str = "greedy",
                 n_group: int = 1, topk_group: int = 1, norm_topk_prob: bool = False,
                 routed_scaling_factor: float = 1.0, router_bias: bool = False, expert_bias: bool = False,
                 activation: str = "silu", swiglu_alpha: float = 1.702, swiglu_limit: float = 7.0,
                 gate_up_layout: str = "halves", weights_on: str = "output"):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_experts", n_experts), ("top_k", top_k),
                            ("moe_intermediate_size", moe_intermediate_size), ("n_group", n_group),
                            ("topk_group", topk_group)):
            check_positive_int(value, name)
        check_number(n_shared_experts, "n_shared_experts", low=0, integer=True)
        check_choice(score_func, "score_func", SCORE_FUNCS)
        check_choice(topk_method, "topk_method", TOPK_METHODS)
        check_choice(weights_on, "weights_on", WEIGHTS_ON)
        check_number(routed_scaling_factor, "routed_scaling_factor", low=0, low_open=True)
        for name, value in (("norm_topk_prob", norm_topk_prob), ("router_bias", router_bias),
                            ("expert_bias", expert_bias)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        self._check_groups(n_experts, top_k, topk_method, n_group, topk_group)
        self.d_model, self.n_experts, self.top_k = d_model, n_experts, top_k
        self.score_func, self.topk_method, self.n_group, self.topk_group = score_func, topk_method, n_group, topk_group
        self.norm_topk_prob, self.routed_scaling_factor = norm_topk_prob, routed_scaling_factor
        self.weights_on = weights_on
        self.router = nn.Linear(d_model, n_experts, bias=router_bias)
        if topk_method == "noaux_tc":  # a buffer: set by the balancing rule, not by gradients
            self.register_buffer("e_score_correction_bias", torch.zeros(n_experts))
        self.experts = ExpertBank(d_model, n_experts, moe_intermediate_size, bias=expert_bias, activation=activation,
                                  swiglu_alpha=swiglu_alpha, swiglu_limit=swiglu_limit, gate_up_layout=gate_up_layout)
        self.shared_experts = (SwiGLU(d_model, n_shared_experts * moe_intermediate_size)
                               if n_shared_experts else None)
        self.sizes = dict(n_shared_experts=n_shared_experts, router_bias=router_bias, expert_bias=expert_bias,
                          moe_intermediate_size=moe_intermediate_size)

    @staticmethod
    def _check_groups(n_experts: int, top_k: int, topk_method: str, n_group: int, topk_group: int) -> None:
        if top_k > n_experts:
            raise ValueError(f"top_k must be <= n_experts, got top_k={top_k}, n_experts={n_experts}")
        if n_experts % n_group:
            raise ValueError(f"n_group must divide n_experts, got n_group={n_group}, n_experts={n_experts}")
        if topk_group > n_group:
            raise ValueError(f"topk_group must be <= n_group, got topk_group={topk_group}, n_group={n_group}")
        if topk_group == n_group:
            return  # every group kept: no group limit
        if topk_method == "greedy":
            raise ValueError(f"n_group={n_group} with topk_group={topk_group} limits groups, which topk_method "
                             "'greedy' does not do; use 'group_limited_greedy' or 'noaux_tc', or topk_group=n_group")
        if topk_method == "noaux_tc" and n_experts // n_group < 2:
            raise ValueError(f"topk_method 'noaux_tc' scores a group by its two best experts, so n_group must leave "
                             f">= 2 experts per group, got n_group={n_group} for n_experts={n_experts}")
        if top_k > topk_group * (n_experts // n_group):
            raise ValueError(f"top_k={top_k} is more than the {topk_group} kept groups hold "
                             f"({topk_group} x {n_experts // n_group} experts); raise topk_group or lower top_k")

    def _group_mask(self, choice: torch.Tensor) -> torch.Tensor:
        """(N, E) choice scores -> (N, E) boolean, True for the experts of each token's G_k best groups."""
        groups = choice.view(choice.shape[0], self.n_group, -1)  # (N, E) -> (N, G, E/G)
        if self.topk_method == "noaux_tc":
            group_score = groups.topk(2, dim=-1).values.sum(dim=-1)  # (N, G): the two best of each group
        else:
            group_score = groups.amax(dim=-1)  # (N, G): the best of each group
        best = group_score.topk(self.topk_group, dim=-1).indices  # (N, G_k)
        keep = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, best, True)  # (N, G)
        return keep.repeat_interleave(self.n_experts // self.n_group, dim=1)  # (N, G) -> (N, E)

    def route(self, tokens: torch.Tensor) -> Routing:
        """tokens (N, D) -> :class:`~minitfm.layers.moe.Routing`; its ``probs`` are the (N, E) scores."""
        half = tokens.dtype in (torch.float16, torch.bfloat16)  # routed in float32 then, as transformers does
        if half:
            bias = None if self.router.bias is None else self.router.bias.float()
            logits = F.linear(tokens.float(), self.router.weight.float(), bias)  # (N, D) -> (N, E)
        else:
            logits = self.router(tokens)  # (N, D) -> (N, E)
        scores = logits.softmax(dim=-1) if self.score_func == "softmax" else logits.sigmoid()  # (N, E)
        choice = scores + self.e_score_correction_bias.to(scores.dtype) if self.topk_method == "noaux_tc" else scores
        if self.topk_group < self.n_group:
            choice = choice.masked_fill(~self._group_mask(choice), float("-inf"))
        indices = choice.topk(self.top_k, dim=-1).indices  # (N, E) -> (N, k)
        weights = scores.gather(1, indices)  # (N, k): the unbiased scores of the chosen
        if self.norm_topk_prob:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        weights = weights * self.routed_scaling_factor
        # DeepSeek-V3's balance loss uses the scores normalised per token (eq. 17-20; here over the batch)
        shares = scores / scores.sum(dim=-1, keepdim=True)
        return Routing(weights.to(tokens.dtype), indices, scores, load_balancing_loss(shares, indices),
                       expert_load(indices, self.n_experts))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Routing]:
        check_module_input(x, "x", self, self.d_model, ndim=3)
        tokens = x.reshape(-1, self.d_model)  # (B, T, D) -> (N, D)
        routing = self.route(tokens)
        out = self.experts(tokens, routing.indices, routing.weights, self.weights_on)  # (N, D)
        if self.shared_experts is not None:
            out = out + self.shared_experts(tokens)
        return out.reshape(x.shape), routing  # (N, D) -> (B, T, D)

    def parameter_counts(self) -> tuple[int, int]:
        """``(total, active_per_token)``, as :func:`moe_params` computes them from the sizes."""
        return moe_params(self.d_model, self.n_experts, self.top_k, **self.sizes)


def from_transformers_state_dict(state: dict[str, torch.Tensor], family: str) -> dict[str, torch.Tensor]:
    """A transformers MoE block's ``state_dict()`` -> one for :class:`RoutedMoE` (built with ``FAMILIES[family]``
    and the config's sizes): renamed by :data:`TRANSFORMERS_NAMES`, experts of gpt-oss and Llama 4 transposed."""
    check_choice(family, "family", tuple(FAMILIES))
    renamed = {}
    for name, tensor in state.items():
        if family in TRANSPOSED_EXPERTS and name in ("experts.gate_up_proj", "experts.down_proj"):
            tensor = tensor.transpose(1, 2)  # (E, in, out) -> (E, out, in)
        renamed[TRANSFORMERS_NAMES[family].get(name, name)] = tensor
    return renamed
