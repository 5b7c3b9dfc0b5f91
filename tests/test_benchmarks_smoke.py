"""Every benchmark runs (issue 45, item 7): each script in ``benchmarks/`` with its smallest setting, ``--smoke``.

The scripts are found by glob, so a new benchmark without a ``--smoke`` setting fails here (argparse refuses the
unknown flag). A smoke run takes seconds: tiny shapes, one repeat, one thread; it checks that the script runs to
its end and writes nothing into the repository, not its figures."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))  # _openmp: a helper


def test_the_benchmarks_are_found():
    assert len(SCRIPTS) >= 9 and (ROOT / "benchmarks" / "generation_speed.py") in SCRIPTS


def _snapshot() -> dict:
    """The repository's top-level entries and every file under benchmarks/ and minitfm/lm/assets/, with mtimes."""
    files = {p: p.stat().st_mtime_ns for folder in ("benchmarks", "minitfm/lm/assets")
             for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return {"top": sorted(p.name for p in ROOT.iterdir()), "files": files}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_every_benchmark_runs_with_its_smoke_setting(script):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    before = _snapshot()
    run = subprocess.run([sys.executable, str(script), "--smoke"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    output = (run.stdout + run.stderr)[-3000:]
    assert run.returncode == 0, f"{script.name} --smoke exited with {run.returncode}:\n{output}"
    assert "--smoke: the smallest setting" in run.stdout, output
    assert _snapshot() == before, f"{script.name} --smoke wrote into the repository"
