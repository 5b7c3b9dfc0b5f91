"""Train chapter 16's DPO and GRPO models from the shipped assistant, measure them, save them, or check them.

Usage:  python benchmarks/train_preference_lms.py [--threads 1] [--save] [--check] [--only dpo|grpo]
        python benchmarks/train_preference_lms.py --smoke   # seconds: a few pairs, two steps

Recipes (all in :mod:`minitfm.lm.preference_lms`): ``DPO_RECIPE`` (pairs from the assistant's own samples on
``add``, a verified sum against a wrong one; beta 1, Adam 1e-4, 2 epochs of batches of 16) and ``GRPO_RECIPE``
(exact-answer reward on ``add``, the final RMSNorm gain only, Adam 0.1, 20 steps x 8 prompts x 8 replies, dapo).
For each it prints the training curve's ends, then held-out greedy accuracy per task beside the assistant's (and
how many of the greedy replies differ from the assistant's), pass@1 / pass@16 on ``add`` (32 samples of 100
held-out sums at temperature 1, seed 0, as ``assistant_lm.json``), KL per reply from the assistant, and for DPO the
preference accuracy on pairs sampled from held-out sums.

``--save`` writes ``minitfm/lm/assets/dpo_lm.pt`` / ``grpo_lm.pt`` and their ``.json`` records. ``--check`` trains
again and compares with the records: on the machine, torch version and thread count of the record the weights must
be bit-equal (same SHA-256) and every figure equal; elsewhere every accuracy and pass@k within TOLERANCE and the
KL per reply within KL_TOLERANCE nats. It prints its time.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from _openmp import WAIT_POLICY  # noqa: E402  (sets OMP_WAIT_POLICY before torch starts OpenMP)

import torch  # noqa: E402

from minitfm.device import cpu_summary  # noqa: E402
from minitfm.lm import assistant_lm as A, preference_lms as P  # noqa: E402
from minitfm.preferences.dpo import dpo_batch_loss, preference_pair  # noqa: E402
from minitfm.preferences.training import sampled_pairs  # noqa: E402
from minitfm.training import save_checkpoint  # noqa: E402

TOLERANCE = 0.08  # accuracy and pass@k shares: a rerun on another machine lands within this of the record
KL_TOLERANCE = 0.5  # nats per reply
PREF_TOLERANCE = 0.1  # DPO's held-out preference accuracy (about 70 pairs)
MODELS = {"dpo": (P.train_dpo_lm, P.DPO_CHECKPOINT, P.DPO_RECORD), "grpo": (P.train_grpo_lm, P.GRPO_CHECKPOINT,
                                                                             P.GRPO_RECORD)}
SMOKE = {"dpo": {"questions": 16, "epochs": 1}, "grpo": {"steps": 2, "prompts": 2, "group": 2}}


def heldout_preference(model, assistant, beta: float, n: int) -> dict:
    """DPO's held-out preference accuracy: pairs from ``n`` held-out sums (seed 300), 8 samples each (seed 2)."""
    examples = A.heldout_examples(P.TASK, n, seed=300)
    pairs = sampled_pairs(assistant, A.chat_template(), examples, 8, seed=2)
    if not pairs:
        return {"pairs": 0, "accuracy": None, "margin": None}
    rendered = [preference_pair(A.chat_template(), e.chat(with_answer=False), c, r) for e, c, r in pairs]
    with torch.no_grad():
        out = dpo_batch_loss(model, assistant, [c for c, _ in rendered], [r for _, r in rendered], beta=beta)
    return {"pairs": len(pairs), "accuracy": round(out.accuracy, 4), "margin": round(float(out.margins.mean()), 4)}


def training_summary(name: str, trained) -> dict:
    h = trained.history
    if name == "dpo":
        tail = max(1, len(h.loss) // 4)  # the last quarter of the steps
        return {"pairs": len(trained.pairs), "steps": len(h.loss), "loss_first": round(h.loss[0], 4),
                "loss_last_quarter": round(sum(h.loss[-tail:]) / tail, 4),
                "accuracy_last_quarter": round(sum(h.accuracy[-tail:]) / tail, 4),
                "chosen_log_prob_first": round(h.chosen[0], 4), "chosen_log_prob_last": round(h.chosen[-1], 4)}
    return {"steps": len(h.reward), "reward_first": round(h.reward[0], 4), "reward_last": round(h.reward[-1], 4),
            "kl_per_token_last": round(h.kl[-1], 5)}


def compare(record: dict, shipped: dict) -> list[str]:
    """Why ``record`` does not reproduce ``shipped`` (empty: it does)."""
    same_place = all(record[k] == shipped[k] for k in ("cpu", "torch", "threads"))
    if same_place:
        drop = ("seconds", "python")
        if record["weights_sha256"] != shipped["weights_sha256"]:
            return [f"weights differ on the same machine, torch and threads ({record['weights_sha256'][:12]} vs "
                    f"{shipped['weights_sha256'][:12]})"]
        return [f"{k}: {record[k]} vs {shipped[k]}" for k in shipped if k not in drop and record.get(k) != shipped[k]]
    now, then = record["figures"], shipped["figures"]
    problems = [f"{t}: {now['tasks'][t]['accuracy']} vs {f['accuracy']}" for t, f in then["tasks"].items()
                if abs(now["tasks"][t]["accuracy"] - f["accuracy"]) > TOLERANCE]
    problems += [f"{k}: {now['intermediate'][k]} vs {then['intermediate'][k]}" for k in ("pass@1", "pass@16")
                 if abs(now["intermediate"][k] - then["intermediate"][k]) > TOLERANCE]
    if abs(now["kl_per_reply"]["nats"] - then["kl_per_reply"]["nats"]) > KL_TOLERANCE:
        problems.append(f"KL per reply: {now['kl_per_reply']['nats']} vs {then['kl_per_reply']['nats']}")
    if "heldout_preference" in then and abs(now["heldout_preference"]["accuracy"]
                                             - then["heldout_preference"]["accuracy"]) > PREF_TOLERANCE:
        problems.append(f"held-out preference accuracy: {now['heldout_preference']} vs {then['heldout_preference']}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for training and measuring (the "
                                                               "shipped weights: 1)")
    parser.add_argument("--only", choices=sorted(MODELS), help="one of the two models")
    parser.add_argument("--save", action="store_true", help="write the .pt checkpoints and .json records")
    parser.add_argument("--check", action="store_true", help="train again and compare with the records")
    parser.add_argument("--smoke", action="store_true", help="a few pairs and steps, small measurements, 1 thread: "
                                                             "checks that the script runs; writes and compares nothing")
    args = parser.parse_args()
    sizes = {}
    if args.smoke:
        if args.save or args.check:
            parser.error("--smoke trains for a step or two: nothing worth saving or checking")
        args.threads, sizes = 1, {"n": 4, "n_pass": 2, "samples": 16, "kl_n": 2}
        print("--smoke: the smallest setting, to check that the script runs; its figures mean nothing")
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_summary()}; {WAIT_POLICY}; {args.threads} threads")
    assistant = A.load_assistant_lm()
    before = json.loads(A.RECORD.read_text(encoding="utf-8"))
    status, start_all = 0, time.perf_counter()
    for name in [args.only] if args.only else sorted(MODELS):
        train, checkpoint, record_path = MODELS[name]
        trained = train(assistant=assistant, threads=args.threads, **(SMOKE[name] if args.smoke else {}))
        summary = training_summary(name, trained)
        print(f"{name}: trained in {trained.seconds:.1f} s: {summary}")
        figures = P.measure(trained.model, assistant, **sizes)
        if name == "dpo":
            figures["heldout_preference"] = heldout_preference(trained.model, assistant, trained.recipe["beta"],
                                                               sizes.get("n_pass", 100))
            print(f"  held-out preference accuracy {figures['heldout_preference']}")
        else:
            ratio = (trained.model.final_norm.weight / assistant.final_norm.weight).detach()
            figures["final_norm_gain_ratio"] = {"min": round(float(ratio.min()), 4),
                                                "max": round(float(ratio.max()), 4),
                                                "mean": round(float(ratio.mean()), 4)}
            print(f"  final-norm gain / the assistant's: {figures['final_norm_gain_ratio']}")
        for task, f in figures["tasks"].items():
            low, high = f["interval"]
            print(f"  {task:12s} greedy {f['accuracy']:6.1%} [{low:.1%}, {high:.1%}] of {f['n']} (assistant "
                  f"{before['tasks'][task]['accuracy']:.1%}, best constant {f['best_constant']:.1%}); "
                  f"{f['differ_from_assistant']} replies differ from the assistant's")
        mid, kl = figures["intermediate"], figures["kl_per_reply"]
        print(f"  {mid['task']}: pass@1 {mid['pass@1']:.3f} pass@16 {mid['pass@16']:.3f} (assistant "
              f"{before['intermediate']['pass@1']:.3f} / {before['intermediate']['pass@16']:.3f}), "
              f"{mid['distinct_answers']} distinct answers; KL per reply from the assistant {kl['nats']:.3f} nats")
        record = {"recipe": trained.recipe, "training": summary, "weights_sha256": P.weights_digest(trained.model),
                  "figures": figures, "seconds": round(trained.seconds, 1), "threads": args.threads,
                  "torch": torch.__version__, "python": platform.python_version(), "cpu": cpu_summary()}
        if args.save:
            save_checkpoint(checkpoint, trained.model)
            record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            print(f"  saved {checkpoint} ({checkpoint.stat().st_size / 1e6:.1f} MB) and {record_path.name}")
        if args.check:
            shipped = json.loads(record_path.read_text(encoding="utf-8"))
            problems = compare(record, shipped)
            same = all(record[k] == shipped[k] for k in ("cpu", "torch", "threads"))
            rule = ("same machine, torch and threads: bit-equal weights and equal figures" if same else
                    f"another machine: accuracies and pass@k within {TOLERANCE}, KL within {KL_TOLERANCE} nats")
            print(f"  check against {record_path.name} ({rule}): "
                  f"{'reproduced' if not problems else 'NOT reproduced: ' + '; '.join(problems)}; "
                  f"trained in {trained.seconds:.1f} s")
            status |= bool(problems)
    print(f"total {time.perf_counter() - start_all:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
