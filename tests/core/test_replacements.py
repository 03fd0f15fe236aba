"""linrec.core.replacements: Replacement kinds: the map each kind puts where an FFN block was, fitted from the block's
moments alone."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from conftest import tiny_model
from linrec.core.fit import fit_affine, held_out
from linrec.core.moments import Moments, merge_folds
from linrec.core.replacements import (
    AffineFFN,
    Kind,
    LowRankFFN,
    MeanFFN,
    ZeroFFN,
    low_rank_ffn,
)
from linrec.errors import LinrecError
from linrec.interventions.surgery import n_stored, param_table


def test_every_kind_and_its_numbers(measured):
    d = 32
    sets = {kind: measured.replacements(kind) for kind in ("zero", "mean", "affine", "lowrank:4")}
    for kind, cls, numbers in [
        ("zero", ZeroFFN, 0),
        ("mean", MeanFFN, d),
        ("affine", AffineFFN, d * d + d),
        ("lowrank:4", LowRankFFN, 4 * (d + d) + d),
    ]:
        assert sorted(sets[kind]) == [0, 1]
        for module in sets[kind].values():
            assert type(module) is cls and sum(t.numel() for t in module.state_dict().values()) == numbers
    x = torch.randn(5, d)
    train = merge_folds(measured.moments[1])
    assert torch.equal(sets["mean"][1](x), train.mean_y.float().expand(5, d))
    assert str(Kind.parse("lowrank:4")) == "lowrank:4" and Kind.parse("mean") == Kind("mean")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("poly", "unknown replacement kind 'poly'"),
        ("lowrank", "unknown replacement kind 'lowrank'"),
        ("affine:3", "unknown replacement kind"),
        ("lowrank:0", "positive integer"),
        ("lowrank:x", "positive integer"),
        ("lowrank:32", "below the block's width 32"),
        ("lowrank:20%", "chooses a rank from the FFN's own numbers, which a measurement does not hold"),
    ],
)
def test_bad_kinds_are_refused(measured, kind, message):
    with pytest.raises(LinrecError, match=message):
        measured.replacements(kind)


def test_parameter_counts_for_a_gpt2_shaped_ffn():
    model = GPT2LMHeadModel(GPT2Config(vocab_size=8, n_positions=8, n_embd=768, n_layer=1, n_head=12)).eval()
    d, hidden, k = 768, 3072, 64
    original = d * hidden + hidden + hidden * d + d
    assert original == 4_722_432
    replacements = {0: AffineFFN(torch.zeros(d, d), torch.zeros(d))}
    table = param_table(model, replacements)
    assert table.original_params[0] == original and table.params[0] == d * d + d == 590_592
    assert table.ratio[0] == original / 590_592 and round(table.ratio[0]) == 8
    others = [
        (LowRankFFN(torch.zeros(d, k), torch.zeros(k, d), torch.zeros(d)), k * (d + d) + d),
        (MeanFFN(torch.zeros(d)), d),
        (ZeroFFN(), 0),
    ]
    for module, expected in others:
        assert n_stored(module) == expected
    assert param_table(model, {0: ZeroFFN()}).ratio[0] == math.inf
    llama = tiny_model("llama")
    assert param_table(llama, {0: ZeroFFN()}).original_params[0] == 3 * 32 * 128  # gate, up, down; no biases


def test_low_rank_truncation_is_the_best_rank_k_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3000, 12, generator=g, dtype=torch.float64) @ torch.randn(12, 12, generator=g, dtype=torch.float64)
    y = x @ torch.randn(12, 10, generator=g, dtype=torch.float64) + torch.randn(
        3000, 10, generator=g, dtype=torch.float64
    )
    train = Moments.from_rows(x, y)
    fit = fit_affine(train)
    full_sse = held_out(fit, train).sse.sum()
    predicted = torch.linalg.eigvalsh(fit.weight.T @ train.cxx @ fit.weight)  # ascending
    for k in (1, 4, 10):
        sse = {}
        for weighted in (True, False):
            module = low_rank_ffn(fit, train, k, weighted, dtype=torch.float64)
            sse[weighted] = float(((module(x) - y) ** 2).sum())
        # reduced-rank regression loses exactly the prediction variance outside its top k directions
        assert sse[True] == pytest.approx(float(full_sse + predicted[: 10 - k].sum()), rel=1e-8)
        assert sse[True] <= sse[False] * (1 + 1e-12)
    assert sse[True] == pytest.approx(float(full_sse), rel=1e-10)  # full rank: the affine map itself
    with pytest.raises(LinrecError, match="between 1 and 10"):
        low_rank_ffn(fit, train, 11)
