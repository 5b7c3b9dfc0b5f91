"""Grade a class: run every student's notebooks and collect each checker's verdict.

    python tools/grade.py SUBMISSIONS/ [--out grades.csv] [--timeout 600] [--no-execute]

SUBMISSIONS/ holds one folder per student with their notebooks (``SUBMISSIONS/alice/02_masks.ipynb``), or
notebooks directly (``SUBMISSIONS/alice_02_masks.ipynb``: the student is the file name). Each notebook is
executed in a fresh kernel (errors do not stop it) with ``MINITFM_CHECK_LOG`` set, so every call of a
``minitfm.exercises`` checker appends its verdict as a JSON line. With ``--no-execute`` the notebooks are
not run: the verdict lines already in their saved outputs ("✓ check_x: ...", "✗ check_x: ...") are read.

The result is a CSV with one row per (student, notebook, checker) and the checker's last verdict: pass,
fail (with the first failing case and what differed) or not implemented, plus a summary per student.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import nbformat

VERDICT_LINE = re.compile(r"^(✓|✗|…) (check_\w+): (.*)$")
STATUS = {"✓": "pass", "✗": "fail", "…": "not implemented"}


def find_submissions(root: Path) -> list[tuple[str, Path]]:
    """(student, notebook) pairs: a folder per student, or loose notebooks named after the student."""
    pairs = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not entry.name.startswith("."):
            pairs += [(entry.name, nb) for nb in sorted(entry.rglob("*.ipynb")) if ".ipynb_checkpoints" not in nb.parts]
        elif entry.suffix == ".ipynb":
            pairs.append((entry.stem, entry))
    return pairs


def verdicts_from_outputs(nb) -> list[dict]:
    """The checkers' verdict lines printed in a notebook's saved outputs, in order."""
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            lines = (text if isinstance(text, str) else "".join(text)).splitlines()
            for i, line in enumerate(lines):
                match = VERDICT_LINE.match(line)
                if match:
                    detail = "\n".join(lines[i:i + 2]) if match.group(1) == "✗" else line
                    found.append({"checker": match.group(2), "status": STATUS[match.group(1)], "message": detail})
    return found


def run_notebook(path: Path, timeout: int) -> tuple[list[dict], str | None]:
    """Execute a copy of the notebook with the JSON log on; return the verdicts and the first error, if any."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "verdicts.jsonl"
        previous = os.environ.get("MINITFM_CHECK_LOG")
        os.environ["MINITFM_CHECK_LOG"] = str(log)  # the kernel inherits this environment
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        except Exception as err:  # a kernel that dies or a cell that times out: grade what ran
            return _read_log(log), f"{type(err).__name__}: {err}".splitlines()[0]
        finally:
            if previous is None:
                os.environ.pop("MINITFM_CHECK_LOG", None)
            else:
                os.environ["MINITFM_CHECK_LOG"] = previous
        errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        first_error = f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else None
        return _read_log(log), first_error


def _read_log(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def grade(root: Path, out: Path, timeout: int = 600, execute: bool = True) -> list[dict]:
    rows = []
    for student, path in find_submissions(root):
        if execute:
            verdicts, error = run_notebook(path, timeout)
        else:
            verdicts, error = verdicts_from_outputs(nbformat.read(path, as_version=4)), None
        last = {v["checker"]: v for v in verdicts}  # a student may run a check cell several times
        for checker, v in sorted(last.items()):
            rows.append({"student": student, "notebook": path.name, "checker": checker, "status": v["status"],
                         "message": v["message"], "notebook_error": error or ""})
        if not last:
            rows.append({"student": student, "notebook": path.name, "checker": "", "status": "no checker ran",
                         "message": "", "notebook_error": error or ""})
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "notebook", "checker", "status", "message", "notebook_error"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def summary(rows: list[dict]) -> str:
    per_student = defaultdict(lambda: [0, 0])
    for row in rows:
        if row["checker"]:
            per_student[row["student"]][0] += row["status"] == "pass"
            per_student[row["student"]][1] += 1
    return "\n".join(f"{student}: {passed} of {total} checks pass" for student, (passed, total) in per_student.items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--out", type=Path, default=Path("grades.csv"))
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--no-execute", action="store_true", help="read the verdicts in the saved outputs")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder of submissions")
    rows = grade(args.submissions, args.out, args.timeout, execute=not args.no_execute)
    print(summary(rows) or "no notebook found")
    print(f"verdicts: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
