"""Shared by the task tests: a datasets cache of each test's own, so the tasks' data never reach the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path, monkeypatch) -> Path:
    """The datasets the tests build go to a cache of each test's own, which starts empty, never the user's."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
    return tmp_path / "datasets-cache"
