"""A perplexity budget as ``linrec replace --max-ppl-increase`` takes it: absolute (``2.5``: ΔPPL at most 2.5) or
relative to the unmodified model's perplexity (``"5%"``), read, checked and put in words.

Its own module, free of torch, so that a budget that cannot be read is refused before torch loads (a second); the
passes that spend it are :mod:`linrec.interventions.perplexity`'s.
"""

from __future__ import annotations

import math

from linrec.errors import LinrecError


def parse_budget(value: str | float) -> tuple[float, bool]:
    """(the number, whether it is relative) of a perplexity budget: ``2.5`` (ΔPPL at most 2.5) or ``"5%"`` (ΔPPL at
    most 5 % of the unmodified model's perplexity); a LinrecError unless the number is finite and above 0."""
    text = str(value).strip()
    relative = text.endswith("%")
    try:
        number = float(text.removesuffix("%"))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise LinrecError(
            f"a perplexity budget (--max-ppl-increase) must be a finite number above 0, absolute (2.5) or relative "
            f"to the model's perplexity (5%); got {value!r}"
        )
    return number, relative


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
