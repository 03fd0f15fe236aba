"""The exception type users see, so a CLI or notebook can report it without a traceback, and the warning
category of conditions that are not errors but that a user should act on."""

from __future__ import annotations

import math
import numbers


class LinrecError(ValueError):
    """Bad input or an unmet precondition, with a message that says what to do instead."""


class LinrecWarning(UserWarning):
    """A run that will work but not as intended (e.g. far slower), with a message that says how to fix it."""


def finite(
    name: str, value: object, *, low: float = -math.inf, low_open: bool = False, high: float = math.inf
) -> float:
    """``value`` as a float, or a :class:`LinrecError` naming ``name`` unless it is a real number, finite and in
    range (``low`` < or <= it, as ``low_open`` says; below ``high``). NaN compares false with everything, so an
    unchecked NaN setting passes ``<``/``>`` tests and silently changes what is computed."""
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number) or number < low or (low_open and number == low) or number >= high:
        bound = f"{'above' if low_open else 'at least'} {low:g}" if low > -math.inf else ""
        upper = f"below {high:g}" if high < math.inf else ""
        where = " and ".join(b for b in (bound, upper) if b)
        raise LinrecError(f"{name} must be a finite number{' ' + where if where else ''}; got {value!r}")
    return number


def whole(name: str, value: object, low: int = 1) -> int:
    """``value``, or a :class:`LinrecError` naming ``name`` unless it is an integer (not a bool) of at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise LinrecError(f"{name} must be an integer of at least {low}; got {value!r}")
    return value
