"""Training speed of minitfm against a minimal GPT in plain PyTorch (and, optionally, nanoGPT's own ``model.py``).

Usage:  python benchmarks/train_speed.py [--threads 1,2] [--rounds 30] [--steps 5] [--optimizer default]
                                         [--nanogpt PATH]
        python benchmarks/train_speed.py --smoke   # seconds: a 1-layer model of width 32 (tests run this)

The shape is nanoGPT's Shakespeare-char recipe for a CPU: block size 64, batch 12, 4 layers, 4 heads, width 128,
a vocabulary of 65 characters, no dropout, no biases, the output head tied to the token embedding. One training
step is what a training loop does: forward, cross-entropy loss over every position, backward, and one
``torch.optim.AdamW`` step, built the same way for every contender (weight decay 0.1 on the tensors of 2 or more
dimensions, none on the others, as nanoGPT's recipe; ``--optimizer`` picks PyTorch's implementation, the same for
all: by default PyTorch's choice for the device, which on a CPU is a loop over the tensors).

Contenders, all with the same number of parameters (checked and printed):

- ``minitfm``: a :class:`minitfm.DecoderOnlyLM` built from a :class:`minitfm.ModelConfig` of that shape (Pre-LN
  LayerNorm without bias, a GELU MLP, learned positions, tied embeddings, no embedding scale, PyTorch's fused
  attention kernel) with the opt-in ``fused_qkv=True``: q, k and v stored as one ``qkv_proj`` and computed with one
  product, as nanoGPT's ``c_attn`` (the same function as the three matrices: ``tests/layers/test_fused_qkv.py``),
  with every input check of the library in place;
- ``minitfm3``: the same model in the library's default layout, three matrices ``q_proj``, ``k_proj``, ``v_proj``
  (what the pretrained loaders, LoRA's usual targets and the shipped checkpoints use);
- ``plain``: the target's reference, a minimal GPT written here in plain PyTorch with nanoGPT's structure (one
  fused q/k/v ``Linear``, ``F.scaled_dot_product_attention(is_causal=True)``, a GELU MLP, LayerNorm without bias):
  what a model with no checks and no options costs;
- ``plain3``: the same minimal GPT with three q, k, v matrices, as minitfm stores them by default (three products
  instead of one, and three tensors for the optimizer): it separates what the layout of the weights costs from
  what the library's code costs (compare it with ``minitfm3``);
- ``plainB``: a second instance of ``plain`` (other random weights, other memory): ``plainB`` against ``plain``
  is the ratio that noise and memory placement alone give two equal models, printed beside the target;
- ``nanogpt`` (with ``--nanogpt PATH``): ``GPT`` imported from ``PATH/model.py``, a local nanoGPT checkout,
  trained through its own ``forward(idx, targets)``.

For each thread count the contenders run in interleaved rounds (the order reverses every round), each round
``--steps`` steps per contender after a warm-up, so that a change in the machine's load hits all of them alike.
It prints the median wall time of a step, the median CPU time of the process (less sensitive to other processes
taking the cores, though not to their use of the caches), and the speed ratio reference time / minitfm time
(above 1: minitfm is faster), also paired by round (the median of the rounds' ratios, which a drift of the load
between rounds does not move, with a 95% bootstrap interval over the rounds; printed, not the verdict). A last line
reads the intervals: minitfm ahead of, behind or level with the plain GPT, and no reading where the interval of
``plainB`` against ``plain`` (two equal models) excludes 1.0. Target (issue 46): minitfm (the fused layout) at least
1.0x the plain GPT on 1 and on 2 threads; ``minitfm3`` against ``plain3`` is printed beside it, not a target.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from _openmp import WAIT_POLICY  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from minitfm import DecoderOnlyLM, ModelConfig  # noqa: E402
from minitfm.device import cpu_summary  # noqa: E402
from minitfm.evaluation import bootstrap_interval  # noqa: E402

SHAPE = dict(block_size=64, batch=12, n_layer=4, n_head=4, n_embd=128, vocab=65)  # shakespeare_char on a CPU
SMOKE_SHAPE = dict(block_size=16, batch=2, n_layer=1, n_head=2, n_embd=32, vocab=65)
TARGET = 1.0


# ---- the minimal GPT, written here from nanoGPT's structure ---------------------------------------------------
class PlainAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)  # queries, keys and values in one product
        self.out = nn.Linear(d, d, bias=False)

    def project(self, x):
        return self.qkv(x).split(x.shape[-1], dim=2)  # (B, T, D) -> 3 x (B, T, D)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.project(x))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class PlainAttention3(PlainAttention):
    """The same attention with three q, k, v matrices, as minitfm (and Hugging Face's Llama) stores them."""

    def __init__(self, d: int, heads: int):
        nn.Module.__init__(self)
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.out = nn.Linear(d, d, bias=False)

    def project(self, x):
        return self.q(x), self.k(x), self.v(x)


class PlainBlock(nn.Module):
    def __init__(self, d: int, heads: int, attention=PlainAttention):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d, bias=False), nn.LayerNorm(d, bias=False)
        self.attn = attention(d, heads)
        self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class PlainGPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, n_layer: int, n_head: int, n_embd: int, attention=PlainAttention):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(PlainBlock(n_embd, n_head, attention) for _ in range(n_layer))
        self.norm = nn.LayerNorm(n_embd, bias=False)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


# ---- contenders -------------------------------------------------------------------------------------------------
def minitfm_model(s: dict, fused_qkv: bool = True) -> nn.Module:
    """The shape as a minitfm model; ``fused_qkv``: one stored q/k/v matrix (the contender ``minitfm``) or three
    (the library's default layout, the contender ``minitfm3``)."""
    config = ModelConfig(vocab_size=s["vocab"], d_model=s["n_embd"], n_heads=s["n_head"], n_layers=s["n_layer"],
                         max_seq_len=s["block_size"], norm="layer", norm_bias=False, norm_first=True, pos="learned",
                         ffn="gelu", bias=False, dropout=0.0, tie_embeddings=True, scale_embeddings=False,
                         attn_impl="fused", pad_id=None, bos_id=0, eos_id=0, fused_qkv=fused_qkv)
    return DecoderOnlyLM(config)


def nanogpt_model(s: dict, path: Path) -> nn.Module:
    spec = importlib.util.spec_from_file_location("nanogpt_model", path / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.GPTConfig(block_size=s["block_size"], vocab_size=s["vocab"], n_layer=s["n_layer"],
                              n_head=s["n_head"], n_embd=s["n_embd"], dropout=0.0, bias=False)
    return module.GPT(config)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # parameters() lists a tied matrix once


IMPLEMENTATIONS = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def optimizer(model: nn.Module, impl: str = "default") -> torch.optim.Optimizer:
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), **IMPLEMENTATIONS[impl])  # the same for all


class Contender:
    def __init__(self, name: str, model: nn.Module, own_loss: bool = False, impl: str = "default"):
        self.name, self.model, self.own_loss = name, model.train(), own_loss
        self.opt, self.times, self.cpu = optimizer(model, impl), [], []

    def step(self, x, y) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        if self.own_loss:  # nanoGPT: forward(idx, targets) -> (logits, loss)
            _, loss = self.model(x, y)
        else:
            logits = self.model(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return time.perf_counter() - start, time.process_time() - cpu


def run(threads: int, s: dict, rounds: int, steps: int, warmup: int, nanogpt: Path | None, impl: str) -> dict:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    sizes = (s["vocab"], s["block_size"], s["n_layer"], s["n_head"], s["n_embd"])
    contenders = [Contender("minitfm", minitfm_model(s), impl=impl), Contender("plain", PlainGPT(*sizes), impl=impl),
                  Contender("minitfm3", minitfm_model(s, fused_qkv=False), impl=impl),
                  Contender("plain3", PlainGPT(*sizes, attention=PlainAttention3), impl=impl),
                  Contender("plainB", PlainGPT(*sizes), impl=impl)]  # a second instance: the ratio noise alone gives
    if nanogpt is not None:
        contenders.append(Contender("nanogpt", nanogpt_model(s, nanogpt), own_loss=True, impl=impl))
    data = torch.randint(0, s["vocab"], (8, s["batch"], s["block_size"] + 1))
    batches = [(row[:, :-1].contiguous(), row[:, 1:].contiguous()) for row in data]
    for c in contenders:
        for i in range(warmup):
            c.step(*batches[i % len(batches)])
    for r in range(rounds):
        order = contenders if r % 2 == 0 else contenders[::-1]
        for c in order:
            for i in range(steps):
                wall, cpu = c.step(*batches[(r * steps + i) % len(batches)])
                c.times.append(wall)
                c.cpu.append(cpu)
    return {c.name: c for c in contenders}


def round_ratios(mine: list[float], ref: list[float], steps: int) -> list[float]:
    """ref's time / mine's time in each round (the two run within a second of each other in a round)."""
    return [sum(ref[r * steps:(r + 1) * steps]) / sum(mine[r * steps:(r + 1) * steps]) for r in range(len(mine) // steps)]


def paired(mine: Contender, ref: Contender, steps: int) -> tuple[str, tuple[float, float]]:
    """The median over rounds of ref's time / mine's time in the same round (wall, CPU), so that a change of the
    machine's load between rounds cancels, with the wall ratio's 95% bootstrap interval (the rounds resampled:
    chapter 14's ``bootstrap_interval``); and that interval. Not part of the target's verdict, which the medians
    above decide: the interval says whether a run can tell the two apart."""
    wall, cpu = round_ratios(mine.times, ref.times, steps), round_ratios(mine.cpu, ref.cpu, steps)
    low, high = bootstrap_interval(wall, np.median, rng=0)
    return f"{np.median(wall):.3f}x (95% interval {low:.3f}-{high:.3f}; CPU {np.median(cpu):.3f}x)", (low, high)


def reading(minitfm: tuple[float, float], plain_b: tuple[float, float], threads: int) -> str:
    """What the paired intervals say of minitfm against the plain GPT on ``threads`` threads: ahead of, behind or
    level with it, or not comparable where the interval of two instances of the plain GPT (``plain_b``) excludes
    1.0."""
    on = f"the plain GPT on {threads} thread{'s' * (threads > 1)}"
    if not plain_b[0] <= 1.0 <= plain_b[1]:
        return f"not comparable with {on} (two instances of the plain GPT differ in this run)"
    return f"{'ahead of' if minitfm[0] > 1.0 else 'behind' if minitfm[1] < 1.0 else 'level with'} {on}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds per thread count")
    parser.add_argument("--steps", type=int, default=5, help="steps per contender in each round")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per contender first")
    parser.add_argument("--nanogpt", type=Path, default=None, help="a nanoGPT checkout: times its model.py too")
    parser.add_argument("--optimizer", choices=tuple(IMPLEMENTATIONS), default="default",
                        help="AdamW's implementation, the same for every contender (default: PyTorch's choice for "
                             "the device, a loop over the tensors on a CPU, as nanoGPT's recipe gets there)")
    parser.add_argument("--smoke", action="store_true", help="seconds: a tiny model, 2 rounds, 1 thread")
    args = parser.parse_args(argv)
    shape = SHAPE
    if args.smoke:
        print("--smoke: the smallest setting (tiny model, 2 rounds of 1 step, 1 thread); the figures mean nothing")
        shape, args.threads, args.rounds, args.steps, args.warmup = SMOKE_SHAPE, "1", 2, 1, 1
    if args.nanogpt is not None and not (args.nanogpt / "model.py").is_file():
        parser.error(f"--nanogpt {args.nanogpt}: no model.py there (give the folder of a nanoGPT checkout)")
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}")
    print("shape: " + ", ".join(f"{k} {v}" for k, v in shape.items())
          + f"; forward + cross-entropy + backward + AdamW ({args.optimizer} implementation)")
    verdicts, readings = [], []
    for threads in [int(t) for t in args.threads.split(",")]:
        res = run(threads, shape, args.rounds, args.steps, args.warmup, args.nanogpt, args.optimizer)
        counts = {name: n_params(c.model) for name, c in res.items()}
        if len(set(counts.values())) != 1:
            print(f"parameter counts differ: {counts}")
            return 1
        print(f"\n{threads} thread{'s' * (threads > 1)}: {args.rounds} interleaved rounds x {args.steps} steps "
              f"(after {args.warmup} warm-up steps); parameters: "
              + ", ".join(f"{n} {v:,}" for n, v in counts.items()))
        med = {name: statistics.median(c.times) for name, c in res.items()}
        cpu = {name: statistics.median(c.cpu) for name, c in res.items()}
        for name, c in res.items():
            q1, _, q3 = statistics.quantiles(c.times, n=4, method="inclusive") if len(c.times) > 1 else (c.times[0],) * 3
            print(f"  {name:8s} median {med[name] * 1e3:7.2f} ms/step (quartiles {q1 * 1e3:.2f}-{q3 * 1e3:.2f}); "
                  f"CPU time {cpu[name] * 1e3:7.2f} ms/step")
        pairs = [("minitfm", ref) for ref in med if not ref.startswith(("minitfm", "plainB"))] + \
            [("minitfm3", "plain3"), ("plainB", "plain")]
        intervals = {}
        for mine, ref in pairs:
            ratio = med[ref] / med[mine]
            ok = ratio >= TARGET
            text, intervals[mine, ref] = paired(res[mine], res[ref], args.steps)
            if (mine, ref) == ("minitfm", "plain"):
                verdicts.append(ok)
            print(f"  {mine} speed / {ref} speed = {ratio:.3f}x  (target >= {TARGET}: "
                  f"{'met' if ok else 'missed'}{'' if (mine, ref) == ('minitfm', 'plain') else ', not the target'}); "
                  f"in CPU time {cpu[ref] / cpu[mine]:.3f}x; paired by round {text}")
        readings.append(reading(intervals["minitfm", "plain"], intervals["plainB", "plain"], threads))
    print(f"\nverdict: target {'met' if all(verdicts) else 'missed'}: met on {sum(verdicts)} of {len(verdicts)} "
          f"thread counts (minitfm, fused_qkv=True, >= {TARGET}x the plain GPT; plainB / plain, two instances of the "
          "same model, shows how far apart noise and memory placement alone put two equal models)")
    print("reading, not the target: minitfm is " + "; ".join(readings)
          + " (ahead or behind: the 95% interval of the paired ratio excludes 1.0; level: it contains 1.0; read only "
          "where plainB's interval against plain contains 1.0, since within one run memory placement alone can "
          "separate two equal models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
