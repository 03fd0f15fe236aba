"""linrec.experiment.spill: When a capture keeps its finished folds on disk rather than in memory: the size of a model's
moments."""

from __future__ import annotations

import math

import pytest

from conftest import tiny_model
from linrec.analysis import scale


def test_capture_needs_are_three_width_squared_float64_and_two_means_per_block_and_fold():
    needs = scale.capture_needs({"m": (1536, 28, 1.5e9)}, folds=5).iloc[0]
    assert needs.moments_in_memory_gb == 28 * 5 * 8 * (3 * 1536**2 + 2 * 1536) / 1e9  # the sums and two means
    assert needs.moments_spilled_gb == pytest.approx(needs.moments_in_memory_gb / 5)
    assert needs.moments_on_disk_gb == 28 * 5 * 8 * (1536**2 + 1536 * 1537 + 2 * 1536) / 1e9  # triangles of Cxx, Cyy
    assert needs.rows == 98_304 and needs.forward_tflop == pytest.approx(2 * 1.5e9 * 98_304 / 1e12)


def test_the_spill_threshold_is_passed_by_the_largest_models_only():
    from linrec.experiment.spill import SPILL_ABOVE, moment_bytes

    small = tiny_model("llama")
    width = small.config.hidden_size
    assert moment_bytes(small, 5) == len(small.model.layers) * 5 * 8 * (3 * width**2 + 2 * width) < SPILL_ABOVE
    assert 28 * 5 * 3 * 1536**2 * 8 > SPILL_ABOVE > 30 * 5 * 3 * 576**2 * 8  # the 1.5B spills, SmolLM2 does not
    assert math.isfinite(SPILL_ABOVE)
