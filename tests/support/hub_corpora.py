"""A pinned dataset revision and a cache of shaped corpora, for the hub and hub-corpus tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHA = "a" * 40


OTHER = "b" * 40


@pytest.fixture(scope="module")
def shaped_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LINREC_CACHE", str(tmp_path_factory.mktemp("shaped")))
        mp.setenv("HF_HUB_OFFLINE", "1")  # local files need no hub
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        yield Path(os.environ["LINREC_CACHE"])
