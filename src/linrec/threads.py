"""How many threads torch may use: the cores this process may run on, not the machine's.

torch starts one thread per core it sees, which in a container or a CPU-limited job is often every core of the host,
and on a shared machine the threads then wait on each other and on the other work (measured here: the same
``linrec replace`` took 583 s with torch's default threads on two busy cores, 51 s with one). :func:`usable_cores`
reads what the process may use: its CPU affinity and its cgroup's CPU quota. ``OMP_NUM_THREADS`` (or
``LINREC_THREADS``), where set, decides instead.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

QUOTA = Path("/sys/fs/cgroup/cpu.max")
"""The cgroup (v2) file holding this process's CPU quota: ``max PERIOD`` or ``QUOTA PERIOD`` in microseconds."""


def usable_cores(quota_file: Path = QUOTA) -> int:
    """The cores this process may use: its CPU affinity, bounded by its cgroup's CPU quota (rounded up)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = quota_file.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def set_threads() -> int:
    """Give torch as many threads as ``LINREC_THREADS`` or ``OMP_NUM_THREADS`` says, else :func:`usable_cores` when
    torch would take more; the number it then uses."""
    import torch

    asked = os.environ.get("LINREC_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if asked and asked.strip().isdigit() and int(asked) > 0:
        torch.set_num_threads(int(asked))
    elif torch.get_num_threads() > usable_cores():
        torch.set_num_threads(usable_cores())
    return torch.get_num_threads()
