"""The practitioner's figure (chapter 9): which blocks pass the replacement thresholds."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from linrec.plots._columns import require
from linrec.plots._layout import WIDTH, legend_below

PASS, FAIL = "#55a868", "#c44e52"


def candidates_figure(candidates: pd.DataFrame, min_r2: float, max_std: float, model: str) -> Figure:
    """R²_lin per block as bars, green where the block is a candidate, with the ``min_r2`` threshold dashed.

    ``candidates`` is the table of :func:`linrec.analysis.your_model.replacement_candidates`; the y axis
    reaches below 0 when a block scores below it.
    """
    require(candidates, ["block", "r2_lin", "candidate"], "the candidates figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.4))
    sns.barplot(
        data=candidates.sort_values("block"),
        x="block",
        y="r2_lin",
        hue="candidate",
        palette={True: PASS, False: FAIL},
        ax=ax,
    )
    ax.axhline(min_r2, color="0.4", ls="--", lw=1)
    ax.set(
        xlabel="FFN block (depth)",
        ylabel="held-out R²_lin",
        ylim=(min(0, candidates.r2_lin.min() - 0.05), 1.02),
        title=f"{model}: blocks that pass R²_lin ≥ {min_r2} with fold std ≤ {max_std}",
    )
    legend_below(ax, title="candidate")
    return fig
