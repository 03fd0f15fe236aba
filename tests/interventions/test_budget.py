"""linrec.interventions.budget: A perplexity budget as ``linrec replace --max-ppl-increase`` takes it, read, checked
and put in words."""

from __future__ import annotations

import pytest

from linrec.errors import LinrecError
from linrec.interventions.budget import budget_drop, budget_ppl, budget_words, drop_words, parse_budget, parse_drop
from support.cli import heavy_imports


def test_a_budget_is_absolute_or_a_share_of_the_base_perplexity_and_says_which():
    assert budget_ppl("5%", 200.0) == pytest.approx(10.0) and budget_ppl(2.5, 200.0) == 2.5
    assert parse_budget(" 5% ") == parse_budget("5 %") == (5.0, True) and parse_budget("0.5") == (0.5, False)
    assert budget_words("5 %").startswith("ΔPPL at most 5% of the model's own perplexity")
    assert budget_words(2.5).startswith("ΔPPL at most 2.5, in perplexity")


@pytest.mark.parametrize("budget", [0, -1, "0%", "nan", float("nan"), "inf", "x%", "", "5%%", "5 percent"])
def test_a_budget_must_be_a_finite_number_above_zero(budget):
    with pytest.raises(LinrecError, match="finite number above 0"):
        parse_budget(budget)


def test_budgets_are_read_without_torch():
    assert heavy_imports("linrec.interventions.budget") == []


def test_a_task_budget_is_a_fall_in_the_score_absolute_or_a_share_of_the_models_own():
    assert budget_drop("5%", 0.6) == pytest.approx(0.03) and budget_drop(0.02, 0.6) == 0.02
    assert parse_drop("2%") == (2.0, True) and drop_words("0.02").startswith("each task's score at most 0.02 below")
    assert drop_words("5%").startswith("each task's score at most 5% of the model's own below it")
    with pytest.raises(LinrecError, match=r"\(--max-accuracy-drop\) must be a finite number above 0, absolute"):
        parse_drop("-0.1")
