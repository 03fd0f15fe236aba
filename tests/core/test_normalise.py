"""linrec.core.normalise: Standardising and whitening a block's inputs without leaving the manifold they live on."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import tiny_model
from linrec.core.capture import capture_with_sample
from linrec.core.fit import fit_affine, kfold
from linrec.core.moments import Moments
from linrec.core.normalise import NormManifold, input_transform, off_manifold_spread
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.interventions.crossfeed import (
    align_inputs,
    norm_manifold,
    normalised_inputs,
    normalised_table,
)
from linrec.models.arch import ffn_norm
from support.crossfeed import FOLDS


def layernormed(seed: int, n: int = 3000, d: int = 24) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 rows of a LayerNorm with a spread of gains (0.1 to 3) and biases, fed inputs with two huge dims;
    with its gain and bias."""
    g = torch.Generator().manual_seed(seed)
    norm = nn.LayerNorm(d)
    with torch.no_grad():
        norm.weight.copy_(0.1 + 2.9 * torch.rand(d, generator=g))
        norm.bias.copy_(torch.randn(d, generator=g))
        h = torch.randn(n, d, generator=g) @ torch.randn(d, d, generator=g)
        h[:, :2] *= 50
        return norm(h), norm.weight.double(), norm.bias.double()


def unit(v: torch.Tensor) -> torch.Tensor:
    return (v / v.norm())[:, None]


def spread_norms(model: nn.Module, seed: int) -> nn.Module:
    """``model`` with the gains (0.5 to 1.5) and biases of its FFN norms spread out, as trained norms have them."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in range(model.config.num_hidden_layers):
            norm = ffn_norm(model, block)
            norm.weight.copy_(0.5 + torch.rand(norm.weight.shape, generator=g))
            if getattr(norm, "bias", None) is not None:
                norm.bias.copy_(0.3 * torch.randn(norm.bias.shape, generator=g))
    return model


def off_surface(x: torch.Tensor, surface: NormManifold) -> tuple[float, float]:
    """(spread along 1/γ as :func:`off_manifold_spread` measures it, 0 for a norm that does not centre;
    largest |‖z‖ - radius| / radius): how far rows ``x`` are from ``surface``."""
    along = off_manifold_spread(x, unit(1 / surface.gain)) if surface.centred else 0.0
    length = surface.features(x).norm(dim=1)
    return along, float((length - surface.radius).abs().max() / surface.radius)


@pytest.fixture(scope="module")
def norm_families(tokenizer, text):
    """A LayerNorm GPT-2, a LayerNorm GPT-NeoX, an RMSNorm Llama and a Gemma 3 (RMSNorm of gain 1 + weight) with
    spread norms, and their sampled rows."""
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=800, batch_size=16)
    out = {}
    for seed, family in enumerate(("gpt2", "gpt_neox", "llama", "gemma3_text")):
        model = spread_norms(tiny_model(family, seed=seed), seed)
        _, sample = capture_with_sample(model, batches, sample_rows=600, folds=FOLDS, progress=False)
        out[family] = (model, sample.rows(1))
    return out


def test_whitening_gives_identity_covariance_and_keeps_the_closed_form_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 8, generator=g, dtype=torch.float64) @ torch.randn(8, 8, generator=g, dtype=torch.float64) + 5
    x = torch.cat([x, x[:, :1] + x[:, 1:2]], 1)  # one exact null direction (like a LayerNorm's)
    y = torch.tanh(x[:, :4]) + x[:, 4:8]
    train = Moments.from_rows(x, y)
    white = input_transform(train, "whiten", variance=2.0)
    z = white(x)
    assert white.null_dims == 1
    cov = torch.cov(z.T, correction=0)
    expected = torch.tensor([0.0] + [2.0] * 8, dtype=torch.float64)
    torch.testing.assert_close(torch.linalg.eigvalsh(cov), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(z.mean(0), x.mean(0))  # the mean is kept
    # the closed form on whitened inputs is the same affine map in other coordinates
    torch.testing.assert_close(fit_affine(Moments.from_rows(z, y))(z), fit_affine(train)(x), rtol=1e-6, atol=1e-6)
    full = Moments.from_rows(x[:, :8], y)  # no null direction: standardising gives exactly the average variance
    std = input_transform(full, "standardise", keep_mean=False)(x[:, :8])
    average = float(full.cxx.diagonal().sum() / (full.n * 8))
    torch.testing.assert_close(std.var(0, correction=0), torch.full((8,), average, dtype=torch.float64))
    torch.testing.assert_close(std.mean(0), torch.zeros(8, dtype=torch.float64))
    with pytest.raises(LinrecError, match="standardise, whiten"):
        input_transform(train, "sphere")


def test_normalised_recoverability(gpt2_capture):
    model, sample = gpt2_capture
    whitened = normalised_table(model, sample, "whiten", FOLDS, blocks=[0, 1])
    assert list(whitened.block) == [0, 1] and (whitened.null_dims == 1).all()  # LayerNorm-fed: one null direction
    own = kfold(0, sample.rows(0).fold_moments(FOLDS)).r2_lin
    assert whitened.r2_lin[0] == pytest.approx(own)
    assert (whitened.r2_lin_norm != whitened.r2_lin).all() and whitened.r2_lin_norm.between(-1, 1).all()
    mlp = model.transformer.h[1].mlp
    gelu, mlp.act = mlp.act, nn.Identity()
    try:
        standardised = normalised_table(model, sample, "standardise", FOLDS, blocks=[1])
    finally:
        mlp.act = gelu
    assert standardised.r2_lin_norm[0] > 1 - 1e-6  # an affine FFN stays affine on any inputs


def test_normalised_and_aligned_inputs_stay_on_the_layernorm_manifold():
    x, gain, bias = layernormed(0)
    null = unit(1 / gain)  # (x - β)·(1/γ) = 0 for every row of a LayerNorm
    assert off_manifold_spread(x, null) < 1e-7  # captured rows: float32 rounding only
    moments = Moments.from_rows(x, x[:, :3])
    for kind in ("standardise", "whiten"):
        z = input_transform(moments, kind).__call__(x).float()
        assert off_manifold_spread(z, null) <= 1e-6, kind
    scale = moments.cxx.diagonal().sqrt()
    correlation_scale = (x.double() - x.double().mean(0)) / scale  # what a per-dimension transform alone does
    assert off_manifold_spread(correlation_scale, null) > 1e-3  # ... leaves the manifold: the check can fail
    y, gain_b, bias_b = layernormed(1)
    own, other = NormManifold.of_rows(x, gain, bias, True), NormManifold.of_rows(y, gain_b, bias_b, True)
    assert own.radius == pytest.approx(24**0.5, rel=1e-4)  # ‖z‖ = √d on a LayerNorm's rows
    aligned = align_inputs(x, own, other).float()
    assert off_manifold_spread(aligned, unit(1 / gain_b)) <= 1e-6  # on B's manifold
    assert off_manifold_spread(x, unit(1 / gain_b)) > 1e-3  # A's rows as they are are not
    torch.testing.assert_close(align_inputs(x, own, own).float(), x, rtol=1e-5, atol=1e-5)  # own norm: unchanged
    with pytest.raises(LinrecError, match="same width"):
        align_inputs(x, own, NormManifold.of_rows(y[:, :8], gain_b[:8], bias_b[:8], True))
    with pytest.raises(LinrecError, match="same width"):
        NormManifold.of_rows(y, gain_b[:8], bias_b[:8], True)


def test_norm_manifold_reads_each_family_s_pre_ffn_norm():
    gpt2, llama = tiny_model("gpt2"), tiny_model("llama")
    h = 3 * torch.randn(200, 32, generator=torch.Generator().manual_seed(0))
    ln, rms = gpt2.transformer.h[1].ln_2, llama.model.layers[0].post_attention_layernorm
    surface = norm_manifold(gpt2, 1, ln(h))
    torch.testing.assert_close(surface.gain, ln.weight.double())
    torch.testing.assert_close(surface.bias, ln.bias.double())
    assert surface.centred and surface.radius == pytest.approx(32**0.5, rel=1e-4)  # ‖z‖ = √d
    surface = norm_manifold(llama, 0, rms(h))  # RMSNorm: a gain, no bias, not centred
    torch.testing.assert_close(surface.gain, rms.weight.double())
    assert not surface.bias.any() and not surface.centred and surface.radius == pytest.approx(32**0.5, rel=1e-4)
    gemma = spread_norms(tiny_model("gemma3_text"), seed=0)
    pre = gemma.model.layers[1].pre_feedforward_layernorm  # Gemma's RMSNorm scales by 1 + weight
    surface = norm_manifold(gemma, 1, pre(h))
    torch.testing.assert_close(surface.gain, 1 + pre.weight.double())
    torch.testing.assert_close(
        surface.features(pre(h)).norm(dim=1), torch.full((200,), 32**0.5).double(), rtol=1e-5, atol=0
    )
    with pytest.raises(LinrecError, match="no FFN block 7"):
        norm_manifold(gpt2, 7, h)


def test_normalised_and_cross_fed_rows_lie_on_the_receiving_norm_surface(norm_families):
    """Standardised, whitened and cross-fed rows lie on the receiving norm's surface: spread along 1/γ at most 1e-6
    (LayerNorm) and row length within 1e-4 of the captured rows' (LayerNorm and RMSNorm)."""
    surfaces = {f: norm_manifold(model, 1, rows.x) for f, (model, rows) in norm_families.items()}
    for family, (model, rows) in norm_families.items():
        surface = surfaces[family]
        assert surface.centred == (family in ("gpt2", "gpt_neox"))
        assert off_surface(rows.x, surface)[0] <= 1e-6, family  # captured rows (lengths vary with the norm's eps)
        for kind in ("standardise", "whiten"):
            z, _ = normalised_inputs(model, 1, rows, kind)
            along, length = off_surface(z, surface)
            assert along <= 1e-6 and length <= 1e-4, (family, kind, along, length)
            loose, _ = normalised_inputs(model, 1, rows, kind, project=False)
            assert off_surface(loose, surface)[1] > 1e-2, (family, kind)  # off the sphere unprojected: can fail
    pairs = [
        ("gpt2", "gpt_neox"),
        ("llama", "gpt2"),
        ("gpt2", "llama"),
        ("llama", "gemma3_text"),
        ("gemma3_text", "gpt2"),
    ]
    for source, target in pairs:  # LN->LN, RMS->LN, LN->RMS, RMS->RMS (1 + weight), RMS (1 + weight)->LN
        a, b = surfaces[source], surfaces[target]
        along, length = off_surface(align_inputs(norm_families[source][1].x, a, b).float(), b)
        assert along <= 1e-6 and length <= 1e-4, (source, target, along, length)
    rms_rows = norm_families["llama"][1].x  # γ_B ⊙ z_A + β_B alone leaves an RMSNorm's rows off the hyperplane
    affine = surfaces["gpt2"].gain * surfaces["llama"].features(rms_rows) + surfaces["gpt2"].bias
    assert off_surface(affine, surfaces["gpt2"])[0] > 1e-3
    with pytest.raises(LinrecError, match="project=False"):
        normalised_table(norm_families["gpt2"][0], {1: norm_families["gpt2"][1]}, "whiten", FOLDS, spec=[("a", "b")])
