"""Tiny models with known FFNs and their measurements, and planted depth tables, for the depth, activation,
cross-feeding and swap tests."""

import pandas as pd
import torch
from torch import nn

from conftest import measurement_info, tiny_model
from linrec.core.capture import capture_with_sample
from linrec.data.tokens import make_batches
from linrec.experiment.measurement import ProfileMeasurement


def two_models(tokenizer, text, folds: int) -> tuple[dict[str, nn.Module], dict[str, ProfileMeasurement]]:
    """Two tiny GPT-2s (one with its block-1 activation removed, so that FFN is exactly affine) and their captures."""
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=1024, batch_size=16)
    models = {"gelu": tiny_model("gpt2", seed=1), "affine": tiny_model("gpt2", seed=2)}
    models["affine"].transformer.h[1].mlp.act = nn.Identity()
    for seed, model in enumerate(models.values()):  # trained norms have gains and biases of their own
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for block in model.transformer.h:
                block.ln_2.weight.copy_(0.5 + torch.rand(block.ln_2.weight.shape, generator=g))
                block.ln_2.bias.copy_(0.2 * torch.randn(block.ln_2.bias.shape, generator=g))
    captured = {}
    for name, model in models.items():
        moments, sample = capture_with_sample(model, batches, sample_rows=800, folds=folds, progress=False)
        info = measurement_info(name, folds=folds, rows=batches.n_rows)
        captured[name] = ProfileMeasurement.assembled(info, moments, {b: sample.rows(b) for b in sample.blocks})
    return models, captured


def planted(profiles: dict[tuple[str, str], list[float]], std: float = 0.001, corpus: str = "c") -> pd.DataFrame:
    """A depth table with the given R²_lin per block for each (model, checkpoint)."""
    return pd.DataFrame(
        [
            {"model": m, "checkpoint": c, "corpus": corpus, "block": b, "r2_lin": r, "r2_lin_std": std}
            for (m, c), values in profiles.items()
            for b, r in enumerate(values)
        ]
    )
