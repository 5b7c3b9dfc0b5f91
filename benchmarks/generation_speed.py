"""Generation speed: recompute the prefix vs a torch.cat cache vs a preallocated KV cache.

Usage:  python benchmarks/generation_speed.py [--runs 3] [--threads auto|1|1,2] [--new-tokens 512] [--clock wall|cpu]
        python benchmarks/generation_speed.py --smoke   # seconds: 1 run, 1 thread, 60 tokens (tests run this)

For the book's language-model configuration (``small_lm_config()``: ModelConfig.small_lm with the corpus
vocabulary) this generates ``--new-tokens`` tokens after a short prompt, greedily, four ways in one run:

- ``recompute``: no cache, the whole prefix goes through the model's modules at every step;
- ``modules``: :class:`minitfm.layers.kv_cache.KVCache`, every decode step through the same modules as ``recompute``;
- ``concat``: :class:`minitfm.layers.kv_cache.ConcatKVCache`, which grows with ``torch.cat``, decode steps through
  :class:`minitfm.generation.lean_decode.LeanDecoder` (what ``generate`` does by default);
- ``prealloc``: :class:`minitfm.layers.kv_cache.KVCache`, preallocated buffers and a length pointer, decode steps
  through ``LeanDecoder`` (``generate``'s default).

Every mode is ``generate`` as a user calls it, without a decoder built beforehand: the lean modes use the model's
own decoder, which the first (warm-up) call builds and later calls reuse (``LeanDecoder.of``).

Two speed-ups answer two questions. ``recompute / modules`` is the **cache alone**: both run the same module
code, one over the whole prefix, the other over one new token. ``recompute / prealloc`` is the **cache plus
the lean step**, what a user of ``generate`` gets; their quotient, ``modules / prealloc``, is the lean step's
share. (``generate`` takes the module path for a model with forward hooks, because the lean step would not
fire them; ``modules`` registers a forward pre-hook that does nothing, one Python call per step, to get it.)

``--threads auto`` (the default) times a short cached generation on 1, 2, 4, ... threads and runs the
benchmark on the fastest; ``--threads 1,2`` runs it once per listed count. For each thread count it prints
per-step latencies (from ``GenerationOutput.step_times``; step 0 is the prefill and is left out of the
flatness figures), end-to-end times (median of ``--runs``), and checks the targets of issue 20:

- prealloc at least 10x faster end to end than recompute (the cache plus the lean step; the cache alone,
  ``recompute / modules``, is printed beside it without a target);
- the median of its last 50 steps at most 1.1x the median of its first 50. Each step's latency is its
  fastest over the runs (its cost without the pauses a virtual machine adds at random moments; the
  median over runs is printed beside it), and the median over each window keeps a step the scheduler
  delayed in every run from deciding it. Beside it the script times the steps' attention alone (every
  layer, over the keys at the middle of each window, caches hot): it reads every cached key and value, so
  its growth is the part of the ratio no cache can remove;
- the cached decode step (median over steps) at most 2 ms on one thread;
- identical tokens in the four modes.

Timings depend on the load of the machine: run it on an idle machine for meaningful numbers.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

from _openmp import WAIT_POLICY, thread_counts  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import torch  # noqa: E402

from minitfm.device import cpu_summary  # noqa: E402
from minitfm.generation import generate  # noqa: E402
from minitfm.generation.lean_decode import LeanDecoder  # noqa: E402
from minitfm.layers.kv_cache import ConcatKVCache, KVCache  # noqa: E402
from minitfm.lm.small_lm import small_lm_config  # noqa: E402
from minitfm.models import DecoderOnlyLM  # noqa: E402

MODES = {"recompute": dict(use_cache=False), "modules": dict(cache_cls=KVCache),
         "concat": dict(cache_cls=ConcatKVCache), "prealloc": dict(cache_cls=KVCache)}
MODULE_PATH = {"recompute", "modules"}  # modes whose every step runs through the module tree


@contextlib.contextmanager
def module_path(model, on: bool):
    """Inside the block, ``generate`` runs every decode step through the model's modules (if ``on``).

    ``LeanDecoder.build`` refuses a model with forward hooks (the lean step would not fire them), so a
    pre-hook that does nothing is enough; it costs one Python call per forward, far under a step's time.
    """
    handle = model.register_forward_pre_hook(lambda module, args: None) if on else None
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


def run_once(model, prompt, new_tokens: int, mode: str, clock=time.perf_counter):
    with module_path(model, mode in MODULE_PATH):
        start = clock()
        out = generate(model, prompt, new_tokens, eos_id=-1, clock=clock, **MODES[mode])  # -1: never stop early
        return clock() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest setting (1 run, 1 thread, 60 new tokens): checks the script runs, no figures")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="auto", help="'auto' (fastest by measurement) or counts, e.g. 1,2")
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--prompt-len", type=int, default=8)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall: time.perf_counter; cpu: time.process_time, this process's CPU time only "
                             "(steadier on a shared machine; with 1 thread it approximates idle wall time)")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.threads, args.new_tokens, args.attention_repeats = 1, "1", 60, 3
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    torch.manual_seed(0)
    config = small_lm_config()
    model = DecoderOnlyLM(config).eval()
    prompt = torch.randint(3, config.vocab_size, (1, args.prompt_len))
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}")
    print(f"model: small_lm_config() d_model={config.d_model} n_layers={config.n_layers} n_heads={config.n_heads} "
          f"pos={config.pos} max_seq_len={config.max_seq_len} params={sum(p.numel() for p in model.parameters()):,}")
    for mode in ("prealloc", "modules"):  # warm-up: first calls allocate and dispatch slowly
        run_once(model, prompt, 8, mode)
    for threads in thread_counts(args.threads, lambda: run_once(model, prompt, 64, "prealloc"), "64 cached tokens"):
        torch.set_num_threads(threads)
        print(f"\n=== {threads} thread{'s' * (threads > 1)}: prompt {args.prompt_len} tokens, {args.new_tokens} new "
              f"tokens, batch 1, {args.runs} runs (median), {args.clock} clock")
        totals, steps, tokens = {m: [] for m in MODES}, {m: [] for m in MODES}, {}
        for _ in range(args.runs):
            for mode in MODES:  # interleaved, so a change in machine load hits all four alike
                seconds, out = run_once(model, prompt, args.new_tokens, mode, clock)
                totals[mode].append(seconds)
                steps[mode].append(out.step_times)
                tokens.setdefault(mode, []).append(out.tokens)
        # the keys a step attends to at the middle of the first and of the last 50-step window
        repeats = getattr(args, "attention_repeats", 300)
        growth = (attention_ms(model, args.prompt_len + 25, repeats),
                  attention_ms(model, args.prompt_len + args.new_tokens - 25, repeats))
        report(args, threads, totals, steps, tokens, growth)


def attention_ms(model, keys: int, repeats: int = 300) -> float:
    """Best time in ms of one decode step's attention alone (every layer, the lean step's kernels) over ``keys``
    cached keys: the part of a step that must grow with the length, since it reads every cached key and value."""
    c = model.config
    lean = LeanDecoder.build(model, keys)
    q = torch.randn(1, c.n_heads, 1, c.d_head)
    k, v = torch.randn(2, 1, c.n_kv_heads, keys, c.d_head).unbind(0)
    kv = [(k.clone(), v.clone()) for _ in range(c.n_layers)]  # one cache per layer, as in a real step
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            for layer, (k_layer, v_layer) in zip(lean.layers, kv):
                lean.attend(layer, q, k_layer, v_layer, None, None)
            best = min(best, time.perf_counter() - start)
    return 1e3 * best


def per_step(step_lists, over_runs=statistics.median):
    """Each step's latency over the runs (median, or ``min``), in ms."""
    return [1000 * over_runs(values) for values in zip(*step_lists)]


def flatness(latencies) -> tuple[float, float]:
    """Medians of steps 1-50 and of the last 50 steps (step 0 is the prefill)."""
    return statistics.median(latencies[1:51]), statistics.median(latencies[-50:])


def report(args, threads, totals, steps, tokens, attention) -> None:
    n = args.new_tokens
    marks = [1, n // 4, n // 2, 3 * n // 4, n - 1]
    print("per-step latency (ms, median of runs) at step " + ", ".join(str(m) for m in marks))
    summary = {}
    for mode in MODES:
        typical, fastest = per_step(steps[mode]), per_step(steps[mode], min)
        first, last = flatness(fastest)
        summary[mode] = (statistics.median(totals[mode]), first, last, statistics.median(typical[1:]),
                         flatness(typical))
        print(f"  {mode:10s} " + "  ".join(f"{typical[m]:7.2f}" for m in marks)
              + f"   prefill {typical[0]:.2f} ms")
    print("\nmode        end-to-end (s)  steps 1-50 (ms)  last 50 (ms)  last/first  (median over runs)  "
          "speed-up vs recompute")
    for mode, (total, first, last, _, (typical_first, typical_last)) in summary.items():
        print(f"  {mode:10s} {total:12.2f} {first:15.2f} {last:13.2f} {last / first:11.2f} "
              f"{typical_last / typical_first:15.2f} {summary['recompute'][0] / total:16.1f}x")
    print("  (steps: median over the window of each step's fastest run; in brackets the same with each step's "
          "median run)")
    reference = tokens["recompute"][0]
    same = all(torch.equal(t, reference) for runs in tokens.values() for t in runs)
    speedup = summary["recompute"][0] / summary["prealloc"][0]
    flat = summary["prealloc"][2] / summary["prealloc"][1]
    step_ms = summary["prealloc"][3]
    cache_alone = summary["recompute"][0] / summary["modules"][0]
    lean_share = summary["modules"][0] / summary["prealloc"][0]
    print(f"\nidentical tokens in all four modes and all runs: {same}  {'PASS' if same else 'FAIL'}")
    print(f"the cache alone, recompute / modules (both through the modules): {cache_alone:.1f}x  (no target)")
    print(f"  the lean step alone, modules / prealloc (both cached): {lean_share:.1f}x")
    print(f"target prealloc >= 10x faster than recompute (cache + lean step): {speedup:.1f}x  "
          f"{'PASS' if speedup >= 10 else 'FAIL'}")
    print(f"target prealloc last-50 / first-50 <= 1.1: {flat:.3f}  {'PASS' if flat <= 1.1 else 'FAIL'}")
    floor = (summary["prealloc"][1] + attention[1] - attention[0]) / summary["prealloc"][1]
    print(f"  of which attention alone (all layers, best of {getattr(args, 'attention_repeats', 300)}): {attention[0]:.3f} ms over {args.prompt_len + 25} "
          f"keys, {attention[1]:.3f} ms over {args.prompt_len + args.new_tokens - 25}: that growth alone makes "
          f"last/first {floor:.2f}")
    verdict = ("PASS" if step_ms <= 2.0 else "FAIL") if threads == 1 else "(the target is for 1 thread)"
    print(f"target cached decode step <= 2 ms on 1 thread: median {step_ms:.2f} ms per token on {threads} "
          f"thread{'s' * (threads > 1)}  {verdict}")


if __name__ == "__main__":
    main()
