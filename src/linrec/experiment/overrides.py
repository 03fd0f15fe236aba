"""Notebook parameters (and command-line options) as a profile's fields: lists made tuples, mappings made pairs,
and a probe or budget mapping applied only to the settings it names (:func:`linrec.experiment.profiles.get_profile`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from linrec.errors import LinrecError
from linrec.experiment.budgets import Budget, ProbeSettings


def changed_fields(
    probe: ProbeSettings, budgets: tuple[tuple[str, Budget], ...], overrides: Mapping[str, object]
) -> dict[str, Any]:
    """``overrides`` as the new values of a profile's fields, where ``probe`` and ``budgets`` are the profile's
    own: a probe mapping changes only the settings it names, and a budgets mapping ({model: {field: value}}) only
    the fields it names. Each value is of its field's type, or not: the profile's validation says which."""
    changed: dict[str, Any] = {k: _coerce(k, v) for k, v in overrides.items()}
    if isinstance(changed.get("probe"), dict):
        changed["probe"] = dataclasses.replace(probe, **changed["probe"])
    if isinstance(changed.get("budgets"), dict):
        changed["budgets"] = _changed_budgets(budgets, changed["budgets"])
    return changed


def _coerce(name: str, value: object) -> object:
    """Notebook parameters arrive as lists and dicts: make them the field's tuple / ProbeSettings form."""
    if name in ("models", "corpora", "seeds") and isinstance(value, list):
        return tuple(value)
    if name == "budgets" and isinstance(value, dict):
        return value  # changed_fields applies each model's fields to that model's budget
    if name in ("revisions", "training_checkpoints") and isinstance(value, dict):
        return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in value.items())
    if name == "probe" and isinstance(value, dict):
        fields = [f.name for f in dataclasses.fields(ProbeSettings)]
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise LinrecError(f"unknown probe setting {unknown}; valid: {', '.join(fields)}")
        return value  # changed_fields applies it to the profile's own settings
    return value


def _changed_budgets(
    budgets: tuple[tuple[str, Budget], ...], changes: dict[str, Any]
) -> tuple[tuple[str, Budget], ...]:
    """``budgets`` with each model's named fields changed (a model without a budget gets one)."""
    changed = dict(budgets)
    fields = [f.name for f in dataclasses.fields(Budget)]
    for model, change in changes.items():
        if not isinstance(change, dict) or set(change) - set(fields):
            raise LinrecError(
                f"budgets: '{model}' needs a mapping of budget fields ({', '.join(fields)}); got {change!r}"
            )
        changed[model] = dataclasses.replace(changed.get(model, Budget()), **change)
    return tuple(changed.items())
