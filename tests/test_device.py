"""Thread-count choice by measurement and the machine line the benchmarks print."""
import pytest
import torch

from minitfm.device import cpu_summary, fastest_threads


def test_fastest_threads_picks_the_count_whose_run_is_quickest_and_restores_the_setting():
    before = torch.get_num_threads()
    fake_seconds = {1: 3.0, 2: 1.0, 4: 2.0}  # a run whose cost depends on the thread count in force
    now = [0.0]

    def run():
        now[0] += fake_seconds[torch.get_num_threads()]

    best, timings = fastest_threads(run, [1, 2, 4], repeats=2, clock=lambda: now[0])
    assert best == 2
    assert timings == {1: 3.0, 2: 1.0, 4: 2.0}
    assert torch.get_num_threads() == before


def test_fastest_threads_keeps_each_counts_best_repeat():
    durations = iter([5.0, 1.0, 2.0, 3.0])  # threads 1: 5 then 1; threads 2: 2 then 3
    now = [0.0]

    def run():
        now[0] += next(durations)

    best, timings = fastest_threads(run, [1, 2], repeats=2, clock=lambda: now[0])
    assert timings == {1: 1.0, 2: 2.0} and best == 1


def test_fastest_threads_default_candidates_are_powers_of_two_up_to_the_core_count(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    seen = []
    fastest_threads(lambda: seen.append(torch.get_num_threads()), repeats=1)
    assert seen == [1, 2, 4]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(run=42), TypeError, "run must be a callable"),
    (dict(run=lambda: None, candidates=[]), ValueError, "candidates must be positive whole thread counts"),
    (dict(run=lambda: None, candidates=[0, 1]), ValueError, "candidates must be positive whole thread counts"),
    (dict(run=lambda: None, repeats=0), ValueError, "repeats must be a positive whole number"),
])
def test_fastest_threads_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        fastest_threads(**kwargs)


def test_cpu_summary_names_cores_torch_and_the_kernels_instruction_set():
    line = cpu_summary()
    assert f"torch {torch.__version__}" in line
    assert line.endswith(torch.backends.cpu.get_cpu_capability())
    assert " cores, " in line
