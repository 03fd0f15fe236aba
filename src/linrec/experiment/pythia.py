"""The Pythia suite on the hub: its public training checkpoints, its sizes and their widths, and which checkpoint
is the same weights as a model's main branch. Facts of the hub, not choices: the profiles choose among them
(:mod:`linrec.experiment.profiles`).
"""

from __future__ import annotations

PYTHIA_REVISIONS: tuple[str, ...] = (
    ("step0",) + tuple(f"step{2**i}" for i in range(10)) + tuple(f"step{1000 * k}" for k in range(1, 144))
)
"""The 154 public checkpoints of every Pythia model: step0, step1, 2, 4, ..., 512, then every 1000 to step143000
(= main)."""

PYTHIA_WIDTHS: dict[str, int] = {
    "EleutherAI/pythia-70m": 512,
    "EleutherAI/pythia-160m": 768,
    "EleutherAI/pythia-410m": 1024,
    "EleutherAI/pythia-1b": 2048,
    "EleutherAI/pythia-1.4b": 2048,
    "EleutherAI/pythia-2.8b": 2560,
    "EleutherAI/pythia-6.9b": 4096,
    "EleutherAI/pythia-12b": 5120,
}
"""The Pythia suite (one training recipe, one corpus, eight sizes) and each model's width (its config's hidden_size)."""

SAME_AS_MAIN: dict[str, str] = {"EleutherAI/pythia-160m": "step143000"}
"""Hub model -> the training-checkpoint revision whose weights are those of its main branch (Pythia's last step),
so that :meth:`~linrec.experiment.profiles.Profile.canonical_checkpoint` names the two alike."""
