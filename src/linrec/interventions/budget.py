"""A perplexity budget as ``linrec replace --max-ppl-increase`` takes it, absolute (``2.5``: ΔPPL at most 2.5) or
relative to the unmodified model's perplexity (``"5%"``), and a task budget as ``--max-accuracy-drop`` takes it
(``0.02``, or ``"5%"`` of the model's own score), read, checked and put in words.

Its own module, free of torch, so that a budget that cannot be read is refused before torch loads (a second); the
passes that spend it are :mod:`linrec.interventions.perplexity`'s.
"""

from __future__ import annotations

import math

from linrec.errors import LinrecError


def _amount(value: str | float, what: str, example: str, of: str) -> tuple[float, bool]:
    """(the number, whether it ends in ``%``) of ``what`` (a budget and its option); a LinrecError unless the number
    is finite and above 0 (``example``: an absolute budget, ``of``: what a relative one is a share of)."""
    text = str(value).strip()
    relative = text.endswith("%")
    try:
        number = float(text.removesuffix("%"))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise LinrecError(
            f"{what} must be a finite number above 0, absolute ({example}) or relative to the model's {of} (5%); "
            f"got {value!r}"
        )
    return number, relative


def parse_budget(value: str | float) -> tuple[float, bool]:
    """(the number, whether it is relative) of a perplexity budget: ``2.5`` (ΔPPL at most 2.5) or ``"5%"`` (ΔPPL at
    most 5 % of the unmodified model's perplexity); a LinrecError unless the number is finite and above 0."""
    return _amount(value, "a perplexity budget (--max-ppl-increase)", "2.5", "perplexity")


def parse_drop(value: str | float) -> tuple[float, bool]:
    """(the number, whether it is relative) of a task budget (``--max-accuracy-drop``): ``0.02`` (each task's score,
    accuracy or pass@1, at most 0.02 below the unmodified model's: two points) or ``"5%"`` (at most 5 % of its own
    score below it)."""
    return _amount(value, "a task budget (--max-accuracy-drop)", "0.02", "own score")


def budget_drop(max_drop: str | float, base_score: float) -> float:
    """The largest fall of a task score a budget (:func:`parse_drop`) allows a model that scores ``base_score``."""
    number, relative = parse_drop(max_drop)
    return number / 100 * base_score if relative else number


def drop_words(value: str | float) -> str:
    """What a task budget (:func:`parse_drop`) allows, in words, before the model's scores are known."""
    number, relative = parse_drop(value)
    if relative:
        return f"each task's score at most {number:g}% of the model's own below it (measured first)"
    return f"each task's score at most {number:g} below the model's own (accuracy or pass@1, 0 to 1)"


def budget_ppl(max_increase: str | float, base_ppl: float) -> float:
    """The largest ΔPPL a budget (:func:`parse_budget`) allows a model of perplexity ``base_ppl``."""
    number, relative = parse_budget(max_increase)
    return number / 100 * base_ppl if relative else number


def budget_words(value: str | float) -> str:
    """What a budget (:func:`parse_budget`) allows, in words, before the base perplexity is known."""
    number, relative = parse_budget(value)
    if relative:
        return f"ΔPPL at most {number:g}% of the model's own perplexity on the held-out text (measured first)"
    return f"ΔPPL at most {number:g}, in perplexity, over the model's own on the held-out text"
