"""linrec.core.planted: Blocks with known answers, for validating the measurement (chapter 1 and the tests)."""

from __future__ import annotations

import torch

from linrec.core.planted import recover_rows


def test_gelu_quadrature_matches_measured_rows():
    from linrec.core.planted import gelu_r2

    z = torch.randn(20_000, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for scale, offset in [(0.2, 0.0), (1.5, -1.0), (4.0, 1.5)]:
        exact = float(gelu_r2(torch.tensor(scale), torch.tensor(offset)))
        measured = recover_rows(z, torch.nn.functional.gelu(scale * z + offset)).r2_lin
        assert abs(exact - measured) < 0.01, (scale, offset)
    assert float(gelu_r2(torch.tensor(0.01), torch.tensor(0.0))) > 0.999  # tiny pre-activations: linear
