"""linrec.threads: torch's threads follow the cores the process may use."""

from __future__ import annotations

import os

import torch

from linrec.threads import set_threads, usable_cores


def test_the_cgroup_quota_bounds_the_cores(tmp_path):
    quota = tmp_path / "cpu.max"
    affinity = len(os.sched_getaffinity(0))
    quota.write_text("max 100000\n")
    assert usable_cores(quota) == affinity
    quota.write_text("150000 100000\n")  # one and a half cores: two threads
    assert usable_cores(quota) == min(affinity, 2)
    quota.write_text("50000 100000\n")
    assert usable_cores(quota) == 1
    assert usable_cores(tmp_path / "absent") == affinity


def test_an_explicit_thread_count_wins_and_none_follows_the_usable_cores(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("LINREC_THREADS", "1")
        assert set_threads() == 1
        monkeypatch.delenv("LINREC_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        torch.set_num_threads(64)
        assert set_threads() == min(64, usable_cores())
    finally:
        torch.set_num_threads(before)
