"""Decoding speed at today's shapes: minitfm against transformers, and the floor of memory bandwidth (issue 38).

Usage:  python benchmarks/decode_families.py [--shapes qwen3-0.6b,gpt2-small] [--threads 1] [--new-tokens 256]
        [--runs 3] [--prompt-len 8]
        python benchmarks/decode_families.py --smoke   # seconds: 2-layer models of both families (tests run this)

For each shape, a model with random weights is built by ``transformers`` (nothing is downloaded), saved, and
loaded into minitfm with :func:`minitfm.pretrained.load`; then, for each thread count, in one run and interleaved
(a change in the machine's load hits both alike), it decodes ``--new-tokens`` tokens greedily at batch 1 in
float32, exactly as ``benchmarks/pretrained_speed.py`` does for GPT-2 (whose functions this script reuses):
minitfm's ``generate`` as a user calls it (its KV cache and the model's own lean decoder, built by the warm-up
call and reused), against ``transformers``' ``generate``.
It prints every run's time per token, the median, transformers / minitfm (target >= 1), minitfm / floor (target
<= 1.3, the floor being the bytes of weights a step reads over the bandwidth measured on the same threads right
after each run, so that a change in the machine's load moves both) and whether the tokens are identical.

Shapes:
- ``qwen3-0.6b``: Qwen3-0.6B's config (28 layers, D = 1024, 16 query and 8 key/value heads of head_dim 128,
  F = 3072, V = 151936, tied embeddings, QK-norm): 596M parameters, 2.4 GB read per step in float32;
- ``gpt2-small``: GPT-2 small's (124M parameters), the shape whose lead over transformers issue 28 measured.

Random weights drawn with transformers' initializer_range (0.02) give logits so close together that the two
libraries' rounding could pick different argmaxes; ``--init`` (default 0.05) widens them, as the tests do.
Run it on an idle machine, pinned (``taskset -c 1`` for one thread): timings depend on the machine's load.

**Is the floor fair?** After the runs the script prints a check per shape (``floor check``), on the same threads:
one pass of matrix-vector products over the decoder's own matrices and nothing else (the step's products alone),
and ``torch.sum`` over the same tensors (another read of the same bytes), each against the floor. The floor's
probe is the fastest read PyTorch offers on one thread (a sum is slower: it is not bound by memory alone), and a
2.4 GB probe read at the rate of the 256 MB one on the Xeon whose L3 holds 300 MB, so the floor is not inflated
by the cache; the products alone come out a few percent above it (one square 256 MB product's best pass against
a typical pass over many smaller ones). The definition is unchanged. The rest of a step (norms, RoPE,
attention, cache writes: small operations that each start cold, because the products stream the caches empty),
the prefill and the decode loop make up the difference; ``benchmarks/README.md`` gives the measured split.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from _openmp import WAIT_POLICY  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a config and random weights: never the network

import torch  # noqa: E402

from minitfm import pretrained  # noqa: E402
from minitfm.device import cpu_summary  # noqa: E402
from minitfm.generation.lean_decode import LeanDecoder, refusal  # noqa: E402
from pretrained_speed import bandwidth, bytes_per_step, run_minitfm, run_transformers  # noqa: E402

SHAPES = {
    "qwen3-0.6b": ("Qwen3Config", dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                                       head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                                       tie_word_embeddings=True, rope_parameters={"rope_theta": 1e6,
                                                                                 "rope_type": "default"},
                                       bos_token_id=151643, eos_token_id=151645)),
    "gpt2-small": ("GPT2Config", {}),
    # --smoke: the same families at 2 layers of width 64
    "qwen3-tiny": ("Qwen3Config", dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                       max_position_embeddings=128, tie_word_embeddings=True, bos_token_id=0,
                                       eos_token_id=1)),
    "gpt2-tiny": ("GPT2Config", dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128, bos_token_id=0,
                                     eos_token_id=0)),
}


def build(shape: str, init: float, folder: str):
    """(transformers model, minitfm model) of ``shape`` with the same random weights."""
    import transformers

    cls_name, settings = SHAPES[shape]
    torch.manual_seed(0)
    config = getattr(transformers, cls_name)(**settings, initializer_range=init)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    hf.save_pretrained(folder)
    return hf, pretrained.load(folder)


def measure(shape: str, hf, model, threads: int, args) -> None:
    torch.set_num_threads(threads)
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt_len), generator=torch.Generator().manual_seed(1))
    decoder = LeanDecoder.of(model)  # the model's own: what generate builds at its first call and then reuses
    if decoder is None:
        raise SystemExit(f"the lean step refuses {shape}: {refusal(model)}")
    run_minitfm(model, prompt, 4)  # warm-up
    run_transformers(hf, prompt, 4)
    times, floors, same = {"minitfm": [], "transformers": []}, [], True
    weights = bytes_per_step(model)
    for _ in range(args.runs):  # each run's floor from the bandwidth measured beside it (the load drifts)
        seconds_m, ours = run_minitfm(model, prompt, args.new_tokens)  # the default call
        seconds_h, theirs = run_transformers(hf, prompt, args.new_tokens)
        floors.append(1e3 * weights / bandwidth(repeats=4, megabytes=args.probe_mb))
        times["minitfm"].append(seconds_m)
        times["transformers"].append(seconds_h)
        same = same and torch.equal(ours, theirs)
    per_token = {k: 1e3 * statistics.median(v) / args.new_tokens for k, v in times.items()}
    floor = statistics.median(floors)
    print(f"\n=== {shape}, {threads} thread{'s' * (threads > 1)}: {args.new_tokens} greedy tokens after "
          f"{args.prompt_len}, batch 1, fp32, median of {args.runs} runs")
    for name in ("minitfm", "transformers"):
        print(f"{name:13s} {per_token[name]:7.1f} ms/token  (runs: "
              + ", ".join(f"{1e3 * t / args.new_tokens:.1f}" for t in times[name]) + ")")
    print(f"floor         {floor:7.1f} ms/token  ({weights / 1e6:.0f} MB read per step; runs: "
          + ", ".join(f"{f:.1f}" for f in floors) + ")")
    for i, (m, h, f) in enumerate(zip(times["minitfm"], times["transformers"], floors)):  # each run's ratios
        print(f"run {i + 1}: transformers / minitfm = {h / m:.2f}, minitfm / floor = "
              f"{1e3 * m / args.new_tokens / f:.2f}")
    floor_check(decoder, weights, megabytes=args.probe_mb)
    ratio = per_token["transformers"] / per_token["minitfm"]
    print(f"median: transformers / minitfm = {ratio:.2f} (target >= 1.00: {'met' if ratio >= 1.0 else 'missed'}); "
          f"minitfm / floor = {per_token['minitfm'] / floor:.2f} (target <= 1.30: "
          f"{'met' if per_token['minitfm'] <= 1.3 * floor else 'missed'}); tokens identical: {same}")


def floor_check(decoder, weights: int, rounds: int = 3, megabytes: int = 256) -> None:
    """Print, per round, the decoder's matrix products alone and a sum over the same tensors, each one pass, over
    a floor probed right beside them; then the median ratios (see the module docstring)."""
    matrices = [decoder.lm_head] + [w for layer in decoder.layers
                                    for w in (layer.qkv_weight, layer.out_weight, layer.up_weight, layer.down_weight)]
    rows = {n: torch.randn(1, n) for n in {m.shape[0] for m in matrices}}

    def one_pass(read) -> float:
        start = time.perf_counter()
        for m in matrices:
            read(m)
        return 1e3 * (time.perf_counter() - start)

    ratios = []
    for _ in range(rounds):
        floor = 1e3 * weights / bandwidth(repeats=4, megabytes=megabytes)
        ratios.append((one_pass(lambda m: torch.mm(rows[m.shape[0]], m)) / floor, one_pass(torch.sum) / floor))
    products, sums = (statistics.median(r) for r in zip(*ratios))
    print(f"floor check   over a floor probed beside them, the step's products alone {products:.2f}x, torch.sum over "
          f"the same {sum(m.numel() * m.element_size() for m in matrices) / 1e6:.0f} MB {sums:.2f}x (medians of "
          f"{rounds}: " + ", ".join(f"{p:.2f}/{q:.2f}" for p, q in ratios) + ")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest setting (qwen3-tiny,gpt2-tiny, 8 tokens, 1 run): checks that the script "
                             "runs; its figures mean nothing")
    parser.add_argument("--shapes", default="qwen3-0.6b,gpt2-small")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=8)
    parser.add_argument("--init", type=float, default=0.05)
    args = parser.parse_args()
    args.probe_mb = 256  # the bandwidth probe's matrix
    if args.smoke:
        args.shapes, args.threads, args.new_tokens, args.runs, args.probe_mb = "qwen3-tiny,gpt2-tiny", "1", 8, 1, 8
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    import transformers

    transformers.logging.set_verbosity_error()
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}; torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            hf, model = build(shape, args.init, folder)
            print(f"\n{shape}: {sum(p.numel() for p in model.parameters()):,} parameters, built, saved and loaded "
                  f"in {time.perf_counter() - start:.1f} s")
        for threads in [int(t) for t in args.threads.split(",")]:
            measure(shape, hf, model, threads, args)
        del hf, model


if __name__ == "__main__":
    main()
