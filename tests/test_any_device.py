"""Every public path works with a model on a device other than the CPU (review 2026-12b M6), on a machine without
a GPU: ``tests/any_device_checks.py`` runs the library with the model on a labelled device that raises where a
GPU would (its docstring says how and why). It registers a device for the whole life of its process, so it runs
in a fresh Python process of its own, started here, and its own test report is shown when it fails."""
import os
import subprocess
import sys
from pathlib import Path

CHECKS = Path(__file__).with_name("any_device_checks.py")


def test_every_public_path_runs_with_the_model_on_another_device():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTEST_ADDOPTS", None)  # the outer run's options (-n for xdist) are not the inner run's
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                          "--rootdir", str(CHECKS.parent.parent), str(CHECKS)],
                         capture_output=True, text=True, env=env, cwd=CHECKS.parent.parent, timeout=600)
    assert run.returncode == 0, "\n".join((run.stdout + run.stderr).splitlines()[-60:])
