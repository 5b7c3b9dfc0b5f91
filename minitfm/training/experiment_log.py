"""An experiment log: one JSON line per run, with its hyperparameters and its results.

Append-only and human-readable (``cat runs.jsonl``), so a log written by one notebook or script can be
read by another, compared, and kept under version control. Values must be JSON-friendly; torch dtypes,
tensors of one element and other simple objects are converted (dtype -> ``"bfloat16"``, tensor -> float).

    log = ExperimentLog("runs.jsonl")
    log.record("baseline", {"lr": 3e-3, "warmup": 50}, {"final_loss": 0.02})
    print(log.table())
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch


def _plain(value):
    """A JSON-friendly version of ``value`` (raises TypeError for what cannot be logged faithfully)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no NaN/Infinity
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return _plain(value.item())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    raise TypeError(f"cannot log a {type(value).__name__} ({value!r:.40}); use numbers, strings, lists or dicts")


class ExperimentLog:
    """Append-only JSON-lines log at ``path`` (created on first record; parent folders too)."""

    def __init__(self, path):
        self.path = Path(path)

    def record(self, run: str, hparams: dict, results: dict) -> dict:
        """Append one run; returns the entry written (``{"run", "hparams", "results"}``)."""
        if not isinstance(run, str) or not run:
            raise ValueError(f"run must be a non-empty name, got {run!r}")
        for name, value in (("hparams", hparams), ("results", results)):
            if not isinstance(value, dict):
                raise TypeError(f"{name} must be a dict, got {type(value).__name__}")
        entry = {"run": run, "hparams": _plain(hparams), "results": _plain(results)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=False) + "\n")
        return entry

    def runs(self) -> list[dict]:
        """Every entry, oldest first (an empty list when nothing was logged yet)."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def table(self, columns: list[str] | None = None, digits: int = 3) -> str:
        """A fixed-width text table, one row per run. ``columns`` are hyperparameter or result names
        (default: every name that appears, hyperparameters first); missing values show as ``-``."""
        runs = self.runs()
        if columns is None:
            columns = []
            for part in ("hparams", "results"):
                for entry in runs:
                    columns += [k for k in entry[part] if k not in columns]

        def cell(entry, key):
            value = entry["results"].get(key, entry["hparams"].get(key, "-"))
            return f"{value:.{digits}g}" if isinstance(value, float) else str(value)

        rows = [["run"] + columns] + [[e["run"]] + [cell(e, k) for k in columns] for e in runs]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows)
