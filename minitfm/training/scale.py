"""The arithmetic of scale: the memory one device needs to train a model, and how sharding divides it.

Glossary: Ψ parameters (n_params), N devices, K optimizer bytes per parameter, s sequence length,
b micro-batch (sequences per device), h d_model, a heads, L layers, t tensor-parallel degree (= N here).
GB = 1e9 bytes, the ZeRO paper's unit (:func:`minitfm.generation.kv_memory.format_bytes` uses binary GiB instead).

**Model states** (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC20, section 5 and figure 1). Mixed-precision Adam keeps 2Ψ bytes of fp16 weights, 2Ψ of fp16
gradients and KΨ of optimizer states, K = 12 (fp32 master weights, momentum and variance). Per device:

    "dp"     data parallel       (2 + 2 + K) Ψ        every device holds everything (PyTorch DDP)
    "zero1"  ZeRO-1, P_os        2Ψ + 2Ψ + KΨ / N     optimizer states sharded N ways
    "zero2"  ZeRO-2, P_os+g      2Ψ + (2 + K)Ψ / N    ... and gradients (FSDP's SHARD_GRAD_OP)
    "zero3"  ZeRO-3, P_os+g+p    (2 + 2 + K)Ψ / N     ... and weights (FSDP's FULL_SHARD)
    "tp"     tensor parallel     (2 + 2 + K)Ψ / N     Megatron-LM (Shoeybi et al. 2019)

Plain fp32 Adam keeps 4 + 4 + 8 = 16 bytes per parameter (weights, gradients, m, v): the same 16 as mixed
precision, which saves time and activation memory, not model-state memory.

Tensor parallelism splits every attention and MLP matrix by heads or hidden units, and the embedding by
vocabulary rows (vocab-parallel). Simplification: we divide *every* parameter by N, although Megatron
keeps the norms' weights and the row-parallel biases whole on each device (under 0.01% of Llama-2-7B).

**Activations** (Korthikanti et al. 2023, "Reducing Activation Recomputation in Large Transformer Models",
MLSys, section 4), bytes per layer with no recomputation:

    s b h (34 + 5 a s / h)                        eq. 1, one device
    s b h (10 + 24 / t + 5 a s / (h t))           eq. 2, tensor parallelism over t devices

They assume fp16 activations, 1-byte dropout masks, a GPT block (LayerNorm, multi-head attention, a 4h
GeLU MLP, dropout on the attention weights and on both residual branches) and attention that stores its
s x s softmax; they leave out the embedding and the logits. The 5as/h term is 2 bytes of softmax output,
1 byte of its dropout mask and 2 bytes of the dropout's output per score; 2 of the 34 are the two residual
dropout masks (1 byte each).

**Without dropout** (``dropout=False``: Llama, and the book's models, which train with ``dropout=0.0``)
neither mask nor the dropout's output is stored, and the value product reads the softmax output itself:

    s b h (32 + 2 a s / h)                        one device
    s b h (8 + 24 / t + 2 a s / (h t))            tensor parallelism over t devices

Llama differs in further details, so read them as estimates there: RMSNorm and RoPE leave the count as it is,
but a SwiGLU MLP of width F keeps four F-wide tensors (gate, up, SiLU output, product), which for Llama 2 7B
(F = 11008 = 2.6875 h) raises the linear constant from 32 to about 37.5; grouped-query attention (Llama 2
34B/70B, Llama 3) shrinks K and V. Llama 2 7B itself has full multi-head attention.
With FlashAttention (Dao et al. 2022) the s x s term vanishes: the scores are recomputed in the
backward pass from Q, K, V and one softmax statistic per row (online softmax, Milakov and Gimelshein
2018), which we neglect. ZeRO does not shrink activations: each device keeps those of its own micro-batch.
"""
from __future__ import annotations

from dataclasses import dataclass

from minitfm._checks import check_choice, check_number, check_positive_int
from minitfm.config import ModelConfig
from minitfm.generation.kv_memory import PUBLISHED_SHAPES, ModelShape
from minitfm.params import estimate_params

GB = 1e9
STRATEGIES = ("dp", "zero1", "zero2", "zero3", "tp")
STRATEGY_NAMES = {"dp": "data parallel", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3",
                  "tp": "tensor parallel"}
MIXED_PRECISION_ADAM = {"weight_bytes": 2, "grad_bytes": 2, "optimizer_bytes_per_param": 12}
FP32_ADAM = {"weight_bytes": 4, "grad_bytes": 4, "optimizer_bytes_per_param": 8}
# which of (weights, gradients, optimizer states) each strategy divides by N
_SHARDED = {"dp": (False, False, False), "zero1": (False, False, True), "zero2": (False, True, True),
            "zero3": (True, True, True), "tp": (True, True, True)}


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes one device holds while training, by part."""

    weights: float
    gradients: float
    optimizer: float  # Adam's states (and fp32 master weights under mixed precision)
    activations: float = 0.0  # kept from the forward pass for the backward pass

    @property
    def model_states(self) -> float:
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> float:
        return self.model_states + self.activations


@dataclass(frozen=True)
class TrainingShape:
    """The numbers of a model that decide its training memory."""

    name: str
    n_params: int  # Ψ
    n_layers: int  # L
    d_model: int  # h
    n_heads: int  # a
    n_kv_heads: int  # tensor parallelism splits these too

    def __post_init__(self):
        for field in ("n_params", "n_layers", "d_model", "n_heads", "n_kv_heads"):
            check_positive_int(getattr(self, field), field)


def training_shape(model: str | ModelShape | ModelConfig, name: str | None = None) -> TrainingShape:
    """A :class:`TrainingShape` from a name in ``minitfm.generation.kv_memory.PUBLISHED_SHAPES`` ("Llama-2-7B"), a
    :class:`~minitfm.generation.kv_memory.ModelShape`, or a decoder-only :class:`~minitfm.config.ModelConfig` (its
    parameters counted by :func:`~minitfm.params.estimate_params`)."""
    if isinstance(model, str):
        if model not in PUBLISHED_SHAPES:
            raise ValueError(f"unknown published model {model!r}; choose from {sorted(PUBLISHED_SHAPES)}")
        model = PUBLISHED_SHAPES[model]
    if isinstance(model, ModelShape):
        return TrainingShape(name or model.name, model.n_params, model.n_layers, model.n_heads * model.d_head,
                             model.n_heads, model.n_kv_heads)
    if isinstance(model, ModelConfig):
        c = model.resolved()
        return TrainingShape(name or f"ModelConfig(d_model={c.d_model}, n_layers={c.n_layers})",
                             estimate_params(c)["total"], c.n_layers, c.d_model, c.n_heads, c.n_kv_heads)
    raise TypeError(f"model must be a published model's name, a ModelShape or a ModelConfig, "
                    f"got {type(model).__name__}")


def tensor_parallel_problem(shape: TrainingShape, n_devices: int) -> str | None:
    """Why ``shape`` cannot be split over ``n_devices`` by tensor parallelism, or None if it can.

    Megatron gives each device whole heads, so N must divide the query heads and the key/value heads.
    """
    for field in ("n_heads", "n_kv_heads"):
        if getattr(shape, field) % n_devices:
            return (f"tensor parallelism gives each device whole heads, but {shape.name} has "
                    f"{field}={getattr(shape, field)}, which does not divide by n_devices={n_devices}")
    return None


def activation_bytes(shape: TrainingShape, seq_len: int, micro_batch: int = 1, *, tensor_parallel: int = 1,
                     flash_attention: bool = False, dropout: bool = True) -> float:
    """Activation bytes of all L layers, Korthikanti et al. eq. 2 (eq. 1 at t = 1) times L:

    L s b h (10 + 24/t) + L 5 a s^2 b / t with dropout (the paper's GPT block, the default);
    L s b h (8 + 24/t) + L 2 a s^2 b / t with ``dropout=False`` (a model trained without dropout, such as
    Llama: no dropout masks, no dropout output). ``flash_attention=True`` drops the s^2 term.
    """
    if not isinstance(shape, TrainingShape):
        raise TypeError(f"shape must be a TrainingShape (see training_shape), got {type(shape).__name__}")
    for value, label in ((seq_len, "seq_len"), (micro_batch, "micro_batch"), (tensor_parallel, "tensor_parallel")):
        check_positive_int(value, label)
    for value, label in ((flash_attention, "flash_attention"), (dropout, "dropout")):
        if not isinstance(value, bool):
            raise TypeError(f"{label} must be a bool, got {type(value).__name__}")
    s, b, h, a, t = seq_len, micro_batch, shape.d_model, shape.n_heads, tensor_parallel
    # 10 sbh stay whole on every device (both LayerNorms' inputs, the inputs of the QKV and first MLP
    # matmuls, the two 1-byte residual dropout masks); the other 24 sbh are split by heads or hidden units
    whole = 10 if dropout else 8  # without dropout there are no residual dropout masks
    linear = s * b * h * (whole + 24 / t)
    # per score: softmax output 2 bytes, plus (with dropout) its 1-byte mask and the dropout's 2-byte output
    bytes_per_score = 5 if dropout else 2
    scores = 0 if flash_attention else bytes_per_score * a * s * s * b / t
    return shape.n_layers * (linear + scores)


def training_memory_per_device(model: int | TrainingShape, *, strategy: str = "dp", n_devices: int = 1,
                               weight_bytes: float = 2, grad_bytes: float = 2,
                               optimizer_bytes_per_param: float = 12, seq_len: int | None = None,
                               micro_batch: int = 1, flash_attention: bool = False,
                               dropout: bool = True) -> TrainingMemory:
    """Bytes per device of weights, gradients, optimizer states and (given ``seq_len``) activations.

    ``model`` is a parameter count Ψ (model states only) or a :class:`TrainingShape`, which tensor
    parallelism and activations need. The byte defaults are mixed-precision Adam; pass ``**FP32_ADAM``
    for plain fp32 training. ``flash_attention`` and ``dropout`` go to :func:`activation_bytes`: the
    default ``dropout=True`` is Korthikanti et al.'s GPT block; pass ``dropout=False`` for a model trained
    without dropout (Llama, the book's models), whose activations are much smaller at long sequences.
    """
    check_choice(strategy, "strategy", STRATEGIES)
    check_positive_int(n_devices, "n_devices")
    for value, label in ((weight_bytes, "weight_bytes"), (grad_bytes, "grad_bytes"),
                         (optimizer_bytes_per_param, "optimizer_bytes_per_param")):
        check_number(value, label, low=0)
    shape = model if isinstance(model, TrainingShape) else None
    if shape is None:
        check_positive_int(model, "model (a parameter count, or a TrainingShape)")
        if strategy == "tp" or seq_len is not None:
            need = "strategy='tp'" if strategy == "tp" else "seq_len (activations)"
            raise TypeError(f"{need} needs the model's layers and heads: pass a TrainingShape "
                            f"(minitfm.training.scale.training_shape), not a bare parameter count {model}")
    n_params = model if shape is None else shape.n_params
    if strategy == "tp" and (problem := tensor_parallel_problem(shape, n_devices)):
        raise ValueError(problem)
    parts = [bytes_per_param * n_params / (n_devices if sharded else 1)
             for bytes_per_param, sharded in zip((weight_bytes, grad_bytes, optimizer_bytes_per_param),
                                                 _SHARDED[strategy])]
    activations = 0.0
    if seq_len is not None:
        activations = activation_bytes(shape, seq_len, micro_batch, flash_attention=flash_attention,
                                       dropout=dropout, tensor_parallel=n_devices if strategy == "tp" else 1)
    return TrainingMemory(*parts, activations=activations)


def format_decimal_bytes(n_bytes: float) -> str:
    """Decimal units, one decimal, as the ZeRO paper prints them: 1.875e9 -> '1.9 GB', 1.3e7 -> '13.0 MB'."""
    check_number(n_bytes, "n_bytes", low=0)
    for unit, size in (("TB", 1e12), ("GB", GB), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= size:
            return f"{n_bytes / size:.1f} {unit}"
    return f"{n_bytes:.0f} B"


def memory_table(model: int | TrainingShape, device_counts=(1, 8, 64), *, strategies=None,
                 **memory_kwargs) -> str:
    """A text table of :attr:`TrainingMemory.total` per device: one row per strategy, one column per N.

    ``strategies`` defaults to all of :data:`STRATEGIES` (without "tp" for a bare parameter count).
    ``memory_kwargs`` go to :func:`training_memory_per_device` (bytes per parameter, ``seq_len``, ...).
    A tensor-parallel cell that cannot exist (N does not divide the heads) shows '-'.
    """
    if strategies is None:
        strategies = STRATEGIES if isinstance(model, TrainingShape) else STRATEGIES[:-1]
    for n in device_counts:
        check_positive_int(n, "each of device_counts")
    for strategy in strategies:
        check_choice(strategy, "each of strategies", STRATEGIES)
    name = model.name if isinstance(model, TrainingShape) else f"{model:,} parameters"
    rows = [[f"per device, {name}"] + [f"N={n}" for n in device_counts]]
    for strategy in strategies:
        cells = [STRATEGY_NAMES[strategy]]
        for n in device_counts:
            impossible = strategy == "tp" and isinstance(model, TrainingShape) and tensor_parallel_problem(model, n)
            cells.append("-" if impossible else format_decimal_bytes(training_memory_per_device(
                model, strategy=strategy, n_devices=n, **memory_kwargs).total))
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))) for row in rows)
