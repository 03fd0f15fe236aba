"""Chapter 9's figure: each block's R²_lin coloured by whether it passes the replacement thresholds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb

from linrec.errors import LinrecError
from linrec.plots import your_model as figures


def test_candidates_figure_colours_each_block_by_its_verdict():
    table = pd.DataFrame({"block": [2, 0, 1], "r2_lin": [0.99, 0.97, -0.2], "candidate": [True, True, False]})
    ax = figures.candidates_figure(table, min_r2=0.95, max_std=0.02, model="m").axes[0]
    bars = [p for p in ax.patches if p.get_height() != 0 and p.get_width() > 0]
    by_block = {round(p.get_x() + p.get_width() / 2): p for p in bars}
    assert {b: by_block[b].get_height() for b in by_block} == pytest.approx({0: 0.97, 1: -0.2, 2: 0.99})
    passed, failed = to_rgb(by_block[0].get_facecolor()), to_rgb(by_block[1].get_facecolor())
    assert to_rgb(by_block[2].get_facecolor()) == passed != failed
    assert passed[1] > passed[0] and failed[0] > failed[1]  # green passes, red fails
    assert any(np.allclose(line.get_ydata(), 0.95) for line in ax.get_lines())
    assert ax.get_ylim()[0] == pytest.approx(-0.25) and ax.get_title().startswith("m: ")
    with pytest.raises(LinrecError, match="candidate"):
        figures.candidates_figure(table.drop(columns="candidate"), 0.95, 0.02, "m")
