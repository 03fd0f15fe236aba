"""linrec.interventions.gating: Gated replacements fitted on a model's rows, and how much of each block is linear once a
gate routes its hard rows to the FFN."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from conftest import WIDTH, tiny_model
from linrec.core.fit import fit_affine, rcond_for
from linrec.core.gated import GatedFFN, LogisticGate, NormGate, threshold_for
from linrec.core.measure import Measurement
from linrec.core.moments import Moments
from linrec.core.sample import Rows
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.gating import (
    gate_agreement,
    gated_replacements,
    gating_curve,
    largest_share,
    needs_ffn,
    route,
    sample_rows,
)
from linrec.interventions.surgery import swapped
from support.gating import logits, random_batches


def ffn_rows(model: nn.Module, batches: TokenBatches, module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (input, output) row of ``module`` over ``batches``, (n, d) each, gathered by a hook of this test's own."""
    xs: list[torch.Tensor] = []
    ys: list[torch.Tensor] = []

    def keep(_m: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        xs.append(args[0].reshape(-1, args[0].shape[-1]))
        ys.append(out.reshape(-1, out.shape[-1]))

    handle = module.register_forward_hook(keep)
    try:
        logits(model, batches)
    finally:
        handle.remove()
    return torch.cat(xs), torch.cat(ys)


class PlantedFFN(nn.Module):
    """y = x A + b on the rows of norm at most ``tau``, 3 tanh(x C) on the others."""

    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor

    def __init__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tau: float) -> None:
        super().__init__()
        self.register_buffer("a", a)
        self.register_buffer("b", b)
        self.register_buffer("c", c)
        self.tau = tau

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        near = torch.linalg.vector_norm(x, dim=-1, keepdim=True) <= self.tau
        return torch.where(near, x @ self.a + self.b, 3 * torch.tanh(x @ self.c))


@pytest.fixture(scope="module")
def planted():
    """A tiny GPT-2 whose block-1 FFN is affine on the 90 % of its fit rows of smallest input norm and strongly
    nonlinear on the rest. Its ln_2 weights are varied so that the FFN's input norms vary (with unit weights every
    LayerNorm output has the same norm), its ln_2 bias is zero, and its (tied) embeddings are scaled up so that its
    logits, and so its perplexity, feel the block."""
    model = tiny_model("gpt2")
    g = torch.Generator().manual_seed(1)
    block = model.transformer.h[1]
    with torch.no_grad():
        model.transformer.wte.weight.mul_(20)
        block.ln_2.weight.copy_(0.3 + 2 * torch.rand(WIDTH, generator=g))
        block.ln_2.bias.zero_()
    fit, evals = random_batches(48, seed=0), random_batches(16, seed=1)
    norms = torch.linalg.vector_norm(ffn_rows(model, fit, block.mlp)[0], dim=-1)
    assert float(norms.std()) > 0.3  # (the norms do vary)
    tau = float(torch.quantile(norms, 0.9))
    a = torch.randn(WIDTH, WIDTH, generator=g) / WIDTH**0.5
    b = torch.randn(WIDTH, generator=g)
    block.mlp = PlantedFFN(a, b, torch.randn(WIDTH, WIDTH, generator=g), tau)
    return model, fit, evals, norms, tau


def test_the_gated_map_recovers_the_planted_affine_part(planted):
    """A share of 0.8 routes only rows of norm below tau (the 0.9 quantile), so the map is fitted on affine rows
    alone and is the planted one. The LayerNorm's output lies in the hyperplane Σᵢ xᵢ / wᵢ = 0 (ln_2's bias is zero),
    so A is identified up to a term u tᵀ along u = 1/w: A is recovered off u, and b exactly."""
    model, fit, _, norms, tau = planted
    (gated,) = gated_replacements(model, fit, "gated:norm:0.8", [1], progress=False).values()
    assert isinstance(gated, GatedFFN) and isinstance(gated.gate, NormGate)
    ordered = norms.double().sort().values
    assert float(gated.threshold) == float(ordered[math.ceil(0.8 * len(norms)) - 1]) < tau
    planted_ffn = model.transformer.h[1].mlp
    a, b = planted_ffn.a.double(), planted_ffn.b.double()
    weight, bias = gated.linear.weight.T.double(), gated.linear.bias.double()
    u = 1 / model.transformer.h[1].ln_2.weight.double()
    off_u = torch.eye(WIDTH, dtype=torch.float64) - torch.outer(u, u) / u.dot(u)
    torch.testing.assert_close(off_u @ weight, off_u @ a, rtol=0, atol=1e-4 * float(a.abs().max()))
    torch.testing.assert_close(bias, b, rtol=0, atol=1e-4 * float(b.abs().max()))
    assert float((weight - a).abs().max()) > 1e-2  # (the u term is real: the comparison above needs its projection)


def test_the_gated_block_is_the_planted_block_where_the_affine_map_is_not(planted):
    model, fit, evals, _, _ = planted
    base = logits(model, evals)
    scale = float(base.abs().max())
    with swapped(model, gated_replacements(model, fit, "gated:norm:0.8", [1], progress=False)):
        torch.testing.assert_close(logits(model, evals), base, rtol=0, atol=1e-4 * scale)
    affine = Measurement.capture(model, fit, folds=4, progress=False).replacements("affine", [1])
    with swapped(model, affine):
        assert float((logits(model, evals) - base).abs().max()) > 1e-2 * scale


def held_out_by_hand(x: torch.Tensor, y: torch.Tensor, fold: torch.Tensor, routed: torch.Tensor) -> tuple[float, float]:
    """(held-out R² of the routed rows, of the gated block), each the mean over folds, by numpy's least squares:
    fold f's routed rows predicted by the map of the other folds' routed rows, their squared error over the
    routed rows' and over all of fold f's rows' sum of squares about their means. (rcond drops the direction the
    LayerNorm leaves to float32 rounding alone.)"""
    xs, ys = x.double().numpy(), y.double().numpy()
    ones = lambda a: np.concatenate([a, np.ones((len(a), 1))], 1)  # noqa: E731
    ss = lambda a: float(((a - a.mean(0)) ** 2).sum())  # noqa: E731
    r2_routed, r2_gated = [], []
    for f in fold.unique().tolist():
        train, test = (routed & (fold != f)).numpy(), (routed & (fold == f)).numpy()
        coef = np.linalg.lstsq(ones(xs[train]), ys[train], rcond=1e-5)[0]
        sse = float(((ones(xs[test]) @ coef - ys[test]) ** 2).sum())
        r2_routed.append(1 - sse / ss(ys[test]))
        r2_gated.append(1 - sse / ss(ys[(fold == f).numpy()]))
    return float(np.mean(r2_routed)), float(np.mean(r2_gated))


def test_each_point_of_the_curve_is_its_gated_map_swapped_alone(planted):
    """Every rule's maps of every block are scored in one pass over the blocks (the layers below a block once for all
    of them): each row's perplexity is that of its own map swapped alone, from the model's logits by this test's own
    arithmetic, and share 1 is the plain affine map, the same row for each rule."""
    model, fit, evals, _, _ = planted
    shares = [0.5, 0.9]
    curve = gating_curve(model, fit, evals, [1, 0], shares=shares, folds=4, progress=False)
    assert curve[["rule", "share", "block"]].values.tolist() == [
        [r, s, b] for r in ("norm", "logistic") for s in (*shares, 1.0) for b in (0, 1)
    ]
    routings = route(model, fit, ["norm", "logistic"], shares, [0, 1], folds=4, progress=False)
    rcond = rcond_for(torch.float32)
    for row in curve.itertuples():
        routing = routings[(row.rule, row.share if row.share < 1 else max(shares))]
        with swapped(model, {row.block: routing.replacement(row.block, row.share, rcond)}):
            alone = logits(model, evals).to(torch.float64)
        nll = torch.nn.functional.cross_entropy(alone[:, :-1].flatten(0, 1), evals.input_ids[:, 1:].flatten())
        assert row.ppl == pytest.approx(math.exp(float(nll)), rel=1e-6)
    plain = curve[curve.share == 1]
    pd.testing.assert_frame_equal(
        plain[plain.rule == "norm"].drop(columns="rule").reset_index(drop=True),
        plain[plain.rule == "logistic"].drop(columns="rule").reset_index(drop=True),
    )


def test_the_curve_is_linear_up_to_the_planted_share(planted):
    model, fit, evals, norms, _ = planted
    curve = gating_curve(model, fit, evals, [1], rules=["norm"], shares=[0.8, 0.95], folds=4, progress=False)
    assert curve[["rule", "share", "block"]].values.tolist() == [["norm", s, 1] for s in (0.8, 0.95, 1.0)]
    at, beyond, whole = (curve.iloc[i] for i in range(3))
    assert at.routed == math.ceil(0.8 * len(norms)) / len(norms) and whole.routed == 1.0
    assert at.r2_routed > 1 - 1e-8 and at.r2_gated > 1 - 1e-8
    assert whole.r2_routed < 0.9 and whole.r2_gated == pytest.approx(whole.r2_routed, rel=1e-12)  # (no FFN rows)
    assert abs(at.delta_ppl) < 1e-6 * at.base_ppl
    assert abs(whole.delta_ppl) > 1e-2 * whole.base_ppl
    # past the planted share, against an implementation of this test's own (the fold of each row as route deals)
    x, y = ffn_rows(model, fit, model.transformer.h[1].mlp)
    fold = fit.folds(4, 0).repeat_interleave(fit.seq_len)
    routed = torch.linalg.vector_norm(x, dim=-1) <= threshold_for(norms, 0.95)
    r2_routed, r2_gated = held_out_by_hand(x, y, fold, routed)
    assert r2_gated > r2_routed and beyond.r2_routed < 0.99  # (the FFN's rows are exact in the gated block)
    assert beyond.r2_routed == pytest.approx(r2_routed, rel=1e-8)
    assert beyond.r2_gated == pytest.approx(r2_gated, rel=1e-8)


def test_needs_ffn_finds_the_rows_the_all_rows_map_gets_wrong():
    """Planted rows: exactly affine but for a tenth of them, moved far off the map; those, and only those, need
    the FFN at a share of 0.9."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 6, generator=g)
    y = x @ torch.randn(6, 5, generator=g) + 1
    off = torch.zeros(400, dtype=torch.bool)
    off[torch.randperm(400, generator=g)[:40]] = True
    y[off] += 50 * torch.sign(torch.randn(40, 5, generator=g))
    rows = Rows(x, y, torch.zeros(400, dtype=torch.long))
    assert torch.equal(needs_ffn(rows, rcond_for(torch.float32), 0.9), off)
    assert int(needs_ffn(rows, rcond_for(torch.float32), 0.5).sum()) == 200


def test_needs_ffn_finds_heavy_rows_that_pull_the_all_rows_map():
    """Planted sink-like rows: 10 of 1,000 rows far out along one input direction carry a huge output shift, which the
    all-rows map absorbs by bending along that direction (so its largest errors are typical rows far out on it, not the
    heavy rows); the map of the typical rows gets exactly the heavy rows wrong."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 6, generator=g)
    heavy = torch.zeros(1000, dtype=torch.bool)
    heavy[:10] = True
    x[heavy, 0] = 50 + 0.1 * x[heavy, 0]
    y = x @ torch.randn(6, 5, generator=g)
    y[heavy, 1] += 400
    rows = Rows(x, y, torch.zeros(1000, dtype=torch.long))
    fit = fit_affine(Moments.from_rows(x, y), rcond_for(torch.float32), condition=False)
    error = (y - fit(x)).square().sum(1)
    assert int(heavy[error.topk(10).indices].sum()) == 0  # (the all-rows map's largest errors miss every one)
    assert torch.equal(needs_ffn(rows, rcond_for(torch.float32), 0.99), heavy)


def test_sample_rows_keeps_rows_the_block_saw(planted):
    model, fit, _, _, _ = planted
    seen = ffn_rows(model, fit, model.transformer.h[1].mlp)[0]
    everything = sample_rows(model, fit, [1], rows=10**6, progress=False)[1]
    assert len(everything) == len(seen)
    ordered = lambda t: t[torch.argsort(t[:, 0])]  # noqa: E731 (rows in one order, to compare sets of rows)
    torch.testing.assert_close(ordered(everything.x), ordered(seen), rtol=0, atol=0)
    some = sample_rows(model, fit, [1], rows=100, progress=False)[1]
    assert len(some) == 100 and all(bool((seen == row).all(1).any()) for row in some.x)


def test_route_shares_a_norm_gate_and_trains_a_logistic_gate_per_share(planted):
    model, fit, _, _, _ = planted
    routings = route(model, fit, ["norm", "logistic"], [0, 0.5, 0.8, 1], [1], rows=600, progress=False)
    assert sorted(routings) == [("logistic", 0.5), ("logistic", 0.8), ("norm", 0.5), ("norm", 0.8)]
    assert routings[("norm", 0.5)] is routings[("norm", 0.8)] and routings[("norm", 0.5)].shares == (0.5, 0.8)
    assert routings[("logistic", 0.5)] is not routings[("logistic", 0.8)]
    assert isinstance(routings[("logistic", 0.8)].gates[1], LogisticGate)
    moments = routings[("norm", 0.8)].moments[1]
    assert moments.share(0) < moments.share(1) < moments.share(2) == 1.0
    assert moments.share(1) == pytest.approx(0.8, abs=0.05)  # (thresholds read on a sample of 600 rows)
    with pytest.raises(LinrecError, match="unknown gate 'size'"):
        route(model, fit, ["size"], [0.5], [1], progress=False)


@pytest.mark.parametrize(
    ("kind", "message"), [("affine", "is no gated kind"), ("gated:first", "is no gated kind"), ("gated:x:1", "no gate")]
)
def test_gated_replacements_refuses_other_kinds(planted, kind, message):
    model, fit, _, _, _ = planted
    with pytest.raises(LinrecError, match=message):
        gated_replacements(model, fit, kind, [1], progress=False)


@pytest.mark.parametrize("shares", [[0.0, 0.5], [1.5]])
def test_the_curve_refuses_shares_outside_0_to_1(planted, shares):
    model, fit, evals, _, _ = planted
    with pytest.raises(LinrecError, match=r"must lie in \(0, 1\]"):
        gating_curve(model, fit, evals, [1], rules=["norm"], shares=shares, progress=False)


def test_largest_share_is_the_largest_under_budget():
    curve = pd.DataFrame(
        {
            "rule": ["norm"] * 4 + ["logistic"] * 3,
            "block": [1, 1, 1, 2, 1, 1, 1],
            "routed": [0.5, 0.9, 1.0, 0.5, 0.5, 0.9, 1.0],
            "delta_ppl": [0.1, 0.5, 3.0, 2.0, 0.2, 0.3, -5.0],
            "base_ppl": [100.0] * 7,
        }
    )
    table = largest_share(curve, budget=0.01)
    got = {(r.rule, r.block): (r.largest_share, r.delta_ppl_there) for r in table.itertuples()}
    assert got[("norm", 1)] == (0.9, 0.5)  # (1.0 costs 3 % of the perplexity)
    assert got[("logistic", 1)] == (1.0, -5.0)  # (a lower perplexity is within any budget)
    share, delta = got[("norm", 2)]
    assert share == 0.0 and math.isnan(delta)  # (nothing under budget)


def test_gate_agreement_of_a_gate_with_itself_and_with_its_negation():
    g = torch.Generator().manual_seed(0)
    rows = Rows(torch.randn(200, 8, generator=g), torch.zeros(200, 1), torch.zeros(200, dtype=torch.long))
    w, b = torch.randn(8, generator=g), torch.tensor(0.3)
    gates = {"a": LogisticGate(w, b), "same": LogisticGate(w, b), "negated": LogisticGate(-w, -b)}
    table = gate_agreement(gates, rows, 0.5).set_index(["gate", "other"])
    assert sorted(table.index) == [("a", "negated"), ("a", "same"), ("same", "negated")]
    assert table.loc[("a", "same"), "alike"] == 1.0
    assert table.loc[("a", "same"), "score_correlation"] == pytest.approx(1.0, abs=1e-12)
    # at share 0.5 of 200 distinct scores, a routes the 100 lowest and its negation the 100 highest: no row alike
    assert table.loc[("a", "negated"), "alike"] == 0.0
    assert table.loc[("a", "negated"), "score_correlation"] == pytest.approx(-1.0, abs=1e-12)
    at_09 = gate_agreement({"a": gates["a"], "negated": gates["negated"]}, rows, 0.9).alike.item()
    assert at_09 == pytest.approx(0.8)  # 180 routed by each, 160 of them by both, 0 by neither
