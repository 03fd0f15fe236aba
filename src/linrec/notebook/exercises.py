"""What a student calls to check a numeric answer to an exercise, in the chapter's notebook (e.g. on Colab).

A check cell sets ``answer`` and calls :func:`check` with the value the notebook itself computed, so the
expected number is this run's, never a number typed into the text: it changes with the profile and the
seed, as the chapter's own numbers do.
"""

from __future__ import annotations

import math
from numbers import Real

from linrec.errors import LinrecError


def check(answer: object, expected: float, tol: float, hint: str = "") -> bool | None:
    """Print whether ``answer`` is within ``tol`` of ``expected`` (absolute difference); return that verdict.

    ``answer`` None (the check cell as the notebook ships it, run by "Run all") prints how to answer and
    returns None. A wrong answer prints the ``hint`` and how far off it is, not the expected value.
    """
    if isinstance(tol, bool) or not isinstance(tol, Real) or not tol >= 0:
        raise LinrecError(f"tol must be a number >= 0; got {tol!r}")
    if isinstance(expected, bool) or not isinstance(expected, Real) or not math.isfinite(expected):
        raise LinrecError(f"expected must be a finite number; got {expected!r}")
    if answer is None:
        print("No answer yet: set `answer = <your number>` in this cell and run it again.")
        return None
    if isinstance(answer, bool) or not isinstance(answer, Real) or not math.isfinite(answer):
        raise LinrecError(f"answer must be a finite number (e.g. answer = 0.67); got {answer!r}")
    off = float(answer) - float(expected)
    if abs(off) <= tol:
        print(f"Right: {float(answer):g} is within {tol:g} of this run's value, {float(expected):g}.")
        return True
    print(
        f"Not yet: {float(answer):g} is {'above' if off > 0 else 'below'} this run's value by more than {tol:g}."
        + (f" Hint: {hint}" if hint else "")
    )
    return False
