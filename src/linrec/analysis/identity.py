"""What a depth profile is of, and what alone separates two: family (and MLP activation), seed, training.

Chapter 3 compares the depth profiles of :mod:`linrec.analysis.depth` between models that differ
in one respect; chapter 8 labels its models the same way:

* :class:`Identity` (from :func:`model_identity`) is what a profile is of: family, seed and whether
  it was trained; :func:`pair_kind` names what alone separates two profiles (one of
  :data:`PAIR_KINDS`) and :func:`distance_table` lists the RMS distance of every such pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from linrec.analysis.depth import curve_distance, curve_groups
from linrec.errors import LinrecError
from linrec.experiment.profiles import Profile
from linrec.models.packaged import PACKAGED

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ACTIVATIONS = {
    "gpt2": "GELU",
    "gpt_neox": "GELU",
    "llama": "gated SiLU",
    "mistral": "gated SiLU",
    "qwen2": "gated SiLU",
    "gemma3_text": "gated GELU",
}
"""The MLP nonlinearity of each causal family (GPT-2 and GPT-NeoX: GELU; Llama-style: SwiGLU; Gemma 3: GeGLU)."""


@dataclass(frozen=True)
class Identity:
    """What a profile is of: the model's family and seed (None: unknown), and whether it was trained.

    :func:`model_identity` gives a model's (trained); a profile at initialisation is
    ``dataclasses.replace(identity, trained=False)``.
    """

    family: str
    seed: int | None
    trained: bool = True

    @property
    def activation(self) -> str | None:
        return ACTIVATIONS.get(self.family)


def model_identity(profile: Profile, model: str, net: PreTrainedModel | None = None) -> Identity:
    """The identity of one of the profile's trained models: family and seed from the zoo entry, a packaged model's
    family from its catalogue entry, else the family from ``net.config`` (seed unknown)."""
    profile.check_model(model)
    if model in PACKAGED:
        return Identity(PACKAGED[model].family, None)
    if profile.zoo is not None:
        entry = profile.zoo.entry(model)
        return Identity(entry.family, entry.seed)
    if net is None:
        raise LinrecError(
            f"'{model}' is a hub model: pass the loaded model (net=...) so its family can be read from its config"
        )
    return Identity(str(net.config.model_type), None)


PAIR_KINDS = ("seed", "family, same activation", "family, other activation", "training")
"""What can separate two profiles (:func:`pair_kind`); the first three get " (init)" when both are untrained."""


def pair_kind(a: Identity, b: Identity) -> str | None:
    """What alone separates two profiles (one of :data:`PAIR_KINDS`), or None when no single factor does.

    ``"training"``: a model against its own initialisation. Between two trained (or two untrained)
    models: ``"seed"`` (same family), or the family when the seed is the same (in the zoo a seed
    also fixes the order of the training batches), split by whether the MLP activation is the same
    (GPT-2 and GPT-NeoX) or not; suffixed ``" (init)"`` when both are untrained.
    """
    same_family = a.family == b.family
    same_seed = a.seed == b.seed  # (two hub models, seed None, count as alike: nothing else is known)
    if a.trained != b.trained:
        return "training" if same_family and same_seed else None
    suffix = "" if a.trained else " (init)"
    if not same_family:
        if not same_seed:
            return None
        same = a.activation is not None and a.activation == b.activation
        return ("family, same activation" if same else "family, other activation") + suffix
    return None if same_seed or a.seed is None or b.seed is None else "seed" + suffix


def distance_table(
    table: pd.DataFrame, identities: Mapping[str, Identity], untrained: Sequence[str] = ("init",)
) -> pd.DataFrame:
    """RMS distance between every pair of (model, checkpoint) profiles in ``table`` that one factor separates.

    ``identities`` maps each model to its :func:`model_identity`; checkpoints named in
    ``untrained`` count as untrained. Only profiles measured on the same corpus with the same blocks are compared
    (block i of a 30-block model is not block i of an 18-block one). Columns: ``kind`` (:func:`pair_kind`),
    ``a, b`` (model @ checkpoint), ``distance``, ``mean_difference`` (mean R²_lin of a minus that of b).
    """
    unknown = sorted(set(table["model"]) - set(identities))
    if unknown:
        raise LinrecError(f"no (family, seed) for {unknown}; give identities for every model in the table")
    profiles = list(curve_groups(table, ("model", "checkpoint")))
    rows = []
    for ((ma, ca), ga), ((mb, cb), gb) in itertools.combinations(profiles, 2):
        ia = replace(identities[ma], trained=ca not in untrained)
        ib = replace(identities[mb], trained=cb not in untrained)
        kind = pair_kind(ia, ib)
        comparable = set(ga.corpus) == set(gb.corpus) and list(ga.block) == list(gb.block)
        if kind is None or not comparable:
            continue
        if kind == "training" and ia.trained:  # list the pair as (init, trained)
            (ma, ca, ga), (mb, cb, gb) = (mb, cb, gb), (ma, ca, ga)
        rows.append(
            {
                "kind": kind,
                "a": f"{ma} @ {ca}",
                "b": f"{mb} @ {cb}",
                "distance": curve_distance(ga, gb),
                "mean_difference": float(ga["r2_lin"].mean() - gb["r2_lin"].mean()),
            }
        )
    return pd.DataFrame(rows, columns=["kind", "a", "b", "distance", "mean_difference"])
