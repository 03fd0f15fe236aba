"""linrec.core.rows: the plan of a batch's rows (folds, the first position of each window), made on the host."""

from __future__ import annotations

import numpy as np
import torch

from linrec.core.rows import BatchRows, to_device


def test_a_plan_of_folds_has_one_run_per_stretch_and_gives_every_rows_fold_back():
    fold = torch.tensor([2, 2, 0, 0, 0, 1])
    plan = BatchRows.of_folds(index=3, offset=100, fold=fold)
    assert plan.runs == ((2, 0, 2), (0, 2, 5), (1, 5, 6)) and plan.n == 6
    assert torch.equal(plan.fold_ids(), fold)
    assert BatchRows.of_folds(0, 0, torch.tensor([], dtype=torch.long)).n == 0


def test_a_masked_batch_marks_each_windows_first_kept_row_and_the_later_rows_keep_their_folds():
    mask = np.array([[True, True, True], [False, False, False], [False, True, True]])  # window 2: its first left out
    plan = BatchRows.of_mask(index=0, offset=0, mask=mask, fold=torch.tensor([0, 1, 1]))
    assert plan.n == 5 and plan.firsts == (0, 3)  # the empty window has no first row
    later, runs = plan.later()
    assert later.tolist() == [1, 2, 4] and runs == ((0, 0, 2), (1, 2, 3))
    assert torch.equal(plan.fold_ids(), torch.tensor([0, 0, 0, 1, 1]))


def test_to_device_on_the_cpu_is_the_same_values():
    t = torch.arange(6.0)
    assert torch.equal(to_device(t, torch.device("cpu")), t)
