import json

import pytest
import torch

from minitfm.training.experiment_log import ExperimentLog


def test_log_appends_readable_json_lines_and_reads_them_back(tmp_path):
    log = ExperimentLog(tmp_path / "sub" / "runs.jsonl")
    assert log.runs() == []
    log.record("a", {"lr": 1e-3, "dtype": torch.bfloat16}, {"loss": torch.tensor(0.5)})
    log.record("b", {"lr": 3e-3, "warmup": 10}, {"loss": float("nan")})
    lines = (tmp_path / "sub" / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["hparams"]["dtype"] == "bfloat16"
    runs = ExperimentLog(tmp_path / "sub" / "runs.jsonl").runs()  # a second reader sees the same runs
    assert [r["run"] for r in runs] == ["a", "b"]
    assert runs[0]["results"]["loss"] == 0.5 and runs[1]["results"]["loss"] == "nan"


def test_table_lists_every_column_with_dashes_for_missing_values(tmp_path):
    log = ExperimentLog(tmp_path / "runs.jsonl")
    log.record("base", {"lr": 0.001}, {"loss": 0.123456})
    log.record("warm", {"lr": 0.003, "warmup": 50}, {"loss": 2.0})
    rows = log.table().splitlines()
    assert rows[0].split() == ["run", "lr", "warmup", "loss"]
    assert rows[1].split() == ["base", "0.001", "-", "0.123"]
    assert log.table(columns=["loss"]).splitlines()[2].split() == ["warm", "2"]


def test_bad_entries_raise(tmp_path):
    log = ExperimentLog(tmp_path / "runs.jsonl")
    with pytest.raises(ValueError, match="non-empty name"):
        log.record("", {}, {})
    with pytest.raises(TypeError, match="hparams must be a dict"):
        log.record("x", [1], {})
    with pytest.raises(TypeError, match="cannot log"):
        log.record("x", {"model": object()}, {})
