"""Figures of the method chapter: the data flow, planted blocks with known answers, and the GELU map.

Every function takes the numbers the chapter computed (tables and arrays, never a model) and
returns a matplotlib Figure with labelled axes; R²_lin is a fraction of output variance, so it
has no unit.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from linrec.errors import LinrecError
from linrec.plots._columns import require
from linrec.plots._layout import SMALL, WIDTH
from linrec.plots.depth import curves_figure

R2_LABEL = "held-out R²_lin"


def draw_pipeline() -> Figure:
    """Boxes and arrows: corpus -> forward pass with hooks -> moments -> closed-form fit -> R²."""
    fig, ax = plt.subplots(figsize=(WIDTH, 4.6))
    steps = [
        (0.08, 0.74, "text corpus\n(the profile's)"),
        (0.36, 0.74, "token batches,\nseq_len tokens each;\nfold = f(sequence,\nseed)"),
        (0.66, 0.74, "frozen LM, one\nforward pass; hooks\nat every FFN block:\nX in, Y out"),
        (0.92, 0.74, "rows (x, y),\none per token,\nnever stored"),
        (0.92, 0.18, "float64 moments\nper fold: n, x̄, ȳ,\nCxx, Cxy, Cyy;\nO(d²) memory"),
        (0.63, 0.18, "closed-form fit\non k−1 folds:\nW = Cxx⁺ Cxy\nb = ȳ − x̄W"),
        (0.34, 0.18, "held-out R²_lin\non the k-th fold,\nfrom its moments"),
        (0.07, 0.18, "mean ± std\nover k folds"),
    ]
    boxes = [
        ax.text(
            x,
            y,
            text,
            ha="center",
            va="center",
            fontsize=SMALL,
            bbox=dict(boxstyle="round,pad=0.4", facecolor="#eef3fb", edgecolor="#4c72b0"),
        )
        for x, y, text in steps
    ]
    fig.canvas.draw()  # box sizes are known only after a draw
    for (x0, y0, _), (x1, y1, _), a, b in zip(steps, steps[1:], boxes, boxes[1:]):
        if y0 != y1:
            start, end = (0.5, 0.0), (0.5, 1.0)  # straight down
        else:
            start, end = ((1.0, 0.5), (0.0, 0.5)) if x1 > x0 else ((0.0, 0.5), (1.0, 0.5))
        ax.annotate(
            "",
            xy=end,
            xycoords=b,
            xytext=start,
            textcoords=a,
            arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.3, shrinkA=4, shrinkB=4),
        )
    ax.text(
        0.45,
        0.47,
        "below the line only moments exist:\nmemory does not grow with the token count",
        ha="center",
        fontsize=SMALL,
        style="italic",
        color="#555555",
    )
    ax.axhline(0.43, xmin=0.02, xmax=0.98, color="#bbbbbb", lw=0.8, ls="--")
    ax.set(xlim=(-0.05, 1.02), ylim=(0.0, 0.95))
    ax.axis("off")
    ax.set_title("Distillation as measurement:\nfrom a frozen model to one number per block")
    return fig


def mixture_figure(measured: pd.DataFrame, exact: pd.DataFrame, folds: int, rows: int) -> Figure:
    """Planted mixtures: measured R²_lin against the weight α of the even part, over the exact curve.

    ``measured`` has one row per α (``alpha``, ``r2_lin``, ``r2_lin_std``: k-fold mean and std);
    ``exact`` holds the population value (``alpha``, ``r2_lin``) on a fine grid of α.
    """
    require(measured, ["alpha", "r2_lin", "r2_lin_std"], "the mixture figure's measured points")
    require(exact, ["alpha", "r2_lin"], "the mixture figure's exact curve")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.4))
    ax.plot(exact["alpha"], exact["r2_lin"], color="0.3", lw=1.5, label="exact population value")
    ax.errorbar(
        measured["alpha"],
        measured["r2_lin"],
        yerr=measured["r2_lin_std"],
        fmt="o",
        capsize=3,
        label=f"measured ({folds}-fold mean ± std, {rows:,} rows)",
    )
    ax.set(
        xlabel="α, weight of the even (quadratic) part",
        ylabel=R2_LABEL,
        title="Planted blocks: affine at α = 0, purely even at α = 1",
    )
    ax.legend(loc="lower left")
    fig.tight_layout()
    return fig


def gelu_map_figure(scales: np.ndarray, offsets: np.ndarray, grid: np.ndarray, points: pd.DataFrame) -> Figure:
    """The exact R²_lin of a GELU block over pre-activation scale (log x) and offset (y), with the
    (``scale``, ``offset``) pairs of ``points`` marked; ``grid[i, j]`` belongs to ``offsets[i]``, ``scales[j]``."""
    require(points, ["scale", "offset"], "the GELU map's marked points")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.8))
    mesh = ax.pcolormesh(
        np.asarray(scales), np.asarray(offsets), np.asarray(grid), cmap="viridis", vmin=0, vmax=1, shading="auto"
    )
    ax.scatter(
        points["scale"], points["offset"], color="white", edgecolor="black", s=40, label="measured (next figure)"
    )
    ax.set(
        xscale="log",
        xlabel="pre-activation scale s",
        ylabel="pre-activation offset β",
        title="Exact R²_lin of a GELU block with N(0, 1) inputs",
    )
    ax.legend(loc="lower right")
    fig.colorbar(mesh, ax=ax, label="R²_lin")
    return fig


def gelu_check_figure(points: pd.DataFrame, rows: int) -> Figure:
    """Measured held-out R²_lin of GELU blocks against the exact value, coloured by offset, with the diagonal."""
    require(points, ["exact", "measured", "offset"], "the GELU check")
    fig, ax = plt.subplots(figsize=(6, 5.2))
    sns.scatterplot(data=points, x="exact", y="measured", hue="offset", palette="deep", s=70, ax=ax)
    ax.plot([0, 1], [0, 1], color="0.4", lw=1, ls="--", label="measured = exact")
    ax.set(
        xlabel="exact R²_lin (quadrature)",
        ylabel=f"measured {R2_LABEL} ({rows:,} rows)",
        title="linrec recovers the exact value",
        xlim=(-0.05, 1.05),
        ylim=(-0.05, 1.05),
    )
    ax.legend(title="offset β", loc="upper left")
    return fig


def untrained_figure(
    table: pd.DataFrame, label: str, title: str = "R²_lin per block at random initialisation"
) -> Figure:
    """The depth profile of one untrained model (a :func:`linrec.core.measure` table), labelled ``label``,
    on the full scale 0 to 1: at its own scale a spread of a few thousandths would look like a swing."""
    require(table, ["block", "r2_lin", "r2_lin_std"], "the untrained profile")
    fig = curves_figure(table.assign(model=label), title=title)
    fig.axes[0].set_ylim(0, 1.05)
    return fig


def gelu_map_table(scales: np.ndarray, offsets: np.ndarray, grid: np.ndarray) -> pd.DataFrame:
    """The map :func:`gelu_map_figure` draws, as a tidy table: one row per (``scale``, ``offset``) with its
    ``exact`` R²_lin (``grid[i, j]`` belongs to ``offsets[i]``, ``scales[j]``)."""
    scale, offset = np.meshgrid(np.asarray(scales), np.asarray(offsets))
    if scale.shape != np.shape(grid):
        raise LinrecError(f"grid {np.shape(grid)} must be (len(offsets), len(scales)) = {scale.shape}")
    return pd.DataFrame({"scale": scale.ravel(), "offset": offset.ravel(), "exact": np.asarray(grid).ravel()})
