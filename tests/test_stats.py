"""Correlations within groups: one group is scipy's correlation; Simpson's paradox; groups too small to use."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from linrec.errors import LinrecError
from linrec.stats import bootstrap_correlation, correlation, stratified_correlation


def simpson(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four groups of 12 items, a and b rising together within each group, while the groups' levels of a rise
    as their levels of b fall: pooled, the relation is strongly negative."""
    rng = np.random.default_rng(seed)
    a, b, g = [], [], []
    for k in range(4):
        u = rng.uniform(0, 1, 12)
        a.append(u + 3 * k)
        b.append(u + rng.normal(0, 0.3, 12) - 3 * k)
        g += [f"model {k}"] * 12
    return np.concatenate(a), np.concatenate(b), np.array(g)


def test_one_group_is_scipys_correlation():
    rng = np.random.default_rng(1)
    a = rng.normal(size=15)
    b = 0.5 * a + rng.normal(size=15)
    for method, theirs in (("spearman", stats.spearmanr(a, b).statistic), ("pearson", stats.pearsonr(a, b).statistic)):
        one = stratified_correlation(a, b, ["m"] * 15, method)
        assert one.combined.r == pytest.approx(theirs, abs=1e-12) and one.groups["m"].r == pytest.approx(theirs)
        plain = correlation(a, b, method)
        assert (one.combined.low, one.combined.high, one.combined.n) == (
            pytest.approx(plain.low, abs=1e-12),
            pytest.approx(plain.high, abs=1e-12),
            15,
        )
    ci = stats.pearsonr(a, b).confidence_interval(0.9)
    pearson = stratified_correlation(a, b, ["m"] * 15, "pearson", level=0.9).combined
    assert (pearson.low, pearson.high) == pytest.approx((ci.low, ci.high), abs=1e-10)


def test_within_groups_sees_through_simpsons_paradox():
    a, b, g = simpson()
    pooled = correlation(a, b, "spearman")
    within = stratified_correlation(a, b, g)
    assert pooled.r < -0.7 and pooled.high < 0  # pooled: strongly negative
    per_group = [stats.spearmanr(a[g == k], b[g == k]).statistic for k in dict.fromkeys(g)]
    assert all(r > 0.3 for r in per_group)  # within every group: positive
    assert [c.r for c in within.groups.values()] == pytest.approx(per_group, abs=1e-12)
    z = np.mean(np.arctanh(per_group))  # equal group sizes: equal weights
    half = 1.959963984540054 * math.sqrt(1.06 / (4 * 9))
    assert (within.combined.r, within.combined.low, within.combined.high) == pytest.approx(
        (math.tanh(z), math.tanh(z - half), math.tanh(z + half)), abs=1e-9
    )
    assert within.combined.low > 0 and within.combined.n == 48
    table = within.table()
    assert list(table.group) == ["within groups, combined", "model 0", "model 1", "model 2", "model 3"]


def test_small_groups_are_left_out_and_perfect_ones_stay_finite():
    a, b, g = simpson()
    extra = stratified_correlation(np.r_[a, 1, 2, 3], np.r_[b, 3, 2, 1], np.r_[g, ["tiny"] * 3])
    assert extra.skipped == {"tiny": "3 items, fewer than the 4 an interval needs"} and "left out: tiny" in extra.note
    assert extra.combined.r == stratified_correlation(a, b, g).combined.r
    flat = stratified_correlation([1, 2, 3, 4, 1, 2, 3, 4], [5, 5, 5, 5, 1, 3, 2, 4], list("xxxxyyyy"))
    assert set(flat.skipped) == {"x"} and flat.combined.n == 4
    perfect = stratified_correlation([1, 2, 3, 4], [2, 4, 6, 8], list("pppp")).combined
    assert perfect.r == pytest.approx(1 - 6 / 60) and -1 < perfect.low < perfect.high < 1  # half a lattice step
    with pytest.raises(LinrecError, match="no group has 4 or more"):
        stratified_correlation([1, 2, 3, 4], [1, 2, 3, 4], list("aabb"))
    with pytest.raises(LinrecError, match="three equally long"):
        stratified_correlation([1, 2, 3, 4], [1, 2, 3], list("aaaa"))
    with pytest.raises(LinrecError, match="pearson or spearman"):
        stratified_correlation(a, b, g, "kendall")


def test_the_bootstrap_interval_is_scipys_for_one_group():
    """One group: ρ is scipy's, and the interval is scipy's percentile bootstrap of Spearman's ρ over items."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=30)
    b = a + rng.normal(size=30)
    got = bootstrap_correlation(a, b, ["m"] * 30, resamples=4000)
    assert got.r == pytest.approx(stats.spearmanr(a, b).statistic)
    spearman = lambda x, y: stats.spearmanr(x, y).statistic  # noqa: E731
    ref = stats.bootstrap((a, b), spearman, paired=True, vectorized=False, n_resamples=4000, method="percentile",
                          random_state=0).confidence_interval  # fmt: skip
    assert got.low == pytest.approx(ref.low, abs=0.05) and got.high == pytest.approx(ref.high, abs=0.05)
    assert got.low < got.r < got.high


def test_the_bootstrap_combines_groups_as_the_stratified_correlation_does():
    rng = np.random.default_rng(4)
    a = rng.normal(size=40)
    b = np.where(np.arange(40) < 20, a, -a) + 0.1 * rng.normal(size=40)
    groups = ["up"] * 20 + ["down"] * 20
    got = bootstrap_correlation(a, b, groups)
    assert got.r == pytest.approx(stratified_correlation(a, b, groups, "spearman").combined.r)
    assert got.low < got.r < got.high and got.n == 40
    assert bootstrap_correlation(a, b, groups, seed=1) != got  # seeded: another seed, another interval
    assert bootstrap_correlation(a, b, groups) == got


def test_a_perfect_group_alone_is_one():
    a = np.arange(6.0)
    got = bootstrap_correlation(a, 2 * a, ["m"] * 6)
    assert got.r == 1.0 and got.high == 1.0 and got.low <= 1.0
