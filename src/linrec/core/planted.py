"""Blocks with known answers, for validating the measurement (chapter 1 and the tests).

``recover_rows`` scores synthetic rows with the same k-fold recovery that ``linrec.core.measure`` uses;
``gelu_r2`` is the exact R²_lin of a GELU unit with standard normal input, by Gauss-Hermite
quadrature: for z ~ N(0, 1) and g = GELU(s z + β), the best affine predictor of g from z explains
Cov(z, g)² / Var(g) of its variance.
"""

from __future__ import annotations

import numpy as np
import torch

from linrec.core.fit import BlockReport, kfold
from linrec.core.moments import Moments


def recover_rows(x: torch.Tensor, y: torch.Tensor, folds: int = 5, block: int = 0) -> BlockReport:
    """k-fold closed-form recovery of independent synthetic rows (folds dealt round-robin by row)."""
    fold = torch.arange(x.shape[0]) % folds
    return kfold(block, [Moments.from_rows(x[fold == f], y[fold == f]) for f in range(folds)])


def gelu_r2(scale: torch.Tensor, offset: torch.Tensor, nodes: int = 120) -> torch.Tensor:
    """Exact R² of the best affine map from z ~ N(0, 1) to GELU(scale · z + offset), elementwise."""
    nodes_z, weights = np.polynomial.hermite_e.hermegauss(nodes)
    z = torch.tensor(nodes_z, dtype=torch.float64)
    w = torch.tensor(weights / weights.sum(), dtype=torch.float64)
    scale, offset = torch.as_tensor(scale, dtype=torch.float64), torch.as_tensor(offset, dtype=torch.float64)
    g = torch.nn.functional.gelu(scale[..., None] * z + offset[..., None])
    mean = (w * g).sum(-1, keepdim=True)
    return (w * z * g).sum(-1) ** 2 / (w * (g - mean) ** 2).sum(-1)
