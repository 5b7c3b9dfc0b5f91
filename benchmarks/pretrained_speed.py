"""Decoding speed of a GPT-2-small-shaped model: minitfm against transformers, and the floor of memory bandwidth.

Usage:  python benchmarks/pretrained_speed.py [--threads 1,2] [--new-tokens 256] [--runs 3] [--prompt-len 8]
        python benchmarks/pretrained_speed.py --smoke   # seconds: a 2-layer GPT-2 of width 64 (tests run this)

One model of GPT-2 small's shape (12 layers, D = 768, 12 heads, V = 50257, 1024 positions: 124M parameters)
with random weights, built by ``transformers`` (nothing is downloaded) and loaded into minitfm with
:func:`minitfm.pretrained.from_transformers`. For each thread count, in one run and interleaved (so that a
change in the machine's load hits both alike), it decodes ``--new-tokens`` tokens greedily at batch 1:

- ``minitfm``: :func:`minitfm.generate` as a user calls it, ``generate(model, prompt, n)``, with its KV cache and
  the lean decode step: the model's own decoder (``LeanDecoder.of``), which the first call builds (it copies q, k
  and v, stacked; timed and printed separately, with the memory the copy takes) and later calls reuse while the
  model is unchanged (each call checks that, and the check is inside the timings);
- ``transformers``: ``GPT2LMHeadModel.generate`` with its cache (``do_sample=False``).

It prints the median time per generated token (prefill included, as a user sees it), the ratio, whether the
tokens are identical, and **the floor**: at batch 1 a decode step reads every weight once, so it cannot take
less than (bytes of the weights read per step) / (memory bandwidth). The bandwidth is measured here, on the
same thread count, as the fastest streaming rate of one large matrix-vector product (a 256 MB float32 matrix,
both storage layouts, best of several repeats): no step of a real model reads its weights faster.

Targets (issue 28): minitfm at least as fast as transformers, within 1.3x of the floor, tokens identical.
Timings depend on the machine's load: run it on an idle machine, pinned (``taskset -c 1`` for one thread).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from _openmp import WAIT_POLICY  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a config and random weights: never the network

import torch  # noqa: E402

import minitfm  # noqa: E402
from minitfm import pretrained  # noqa: E402
from minitfm.device import cpu_summary  # noqa: E402
from minitfm.generation.lean_decode import LeanDecoder, refusal  # noqa: E402


def bandwidth(repeats: int = 8, megabytes: int = 256) -> float:
    """Bytes per second of the fastest pass over a large float32 matrix in a matrix-vector product."""
    n = int((megabytes * 2**20 / 4) ** 0.5)
    matrix, x = torch.randn(n, n), torch.randn(n)
    best = float("inf")
    for product in (lambda: torch.mv(matrix, x), lambda: torch.mm(x[None], matrix)):  # (out, in) and (in, out)
        product()
        for _ in range(repeats):
            start = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - start)
    return matrix.numel() * 4 / best


def bytes_per_step(model) -> int:
    """The weights a batch-1 decode step reads: every matrix and vector, but one row of the position table."""
    total = sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())
    if model.pos_emb is not None:
        table = model.pos_emb.emb.weight
        total -= (table.shape[0] - 1) * table.shape[1] * table.element_size()
    return total


def run_minitfm(model, prompt, n, decoder=None):
    """``generate`` as a user calls it (``decoder=None``: the model's own lean decoder), or with ``decoder``."""
    start = time.perf_counter()
    tokens = minitfm.generate(model, prompt, n, eos_id=-1, decoder=decoder).tokens
    return time.perf_counter() - start, tokens


def run_transformers(hf, prompt, n):
    start = time.perf_counter()
    with torch.inference_mode():
        tokens = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest setting (a 2-layer GPT-2 of width 64, 8 tokens, 1 run, 1 thread): checks "
                             "that the script runs; its figures mean nothing")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=8)
    args = parser.parse_args()
    megabytes = 256  # the bandwidth probe's matrix
    if args.smoke:
        args.threads, args.new_tokens, args.runs, megabytes = "1", 8, 1, 8
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    shape = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64, bos_token_id=0,
                 eos_token_id=0) if args.smoke else {}
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape)).eval()  # GPT-2 small's shape, random weights
    start = time.perf_counter()
    model = pretrained.from_transformers(hf)
    load_s = time.perf_counter() - start
    prompt = torch.randint(0, hf.config.vocab_size, (1, args.prompt_len), generator=torch.Generator().manual_seed(1))
    weights = bytes_per_step(model)
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}; torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"model: {'a 2-layer GPT-2 of width 64 (--smoke)' if args.smoke else 'GPT-2 small' + chr(39) + 's shape'}, random weights, {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{weights / 1e6:.0f} MB read per decode step (fp32); converted in {load_s:.2f} s")
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        LeanDecoder.release(model)  # the first call below builds the model's decoder again: timed as a user pays it
        start = time.perf_counter()
        decoder = LeanDecoder.of(model)  # what the first generate call builds (q, k, v stacked), then reuses
        if decoder is None:
            raise SystemExit(f"the lean step refuses this model: {refusal(model)}")
        prepare_s = time.perf_counter() - start
        run_minitfm(model, prompt, 4)  # warm-up
        run_transformers(hf, prompt, 4)
        times = {"minitfm": [], "transformers": []}
        same = True
        for _ in range(args.runs):
            seconds_m, ours = run_minitfm(model, prompt, args.new_tokens)  # the default call
            seconds_h, theirs = run_transformers(hf, prompt, args.new_tokens)
            times["minitfm"].append(seconds_m)
            times["transformers"].append(seconds_h)
            same = same and torch.equal(ours, theirs)
        per_token = {k: 1e3 * statistics.median(v) / args.new_tokens for k, v in times.items()}
        bw = bandwidth(megabytes=megabytes)
        floor = 1e3 * weights / bw
        ratio = per_token["transformers"] / per_token["minitfm"]
        print(f"\n=== {threads} thread{'s' * (threads > 1)}: {args.new_tokens} greedy tokens after {args.prompt_len}, "
              f"batch 1, median of {args.runs} runs (the first call builds minitfm's lean decoder, once: {prepare_s:.2f} "
              f"s, {decoder.nbytes() / 1e6:.0f} MB of copied matrices)")
        print(f"minitfm       {per_token['minitfm']:6.1f} ms/token  (runs: "
              + ", ".join(f"{1e3 * t / args.new_tokens:.1f}" for t in times["minitfm"]) + ")")
        print(f"transformers  {per_token['transformers']:6.1f} ms/token  (runs: "
              + ", ".join(f"{1e3 * t / args.new_tokens:.1f}" for t in times["transformers"]) + ")")
        print(f"floor         {floor:6.1f} ms/token  ({weights / 1e6:.0f} MB / {bw / 1e9:.1f} GB/s measured)")
        print(f"transformers / minitfm = {ratio:.2f} (target >= 1.00: {'met' if ratio >= 1.0 else 'missed'}); "
              f"minitfm / floor = {per_token['minitfm'] / floor:.2f} (target <= 1.30: "
              f"{'met' if per_token['minitfm'] <= 1.3 * floor else 'missed'}); tokens identical: {same}")


if __name__ == "__main__":
    main()
