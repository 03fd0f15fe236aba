"""The walks read: each step's perplexity budget beside each task's change, where the two part ways, the rank
correlation over the steps, and each verdict by its rule, on planted tables with a known answer."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.analysis import tasks
from linrec.errors import LinrecError
from linrec.report.claims import Verdict

BASE = 20.0
"""The planted models' perplexity: a budget of 1.0 (5 %)."""


def walk(model: str, deltas: dict[str, list[float]]) -> pd.DataFrame:
    """A study's ``walk``: step 0 and steps 1, 2, 4, ... of each kind with the given joint ΔPPL (± 0.1)."""
    rows = []
    for kind, values in deltas.items():
        mechanism = {"swapped": "affine", "removed": "layer"}[kind]
        for k, delta in zip([0, 1, 2, 4, 8], [0.0, *values], strict=False):
            rows.append({"model": model, "mechanism": mechanism, "kind": kind, "step": k,
                         "blocks": ", ".join(str(b) for b in range(k)), "numbers_saved": 10 * k, "base_ppl": BASE,
                         "ppl": BASE + delta, "delta_ppl": delta, "delta_ppl_low": delta - 0.1,
                         "delta_ppl_high": delta + 0.1})  # fmt: skip
    return pd.DataFrame(rows)


def changes(model: str, moved: dict[str, list[tuple[float, float]]], task: str = "linrec_prose") -> pd.DataFrame:
    """A study's ``changes`` of one task: each step's (change, half-width of its interval), from 0.6."""
    rows = []
    for kind, values in moved.items():
        mechanism = {"swapped": "affine", "removed": "layer"}[kind]
        for k, (change, half) in zip([1, 2, 4, 8], values, strict=False):
            rows.append({"model": model, "mechanism": mechanism, "kind": kind, "step": k, "task": task,
                         "metric": "acc", "before": 0.6, "after": 0.6 + change, "change": change,
                         "change_low": change - half, "change_high": change + half})  # fmt: skip
    return pd.DataFrame(rows)


def scores(model: str) -> pd.DataFrame:
    return pd.DataFrame([
        {"model": model, "task": "linrec_prose", "metric": "acc", "value": 0.6, "stderr": 0.04, "low": 0.52,
         "high": 0.68, "n": 150},
        {"model": model, "task": "humaneval", "metric": "pass@1", "value": 0.0, "stderr": 0.0, "low": 0.0,
         "high": 0.0, "n": 20},
    ])  # fmt: skip


def test_a_change_is_read_from_its_interval_and_parts_ways_only_across_the_budget():
    assert tasks.task_reading(-0.2, -0.01) == tasks.LOST
    assert tasks.task_reading(-0.019, 0.3) == tasks.KEPT  # above −0.02: within --max-accuracy-drop 0.02
    assert tasks.task_reading(-0.021, 0.3) == tasks.UNRESOLVED
    assert tasks.parting(True, tasks.LOST) == "the task loses what perplexity keeps"
    assert tasks.parting(False, tasks.KEPT) == "the task keeps what perplexity rejects"
    for within, reading in ((True, tasks.KEPT), (False, tasks.LOST), (True, tasks.UNRESOLVED)):
        assert tasks.parting(within, reading) == ""


def test_the_steps_table_joins_each_step_to_each_task_and_reads_the_budget():
    w = walk("m", {"swapped": [0.1, 0.5, 2.0], "removed": [0.9, 3.0, 9.0]})
    c = changes("m", {"swapped": [(0.0, 0.1), (-0.15, 0.1), (-0.05, 0.1)],
                      "removed": [(0.01, 0.02), (0.0, 0.01), (-0.3, 0.1)]})  # fmt: skip
    table = tasks.steps_table([w], [c]).set_index(["kind", "step"])
    assert len(table) == 6 and (table.task == "linrec_prose").all()
    assert table.within.to_dict() == {("swapped", 1): True, ("swapped", 2): True, ("swapped", 4): False,
                                      ("removed", 1): True, ("removed", 2): False, ("removed", 4): False}  # fmt: skip
    assert table.relative["removed", 4] == pytest.approx(9.0 / BASE)
    assert table.reading["swapped", 2] == tasks.LOST and table.parting["swapped", 2].startswith("the task loses")
    assert table.reading["removed", 2] == tasks.KEPT and table.parting["removed", 2].startswith("the task keeps")
    assert table.parting["removed", 4] == "" and table.parting["swapped", 1] == ""
    bare = tasks.steps_table([w], [])
    assert len(bare) == 6 and bare.task.isna().all() and (bare.reading == "").all()
    with pytest.raises(LinrecError, match="lacks columns"):
        tasks.steps_table([w.drop(columns="base_ppl")], [c])


def test_the_deepest_step_within_the_budget_of_each_kind():
    w = walk("m", {"swapped": [0.1, 0.5, 0.9, 1.5], "removed": [1.2, 3.0]})
    deepest = tasks.deepest_within([w]).set_index("kind")
    assert deepest.step.to_dict() == {"swapped": 4, "removed": 0}  # removing even one block costs too much
    assert deepest.over["swapped"] == 8 and deepest.over["removed"] == 1 and deepest.budget.iloc[0] == 1.0
    assert deepest.blocks["removed"] == "" and deepest.delta_ppl["swapped"] == 0.9


def test_perplexity_orders_the_steps_as_a_task_does_when_the_costlier_steps_lose_more():
    w = walk("m", {"swapped": [0.1, 0.5, 2.0], "removed": [0.9, 3.0, 9.0]})
    falls = changes("m", {"swapped": [(-0.01, 0.1), (-0.03, 0.1), (-0.1, 0.1)],
                          "removed": [(-0.05, 0.1), (-0.2, 0.1), (-0.4, 0.1)]})  # fmt: skip
    rho = tasks.correlations(tasks.steps_table([w], [falls]))
    assert rho.task.tolist() == ["linrec_prose"] and rho.rho.iloc[0] == pytest.approx(-1.0)
    assert rho.steps.iloc[0] == 6 and rho.models.iloc[0] == 1
    few = tasks.steps_table([walk("m", {"swapped": [0.1], "removed": [0.9]})],
                            [changes("m", {"swapped": [(-0.01, 0.1)], "removed": [(-0.05, 0.1)]})])  # fmt: skip
    assert tasks.correlations(few).empty  # two steps: no interval
    flat = tasks.steps_table([w], [falls.assign(change=0.0)])
    assert tasks.correlations(flat).empty  # a task that never moves has no rank order


def claims_of(table: pd.DataFrame, walks: list[pd.DataFrame]) -> dict[str, object]:
    return {c.claim: c for c in tasks.task_claims(table, [scores("m")], walks)}


def test_the_verdicts_follow_the_rule_on_both_sides():
    w = walk("m", {"swapped": [0.1, 0.5, 2.0], "removed": [0.9, 3.0, 9.0]})
    agree = changes("m", {"swapped": [(0.0, 0.1), (-0.01, 0.1), (-0.1, 0.1)],
                          "removed": [(-0.02, 0.1), (-0.2, 0.1), (-0.4, 0.1)]})  # fmt: skip
    said = claims_of(tasks.steps_table([w], [agree]), [w])
    assert said["perplexity's budget keeps the tasks' accuracy (m)"].verdict is Verdict.YES
    assert said["what perplexity's budget rejects, the tasks do not keep (m)"].verdict is Verdict.YES
    ordered = said["perplexity orders the steps as linrec_prose does"]
    assert ordered.verdict is Verdict.YES and ordered.value == pytest.approx(-1.0)
    assert "0.600 [0.520, 0.680] on 150 items" in said["linrec_prose acc of the model itself (m)"].measured
    assert "on 20 problems" in said["humaneval pass@1 of the model itself (m)"].measured
    assert said["most blocks swapped within 5% of perplexity, cheapest first (m)"].measured.startswith("2 (blocks 0, 1")
    apart = changes("m", {"swapped": [(0.0, 0.1), (-0.15, 0.1), (-0.1, 0.1)],
                          "removed": [(-0.02, 0.1), (0.0, 0.01), (-0.4, 0.1)]})  # fmt: skip
    said = claims_of(tasks.steps_table([w], [apart]), [w])
    kept = said["perplexity's budget keeps the tasks' accuracy (m)"]
    assert kept.verdict is Verdict.NO and "swapped 2 (linrec_prose -0.150" in kept.measured
    rejected = said["what perplexity's budget rejects, the tasks do not keep (m)"]
    assert rejected.verdict is Verdict.NO and "removed 2" in rejected.measured
    assert all(c.rule for c in said.values() if c.tested)


def test_without_the_walk_the_task_verdicts_are_untestable_and_the_note_says_what_it_would_cost():
    w = walk("m", {"swapped": [0.1, 0.5, 2.0, 3.0], "removed": [0.9, 3.0, 9.0, 20.0]})
    table = tasks.steps_table([w], [])
    said = claims_of(table, [w])
    assert said["perplexity's budget keeps the tasks' accuracy (m)"].verdict is Verdict.UNTESTABLE
    assert said["what perplexity's budget rejects, the tasks do not keep (m)"].verdict is Verdict.UNTESTABLE
    assert not any(name.startswith("perplexity orders") for name in said)
    run = pd.DataFrame([{"model": "m", "tasks_seconds": 210.0}])
    note = tasks.walk_note(table, [run], "TASK_WALK = True")
    assert "m: 210 s for the tasks, some 28 minutes of one core for its 8 steps" in note and "TASK_WALK = True" in note
    scored = tasks.steps_table([w], [changes("m", {"swapped": [(0.0, 0.1)]})])
    assert tasks.walk_note(scored, [run], "X").startswith("This build scored the tasks on each model itself and at")


def test_an_example_item_shows_its_context_and_names_the_true_continuation():
    items = pd.DataFrame([
        {"task": "linrec_prose", "item": 0, "context": "A B.", "choices": ["C.", "D.", "E.", "F."], "label": 2},
        {"task": "linrec_prose", "item": 1, "context": "G.", "choices": ["H.", "I."], "label": 0},
        {"task": "linrec_code", "item": 0, "context": "x = 1", "choices": ["y = 2", "z"], "label": 1},
    ])  # fmt: skip
    shown = tasks.example_items(items)
    assert shown.passage.tolist() == ["context", "choice 1", "choice 2", "the true continuation", "choice 4",
                                      "context", "choice 1", "the true continuation"]  # fmt: skip
    assert shown.text.tolist()[:4] == ["A B.", "C.", "D.", "E."] and set(shown.item) == {0}
    with pytest.raises(LinrecError, match="lacks columns"):
        tasks.example_items(items.drop(columns="label"))


def test_the_pruning_papers_perplexity_is_shown_beside_the_tasks_and_read_by_no_budget():
    """A score where less is better (``wikitext2-ppl``, no standard error) has its rows, no reading and no verdict,
    whichever way it moves; the model's own is stated on its windows, with no interval."""
    w = walk("m", {"swapped": [0.1, 0.5, 2.0], "removed": [0.9, 3.0, 9.0]})
    falls = changes("m", {"swapped": [(-0.01, 0.1), (-0.03, 0.1), (-0.1, 0.1)],
                          "removed": [(-0.05, 0.1), (-0.2, 0.1), (-0.4, 0.1)]})  # fmt: skip
    ppl = changes("m", {"swapped": [(0.2, float("nan")), (1.0, float("nan")), (3.0, float("nan"))],
                        "removed": [(1.5, float("nan")), (4.0, float("nan")), (12.0, float("nan"))]},
                  task="wikitext2-ppl").assign(metric="ppl")  # fmt: skip
    table = tasks.steps_table([w], [falls, ppl])
    assert len(table) == 12 and (table[table.task == "wikitext2-ppl"].reading == "").all()
    assert tasks.correlations(table).task.tolist() == ["linrec_prose"]
    own = pd.concat([scores("m"), pd.DataFrame([{"model": "m", "task": "wikitext2-ppl", "metric": "ppl",
                                                 "value": 30.25, "stderr": float("nan"), "low": float("nan"),
                                                 "high": float("nan"), "n": 140}])])  # fmt: skip
    said = {c.claim: c for c in tasks.task_claims(table, [own], [w])}
    assert said["wikitext2-ppl ppl of the model itself (m)"].measured == "30.250 on 140 windows"
    assert said["wikitext2-ppl ppl of the model itself (m)"].interval is None
    assert not any("wikitext2-ppl does" in name for name in said)
