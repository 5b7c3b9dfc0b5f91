"""Byte-level BPE speed: minitfm.text.bpe_trainer's training and encoding, against the naive recount and Hugging Face.

Usage:  taskset -c 1 python benchmarks/bpe_speed.py [--text FILE] [--chars 1000000] [--vocab-size 500]
                                                    [--naive-chars 50000] [--runs 3]
        python benchmarks/bpe_speed.py --smoke   # seconds: 20,000 characters, 1 run (tests run this)

On about 1 MB of English-like text (generated deterministically from a word list, with ``<|endoftext|>``
between documents; or the first ``--chars`` characters of ``--text``), it times:

- ``train_bpe`` learning a ``--vocab-size`` vocabulary (target: under 5 s on one core);
- ``Tokenizer.encode`` on the whole text (target: under 2 s), and ``encode_iterable`` over its lines;
- ``train_bpe_naive``, which recounts every pair at every merge, on the first ``--naive-chars`` characters,
  beside ``train_bpe`` on the same characters, and checks that the two learn the same merges;
- Hugging Face ``tokenizers`` (Rust): its ``BpeTrainer`` with the same vocabulary size on the same text, and
  its encoding of the text; and, given minitfm's vocabulary and merges, whether it encodes to the same ids.

Each time is the best of ``--runs`` (the run the machine disturbed least), in wall-clock seconds. Run it on
one core (``taskset -c 1``): Hugging Face's Rayon thread pool is also held to one thread
(``RAYON_NUM_THREADS=1`` unless you set it), so both sides use one core.

The generated text draws from a few hundred words, so it has few distinct pre-tokens and ``encode``'s cache
answers most of them; real text has many more (try ``--text`` on a large English file) and costs more.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import random
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers starts its thread pool

from minitfm.text.bpe_tokenizer import Tokenizer  # noqa: E402
from minitfm.text.bpe_trainer import train_bpe, train_bpe_naive  # noqa: E402
from minitfm.text.gpt2_files import token_text  # noqa: E402

SPECIALS = ["<|endoftext|>"]
TRAIN_TARGET_S, ENCODE_TARGET_S = 5.0, 2.0

WORDS = """the of and to a in is it you that he was for on are with as I his they be at one have this from or
had by not word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than call first who may down side
been now find any new work part take get place made live where after back little only round man year came show
every good me give our under name very through just form sentence great think say help low line differ turn
cause much mean before move right boy old too same tell does set three want air well also play small end put
home read hand port large spell add even land here must big high such follow act why ask men change went light
kind off need house picture try us again animal point mother world near build self earth father head stand own
page should country found answer school grow study still learn plant cover food sun four between state keep eye
never last let thought city tree cross farm hard start might story saw far sea draw left late run while press
close night real life few north open seem together next white children begin got walk example ease paper group
always music those both mark often letter until mile river car feet care second book carry took science eat room
friend began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song measure
door product black short numeral class wind question happen complete ship area half rock order fire south problem
piece told knew pass since top whole king space heard best hour better true during hundred five remember step
early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel
toward war lay against pattern slow center love person money serve appear road map rain rule govern pull cold
notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field
rest correct able pound done beauty drive stood contain front teach week final gave green oh quick develop ocean
warm free minute strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel
full force blue object decide surface deep moon island foot system busy test record boat common gold possible
plane stead dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes
distant fill east paint language among""".split()
NAMES = "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil Trent".split()
CONTRACTIONS = ["don't", "it's", "we're", "they've", "I'm", "you'll", "she'd", "can't", "won't", "isn't"]


def english_like_text(n_chars: int, seed: int = 0) -> str:
    """About ``n_chars`` of sentences and paragraphs, Zipf-distributed words, documents between specials."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    documents, size = [], 0
    while size < n_chars:
        paragraphs = ["\n".join(_sentence(rng, weights) for _ in range(rng.randint(1, 6)))
                      for _ in range(rng.randint(1, 8))]
        documents.append("\n\n".join(paragraphs) + "\n")
        size += len(documents[-1])
    return "<|endoftext|>".join(documents)


def _sentence(rng: random.Random, weights: list[float]) -> str:
    words = rng.choices(WORDS, weights, k=rng.randint(4, 18))
    for i in range(len(words)):
        roll = rng.random()
        if roll < 0.04:
            words[i] = rng.choice(NAMES)
        elif roll < 0.07:
            words[i] = rng.choice(CONTRACTIONS)
        elif roll < 0.09:
            words[i] = rng.choice([str(rng.randint(1800, 2030)), f"{rng.randint(1, 99)}%",
                                   f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}"])
        elif roll < 0.14:
            words[i] += ","
    words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words) + rng.choice([".", ".", ".", "?", "!", ";", ":"])


def best_time(function, runs: int):
    """(the fastest of ``runs`` wall-clock times, the last result)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def hugging_face(text: str, vocab_size: int, runs: int, vocab, merges):
    """Hugging Face's times and results, or None if ``tokenizers`` is not installed."""
    try:
        from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        return None

    def byte_level(model):
        tokenizer = HFTokenizer(model)
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer

    def train():  # from the lines, its usual input (faster for it than one 1 MB string)
        tokenizer = byte_level(models.BPE())
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train_from_iterator(text.splitlines(keepends=True), trainer)
        return tokenizer

    lines = text.splitlines(keepends=True)
    result = {"train": best_time(train, runs)}
    result["encode"] = best_time(lambda: result["train"][1].encode(text).ids, runs)
    result["encode_batch"] = best_time(lambda: result["train"][1].encode_batch(lines), runs)
    ours = byte_level(models.BPE(vocab={t.decode() if i >= len(vocab) - len(SPECIALS) else token_text(t): i
                                        for i, t in vocab.items()},
                                 merges=[(token_text(a), token_text(b)) for a, b in merges]))
    ours.add_special_tokens(SPECIALS)
    result["ids with our merges"] = ours.encode(text).ids
    return result


def time_minitfm(text: str, small: str, vocab_size: int, runs: int) -> dict:
    """minitfm's times: ``{name: (seconds, result)}``."""
    result = {"train": best_time(lambda: train_bpe(text, vocab_size, SPECIALS), runs)}
    vocab, merges = result["train"][1]
    result["encode"] = best_time(lambda: Tokenizer(vocab, merges, SPECIALS).encode(text), runs)  # cold cache
    tokenizer = Tokenizer(vocab, merges, SPECIALS)
    lines = text.splitlines(keepends=True)
    result["encode_iterable"] = best_time(lambda: list(tokenizer.encode_iterable(lines)), runs)
    result["small train"] = best_time(lambda: train_bpe(small, vocab_size, SPECIALS), runs)
    result["small naive"] = best_time(lambda: train_bpe_naive(small, vocab_size, SPECIALS), 1)
    return result


def verdict(seconds: float, target: float) -> str:
    return f"target < {target:.0f} s: {'met' if seconds < target else 'NOT met'}"


def yes(condition: bool) -> str:
    return "yes" if condition else "NO"


def report_minitfm(ours: dict, text: str, small: str) -> None:
    (train_s, (vocab, merges)), (encode_s, ids) = ours["train"], ours["encode"]
    print(f"minitfm train_bpe        {train_s:7.3f} s  ({len(merges)} merges)   {verdict(train_s, TRAIN_TARGET_S)}")
    print(f"minitfm encode           {encode_s:7.3f} s  ({len(ids):,} ids, {len(text.encode()) / len(ids):.2f} "
          f"bytes per token)   {verdict(encode_s, ENCODE_TARGET_S)}")
    print(f"minitfm encode_iterable  {ours['encode_iterable'][0]:7.3f} s  (over the lines, warm cache; same ids: "
          f"{yes(ours['encode_iterable'][1] == ids)})")
    (naive_s, naive), (fast_s, fast) = ours["small naive"], ours["small train"]
    print(f"\non the first {len(small):,} characters:")
    print(f"  train_bpe_naive        {naive_s:7.3f} s")
    print(f"  train_bpe              {fast_s:7.3f} s   naive / incremental = {naive_s / fast_s:.1f}x; "
          f"same vocabulary and merges: {yes(naive == fast)}")


def report_hugging_face(hf: dict, ours: dict, text: str) -> None:
    print(f"\nHugging Face tokenizers (Rust), on the same {len(text):,} characters:")
    print(f"  BpeTrainer             {hf['train'][0]:7.3f} s  (from the lines; vocab {hf['train'][1].get_vocab_size()})"
          f"   minitfm / HF = {ours['train'][0] / hf['train'][0]:.2f}x")
    print(f"  encode                 {hf['encode'][0]:7.3f} s   minitfm / HF = "
          f"{ours['encode'][0] / hf['encode'][0]:.2f}x")
    print(f"  encode_batch(lines)    {hf['encode_batch'][0]:7.3f} s")
    print(f"  HF given minitfm's vocabulary and merges encodes to minitfm's ids: "
          f"{yes(hf['ids with our merges'] == ours['encode'][1])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", type=pathlib.Path, help="a UTF-8 file to use instead of generated text")
    parser.add_argument("--chars", type=int, default=1_000_000,
                        help="characters of text: generated, or the first of --text")
    parser.add_argument("--vocab-size", type=int, default=500)
    parser.add_argument("--naive-chars", type=int, default=50_000, help="characters for the naive recount")
    parser.add_argument("--runs", type=int, default=3, help="each time is the best of this many runs")
    parser.add_argument("--smoke", action="store_true", help="the smallest setting (20,000 characters, 1 run): checks "
                                                             "that the script runs; no target is judged")
    args = parser.parse_args()
    if args.smoke:
        args.chars, args.naive_chars, args.vocab_size, args.runs = 20_000, 2_000, 300, 1
        print("--smoke: the smallest setting, to check that the script runs; its figures and verdicts mean nothing")
    text = args.text.read_text(encoding="utf-8")[:args.chars] if args.text else english_like_text(args.chars)
    small = text[:args.naive_chars]
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores (load average {load:.1f}), this process on "
          f"cores {cores}; Python {platform.python_version()}; RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}")
    print(f"text: {len(text):,} characters, {len(text.encode()):,} bytes "
          f"({args.text or 'generated, seed 0'}); vocab_size {args.vocab_size}; best of {args.runs} runs\n")
    ours = time_minitfm(text, small, args.vocab_size, args.runs)
    report_minitfm(ours, text, small)
    hf = hugging_face(text, args.vocab_size, args.runs, *ours["train"][1])
    if hf is None:
        print("\nHugging Face tokenizers is not installed: its comparison is skipped")
    else:
        report_hugging_face(hf, ours, text)
    met = ours["train"][0] < TRAIN_TARGET_S and ours["encode"][0] < ENCODE_TARGET_S
    same = ours["encode_iterable"][1] == ours["encode"][1]
    sys.exit(0 if (met or args.smoke) and same else 1)  # a smoke run judges no time target, only the ids


if __name__ == "__main__":
    main()
