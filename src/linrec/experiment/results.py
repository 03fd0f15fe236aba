"""Cached result tables: any table computed from cached measurements, computed once and read afterwards.

:func:`cached_frames` keys tables by a description of everything that determines them (for a measurement,
:func:`measurement_identity`: its provenance), so a chapter rerun (a warm build, a Colab session resumed)
neither trains its probes and baselines nor scores its swaps again. Timings inside such tables are those of
the run that computed them. Only measurements from the cache carry provenance that identifies their rows;
a measurement assembled by hand should not be cached this way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from linrec.cache import build_entry, built_entry, cache_dir, cache_key
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.stored import read_frame, write_frame

FORMAT = 4  # 2: probe tables carry the captured share and convergence columns; 3: true medians, rounding clause;
# 4: swap tables carry the ΔPPL bootstrap interval (delta_ppl_low, delta_ppl_high)


def measurement_identity(m: ProfileMeasurement) -> dict[str, object]:
    """What identifies a measurement's data in a result's cache key: its provenance without the capture time."""
    identity = asdict(m.info)
    identity.pop("capture_s")
    return identity


def cached_frames(
    kind: str, content: Mapping[str, object], compute: Callable[[], dict[str, pd.DataFrame]]
) -> dict[str, pd.DataFrame]:
    """The tables ``compute`` returns ({name: table}), computed once per ``content`` (a JSON-able description of
    everything that determines them, e.g. :func:`measurement_identity` and a configuration) and cached."""
    path = cache_dir() / "sweeps" / f"{kind}-{cache_key({'format': FORMAT, 'kind': kind, **content})}"

    def build(tmp: Path) -> None:
        for name, frame in compute().items():
            write_frame(frame, tmp / f"{name}.json")

    build_entry(path, build)
    return {p.stem: read_frame(p) for p in sorted(built_entry(path).glob("[!.]*.json"))}  # not the cache's marker
