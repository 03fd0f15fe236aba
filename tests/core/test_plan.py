"""The capture's plan (linrec.core.plan): budgets read as users write them, the sizes it counts against what the
code allocates, and groups that are the fewest that fit, refused with the smallest budget that works."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from conftest import tiny_model
from linrec.core.accumulator import MomentAccumulator
from linrec.core.measure import Measurement
from linrec.core.moment_files import save_moments
from linrec.core.moments import Moments
from linrec.core.plan import (
    TABLE_WORK,
    Footprint,
    capture_bytes,
    packed_bytes,
    parse_memory,
    pinned_bytes,
    plan_capture,
    sums_bytes,
)
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("12GB", 12 * 10**9), ("12 GiB", 12 * 2**30), ("800MB", 8 * 10**8), ("1.5g", 15 * 10**8), ("2e9", 2 * 10**9),
     (1024, 1024), (None, None)],
)  # fmt: skip
def test_budgets_read_as_users_write_them(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["12XB", "-1GB", "0", "", "GB", "twelve"])
def test_an_unreadable_budget_says_how_to_write_one(text):
    with pytest.raises(LinrecError, match="12GB, 12GiB, 800MB"):
        parse_memory(text)


@pytest.mark.parametrize("joined", [False, True])
@pytest.mark.parametrize("full_output", [False, True])
def test_a_fold_s_sums_are_the_bytes_the_accumulator_allocates(full_output, joined):
    """The plan's bytes per live fold, and the d_in + 1 more of the one-product layout (its product's row of ones)."""
    acc = MomentAccumulator(7, 5, folds=2, full_output=full_output, joined=joined)
    acc.add(torch.randn(10, 7), torch.randn(10, 5), fold=1)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in vars(acc._sums[1]).values()
                if t is not None}  # fmt: skip
    assert sum(storages.values()) == sums_bytes(7, 5, full_output) + (8 * (7 + 1) if joined else 0)


def test_a_fold_on_disk_is_its_packed_bytes(tmp_path: Path):
    g = torch.Generator().manual_seed(0)
    m = Moments.from_rows(torch.randn(50, 64, generator=g, dtype=torch.float64), torch.randn(50, 64, generator=g))
    save_moments({0: [m]}, tmp_path / "m.safetensors")
    size = (tmp_path / "m.safetensors").stat().st_size
    assert packed_bytes(64, 64) <= size < packed_bytes(64, 64) + 4096  # the values, and a header


@pytest.mark.parametrize(("n", "taken"), [(0, 0), (1, 1), (4096, 4096), (4097, 8192), (sums_bytes(4096, 4096), 2**29)])
def test_a_pinned_allocation_is_counted_at_the_power_of_two_it_takes(n, taken):
    assert pinned_bytes(n) == taken


def test_on_a_gpu_the_host_holds_each_finished_fold_at_its_pinned_size():
    """The H200 check of 2026-11-28 found the host's peak 36 % over a plan that counted the bytes asked for: at width
    4,096 a fold's 403 MB of moments take 2**29 bytes of pinned memory."""
    gpu = _footprint(on_gpu=True, width=4096)
    assert gpu.host(1, 1) >= gpu.weights_host + gpu.folds * 2**29 + TABLE_WORK * gpu.sums


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_a_pinned_allocation_takes_what_the_plan_counts():
    before = torch.cuda.host_memory_stats().get("allocated_bytes.current", 0)
    n = sums_bytes(300, 300)
    host = torch.empty(n // 8, dtype=torch.float64, pin_memory=True)
    taken = torch.cuda.host_memory_stats()["allocated_bytes.current"] - before
    assert taken == pinned_bytes(n), (taken, n)
    del host


def _footprint(blocks: int = 12, on_gpu: bool = False, width: int = 256) -> Footprint:
    weights = {"weights_host": 10**8 * (not on_gpu), "weights_device": 10**8 * on_gpu}
    return Footprint(width=width, blocks=blocks, layers=blocks, folds=5, **weights, forward=10**7, first_rows=10**5,
                     stream=10**6, on_gpu=on_gpu)  # fmt: skip


@pytest.mark.parametrize("on_gpu", [False, True])
@pytest.mark.parametrize("budget", [1.3e8, 1.6e8, 2.5e8, 1e12])
def test_the_groups_are_the_fewest_that_fit_and_as_even_as_can_be(budget, on_gpu):
    fp = _footprint(on_gpu=on_gpu)
    plan = plan_capture(fp, list(range(12)), int(budget), host_budget=int(budget))
    assert [b for g in plan.groups for b in g] == list(range(12))  # contiguous, in depth order, every block once
    sizes = [len(g) for g in plan.groups]
    assert max(sizes) - min(sizes) <= 1
    assert plan.peak_host <= budget and plan.peak_device <= budget
    if len(plan.groups) > 1:  # one group fewer would not fit: its largest group is too large
        fewer = len(plan.groups) - 1
        largest = -(-12 // fewer)
        assert fp.host(largest, fewer) > budget or fp.device(largest) > budget
    assert plan.forward_passes == 1.0  # resumed: one forward pass whatever the groups


def test_a_table_on_a_gpu_keeps_its_finished_folds_there_and_none_on_the_host():
    """Where only the table is wanted and the GPU has the room, the folds wait there for the fits that run there:
    no pinned copy out and back, and the host holds none of them."""
    fp = _footprint(on_gpu=True, width=1024)
    host_way = plan_capture(fp, list(range(12)), 10**12)
    kept = plan_capture(fp, list(range(12)), 10**12, table=True)
    assert kept.groups == host_way.groups == (tuple(range(12)),)
    assert kept.footprint.kept_on_gpu and not host_way.footprint.kept_on_gpu
    assert host_way.peak_host - kept.peak_host == 12 * fp.folds * pinned_bytes(fp.sums)
    # on the GPU: every block's k finished folds and one live (k + 1 in all), where the host way holds 2 live folds
    # and brings one block's k folds back for its fits
    assert kept.peak_device - host_way.peak_device == (12 * (fp.folds + 1 - 2) - fp.folds) * fp.sums
    assert "finished folds kept on the GPU" in kept.describe()
    assert "kept on the GPU" not in host_way.describe()  # (sent to pinned memory, or to disk with --spill)


def test_a_table_sends_its_folds_to_the_host_where_keeping_them_takes_more_groups():
    fp = _footprint(on_gpu=True, width=1024)
    device = fp.device(4) + 1  # room on the GPU for 4 blocks' live sums, not for 12 blocks' finished folds
    plan = plan_capture(fp, list(range(12)), host_budget=10**12, device_budget=int(device / 0.85) + 1, table=True)
    kept = replace(fp, kept_on_gpu=True)
    assert not plan.footprint.kept_on_gpu
    assert len(plan.groups) < len(plan_capture(kept, list(range(12)), device, host_budget=device).groups)


def test_a_budget_too_small_for_a_table_names_the_smallest_in_either_way():
    fp = _footprint(on_gpu=True, width=1024)
    with pytest.raises(LinrecError, match="too small") as err:
        plan_capture(fp, list(range(12)), 10**8, table=True)
    smallest = parse_memory(re.search(r"--memory (\S+)", str(err.value)).group(1))
    assert len(plan_capture(fp, list(range(12)), smallest, table=True).groups) == 12
    with pytest.raises(LinrecError, match="too small"):
        plan_capture(fp, list(range(12)), smallest - 10**6, table=True)


def test_groups_that_cannot_resume_say_what_they_cost():
    plan = plan_capture(_footprint(blocks=4), [0, 1, 2, 3], int(1.4e8), resumes=False)
    assert len(plan.groups) > 1
    assert plan.forward_passes == sum(g[-1] + 1 for g in plan.groups) / 4
    assert "each group runs the model from its input" in plan.describe()


@pytest.mark.parametrize("on_gpu", [False, True])
def test_a_budget_too_small_names_the_smallest_that_works(on_gpu):
    fp = _footprint(on_gpu=on_gpu)
    with pytest.raises(LinrecError, match=r"too small for one block at a time: the weights take 100 MB") as err:
        plan_capture(fp, list(range(12)), 5 * 10**7, host_budget=5 * 10**7)
    smallest = parse_memory(re.search(r"--memory (\S+)", str(err.value)).group(1))
    plan = plan_capture(fp, list(range(12)), smallest)
    assert len(plan.groups) == 12  # one block at a time
    with pytest.raises(LinrecError, match="too small"):
        plan_capture(fp, list(range(12)), smallest - 10**6)  # to the MB


def test_the_plan_says_its_groups_memory_and_disk():
    plan = plan_capture(_footprint(), list(range(12)), int(1.6e8), saved=True)
    text = plan.describe()
    assert f"{len(plan.groups)} groups" in text and "peak host memory" in text and "to disk" in text
    assert plan.disk == 12 * 5 * packed_bytes(256, 256)
    assert plan_capture(_footprint(), list(range(12)), 10**12, saved=True).disk == 0  # one group: nothing spilled


@pytest.mark.parametrize("extras", [(), ("output-covariance",)])
def test_capture_bytes_is_what_a_capture_holds(tokenizer, text, extras):
    model = tiny_model("llama")
    measured = Measurement.capture(model, make_batches(tokenizer, text, seq_len=16, max_rows=512), folds=3,
                                   progress=False, extras=extras)  # fmt: skip
    kept = sum(
        getattr(m, f).nbytes
        for part in (measured.positions.first, measured.positions.later)
        for folds in part.values()
        for m in folds
        for f in ("mean_x", "mean_y", "cxx", "cxy", "cyy")
    )
    assert kept == capture_bytes(32, blocks=2, folds=3, first_apart=True, full_output=bool(extras))
