"""linrec.experiment.releases: The releases of the libraries whose kernels and model code compute the activations, as
they key the cache."""

from __future__ import annotations

import torch

from linrec.data.corpus import Corpus
from linrec.experiment import measurement as m
from linrec.experiment.profiles import get_profile
from linrec.experiment.releases import library_versions


def test_the_cache_key_holds_the_torch_and_transformers_releases(tmp_path, monkeypatch):
    """Another release of torch or transformers (kernels, model code) gets another entry; a build tag does not."""
    import transformers

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    text, paper = Corpus("toy", "prose", "fit", "eval", "test"), get_profile("paper")

    def key(torch_version: str, transformers_version: str) -> str:
        monkeypatch.setattr(torch, "__version__", torch_version)
        monkeypatch.setattr(transformers, "__version__", transformers_version)
        return m.entry_path(paper, "openai-community/gpt2", "final", text, "a" * 40).name

    assert key("2.5.1+cu124", "4.57.0") == key("2.5.1+cpu", "4.57.0")
    assert len({key("2.5.1", "4.57.0"), key("2.5.2", "4.57.0"), key("2.5.1", "4.57.1")}) == 3
    key("2.5.1+cu124", "4.57.0.dev0")
    assert library_versions() == {"torch": "2.5.1", "transformers": "4.57.0"}
