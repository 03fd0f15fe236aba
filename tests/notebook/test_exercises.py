"""linrec.notebook.exercises: what a student calls to check a numeric answer to an exercise, in the chapter's notebook
(e.g. on Colab)."""

from __future__ import annotations

import pytest

from linrec.errors import LinrecError
from linrec.notebook.exercises import check


def test_check_says_right_wrong_or_how_to_answer(capsys):
    assert check(None, 0.667, tol=0.03) is None
    assert "set `answer = <your number>`" in capsys.readouterr().out
    assert check(0.65, 0.667, tol=0.03) is True
    assert "Right" in capsys.readouterr().out
    assert check(0.5, 0.667, tol=0.03, hint="split the square") is False
    out = capsys.readouterr().out
    assert "below" in out and "Hint: split the square" in out and "0.667" not in out  # no spoiler
    assert check(0.7, 0.667, tol=0.0) is False and "above" in capsys.readouterr().out


@pytest.mark.parametrize(
    "answer, expected, tol, message",
    [("0.6", 0.6, 0.1, "answer must be a finite number"), (float("nan"), 0.6, 0.1, "answer must be"),
     (True, 1.0, 0.1, "answer must be"), (0.6, float("inf"), 0.1, "expected must be"), (0.6, 0.6, -1, "tol must")],
)  # fmt: skip
def test_check_rejects_what_is_not_a_number(answer, expected, tol, message):
    with pytest.raises(LinrecError, match=message):
        check(answer, expected, tol)
