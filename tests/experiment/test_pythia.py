"""linrec.experiment.pythia: The Pythia suite on the hub: its public training checkpoints, its sizes and their widths,
and which checkpoint is the same weights as a model's main branch. Facts of the hub, not choices: the profiles choose
among them (:mod:`linrec.experiment.profiles`)."""

from __future__ import annotations

from linrec.experiment.profiles import PROFILES, PYTHIA_DYNAMICS
from linrec.experiment.pythia import PYTHIA_REVISIONS


def test_pythia_revisions_are_the_public_schedule():
    assert len(PYTHIA_REVISIONS) == 154
    assert PYTHIA_REVISIONS[:3] == ("step0", "step1", "step2") and PYTHIA_REVISIONS[-1] == "step143000"
    assert "step512" in PYTHIA_REVISIONS and "step1024" not in PYTHIA_REVISIONS and "step1000" in PYTHIA_REVISIONS
    assert set(PYTHIA_DYNAMICS) <= set(PYTHIA_REVISIONS)
    assert PROFILES["paper"].checkpoints("EleutherAI/pythia-160m") == PYTHIA_DYNAMICS
    assert PROFILES["paper"].checkpoints("openai-community/gpt2") == ("final",)
