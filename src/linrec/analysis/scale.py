"""Across scale: how a model's profile of R²_lin over its blocks changes with the model's size (the
chapter ``10_scale``).

Models of different depths are compared at the same *relative* depth (block / (blocks - 1)). Each model's profile
is summarised by its spread over blocks (range, interquartile range, the largest step between adjacent blocks), its
first position's share of the output variance and R²_lin without that position (:mod:`linrec.analysis.positions`),
and each statistic is set against the model's parameter count. A trend across models is the least-squares slope
of the statistic on log10(parameters), with a percentile bootstrap interval that resamples every model's blocks
(the blocks, not the few models, are what varies between two measurements of the same models).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from linrec.core.plan import capture_bytes, packed_bytes
from linrec.errors import LinrecError
from linrec.report.claims import Claim
from linrec.stats import percentile_interval

if TYPE_CHECKING:
    from linrec.experiment.measurement import ProfileMeasurement
    from linrec.experiment.profiles import Profile

KEEPS = 0.5
"""The largest model keeps its profile's spread when its standard deviation of R²_lin over blocks is at least this
share of the smallest model's (the standard deviation, not the IQR or the range: every block counts, so resampling
blocks moves it least)."""

RESAMPLES = 2000
"""Bootstrap resamples behind every interval of this module."""


def iqr(values: np.ndarray) -> float:
    """The interquartile range (numpy's linear quantiles)."""
    q1, q3 = np.quantile(values, [0.25, 0.75])
    return float(q3 - q1)


def spread(values: np.ndarray) -> float:
    """The standard deviation over blocks (population: these are all of the model's blocks)."""
    return float(np.std(values))


def with_depth(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (one row per model and block) with ``depth``: the block's relative depth, 0 first, 1 last."""
    last = table.groupby("model", sort=False)["block"].transform("max")
    return table.assign(depth=table["block"] / last.where(last > 0, 1))


def _adjacent_jump(r2: np.ndarray) -> float:
    return float(np.abs(np.diff(r2)).max()) if len(r2) > 1 else 0.0


def scale_summary(table: pd.DataFrame, parameters: Mapping[str, int]) -> pd.DataFrame:
    """One row per model, smallest first: its parameters, blocks, width and rows per input dimension, and its
    profile's median, range, IQR, standard deviation and largest adjacent jump of R²_lin, the median, mean and
    largest first-position share and the median R²_lin without the first position (NaN where the first position was not
    kept apart)."""
    missing = sorted(set(table["model"]) - set(parameters))
    if missing:
        raise LinrecError(f"no parameter count for {missing}; give one for every model of the table")
    rows = []
    for model, g in table.sort_values("block").groupby("model", sort=False):
        r2 = g["r2_lin"].to_numpy(dtype=float)
        rows.append(
            {
                "model": model,
                "parameters": int(parameters[str(model)]),
                "blocks": len(g),
                "width": int(g["d_in"].iloc[0]),
                "rows_per_dim": float((g["n_train"] + g["n_test"]).iloc[0] / g["d_in"].iloc[0]),
                "r2_median": float(np.median(r2)),
                "r2_min": float(r2.min()),
                "r2_max": float(r2.max()),
                "r2_range": float(r2.max() - r2.min()),
                "r2_iqr": iqr(r2),
                "r2_sd": spread(r2),
                "max_jump": _adjacent_jump(r2),
                "first_share_median": float(g["first_position_share"].median()),
                "first_share_mean": float(g["first_position_share"].mean()),
                "first_share_max": float(g["first_position_share"].max()),
                "r2_after_first_median": float(g["r2_lin_after_first"].median()),
                "r2_half_rows_gap": float((g["r2_lin"] - g["r2_lin_half_rows"]).median()),
            }
        )
    return pd.DataFrame(rows).sort_values("parameters", kind="stable", ignore_index=True)


def _resampled(
    table: pd.DataFrame, statistic: Callable[[np.ndarray], float], column: str, resamples: int, seed: int
) -> dict[str, np.ndarray]:
    """Per model, ``statistic`` of ``column`` over its blocks resampled with replacement ``resamples`` times."""
    generator = np.random.default_rng(seed)
    out = {}
    for model, g in table.groupby("model", sort=False):
        values = g[column].to_numpy(dtype=float)
        picks = generator.integers(0, len(values), size=(resamples, len(values)))
        out[str(model)] = np.array([statistic(values[p]) for p in picks])
    return out


def size_slope(
    table: pd.DataFrame,
    parameters: Mapping[str, int],
    column: str,
    statistic: Callable[[np.ndarray], float] = np.median,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, tuple[float, float]]:
    """The least-squares slope of each model's ``statistic`` of ``column`` over its blocks against log10 of its
    parameters (change per tenfold size), with its bootstrap interval at ``level`` (blocks resampled per model)."""
    models = list(dict.fromkeys(table["model"].astype(str)))
    x = np.log10([float(parameters[m]) for m in models])
    if len(set(x)) < 2:
        raise LinrecError(f"a slope against size needs models of at least two sizes; got {models}")

    def slope(values: list[float]) -> float:
        return float(np.polyfit(x, values, 1)[0])

    point = slope([statistic(g[column].to_numpy(dtype=float)) for _, g in table.groupby("model", sort=False)])
    drawn = _resampled(table, statistic, column, resamples, seed)
    slopes = torch.tensor([slope([drawn[m][i] for m in models]) for i in range(resamples)])
    return point, percentile_interval(slopes, level)


def spread_ratio(
    table: pd.DataFrame, parameters: Mapping[str, int], level: float = 0.95, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[str, str, float, tuple[float, float]]:
    """(smallest model, largest model, the largest's standard deviation of R²_lin over blocks / the smallest's, its
    bootstrap interval at ``level``, blocks resampled per model)."""
    models = sorted(dict.fromkeys(table["model"].astype(str)), key=lambda m: parameters[m])
    small, large = models[0], models[-1]
    if parameters[small] == parameters[large]:
        raise LinrecError(f"a trend with size needs models of at least two sizes; got {models}")
    drawn = _resampled(table[table.model.isin([small, large])], spread, "r2_lin", resamples, seed)
    values = {m: spread(table[table.model == m]["r2_lin"].to_numpy(dtype=float)) for m in (small, large)}
    ratio = values[large] / values[small] if values[small] > 0 else float("inf")
    with np.errstate(divide="ignore", invalid="ignore"):  # a resample of equal blocks has no spread: inf, or 0/0
        ratios = np.nan_to_num(drawn[large] / drawn[small], nan=1.0, posinf=np.inf)
    tail = (1 - level) / 2  # quantiles that are resampled values (no interpolation: some may be infinite)
    low, high = np.quantile(ratios, [tail, 1 - tail], method="inverted_cdf")
    return small, large, ratio, (float(low), float(high))


def scale_claims(
    table: pd.DataFrame, parameters: Mapping[str, int], keeps: float = KEEPS, seed: int = 0
) -> list[Claim]:
    """The chapter's two claims, each with its rule: the largest model keeps the spread of the smallest (it does not
    shrink toward a uniform profile), and the first position's share of the output variance changes with size (its
    mean over blocks: a sink lives in a few blocks, which a median would not see)."""
    sizes = {parameters[m] for m in table["model"].astype(str)}
    if len(sizes) < 2:
        why = "needs models of at least two sizes"
        return [
            Claim.check("heterogeneity persists with size", "not tested (the paper measures ~160M models)",
                        f"untestable: this run {why}", None, rule=f"{why}"),
            Claim.check("the attention sink's share changes with size", "not tested", f"untestable: this run {why}",
                        None, rule=f"{why}"),
        ]  # fmt: skip
    small, large, ratio, (low, high) = spread_ratio(table, parameters, seed=seed)
    persists = Claim.check(
        "heterogeneity persists with size",
        "not tested (the paper measures ~160M models)",
        f"{large}'s standard deviation of R²_lin over blocks is {ratio:.2f}× {small}'s [{low:.2f}, {high:.2f}]",
        low >= keeps,
        value=ratio,
        interval=(low, high),
        unit="× the smallest model's standard deviation over blocks",
        rule=f"yes when the 95% interval's lower end (blocks resampled) is at least {keeps}: the largest model keeps "
        f"at least {keeps:.0%} of the smallest model's spread; no otherwise",
    )
    sinks = table.dropna(subset=["first_position_share"])
    if sinks["model"].nunique() < 2 or len({parameters[m] for m in sinks["model"].astype(str)}) < 2:
        why = "the first position's share for models of two sizes or more"
        return [persists, Claim.check("the attention sink's share changes with size", "not tested",
                                      f"untestable: this run lacks {why}", None, rule=f"needs {why}")]  # fmt: skip
    slope, (lo, hi) = size_slope(sinks, parameters, "first_position_share", statistic=np.mean, seed=seed)
    direction = "grows" if lo > 0 else "shrinks" if hi < 0 else "has no resolved trend"
    sink = Claim.check(
        "the attention sink's share changes with size",
        "not tested",
        f"the mean first-position share {direction}: {slope:+.3f} per tenfold parameters [{lo:+.3f}, {hi:+.3f}]",
        lo > 0 or hi < 0,
        value=slope,
        interval=(lo, hi),
        unit="share per tenfold parameters",
        rule="yes when the 95% interval of the slope of each model's mean first-position share on log10 "
        "parameters (blocks resampled) excludes 0 (it grows when above, shrinks when below); no when it holds 0",
    )
    return [persists, sink]


LARGER: dict[str, tuple[int, int, float]] = {
    "Qwen2.5-3B": (2048, 36, 3.09e9),
    "Qwen2.5-7B": (3584, 28, 7.62e9),
    "Pythia-12b": (5120, 36, 1.18e10),
    "Llama-3-70B": (8192, 80, 7.06e10),
}
"""Larger open models: (width, FFN blocks, parameters), from their published configs."""


def capture_needs(models: Mapping[str, tuple[int, int, float]], folds: int = 5, rows_per_dim: int = 64) -> pd.DataFrame:
    """What measuring every block of each model at ``rows_per_dim`` rows per input dimension holds and costs: its
    float32 weights, its float64 moments with every fold in memory and with finished folds on disk (one live fold
    per block; :class:`linrec.core.moment_files.SpilledMoments`), the moments on disk (upper triangles of Cxx and Cyy),
    and the forward pass's arithmetic (2 × parameters per token), in GB and TFLOP."""
    rows = []
    for name, (width, blocks, parameters) in models.items():
        per_fold = capture_bytes(width, blocks, 1)
        tokens = rows_per_dim * width
        rows.append(
            {
                "model": name,
                "width": width,
                "blocks": blocks,
                "rows": tokens,
                "weights_gb": parameters * 4 / 1e9,
                "moments_in_memory_gb": folds * per_fold / 1e9,
                "moments_spilled_gb": per_fold / 1e9,
                "moments_on_disk_gb": folds * blocks * packed_bytes(width, width) / 1e9,
                "forward_tflop": 2 * parameters * tokens / 1e12,
            }
        )
    return pd.DataFrame(rows)


def at_fixed_depths(swaps: pd.DataFrame, blocks: Mapping[str, int], depths: tuple[float, ...]) -> pd.DataFrame:
    """The rows of ``swaps`` (one per model and block) at the blocks nearest ``depths`` of each model of
    ``blocks[model]`` blocks (:func:`linrec.experiment.profiles.depth_blocks`), with ``depth``: the nominal relative
    depth each stands for (the first of them where two depths fall on one block)."""
    nominal = {(m, round(d * (n - 1))): d for m, n in blocks.items() for d in reversed(depths)}
    kept = swaps[[(m, b) in nominal for m, b in zip(swaps["model"], swaps["block"], strict=True)]]
    return kept.assign(depth=[nominal[(m, b)] for m, b in zip(kept["model"], kept["block"], strict=True)])


NO_SWAPS = pd.DataFrame(columns=["model", "block", "depth", "relative"])
"""The swap table of a run that swapped nothing (``SWAP = False``): the trends figure leaves its panel empty."""


def fixed_depth_swaps(
    series: Profile,
    measured: Mapping[str, ProfileMeasurement],
    table: pd.DataFrame,
    swap_tokens: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Each model's blocks nearest the fixed relative depths (:data:`~linrec.experiment.profiles.SCALE_DEPTHS`)
    swapped alone for their affine maps (cached), scored on ``swap_tokens`` tokens (default: a quarter of the model's
    evaluation tokens), with each block's R²_lin from ``table``."""
    from linrec.experiment.profiles import SCALE_DEPTHS
    from linrec.experiment.swaps import affine_swaps

    def tokens(model: str) -> int:
        return swap_tokens or int(series.budget(model).eval_tokens or 0) // 4  # budget() fills eval_tokens in

    swaps = pd.concat([affine_swaps(series, [r], max_tokens=tokens(m), progress=progress, cache=True,
                                    blocks=series.swap_blocks(len(r.blocks)))
                       for m, r in measured.items()], ignore_index=True)  # fmt: skip
    swaps = at_fixed_depths(swaps, {m: len(r.blocks) for m, r in measured.items()}, SCALE_DEPTHS)
    return swaps.merge(table[["model", "block", "r2_lin"]], on=["model", "block"])
