"""Run the notebooks on seeds nobody ran: every seed k becomes k + offset, the code unchanged.

    python tools/seed_shift.py run --offset 17 [NB ...]            # execute once, shifted; exit 1 on an error
    python tools/seed_shift.py sweep --offsets 1-20 [NB ...]       # many offsets; results in _build/seed_sweep/
    python tools/seed_shift.py report [--out _build/seed_sweep]    # what the sweep found, per notebook and verdict

Why: a reader's CPU, BLAS or GPU changes the float bits of every training run, which for a chaotic run is
much like drawing new seeds. An ``assert`` in a chapter may only guard what holds on every seed, with a
margin; anything else is a printed verdict. This tool finds the asserts that were fitted to the seeds the
chapter happens to run.

How: the kernel (and every Python process it starts, such as chapter 12's spawned ranks) runs with a
``sitecustomize`` that wraps ``torch.manual_seed``, ``torch.Generator`` (its ``manual_seed``),
``random.seed``/``random.Random`` and ``numpy.random.seed``/``default_rng``/``RandomState`` so that an integer
seed k becomes k + offset. The library's ``seed=`` arguments go through these, so they shift too. Outputs are
not compared (nbval does that for the committed seeds); a run fails only on an error, such as an assert.

The sweep also reads every verdict line the shifted run printed (``minitfm.claims``' format) and counts, for
each, how often its verdict word differs from the committed notebook's: a verdict that changes on a third of
the offsets is weak evidence, whatever the committed run says.

Run one sweep at a time (it runs one kernel at a time): kernels that start at once in several processes can pick
the same TCP port, and a lost message then stalls a run until its cell timeout.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from minitfm.claims import verdict_words

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "seed_sweep"
ENV = "MINITFM_SEED_SHIFT"

# Written into a folder put first on PYTHONPATH: Python imports it at start-up in the kernel and in every
# process the kernel spawns, before any notebook or library code runs.
SITECUSTOMIZE = r'''
import os
_shift = int(os.environ.get("MINITFM_SEED_SHIFT", "0") or 0)


def _moved(seed):
    # only integer seeds move; None (fresh entropy) and other objects stay as they are
    return seed + _shift if isinstance(seed, int) and not isinstance(seed, bool) else seed


if _shift:
    import random
    _seed = random.seed
    random.seed = lambda a=None, version=2: _seed(_moved(a), version)

    class _Random(random.Random):
        def seed(self, a=None, version=2):
            return super().seed(_moved(a), version)
    random.Random = _Random

    try:
        import numpy as _np
        _np_seed, _np_rng, _np_state = _np.random.seed, _np.random.default_rng, _np.random.RandomState
        _np.random.seed = lambda seed=None: _np_seed(_moved(seed))
        _np.random.default_rng = lambda seed=None: _np_rng(_moved(seed))

        class _RandomState(_np_state):
            def __init__(self, seed=None):
                super().__init__(_moved(seed))
        _np.random.RandomState = _RandomState
    except ImportError:
        pass

    try:
        import torch as _torch
        _torch_seed = _torch.manual_seed

        def manual_seed(seed):
            return _torch_seed(_moved(seed))

        class Generator(_torch.Generator):
            def manual_seed(self, seed):
                return super().manual_seed(_moved(seed))
        _torch.manual_seed = _torch.random.manual_seed = manual_seed
        _torch.Generator = Generator
    except ImportError:
        pass
'''

def shim_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="minitfm-seed-shift-"))
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def verdicts(nb) -> dict[str, str]:
    """{key: verdict word} for every verdict line a notebook printed; key = cell id + line's rank in it."""
    found = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        rank = 0
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            for line in "".join(text).splitlines():
                words = verdict_words(line)
                if words:  # one verdict per line: the first
                    found[f"{cell.get('id', index)}#{rank}"] = words[0]
                    rank += 1
    return found


def run_one(path: Path, offset: int, timeout: int = 180, keep: Path | None = None) -> dict:
    """Execute one notebook with seeds shifted by ``offset``; return what happened.

    ``timeout`` is per cell; a cell that times out runs the notebook once more (notebooks.run_notebook), and a
    second timeout counts as this offset's failure."""
    from nbclient.exceptions import CellExecutionError

    from notebooks import run_notebook

    nb = nbformat.read(path, as_version=4)
    shim = shim_dir()
    saved = {k: os.environ.get(k) for k in (ENV, "PYTHONPATH", "OMP_WAIT_POLICY")}
    os.environ[ENV] = str(offset)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), saved["PYTHONPATH"]]))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    start, error = time.perf_counter(), None
    try:
        run_notebook(nb, path, timeout)
    except CellExecutionError as err:
        lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(err)).splitlines() if ln.strip()]
        error = next((ln for ln in reversed(lines) if re.match(r"^\w*(Error|Exception)\b", ln)), lines[-1])
    except Exception as err:  # a timeout or a dead kernel: also a failure of this offset
        error = f"{type(err).__name__}: {err}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    result = {"notebook": path.name, "offset": offset, "seconds": round(time.perf_counter() - start, 1),
              "error": error, "verdicts": verdicts(nb)}
    if error:
        failed = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        result["cell"] = failed
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, keep / f"{path.stem}.offset{offset}.ipynb")
    return result


def _notebooks(names: list[str]) -> list[Path]:
    return [Path(n).resolve() for n in names] or sorted((ROOT / "notebooks").glob("*.ipynb"))


def _offsets(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def cmd_run(args) -> int:
    bad = 0
    keep = Path(args.keep) if args.keep else None
    paths = _notebooks(args.notebooks)
    # Each notebook runs in its own kernel on one thread, so --jobs N runs N at once in N worker processes
    # (each sets the seed offset in its own environment).
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, path, args.offset, keep=keep) for path in paths]
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            status = "ok" if not r["error"] else f"FAILED in cell {r.get('cell')}: {r['error']}"
            print(f"{r['notebook']} (seeds + {args.offset}): {status} ({r['seconds']} s)", flush=True)
            bad += bool(r["error"])
    print(f"{bad} notebook(s) failed with seeds shifted by {args.offset}")
    return 1 if bad else 0


def cmd_sweep(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in _notebooks(args.notebooks):
        record = out / f"{path.stem}.json"
        results = json.loads(record.read_text()) if record.exists() else {}
        for offset in _offsets(args.offsets):
            if str(offset) in results and not args.redo:
                continue
            r = run_one(path, offset)
            results[str(offset)] = r
            record.write_text(json.dumps(results, indent=1))
            print(f"{path.name} +{offset}: {'ok' if not r['error'] else 'FAILED: ' + r['error']} "
                  f"({r['seconds']} s)", flush=True)
    return cmd_report(args)


def cmd_report(args) -> int:
    out, failed = Path(args.out), 0
    for record in sorted(out.glob("*.json")):
        results = json.loads(record.read_text())
        committed = verdicts(nbformat.read(ROOT / "notebooks" / f"{record.stem}.ipynb", as_version=4))
        fails = {k: r for k, r in results.items() if r["error"]}
        failed += bool(fails)
        print(f"{record.stem}: {len(results) - len(fails)} of {len(results)} offsets ran without error"
              + (f" (max {max(r['seconds'] for r in results.values())} s)" if results else ""))
        for k, r in sorted(fails.items(), key=lambda kv: int(kv[0])):
            print(f"    +{k}: cell {r.get('cell')}: {r['error'][:160]}")
        for key, word in committed.items():
            seen = [r["verdicts"].get(key) for r in results.values() if not r["error"]]
            changed = [w for w in seen if w != word]
            if changed:
                counts = {w: changed.count(w) for w in sorted(set(map(str, changed)))}
                print(f"    verdict {key} (committed: {word}): differs on {len(changed)} of {len(seen)}: {counts}")
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute notebooks once with shifted seeds")
    run.add_argument("--offset", type=int, required=True)
    run.add_argument("--keep", help="folder for the executed copies")
    run.add_argument("--jobs", type=int, default=1, help="notebooks run at once, each in its own process")
    sweep = sub.add_parser("sweep", help="execute notebooks over many offsets, resumable")
    sweep.add_argument("--offsets", default="1-20", help="e.g. 1-20 or 1,5,9-12")
    sweep.add_argument("--redo", action="store_true", help="run offsets already recorded again")
    report = sub.add_parser("report", help="summarise a sweep")
    for p in (run, sweep):
        p.add_argument("notebooks", nargs="*")
    for p in (sweep, report):
        p.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    return {"run": cmd_run, "sweep": cmd_sweep, "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
