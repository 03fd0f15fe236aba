"""Chapter parameters checked where they are set, so a bad value fails in one line, not cells later.

A chapter's first code cell after its ``parameters`` cell checks them through
:func:`linrec.notebook.chapter.begin` (which also starts the chapter), for example::

    ch = chapter.begin("01_method", globals(), positive_int=["ROWS", "WIDTH"], folds=["FOLDS"],
                       positive_int_or_none=["MAX_ROWS"], fraction=["MIN_R2"])

with the rules of :func:`check_params` (``SEED`` is always checked as an integer), and ``ROWS = -5`` stops
there with ``parameter ROWS must be a positive integer; got -5`` instead of a tensor-shape error later (or
argparse's usage text, when the value is handed to the CLI). Relations between parameters are checked there
too: ``multiple_of=[("WIDTH", "HEADS")]`` refuses a width its heads cannot divide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real

from linrec.errors import LinrecError


def _integer(v: object, low: int | None = None) -> bool:
    """An integer (not a bool), at least ``low`` when given."""
    return isinstance(v, Integral) and not isinstance(v, bool) and (low is None or int(v) >= low)


def _number(v: object, low: float = -math.inf, high: float = math.inf, strict: bool = False) -> bool:
    """A finite real number (not a bool) in [``low``, ``high``] (above ``low`` when ``strict``)."""
    if not isinstance(v, Real) or isinstance(v, bool) or not math.isfinite(v):
        return False
    x = float(v)
    return (x > low if strict else x >= low) and x <= high


def _name(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _ppl_budget(v: object) -> bool:
    """A perplexity budget as ``linrec replace --max-ppl-increase`` takes it (2.5, or "5%")."""
    from linrec.interventions.perplexity import parse_budget

    if isinstance(v, bool) or not isinstance(v, (str, Real)):
        return False
    try:
        parse_budget(v if isinstance(v, str) else float(v))
    except LinrecError:
        return False
    return True


RULES: dict[str, tuple[Callable[[object], bool], str]] = {
    "integer": (_integer, "an integer"),
    "positive_int": (lambda v: _integer(v, 1), "a positive integer"),
    "positive_int_or_none": (lambda v: v is None or _integer(v, 1), "a positive integer or None"),
    "folds": (lambda v: _integer(v, 2), "an integer of at least 2"),
    "fraction": (lambda v: _number(v, 0, 1), "a number between 0 and 1"),
    "positive_number": (lambda v: _number(v, 0, strict=True), "a positive number"),
    "ppl_budget": (_ppl_budget, "a perplexity budget above 0, absolute like 2.5 or relative like '5%'"),
    "flag": (lambda v: isinstance(v, bool), "True or False"),
    "flag_or_none": (lambda v: v is None or isinstance(v, bool), "True, False or None"),
    "name_or_none": (lambda v: v is None or _name(v), "a non-empty string or None"),
    "names_or_none": (
        lambda v: v is None or (isinstance(v, (list, tuple)) and bool(v) and all(map(_name, v))),
        "a non-empty list of names or None",
    ),
    "names_empty_or_none": (
        lambda v: v is None or (isinstance(v, (list, tuple)) and all(map(_name, v))),
        "a list of names, empty for none, or None",
    ),
    "seeds": (
        lambda v: isinstance(v, (list, tuple)) and bool(v) and all(_integer(s, 0) for s in v),
        "a non-empty list of non-negative integers",
    ),
    "indices_or_none": (
        lambda v: v is None or (isinstance(v, (list, tuple)) and bool(v) and all(_integer(s, 0) for s in v)),
        "a non-empty list of non-negative integers or None",
    ),
    "shares": (
        lambda v: isinstance(v, (list, tuple)) and bool(v) and all(_number(s, 0, 1, strict=True) for s in v),
        "a non-empty list of numbers above 0 and at most 1",
    ),
}
"""rule -> (test, what a passing value is)."""


def require(name: str, value: object, rule: str, hint: str = "") -> None:
    """Raise a one-line :class:`LinrecError` unless ``value`` passes ``rule`` (a key of :data:`RULES`)."""
    if rule not in RULES:
        raise LinrecError(f"unknown parameter rule '{rule}'; choose one of {', '.join(RULES)}")
    test, meaning = RULES[rule]
    if not test(value):
        raise LinrecError(f"parameter {name} must be {meaning}; got {value!r}" + (f" ({hint})" if hint else ""))


RELATIONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "multiple_of": (lambda a, b: a % b == 0, "a multiple of"),
    "at_least": (lambda a, b: a >= b, "at least"),
}
"""relation -> (test of (value, other value), what a passing value is): how one parameter bounds another, e.g. a
width that its attention heads must divide."""


def check_params(
    values: Mapping[str, object],
    *,
    multiple_of: Iterable[tuple[str, str]] = (),
    at_least: Iterable[tuple[str, str]] = (),
    **rules: Iterable[str],
) -> None:
    """Check each named parameter in ``values`` (a chapter's ``globals()``) against its rule's keyword, then each
    pair ``(A, B)`` of ``multiple_of`` (A a multiple of B) and ``at_least`` (A >= B), so that a combination the
    chapter cannot run with fails here too, not cells later; a pair with a None side (the profile's value) passes."""
    for rule, names in rules.items():
        for name in names:
            if name not in values:
                raise LinrecError(f"parameter {name} is not defined; set it in the parameters cell")
            require(name, values[name], rule)
    for relation, pairs in (("multiple_of", multiple_of), ("at_least", at_least)):
        test, meaning = RELATIONS[relation]
        for name, other in pairs:
            missing = [n for n in (name, other) if n not in values]
            if missing:
                raise LinrecError(f"parameter {missing[0]} is not defined; set it in the parameters cell")
            a, b = values[name], values[other]
            if a is None or b is None:
                continue
            if not (isinstance(a, Real) and isinstance(b, Real)):
                raise LinrecError(f"parameters {name} and {other} must be numbers; got {a!r} and {b!r}")
            if not test(float(a), float(b)):
                raise LinrecError(f"parameter {name} must be {meaning} {other} = {b!r}; got {a!r}")
