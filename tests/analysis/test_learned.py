"""Learned or architectural (linrec.analysis.learned): the rule on planted tables and on planted models whose answer
is known, the Student-t quantile it uses, and its figure."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest
import torch
from scipy import stats

from conftest import tiny_model
from linrec.analysis.learned import CLAIM, MATCHED, WEIGHTS, control_bands, learned_claims
from linrec.core.measure import measure
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.models.arch import ffn_blocks
from linrec.models.controls import permuted
from linrec.plots.activation import controls_figure
from linrec.report.claims import Verdict
from linrec.stats import t_quantile

SEEDS = (0, 1, 2)


def table_of(trained: list[float], shuffled: list[list[float]], model: str = "m") -> pd.DataFrame:
    """A control table as control_tables returns it, from R²_lin per block."""
    rows = [{"model": model, "block": b, "r2_lin": r, "r2_lin_std": 0.01, "weights": WEIGHTS["final"], "seed": None}
            for b, r in enumerate(trained)]  # fmt: skip
    rows += [{"model": model, "block": b, "r2_lin": r, "r2_lin_std": 0.01, "weights": MATCHED, "seed": s}
             for s, run in enumerate(shuffled) for b, r in enumerate(run)]  # fmt: skip
    return pd.DataFrame(rows).astype({"seed": "Int64"})


def profile_of(name: str, model: torch.nn.Module, batches) -> pd.DataFrame:
    """The trained table and SEEDS shuffled ones of ``model``, measured for real on ``batches``."""
    tables = [measure(model, batches, progress=False).assign(weights=WEIGHTS["final"], seed=None)]
    for seed in SEEDS:
        shuffled = permuted(copy.deepcopy(model), seed)
        tables.append(measure(shuffled, batches, progress=False).assign(weights=MATCHED, seed=seed))
    return pd.concat(tables, ignore_index=True).assign(model=name).astype({"seed": "Int64"})


@pytest.fixture(scope="module")
def batches(tokenizer, text):
    return make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=16)


def mlps(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [model.get_submodule(block.input) for block in ffn_blocks(model)]


def first_matrix(mlp: torch.nn.Module) -> torch.Tensor:
    for name in ("c_fc", "dense_h_to_4h", "up_proj"):
        if hasattr(mlp, name):
            return getattr(mlp, name).weight
    raise AssertionError(type(mlp))


@pytest.mark.parametrize("df", [1, 2, 3, 7, 40])
def test_t_quantile_agrees_with_scipy(df):
    for p in (0.5, 0.8, 0.975, 0.995, 0.02):
        assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9, abs=1e-12)
    with pytest.raises(LinrecError, match="p in"):
        t_quantile(1.0, df)
    with pytest.raises(LinrecError, match="degree of freedom"):
        t_quantile(0.9, 0)


def test_the_band_is_a_student_t_prediction_interval():
    bands = control_bands(table_of([0.9, 0.5], [[0.1, 0.4], [0.2, 0.5], [0.3, 0.6]]))
    half = stats.t.ppf(0.975, 2) * 0.1 * math.sqrt(1 + 1 / 3)
    assert bands["control_mean"].tolist() == pytest.approx([0.2, 0.5])
    assert (bands["high"] - bands["control_mean"]).tolist() == pytest.approx([half, half])
    assert bands["departs"].tolist() == [True, False]  # 0.9 lies above 0.2 + 0.44; 0.5 is the control's mean


def test_the_rule_needs_a_majority_of_blocks_and_three_seeds():
    shuffled = [[0.1, 0.1, 0.1], [0.11, 0.11, 0.11], [0.12, 0.12, 0.12]]
    majority, medians = learned_claims(table_of([0.9, 0.8, 0.11], shuffled))
    assert majority.verdict is Verdict.YES and majority.value == pytest.approx(2 / 3)
    assert "2 of 3 blocks outside" in majority.measured and medians.verdict is None
    minority, _ = learned_claims(table_of([0.9, 0.11, 0.11], shuffled))
    assert minority.verdict is Verdict.NO and "1 of 3" in minority.measured
    below, _ = learned_claims(table_of([-0.5, -0.4, 0.11], shuffled))  # less linear than chance also departs
    assert below.verdict is Verdict.YES and "0 above, 2 below" in below.measured
    two_seeds, _ = learned_claims(table_of([0.9, 0.8, 0.7], shuffled[:2]))
    assert two_seeds.verdict is Verdict.UNTESTABLE and "needs 3" in two_seeds.measured


def test_bad_tables_are_refused():
    table = table_of([0.9], [[0.1], [0.2], [0.3]])
    with pytest.raises(LinrecError, match="trained weights and the"):
        control_bands(table[table.weights == WEIGHTS["final"]])
    with pytest.raises(LinrecError, match="no control measured"):
        control_bands(pd.concat([table, table_of([0.5], [[0.1]] * 3).assign(block=7, seed=pd.NA).iloc[:1]]))
    with pytest.raises(LinrecError, match="at least two control seeds"):
        control_bands(table_of([0.9], [[0.1]]))
    with pytest.raises(LinrecError, match="level"):
        control_bands(table, level=1.5)


@pytest.mark.slow
def test_a_profile_set_by_design_is_not_read_as_learned(batches):
    """The issue's false case: untrained models of several families whose FFN input matrices are scaled by one
    per-block schedule shared by all (a profile set by design, with no learning). Shuffling keeps every matrix's
    values, so the shuffled models are as linear as these: the rule must not say "learned"."""
    tables = []
    for name, family, seed in (
        ("gpt2", "gpt2", 0),
        ("gpt2-seed1", "gpt2", 1),
        ("neox", "gpt_neox", 2),
        ("llama", "llama", 3),
    ):
        model = tiny_model(family, seed=seed)
        with torch.no_grad():
            for scale, mlp in zip((10.0, 0.1), mlps(model), strict=True):
                first_matrix(mlp).mul_(scale)
        tables.append(profile_of(name, model, batches))
    trained = [t.loc[t.weights == WEIGHTS["final"], "r2_lin"] for t in tables]
    assert min(r.max() - r.min() for r in trained) > 0.05  # the schedule does set a profile
    claims = learned_claims(pd.concat(tables, ignore_index=True))
    assert [c.claim.removeprefix(CLAIM) for c in claims[:5]] == ["", " (gpt2)", " (gpt2-seed1)", " (neox)", " (llama)"]
    assert all(c.verdict is Verdict.NO for c in claims[:5]), [c.measured for c in claims]


def test_weights_arranged_to_cancel_the_nonlinearity_are_read_as_learned(batches):
    """The true case: GELU(a) − GELU(−a) = a, so an FFN whose hidden units come in pairs with opposite input
    weights and opposite output weights is exactly affine. The same values shuffled are not: only their arrangement
    makes the block linear, so the rule must say "learned"."""
    model = tiny_model("gpt2", seed=4)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for mlp in mlps(model):
            d, hidden = mlp.c_fc.weight.shape  # Conv1D: (in, out)
            a = torch.randn(d, hidden // 2, generator=g) * 0.5
            b = torch.randn(hidden // 2, d, generator=g) * 0.1
            mlp.c_fc.weight.copy_(torch.cat([a, -a], 1))
            mlp.c_proj.weight.copy_(torch.cat([b, -b], 0))
            mlp.c_fc.bias.zero_()
    table = profile_of("paired", model, batches)
    assert table.loc[table.weights == WEIGHTS["final"], "r2_lin"].min() > 1 - 1e-6
    claim, _ = learned_claims(table)
    assert claim.verdict is Verdict.YES and claim.value == 1.0, claim.measured


def test_the_figure_rings_the_blocks_outside_the_band():
    table = pd.concat([table_of([0.9, 0.2], [[0.1, 0.2], [0.2, 0.25], [0.3, 0.15]], "A"),
                       table_of([0.5, 0.6], [[0.5, 0.1], [0.55, 0.1], [0.45, 0.1]], "B")])  # fmt: skip
    fig = controls_figure(table, control_bands(table), order=["A", "B"])
    ringed = [c for ax in fig.axes for c in ax.collections if c.get_label() == "trained outside the band"]
    assert [len(c.get_offsets()) for c in ringed] == [1, 1]
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes[:1])
