"""tools/seed_shift.py: seed k becomes k + offset in every random number generator, the code unchanged."""
import json
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import seed_shift  # noqa: E402

DRAW = """
import json, random, subprocess, sys
import numpy as np, torch
def draws(k):
    torch.manual_seed(k); a = torch.rand(1).item()
    b = torch.rand(1, generator=torch.Generator().manual_seed(k)).item()
    random.seed(k); c = random.random()
    d = random.Random(k).random()
    np.random.seed(k); e = float(np.random.rand())
    f = float(np.random.default_rng(k).random()); g = float(np.random.RandomState(k).rand())
    return [a, b, c, d, e, f, g]
child = subprocess.run([sys.executable, "-c", "import torch; torch.manual_seed(%K%); print(torch.rand(1).item())"],
                       capture_output=True, text=True, check=True).stdout
print(json.dumps({"draws": draws(%K%), "child": float(child)}))
"""


def _run(seed, offset):
    shim = seed_shift.shim_dir()
    env = dict(os.environ, PYTHONPATH=str(shim), **{seed_shift.ENV: str(offset)})
    out = subprocess.run([sys.executable, "-c", DRAW.replace("%K%", str(seed))], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_every_generator_and_a_spawned_process_see_seed_plus_offset():
    shifted, plain, other = _run(3, 4), _run(7, 0), _run(3, 0)
    assert shifted == plain  # seed 3 shifted by 4 draws exactly what seed 7 draws
    assert all(x != y for x, y in zip(shifted["draws"], other["draws"]))  # and not what seed 3 draws
    assert shifted["child"] == plain["child"] != other["child"]


def test_offsets_parse_and_verdict_lines_are_read():
    assert seed_shift._offsets("1-3,7") == [1, 2, 3, 7]
    import nbformat  # jupyter-book and nbval (requirements.txt) install it: a missing one fails, never skips
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="x\n0.3: mixed: the rule held on 1 of 3 seeds (r)\nverdict: refined: y\n")])])
    assert list(seed_shift.verdicts(nb).values()) == ["mixed", "refined"]
