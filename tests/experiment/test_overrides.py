"""linrec.experiment.overrides: Notebook parameters (and command-line options) as a profile's fields: lists made tuples,
mappings made pairs, and a probe or budget mapping applied only to the settings it names
(:func:`linrec.experiment.profiles.get_profile`)."""

from __future__ import annotations

import pytest

from linrec import LinrecError
from linrec.experiment.budgets import ProbeSettings
from linrec.experiment.profiles import get_profile


def test_overrides_arrive_as_notebook_parameters():
    p = get_profile(
        "paper",
        models=["openai-community/gpt2"],
        seeds=[3],
        probe={"rank": 8},
        revisions={"openai-community/gpt2": "607a30d"},
    )
    assert p.models == ("openai-community/gpt2",) and p.seeds == (3,)
    paper = get_profile("paper").probe  # a probe dict changes only the settings it names
    assert p.probe == ProbeSettings(8, paper.sample_rows, paper.steps, paper.lr) != paper
    assert p.revision("openai-community/gpt2") == "607a30d"
    with pytest.raises(LinrecError, match="not one of its models"):
        get_profile("paper", revisions={"gpt2-xl": "main"})
