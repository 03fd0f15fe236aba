"""linrec.versions: The versions at work, read in one place: for a result's provenance, and the releases that key the
cache."""

from __future__ import annotations

import torch

from linrec.data.corpus import Corpus
from linrec.experiment import measurement as m
from linrec.experiment.profiles import get_profile
from linrec.versions import releases, versions


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
    assert releases() == {"torch": "2.5.1", "transformers": "4.57.0"}


def test_the_versions_at_work_name_the_interpreter_the_running_code_and_what_is_absent():
    import platform

    from linrec._version import __version__

    found = versions(("python", "linrec", "torch", "numpy", "no-such-library-here"))
    assert found == {"python": platform.python_version(), "linrec": __version__, "torch": torch.__version__,
                     "numpy": __import__("numpy").__version__, "no-such-library-here": "absent"}  # fmt: skip
    assert list(versions()) == ["linrec", "torch", "transformers"]
