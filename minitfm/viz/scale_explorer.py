"""The kernel-free explorer of training memory at scale (chapter 12): one model, many devices, each strategy.

Drag the number of devices, the sequence length and the micro-batch; pick data, tensor or pipeline parallelism
or a ZeRO stage; see which fits in a device's memory. Built like the other static explorers
(:mod:`minitfm.viz.static_explorers`): every number is computed here from :mod:`minitfm.training.scale` and
embedded in the page.
"""
from __future__ import annotations

import itertools

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.viz.static_explorers import StaticExplorer, _closest, _control, _readout_grid


SCALE_ACTIVATIONS = ("not counted", "stored s×s attention", "FlashAttention")  # None, eq. 1/2, eq. 1/2 without s×s


def _default_scale_models():
    from minitfm.config import ModelConfig
    from minitfm.training.scale import training_shape

    return [training_shape(ModelConfig.small_lm(), name="the book's small LM"),
            training_shape("Llama-2-7B"), training_shape("Llama-2-70B")]


def _scale_grid(models, device_counts, seq_lens, micro_batches, dropout):
    """GB per device: states (M, St, 3, N) weights/grads/Adam and activations (M, A, S, Bm, St, N); NaN = impossible."""
    from minitfm.training.scale import GB, STRATEGIES, tensor_parallel_problem, training_memory_per_device

    nan = float("nan")
    states = torch.full((len(models), len(STRATEGIES), 3, len(device_counts)), nan)
    acts = torch.full((len(models), len(SCALE_ACTIVATIONS), len(seq_lens), len(micro_batches), len(STRATEGIES),
                       len(device_counts)), nan)
    for (m, shape), (st, strategy), (d, n) in itertools.product(
            enumerate(models), enumerate(STRATEGIES), enumerate(device_counts)):
        if strategy == "tp" and tensor_parallel_problem(shape, n):
            continue
        mem = training_memory_per_device(shape, strategy=strategy, n_devices=n)
        states[m, st, :, d] = torch.tensor([mem.weights, mem.gradients, mem.optimizer], dtype=torch.float64) / GB
        acts[m, 0, :, :, st, d] = 0.0
        for (a, flash), (s, seq_len), (b, batch) in itertools.product(
                enumerate((False, True), start=1), enumerate(seq_lens), enumerate(micro_batches)):
            acts[m, a, s, b, st, d] = training_memory_per_device(
                shape, strategy=strategy, n_devices=n, seq_len=seq_len, micro_batch=batch,
                flash_attention=flash, dropout=dropout).activations / GB
    return states, acts


def _in_one_unit(gb_values) -> tuple[list[str], str]:
    """Numbers in GB printed in the unit that suits the largest: ([0.2, 1.4], "GB") or ([13.1], "MB")."""
    units = (("TB", 1e-3, 1e3), ("GB", 1.0, 1.0), ("MB", 1e3, 1e-3), ("kB", 1e6, 0.0))  # name, factor, lowest GB
    unit, k = next((u, k) for u, k, low in units if max(gb_values) >= low)
    return [f"{float(v) * k:.1f}" for v in gb_values], unit


def _scale_readouts(models, device_counts, states, acts, totals, device_gb, act_keys, act_sizes) -> list:
    """Two readouts: the model states by (model, strategy, N); activations and the verdict by every control."""
    from minitfm.training.scale import GB, STRATEGIES, STRATEGY_NAMES, format_decimal_bytes

    def states_text(m, st, d):
        n, shape = device_counts[d], models[m]
        where = f"{STRATEGY_NAMES[STRATEGIES[st]]} on {n} device{'s' if n > 1 else ''}"
        if states[m, st, 0, d].isnan():
            kv = f" ({shape.n_kv_heads} key/value heads)" if shape.n_kv_heads != shape.n_heads else ""
            return f"{where}: impossible, {shape.name} has {shape.n_heads} heads{kv} and each device needs whole ones"
        (w, g, o), unit = _in_one_unit(states[m, st, :, d])
        slow = " (beyond one 8-GPU node: slow all-reduces)" if STRATEGIES[st] == "tp" and n > 8 else ""
        return f"{where}: weights {w}, gradients {g}, Adam {o} {unit}{slow}"

    def total_text(m, st, d, a, s, b=0):
        total = float(totals[m, a, s, b, st, d])
        if total != total:  # NaN: no such tensor-parallel split
            return "choose an N that divides the heads"
        act = f"activations {format_decimal_bytes(acts[m, a, s, b, st, d] * GB)}" if a else "activations not counted"
        return (f"{act}, {format_decimal_bytes(total * GB)} per device: "
                f"{'fits in' if total <= device_gb else 'over'} {device_gb:g} GB")

    sizes = [len(models), len(STRATEGIES), len(device_counts)]
    return [_readout_grid(["model", "strategy", "devices"], sizes, states_text),
            _readout_grid(["model", "strategy", "devices", *act_keys], sizes + act_sizes, total_text)]


def _scale_views(line_titles, device_gb, batch) -> list:
    """Cumulative lines against N (the gaps are the parts) and grouped bars per strategy at the chosen N."""
    colors = ["#440154", "#3b528b", "#21908d", "#5ec962"]  # viridis; the engine marks the chosen N in orange
    lines = [{"array": "states", "index": ["model", "strategy", k], "label": label, "color": colors[k]}
             for k, label in enumerate(["weights", "+grads", "+Adam"])]
    lines += [{"array": "total", "index": ["model", "act", "seq", batch, "strategy"], "label": "+activations",
               "color": colors[3]},
              {"array": "capacity", "index": ["model"], "label": f"{device_gb:g} GB", "color": "#8c96a3"}]
    bars = [{"array": "bar_states", "index": ["model", "devices", k], "label": label, "color": colors[k]}
            for k, label in enumerate(["weights", "grads", "Adam"])]
    bars += [{"array": "bar_acts", "index": ["model", "act", "seq", batch, "devices"], "label": "activations",
              "color": colors[3]}]
    return [{"type": "lines", "title": {"by": ["model"], "texts": line_titles}, "x": "devices", "marker": "devices",
             "zero": True, "basis": 460, "xlabel": "devices N", "ylabel": "GB per device", "series": lines},
            {"type": "bars", "title": "at the chosen N: each strategy, by part", "cats": "strategies", "zero": True,
             "xlabel": "strategy", "ylabel": "GB per device", "series": bars}]


def static_scale_explorer(models=None, *, device_counts=tuple(2 ** i for i in range(11)),
                          seq_lens=(1024, 2048, 4096, 8192), micro_batches=(1,),
                          device_gb: float = 80.0, dropout: bool = False) -> StaticExplorer:
    """Model, strategy (DP, ZeRO-1/2/3, tensor parallel), devices, activations -> training memory per device.

    ``models``: :class:`minitfm.training.scale.TrainingShape` objects (default: the book's small LM, Llama-2-7B and
    Llama-2-70B). Mixed-precision Adam; activations by Korthikanti et al. (see :mod:`minitfm.training.scale`). A
    micro-batch control appears only with several ``micro_batches`` (each one multiplies the readouts).
    ``dropout``: whether the models train with dropout (Korthikanti et al.'s GPT count, with dropout masks);
    the default models do not (Llama, and the book's models with ``dropout=0.0``), hence the default False.
    """
    from minitfm.training.scale import TrainingShape

    models = _default_scale_models() if models is None else list(models)
    if not models or not all(isinstance(m, TrainingShape) for m in models):
        raise TypeError("models must be a non-empty list of minitfm.training.scale.TrainingShape (see training_shape)")
    for name, values in (("device_counts", device_counts), ("seq_lens", seq_lens), ("micro_batches", micro_batches)):
        if not values:
            raise ValueError(f"{name} must not be empty")
        for v in values:
            check_positive_int(v, f"each of {name}")
    check_number(device_gb, "device_gb", low=0, low_open=True)
    if not isinstance(dropout, bool):
        raise TypeError(f"dropout must be a bool, got {type(dropout).__name__}")
    states, acts = _scale_grid(models, device_counts, seq_lens, micro_batches, dropout)
    cumulative = states.cumsum(2)  # weights, + gradients, + Adam: lines whose gaps are the parts
    totals = cumulative[:, None, None, None, :, 2] + acts  # (M, St, N) -> (M, A, S, Bm, St, N)
    # the device's capacity as a flat line, left out (NaN) for a model that never comes near it, so that the
    # plot keeps a scale on which that model's parts show
    in_range = [bool(totals[m].nan_to_num(0).max() >= device_gb / 10) for m in range(len(models))]
    capacity = torch.tensor([[device_gb if ok else float("nan")] * len(device_counts) for ok in in_range])  # (M, N)
    line_titles = ["GB per device against N (gaps between lines = the parts; " +
                   (f"grey: a {device_gb:g} GB device)" if ok else f"{device_gb:g} GB is far above this scale)")
                   for ok in in_range]
    several = len(micro_batches) > 1  # else no control, and views index the one micro-batch as 0
    act_keys = ["act", "seq"] + ["batch"] * several
    act_sizes = [len(SCALE_ACTIVATIONS), len(seq_lens)] + [len(micro_batches)] * several
    per_device = "a micro-batch" if several else f"{micro_batches[0]} sequence" + "s" * (micro_batches[0] > 1)
    short = ["DP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "TP"]
    spec = {
        "controls": [_control("model", "model", [m.name for m in models], value=min(1, len(models) - 1), kind="select"),
                     _control("strategy", "strategy", short, value=3, kind="select"),
                     _control("devices", "devices N", device_counts, value=_closest(device_counts, 64)),
                     _control("act", "activations", SCALE_ACTIVATIONS, value=2, kind="select"),
                     _control("seq", "sequence length", seq_lens, value=_closest(seq_lens, 4096))]
                    + [_control("batch", "micro-batch", micro_batches)] * several,
        "arrays": {"states": cumulative, "total": totals, "capacity": capacity,
                   "bar_states": states.permute(0, 3, 2, 1),  # (M, St, 3, N) -> (M, N, 3, St)
                   "bar_acts": acts.permute(0, 1, 2, 3, 5, 4)},  # (M, A, S, Bm, St, N) -> (M, A, S, Bm, N, St)
        "labels": {"devices": [str(n) for n in device_counts], "strategies": short},
        "views": _scale_views(line_titles, device_gb, "batch" if several else 0),
        "readouts": _scale_readouts(models, device_counts, states, acts, totals, device_gb, act_keys, act_sizes),
        "hint": ("mixed-precision Adam, 2 + 2 + 12 bytes per parameter (Rajbhandari et al. 2020); activations of "
                 f"{per_device} per device, fp16, {'with' if dropout else 'no'} dropout, no recomputation "
                 "(Korthikanti et al. 2023)"),
    }
    return StaticExplorer("scale", "Training memory per device: data parallel, ZeRO, tensor parallel", spec)
