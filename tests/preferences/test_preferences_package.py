"""The package: its names, its place in the layers, and trl never imported by the library (only by its tests)."""
from __future__ import annotations

import subprocess
import sys

import minitfm.preferences as P


def test_the_package_exports_its_modules_names():
    for name in P.__all__:
        assert getattr(P, name) is not None
    assert P.LOSS_TYPES == ("grpo", "bnpo", "dr_grpo", "dapo") and P.SCALES == ("group", "batch", "none")


def test_the_library_never_imports_trl():
    code = ("import sys, minitfm, minitfm.preferences, minitfm.preferences.dpo, minitfm.preferences.grpo, "
            "minitfm.preferences.rewards; print('trl' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_docstrings_answer_the_learners_questions():
    """The survey's list of confusions (loss 0, ln 2, chosen reward down, beta's direction, sum or mean, the KL)."""
    dpo, grpo = P.dpo.__doc__, P.grpo.__doc__
    for phrase in ("ln 2", "chosen reward goes down", "Which way does beta go", "Sum or mean", "Where is the KL"):
        assert phrase in dpo, phrase
    for phrase in ("Why is the loss 0", "Where does the KL go", "Sum or mean", "k3"):
        assert phrase in grpo, phrase
    assert "wrong on purpose" in P.rewards.contains_answer.__doc__
