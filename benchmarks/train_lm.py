"""Train the book's small language model on the grammar corpus and report loss and validity.

Usage:  python benchmarks/train_lm.py [--steps 400] [--threads auto|N] [--save minitfm/lm/assets/small_lm.pt]
        python benchmarks/train_lm.py --smoke   # seconds: 3 steps on 500 sentences, nothing saved (tests run this)

Recipe (all in :mod:`minitfm.lm.small_lm`): 20,000 sentences from ``generate_sentences(seed=0)``,
``small_lm_config()`` (ModelConfig.small_lm: 4 Pre-RMSNorm layers, d_model 128, RoPE, SwiGLU) and
``small_lm_train_config()`` (Adam, warmup + cosine, batches of 64 bucketed by length), model seed 0.
Training rows pack sentences into 32-token rows (``lm_stream_rows``), so the model writes sentence after
sentence and never stops by itself. The script prints the training time, the held-out loss (1,000
sentences from seed 1), and for greedy continuations of short prompts and 200 samples at temperature 1
(32 new tokens each): the fraction of grammatical complete sentences, distinct bigrams and repeated
trigrams. ``--save`` writes a checkpoint loadable with ``minitfm.training.load_checkpoint``.

``--threads auto`` (the default) times 20 training steps on 1, 2, 4, ... threads and trains on the
fastest; ``--threads N`` forces N. The thread count changes the last bits of every sum, so a checkpoint
trained on another count differs slightly (its figures do not change beyond their last decimals).
"""
from __future__ import annotations

import argparse
import time

from _openmp import WAIT_POLICY, thread_counts  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import torch  # noqa: E402

from minitfm.device import cpu_summary  # noqa: E402
from minitfm.generation.text_metrics import distinct_n, repetition_rate  # noqa: E402
from minitfm.lm.corpus import generate_sentences, validity  # noqa: E402
from minitfm.lm.small_lm import VALID_SEED, perplexity_and_loss, sample_texts, train_small_lm  # noqa: E402
from minitfm.training import save_checkpoint  # noqa: E402

PROMPTS = ["the", "a", "some", "every", "many", "this", "these", "the cats", "a dog near", "the children that"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None, help="default: small_lm_train_config().steps")
    parser.add_argument("--threads", default="auto", help="'auto' (fastest by measurement) or a thread count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="checkpoint path, e.g. minitfm/lm/assets/small_lm.pt")
    parser.add_argument("--smoke", action="store_true", help="the smallest setting (3 steps on 500 sentences, 1 thread, "
                                                             "few samples): checks that the script runs; saves nothing")
    args = parser.parse_args()
    sizes = dict(valid=1000, samples=200, sentences=20_000)
    if args.smoke:
        if args.save:
            parser.error("--smoke trains a model that is not worth saving: drop --save")
        args.steps, args.threads, sizes = 3, "1", dict(valid=50, samples=4, sentences=500)
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}")
    torch.set_num_threads(thread_counts(args.threads, lambda: train_small_lm(20, seed=args.seed), "20 training steps",
                                        repeats=1)[0])

    wall, cpu = time.perf_counter(), time.process_time()
    model, history = train_small_lm(args.steps, seed=args.seed, n_sentences=sizes["sentences"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n_params = sum(p.numel() for p in model.parameters())
    print(f"trained {len(history.loss)} steps in {wall:.1f} s wall ({cpu:.1f} s CPU, {torch.get_num_threads()} threads), "
          f"{n_params:,} parameters")
    print(f"training loss: first 10 steps {sum(history.loss[:10]) / 10:.3f}, last 10 {sum(history.loss[-10:]) / 10:.3f}")
    ppl, loss = perplexity_and_loss(model, generate_sentences(sizes["valid"], seed=VALID_SEED))
    print(f"held-out loss {loss:.3f} nats/token (perplexity {ppl:.2f})")

    greedy = sample_texts(model, len(PROMPTS), prompts=PROMPTS)
    generator = torch.Generator().manual_seed(args.seed)
    sampled = sample_texts(model, sizes["samples"], do_sample=True, generator=generator)
    for name, texts in (("greedy, 10 prompts", greedy), (f"sampled at temperature 1, {sizes['samples']} texts", sampled)):
        try:
            valid = f"{validity(texts, complete_only=True):.3f}"
        except ValueError:  # an undertrained model (--smoke) may complete no sentence
            valid = "n/a (no complete sentence)"
        print(f"{name}: validity of complete sentences {valid}, "
              f"distinct-2 {distinct_n(texts, 2):.3f}, repeated 3-grams {repetition_rate(texts, 3):.3f}")
    print("greedy:\n  " + "\n  ".join(greedy[:5]))
    print("sampled:\n  " + "\n  ".join(sampled[:5]))
    if args.save:
        save_checkpoint(args.save, model)
        print(f"saved {args.save}")


if __name__ == "__main__":
    main()
