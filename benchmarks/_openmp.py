"""Benchmark set-up shared by the scripts: OpenMP's wait policy (import this module before torch) and the
``--threads`` choice.

Between two parallel operations, OpenMP's threads spin for a while before they sleep. On an idle machine
that is what makes a second thread cheap to wake for a tiny matrix product: with ``PASSIVE`` waiting each
wake-up costs tens of microseconds, and a tiny model's decode step on two threads became twice as slow.
On a busy machine the spinning threads compete with the other processes for the cores, and a tiny model
trained up to 10x slower. So: if ``OMP_WAIT_POLICY`` is unset, this samples how busy the cores are for half
a second and sets ``PASSIVE`` when other processes keep at least half a core busy; otherwise it leaves
OpenMP's default. (The load average would remember the previous benchmark for a minute.)
"""
from __future__ import annotations

import os
import time


def busy_cores(seconds: float = 0.5) -> float | None:
    """How many cores other processes kept busy during ``seconds`` (Linux ``/proc/stat``), or None."""
    def sample():
        with open("/proc/stat", encoding="utf-8") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total (in clock ticks)

    try:
        idle0, total0 = sample()
        time.sleep(seconds)
        idle1, total1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    busy = 1 - (idle1 - idle0) / max(total1 - total0, 1)
    return busy * (os.cpu_count() or 1)


def choose_wait_policy(threshold: float = 0.5) -> str:
    """Set ``OMP_WAIT_POLICY`` as described above; return a line saying what was chosen and why."""
    if "OMP_WAIT_POLICY" in os.environ:
        return f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']} (set by you)"
    busy = busy_cores()
    if busy is None:
        busy = os.getloadavg()[0]
    if busy >= threshold:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        return f"OMP_WAIT_POLICY=PASSIVE (other processes kept {busy:.1f} cores busy)"
    return f"OMP_WAIT_POLICY left to OpenMP's default (other processes kept {busy:.1f} cores busy: idle)"


WAIT_POLICY = choose_wait_policy()


def thread_counts(arg: str, probe, what: str, repeats: int = 2) -> list[int]:
    """The thread counts a ``--threads`` argument asks for: ``"auto"`` times ``probe()`` on 1, 2, 4, ...
    threads (``minitfm.device.fastest_threads``), prints the timings and returns the fastest; ``"1,2"``
    returns the listed counts. The caller sets each with ``torch.set_num_threads``."""
    if arg != "auto":
        return [int(t) for t in arg.split(",")]
    from minitfm.device import fastest_threads  # imports torch: after the wait policy is set

    best, timings = fastest_threads(probe, repeats=repeats)
    print(f"thread probe ({what}, best of {repeats}): "
          + ", ".join(f"{t} thread{'s' * (t > 1)} {s:.2f} s" for t, s in timings.items()) + f" -> {best}")
    return [best]
