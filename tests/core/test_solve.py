"""linrec.core.solve: the Cholesky solve of the fits that are only scored, where it provably gives the
eigendecomposition's map (linrec.core.fit's eigendecomposition elsewhere), against the eigendecomposition everywhere
(``solver="eigh"``) on planted inputs, tiny models of four families and the packaged real models."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pytest
import torch

import linrec.core.fit as fit_module
import linrec.core.solve as solve_module
from conftest import tiny_model, user_cache
from linrec.core.capture import CaptureOptions, capture_positions
from linrec.core.fit import (
    DEFAULT_RCOND,
    AffineFit,
    BlockReport,
    fit_affine,
    held_out,
    held_out_r2,
    input_spectrum,
    kfold,
    leave_one_out,
    rcond_for,
)
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.core.solve import FitSums
from linrec.data.tokens import make_batches
from support.packaged import GEMMA, SMOL, installed_or_skip

TOLERANCE = 1e-9
"""The largest difference allowed between the two solves' R² (absolute)."""

R2_COLUMNS = ("r2_lin", "r2_lin_std", "r2_lin_half_rows", "r2_lin_after_first", "r2_lin_after_first_std")
R2_SEQUENCES = ("r2_lin_folds", "r2_lin_after_first_folds")
ALL_ROWS_COLUMNS = ("null_dims", "input_condition", "effective_rank_map")
"""The columns of the fit on all rows, an eigendecomposition in either solve: equal bit for bit."""


@pytest.fixture
def solves(monkeypatch) -> Counter:
    """How many fits the Cholesky solve made ("cholesky") and how many fell back to the eigendecomposition ("eigh")."""
    counts: Counter = Counter()
    real = solve_module.cholesky_map

    def counted(*args):
        solved = real(*args)
        counts["cholesky" if solved is not None else "eigh"] += 1
        return solved

    monkeypatch.setattr(solve_module, "cholesky_map", counted)
    return counts


def largest_difference(a: BlockReport, b: BlockReport) -> float:
    """The largest absolute difference between the R² columns of ``a`` and ``b`` (per feature included), after
    checking that each is NaN in both or in neither."""
    pairs = [(getattr(a, c), getattr(b, c)) for c in R2_COLUMNS]
    for column in R2_SEQUENCES:
        assert len(getattr(a, column)) == len(getattr(b, column)), column
        pairs += zip(getattr(a, column), getattr(b, column), strict=True)
    pairs += zip(a.r2_per_feature.tolist(), b.r2_per_feature.tolist(), strict=True)
    assert all(math.isnan(x) == math.isnan(y) for x, y in pairs)
    return max((abs(x - y) for x, y in pairs if not math.isnan(x)), default=0.0)


def assert_same_report(fast: BlockReport, reference: BlockReport, allowed: float = TOLERANCE) -> float:
    """``fast`` has ``reference``'s numbers: its all-rows columns equal, its R² within ``allowed``; returns the
    largest R² difference."""
    for column in ALL_ROWS_COLUMNS:
        assert getattr(fast, column) == getattr(reference, column), column
    difference = largest_difference(fast, reference)
    assert difference <= allowed, difference
    return difference


def layernorm_rows(n: int = 3000, d: int = 40, d_out: int = 16, seed: int = 0, dtype=torch.float64):
    """Rows of a LayerNorm (spread gains and biases) of correlated inputs, rounded to ``dtype``, and a GELU layer's
    outputs of them: each row's x / γ sums to a constant, the input's one null direction."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, dtype=torch.float64) @ torch.randn(d, d, generator=g, dtype=torch.float64)
    h = (h - h.mean(1, keepdim=True)) / h.std(1, keepdim=True)
    x = (h * (0.5 + torch.rand(d, generator=g, dtype=torch.float64)) + 0.3 * torch.randn(d, generator=g)).to(dtype)
    x = x.double()
    return x, torch.nn.functional.gelu(x @ torch.randn(d, d_out, generator=g, dtype=torch.float64) / d**0.5)


def fold_moments(x: torch.Tensor, y: torch.Tensor, k: int = 5) -> list[Moments]:
    fold = torch.arange(x.shape[0]) % k
    return [Moments.from_rows(x[fold == f], y[fold == f]) for f in range(k)]


def planted(case: str) -> tuple[list[Moments], float, int]:
    """(folds, rcond, null directions of all rows) of a planted case."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3000, 24, generator=g, dtype=torch.float64)
    if case == "linear":
        return fold_moments(x, x @ torch.randn(24, 8, generator=g, dtype=torch.float64) + 3.0), DEFAULT_RCOND, 0
    if case == "duplicated-and-constant":
        x = torch.cat([x, x[:, :2], torch.full((3000, 1), 2.0, dtype=torch.float64)], 1)
        return fold_moments(x, torch.tanh(x[:, :6])), DEFAULT_RCOND, 3
    dtype = getattr(torch, case.removeprefix("layernorm-"))
    return fold_moments(*layernorm_rows(dtype=dtype)), rcond_for(dtype), 1


def test_fit_sums_are_those_of_merge_folds_bit_for_bit():
    """The training sums are merge_folds's n, means, Cxx and Cxy, every bit, and the folds are left as they were
    (the sums are made in place); an empty fold changes nothing."""
    g = torch.Generator().manual_seed(0)
    folds = [Moments.from_rows(torch.randn(50 + i, 6, generator=g) * 3 + i, torch.randn(50 + i, 4, generator=g))
             for i in range(4)]  # fmt: skip
    folds.insert(2, Moments.zeros(6, 4))
    before = [(m.cxx.clone(), m.cxy.clone()) for m in folds]
    for used in (folds, folds[:1], folds[2:], [folds[2], folds[0]]):
        sums, merged = FitSums.of(used), merge_folds(used)
        assert sums.n == merged.n
        for field in ("mean_x", "mean_y", "cxx", "cxy"):
            assert torch.equal(getattr(sums, field), getattr(merged, field)), field
    assert all(torch.equal(m.cxx, a) and torch.equal(m.cxy, b) for m, (a, b) in zip(folds, before, strict=True))


@pytest.mark.parametrize(
    "case", ["linear", "layernorm-float64", "layernorm-float32", "layernorm-bfloat16", "duplicated-and-constant"]
)
def test_planted_blocks_need_no_eigendecomposition_and_agree(case, solves):
    """An exactly linear block scores 1; a LayerNorm's null direction (rounded to float32 or bfloat16 or not) and
    duplicated or constant features are null in every training set, so all ten held-out fits are Cholesky's and
    give the eigendecomposition's numbers."""
    folds, rcond, null_dims = planted(case)
    fast = kfold(0, folds, rcond)
    assert solves == {"cholesky": 10}
    reference = kfold(0, folds, rcond, solver="eigh")
    assert_same_report(fast, reference)
    assert fast.null_dims == null_dims
    if case == "linear":
        assert fast.r2_lin == pytest.approx(1, abs=1e-12) and reference.r2_lin == pytest.approx(1, abs=1e-12)


def test_a_gram_singular_in_some_training_sets_only_falls_back(solves):
    """A feature constant in every fold but the first is null where that fold is held out, not in all rows: those
    fits fall back to the eigendecomposition (which drops it), the others stay Cholesky's, and the numbers agree."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3000, 16, generator=g, dtype=torch.float64)
    x[torch.arange(3000) % 5 != 0, 3] = 1.0
    folds = fold_moments(x, torch.tanh(x[:, :6] @ torch.randn(6, 6, generator=g, dtype=torch.float64)))
    assert input_spectrum(FitSums.of(folds[1:]), DEFAULT_RCOND).null_dims == 1
    fast = kfold(0, folds, DEFAULT_RCOND)
    assert solves["eigh"] >= 2 and solves["cholesky"] >= 5  # the held-out fits without the first fold, at least
    assert_same_report(fast, kfold(0, folds, DEFAULT_RCOND, solver="eigh"))


@pytest.mark.parametrize("case", ["layernorm-float32", "layernorm-bfloat16", "duplicated-and-constant", "linear"])
def test_held_out_r2_guesses_the_null_directions_it_is_not_given(case, solves):
    """Given no null directions, a group's first fit guesses them (a LayerNorm's, duplicated and constant features,
    none), and every fit is Cholesky's."""
    folds, rcond, _ = planted(case)
    fast = held_out_r2(folds, leave_one_out(5), rcond)
    assert solves == {"cholesky": 5}
    reference = held_out_r2(folds, leave_one_out(5), rcond, solver="eigh")
    assert fast is not None and reference is not None
    assert max(abs(a - b) for a, b in zip(fast, reference, strict=True)) <= TOLERANCE


def test_more_null_directions_than_the_guess_finds_are_taken_from_the_first_fall_back(solves):
    """Ten constant features are more than the guess looks for: the first fit falls back and hands the
    directions its eigendecomposition dropped to the other four."""
    g = torch.Generator().manual_seed(6)
    x = torch.cat([torch.randn(3000, 12, generator=g, dtype=torch.float64), torch.ones(3000, 10)], 1)
    folds = fold_moments(x, torch.tanh(x[:, :4]))
    assert solve_module.GUESSED_NULL < 10
    fast = held_out_r2(folds, leave_one_out(5), DEFAULT_RCOND)
    assert solves == {"eigh": 1, "cholesky": 4}
    reference = held_out_r2(folds, leave_one_out(5), DEFAULT_RCOND, solver="eigh")
    assert fast is not None and reference is not None
    assert max(abs(a - b) for a, b in zip(fast, reference, strict=True)) <= TOLERANCE


def test_fit_affine_that_is_only_scored_is_the_pseudo_inverse_map():
    """fit_affine(condition=False) deflating the null directions it is given is the eigendecomposition's map: the
    same weights (minimum-norm: nothing along the null direction), null_dims and a NaN condition number."""
    folds = planted("layernorm-bfloat16")[0]
    rcond, train = rcond_for(torch.bfloat16), merge_folds(folds[1:])
    null = input_spectrum(merge_folds(folds), rcond).null_basis()
    fast = fit_affine(train, rcond, condition=False, null=null)
    reference = fit_affine(train, rcond, condition=False, solver="eigh")
    assert fast.null_dims == reference.null_dims == 1 and math.isnan(fast.input_condition)
    scale = float(reference.weight.abs().max())
    assert (fast.weight - reference.weight).abs().max() <= 1e-9 * scale
    assert (fast.bias - reference.bias).abs().max() <= 1e-9 * float(reference.bias.abs().max())


def anisotropic_rows(dtype: torch.dtype, seed: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm-fed rows whose spectrum spreads over many decades, rounded to ``dtype``: real directions sit where
    the cutoffs of a sweep of rcond fall."""
    g = torch.Generator().manual_seed(seed)
    d = 32
    h = torch.randn(2500, d, generator=g, dtype=torch.float64) * torch.logspace(0, -3, d, dtype=torch.float64)
    h = h @ torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64)).Q
    x = ((h - h.mean(1, keepdim=True)) / h.std(1, keepdim=True) * (0.5 + torch.rand(d, generator=g))).to(dtype)
    return x.double(), torch.tanh(x.double() @ torch.randn(d, 8, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_cholesky_solve_holds_only_where_the_rule_drops_exactly_its_null_directions(dtype):
    """Over a sweep of cutoffs, with the all-rows null directions and with none: wherever the Cholesky solve holds,
    the eigendecomposition drops exactly as many directions and scores the same. It holds for most small cutoffs and
    gives way wherever the rule drops other directions (real ones under the large cutoffs, a LayerNorm's not given)."""
    x, y = anisotropic_rows(dtype)
    folds = fold_moments(x, y)
    train, test = FitSums.of(folds[1:]), folds[0]
    outcomes: Counter = Counter()
    for rcond in torch.logspace(-14, -2, 25).tolist():
        null = input_spectrum(FitSums.of(folds), rcond).null_basis()
        spec = input_spectrum(train, rcond)
        for basis in (null, null[:, :0]):
            solved = solve_module.cholesky_map(train, rcond, basis)
            if spec.null_dims != basis.shape[1]:
                assert solved is None, rcond
                outcomes["refused, dropping other directions"] += 1
            elif solved is None:
                outcomes["refused, the bounds not met"] += 1
            else:
                outcomes["held"] += 1
                fast = AffineFit(*solved, math.nan, rcond)
                reference = held_out(fit_module._eigh_fit(train, spec, rcond, condition=False), test)
                assert abs(held_out(fast, test).r2 - reference.r2) <= TOLERANCE, rcond
                assert (held_out(fast, test).r2_per_feature - reference.r2_per_feature).abs().max() <= TOLERANCE
    assert outcomes["held"] >= 15 and outcomes["refused, dropping other directions"] >= 5, outcomes


def position_moments(model, tokenizer, text: str, rows: int, seq_len: int = 32, blocks=None) -> PositionMoments:
    batches = make_batches(tokenizer, text, seq_len=seq_len, max_rows=rows, batch_size=16)
    return capture_positions(model, batches, blocks, options=CaptureOptions(folds=5, progress=False))


def reports(split: PositionMoments, block: int, rcond: float) -> tuple[BlockReport, BlockReport]:
    """``block``'s report, with its first-position columns, by the default solve and by the eigendecomposition."""
    fast = fit_module._positions_report(block, split, rcond, False, None)
    return fast, fit_module._positions_report(block, split, rcond, False, None, solver="eigh")


def permuted(split: PositionMoments, seed: int = 0) -> PositionMoments:
    """``split`` with the input features in another order (drawn by ``seed``): the same least-squares problems, other
    rounding."""
    p = torch.randperm(next(iter(split.later.values()))[0].d_in, generator=torch.Generator().manual_seed(seed))
    swap = lambda m: replace(m, mean_x=m.mean_x[p], cxx=m.cxx[p][:, p], cxy=m.cxy[p])  # noqa: E731
    return PositionMoments(
        *({b: [swap(m) for m in ms] for b, ms in part.items()} for part in (split.first, split.later))
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "llama", "bert"])
def test_tiny_models_agree(family, dtype, tokenizer, text, solves):
    """Tiny GPT-2, NeoX, Llama and BERT (a MiniLM-like encoder) models, captured in float32 and in bfloat16: every
    column of every block's report, the later rows' included, is the eigendecomposition's, and every held-out fit (15
    a block) is Cholesky's."""
    model = tiny_model(family).to(dtype)
    split = position_moments(model, tokenizer, text, rows=2000)
    for block in sorted(split.later):
        assert_same_report(*reports(split, block, rcond_for(dtype)))
    assert solves == {"cholesky": 15 * len(split.later)}


REORDERINGS = 4
"""The feature orders whose eigendecompositions measure an ill-conditioned block's own spread: on SmolLM2's first
block (condition ~6e8) one order moved its R² by 4e-8 to 3e-7 from the reference, by the order drawn (six orders,
2026-12-03), and the Cholesky solve by 5e-8 here and 1.9e-7 on another CPU; the largest of four orders is the spread."""


@pytest.mark.slow
@pytest.mark.parametrize("name", [SMOL, GEMMA])
def test_packaged_models_agree(name, text, solves):
    """SmolLM2 and Gemma 3, their first, a middle and their last block, at about 3 rows per input dimension: the
    reports agree to 1e-9 where the eigendecomposition itself does (with the features in another order), and within
    twice its own spread over :data:`REORDERINGS` orders elsewhere (the first blocks, conditioned to ~1e9 and
    beyond). Where no direction is dropped but for a structural one, every held-out fit is Cholesky's."""
    from linrec.models.loading import load_pretrained

    installed_or_skip(name)
    with user_cache():
        model, tokenizer = load_pretrained(name, device="cpu")
    last = model.config.num_hidden_layers - 1
    split = position_moments(model, tokenizer, text, rows=2048, seq_len=64, blocks=[0, last // 2, last])
    for block in (0, last // 2, last):
        fast, reference = reports(split, block, DEFAULT_RCOND)
        if block == 0:  # ill-conditioned: the eigendecomposition's own rounding shows, more or less by the order
            orders = (permuted(split, seed) for seed in range(REORDERINGS))
            again = [fit_module._positions_report(block, o, DEFAULT_RCOND, False, None, solver="eigh") for o in orders]
            spread = max(largest_difference(a, reference) for a in again)
            assert spread > TOLERANCE
            assert_same_report(fast, reference, allowed=max(TOLERANCE, 2 * spread))
        else:
            assert_same_report(fast, reference)
    assert solves["cholesky"] >= 30, solves  # the two deeper blocks', at least
