"""Choose OpenMP's wait policy before torch starts its threads (import this module before torch).

Between two parallel operations, OpenMP's threads spin for a while before they sleep. On an idle machine
that is what makes a second thread cheap to wake for a tiny matrix product: with ``PASSIVE`` waiting each
wake-up costs tens of microseconds, and a tiny model's decode step on two threads became twice as slow.
On a busy machine the spinning threads compete with the other processes for the cores, and a tiny model
trained up to 10x slower. So: if ``OMP_WAIT_POLICY`` is unset, it is set to ``PASSIVE`` when the load
average says other work is running (1 or more), and left to OpenMP's default otherwise.
"""
from __future__ import annotations

import os


def choose_wait_policy(busy_load: float = 1.0) -> str:
    """Set ``OMP_WAIT_POLICY`` as described above; return a line saying what was chosen and why."""
    load = os.getloadavg()[0]
    if "OMP_WAIT_POLICY" in os.environ:
        return f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']} (set by you), load average {load:.1f}"
    if load >= busy_load:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        return f"OMP_WAIT_POLICY=PASSIVE (load average {load:.1f}: other processes need the cores)"
    return f"OMP_WAIT_POLICY unset: OpenMP's default (load average {load:.1f}, an idle machine)"


WAIT_POLICY = choose_wait_policy()
