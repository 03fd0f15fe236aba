"""linrec.interventions.replacement.report: The report of a replacement directory for a reader: ``report.md`` and its
figure, both made from the record alone (:func:`linrec.interventions.replacement.replace.replace` builds it), so a
directory's report can always be made again."""

from __future__ import annotations

import json

import pytest

from linrec.interventions.replacement.report import report_figure, report_markdown


def test_the_report_figure_shows_each_steps_cost_and_saving(replaced):
    record = replaced[0].record
    delta, saved = report_figure(record).axes
    assert "ΔPPL" in delta.get_ylabel() and "(thousands)" in saved.get_ylabel() and "step" in delta.get_xlabel()
    assert [t.get_text() for t in saved.get_xticklabels()] == ["model", "+1", "+0"]
    heights = [bar.get_height() for bar in saved.patches]
    assert heights == pytest.approx([s["params_saved"] / 1e3 for s in record["steps"]], rel=1e-12)
    budgeted = {**record, "selection": {**record["selection"], "max_delta_ppl": 1e4}}  # far above: named, no line
    labels = [t.get_text() for t in report_figure(budgeted).axes[0].get_legend().get_texts()]
    assert "budget 1e+04 (above)" in labels and "budget" not in labels
    points = delta.lines[0].get_ydata()  # the kept steps' joint ΔPPL
    assert list(points) == pytest.approx([s["delta_ppl"] for s in record["steps"]], rel=1e-12)


def test_the_report_says_more_numbers_where_blocks_keep_their_ffn(replaced):
    """A gated or first-apart:own block keeps its FFN: the report says how many more numbers, not "-N fewer"."""
    record = replaced[0].record
    before = record["params"]["model_before"]
    grown = {**record, "params": {"model_before": before, "model_after": before + 1056}}
    grown_text, text = report_markdown(grown, "r", figure=False), report_markdown(record, "r", figure=False)
    assert "(1,056 more, +" in grown_text and "keep their FFN in use" in grown_text
    assert "fewer, " in text and "more, +" not in text


def test_the_task_scores_have_a_section_and_each_budgeted_step_its_columns(replaced):
    record = json.loads(json.dumps(replaced[0].record))
    change = {"task": "piqa", "metric": "acc", "before": 0.7, "after": 0.65, "change": -0.05,
              "change_low": -0.09, "change_high": -0.01}  # fmt: skip
    record["tasks"] = {"tasks": ["piqa"], "max_accuracy_drop": "0.1", "lowest_allowed": {"piqa": 0.6},
                       "base": {"harness": {"lm_eval": "0.4.13"}}, "replaced": {}, "changes": [change]}  # fmt: skip
    for step in record["steps"]:
        step["piqa acc"] = 0.65
    report = report_markdown(record, "out", figure=False)
    assert "## Task scores" in report and "lm-evaluation-harness 0.4.13" in report
    assert "- piqa (acc): 0.7 -> 0.65 (change -0.05, 95 % interval [-0.09, -0.01])" in report
    assert "(--max-accuracy-drop 0.1: piqa 0.6)" in report
    header = next(line for line in report.splitlines() if line.startswith("|") and "delta_ppl" in line)
    cells = [cell.strip() for cell in header.split("|")]
    assert cells.index("piqa acc") == cells.index("kept") - 1  # the step's score, before whether it was kept
