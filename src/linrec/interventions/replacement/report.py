"""The report of a replacement directory for a reader: ``report.md`` and its figure, both made from the record alone
(:func:`linrec.interventions.replacement.replace.replace` builds it), so a directory's report can always be made
again."""

from __future__ import annotations

import importlib.util
import math
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGURE = "report.png"
"""The report's figure, beside ``report.md``: drawn where matplotlib is installed (``linrec[notebook]``), which
measuring and replacing do not need."""


def can_draw() -> bool:
    """Whether the figure can be drawn here (matplotlib and seaborn installed)."""
    return all(importlib.util.find_spec(name) is not None for name in ("matplotlib", "seaborn"))


def _number(value: float | None, digits: str = ".4g") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, digits)


def _second_text_lines(second: dict | None) -> list[str]:
    """The report's line on the second text's ΔPPL (none when no second text was scored)."""
    if second is None:
        return []
    return [
        f"- Second text, another domain (stability): {second['name']}, {second['part']} (sha256 {second['sha256']}), "
        f"{second['rows']:,} token rows: perplexity {second['base_ppl']:.6g} before, {second['replaced_ppl']:.6g} "
        f"after (ΔPPL {second['delta_ppl']:+.4g}, 95 % interval [{_number(second['delta_ppl_low'])}, "
        f"{_number(second['delta_ppl_high'])}] over {second['windows']} windows)."
    ]


def speed_words(latency: dict) -> str:
    """Decoding speed before and after in words: the medians with the slowest and fastest runs, and the speed-up only
    where every pair of runs agrees on its side of 1 (a record made before the spread was kept: its two medians)."""
    if "speedup" not in latency:
        return (
            f"{latency['base_tokens_per_s']:.4g} -> {latency['replaced_tokens_per_s']:.4g} tokens/s (one median each)"
        )
    pairs = f"{latency['speedup_low']:.2f}x to {latency['speedup_high']:.2f}x"
    verdict = (
        f"{latency['speedup']:.2f}x (every pair of runs {pairs})"
        if latency["speedup_clear"]
        else f"no change the runs can tell (the pairs' ratios, {pairs}, cover 1)"
    )
    return (
        f"{latency['base_tokens_per_s']:.4g} [{latency['base_low']:.4g}, {latency['base_high']:.4g}] -> "
        f"{latency['replaced_tokens_per_s']:.4g} [{latency['replaced_low']:.4g}, {latency['replaced_high']:.4g}] "
        f"tokens/s, median [slowest, fastest] of {latency['repeats']} runs each in turns: {verdict}"
    )


def step_task_columns(record: dict) -> list[str]:
    """The columns of the record's steps that hold a task's headline score (a step scored under --max-accuracy-drop)."""
    return [f"{c['task']} {c['metric']}" for c in (record.get("tasks") or {}).get("changes", [])]


def task_change_words(change: dict) -> str:
    """A task's headline score before and after, with the change's 95 % interval (a row of the record's
    ``tasks.changes``)."""
    return (
        f"{change['before']:.4g} -> {change['after']:.4g} (change {change['change']:+.4g}, 95 % interval "
        f"[{_number(change['change_low'], '+.4g')}, {_number(change['change_high'], '+.4g')}])"
    )


def _task_lines(tasks: dict | None) -> list[str]:
    """The report's section on the task scores (none when no tasks were scored)."""
    if tasks is None:
        return []
    budget = tasks["max_accuracy_drop"]
    kept = (
        f"Each step within the perplexity budget was scored on them too and kept only where every score stayed at "
        f"or above its lowest allowed one (--max-accuracy-drop {budget}: "
        + ", ".join(f"{task} {low:.4g}" for task, low in tasks["lowest_allowed"].items())
        + ")."
        if budget is not None
        else "They were scored before and after; no budget was set on them."
    )
    lines = [f"- {c['task']} ({c['metric']}): {task_change_words(c)}" for c in tasks["changes"]]
    versions = tasks["base"].get("harness", {}).get("lm_eval")
    harness = f" lm-evaluation-harness {versions}." if versions else ""
    return [
        "## Task scores",
        "",
        f"Tasks: {', '.join(tasks['tasks'])}, each score's interval ±1.96 standard errors; a change's combines the "
        f"two as if independent (wider than a paired one on the same items). {kept}{harness}",
        "",
        *lines,
        "",
    ]


def _latency_lines(latency: dict | None) -> list[str]:
    """The report's line on decoding speed before and after (none for a record made before it was timed)."""
    if latency is None:
        return []
    return [
        f"- Greedy decoding on {latency['device']} (batch {latency['batch']}, a {latency['prompt_tokens']}-token "
        f"prompt, {latency['new_tokens']} new tokens): {speed_words(latency)}."
    ]


def _interval(rows: pd.DataFrame, prefix: str = "") -> list[str]:
    return [
        f"{_number(d, '+.4g')} [{_number(lo)}, {_number(hi)}]"
        for d, lo, hi in zip(
            rows[f"{prefix}delta_ppl"], rows[f"{prefix}delta_ppl_low"], rows[f"{prefix}delta_ppl_high"]
        )
    ]


def _ablation_lines(ablations: list[dict] | None) -> list[str]:
    """The report's ablations: each candidate block swapped alone for each kind, read by thirds of depth, with each
    kind's numbers stored and decoding speed (none when no ablation was asked for)."""
    if not ablations:
        return []
    table = pd.DataFrame(ablations)
    columns = {"ΔPPL [95 % interval]": ""}
    if table.get("second_delta_ppl") is not None and table.second_delta_ppl.notna().any():
        columns["second text ΔPPL"] = "second_"
    cells = table[["depth", "block"]].copy()
    for label, prefix in columns.items():
        cells[label] = _interval(table, prefix)
    cells["ablation"] = table.ablation
    wide = cells.pivot(index=["depth", "block"], columns="ablation", values=list(columns))
    wide = wide.reindex(sorted(wide.index, key=lambda key: key[1]))
    order = list(dict.fromkeys(table.ablation))
    wide = wide[[(label, kind) for label in columns for kind in order]]
    wide.columns = [f"{kind}: {label}" for label in columns for kind in order]
    kinds = table.groupby("ablation", sort=False).agg(
        params=("params", "median"), ratio=("ratio", "median"), tokens_per_s=("tokens_per_s", "first")
    )
    return [
        "## Ablations",
        "",
        "Each candidate block swapped alone for each kind of replacement, fitted on the fit text, ΔPPL on the "
        "evaluation text (and on the second text, where one was given), blocks grouped by thirds of depth. "
        "Numbers stored and greedy decoding with that kind in every candidate block at once:",
        "",
        *(
            f"- `{kind}`: {row.params:,.0f} numbers per block "
            f"({'the FFN removed' if math.isinf(row.ratio) else _ratio(row.ratio)}), "
            f"{row.tokens_per_s:.4g} tokens/s"
            for kind, row in kinds.iterrows()
        ),
        "",
        wide.reset_index().to_markdown(index=False),
        "",
    ]


def report_markdown(record: dict, name: str, figure: bool = True) -> str:
    """``report.md``: what the record says, for a reader (``figure``: with :data:`FIGURE` beside it)."""
    base, params, ppl = record["base"], record["params"], record["ppl"]
    fit, held = record["fit_text"], record["eval_text"]
    steps = pd.DataFrame(record["steps"])
    steps["interval"] = [f"[{_number(lo)}, {_number(hi)}]" for lo, hi in zip(steps.delta_ppl_low, steps.delta_ppl_high)]
    steps["block"] = ["model" if b is None else str(b) for b in (s["block"] for s in record["steps"])]
    columns = ["step", "block", "single_delta_ppl", "ppl", "delta_ppl", "interval", "params_saved", "kept"]
    if "one_shot_delta_ppl" in steps:
        columns.insert(6, "one_shot_delta_ppl")
    columns[-1:-1] = [c for c in step_task_columns(record) if c in steps]
    shown = steps[columns]
    blocks = pd.DataFrame(record["blocks"])
    chosen = ", ".join(f"{b['block']} ({b['kind']})" for b in record["blocks"]) or "none"
    lines = [
        f"# Replaced FFN blocks of {base['model']}",
        "",
        f"- Base model: `{base['model']}`, weights `{base['weights']}`, computing in {base['dtype']}.",
        f"- Blocks replaced, in order: {chosen}; selection: {record['selection']['rule']}.",
        f"- Numbers stored: {params['model_before']:,} before, {params['model_after']:,} after ({_saved(params)}).",
        f"- Perplexity on the evaluation text: {ppl['base']:.6g} before, {ppl['replaced']:.6g} after "
        f"(ΔPPL {ppl['delta_ppl']:+.4g}, 95 % interval [{_number(ppl['delta_ppl_low'])}, "
        f"{_number(ppl['delta_ppl_high'])}] over {held['windows']} windows, resampled by window).",
        f"- Fit text: {fit['name']}, {fit['part']} (sha256 {fit['sha256']}), {fit['rows']:,} token rows.",
        f"- Evaluation text: {held['name']}, {held['part']} (sha256 {held['sha256']}), {held['rows']:,} token rows; "
        "it never overlaps the fit text.",
        *_second_text_lines(record.get("second_text")),
        *_latency_lines(record.get("latency")),
        "",
        "## Steps",
        "",
        "Each step puts its block in with every kept block and scores them together (the joint ΔPPL); "
        "`single_delta_ppl` is the block's own cost, swapped alone."
        + (
            " Each block above a kept one was fitted again with the kept blocks in place (re-fitted maps, kept); "
            "`one_shot_delta_ppl` is the same step with the map fitted on the unmodified model instead (equal where "
            "no kept block lies below)."
            if record["selection"].get("refit")
            else ""
        ),
        "",
        f"![Joint ΔPPL and numbers saved at each step]({FIGURE})"
        if figure
        else "(The figure of these steps needs matplotlib: `pip install 'linrec[notebook]'`.)",
        "",
        shown.to_markdown(index=False, floatfmt=".4g"),
        "",
        *_ablation_lines(record.get("ablations")),
        *_task_lines(record.get("tasks")),
        "## Blocks",
        "",
        blocks.to_markdown(index=False, floatfmt=".4g") if len(blocks) else "No block was replaced.",
        "",
        "## Load it",
        "",
        "```python",
        "import linrec",
        f'model, tokenizer = linrec.load_replaced("{name}")   # or linrec.load_model("{name}")',
        "```",
        "",
        f"`linrec measure --model {name} ...` measures it; `linrec export {name} --out DIR` writes it as one "
        "directory that loads without linrec where the base model's class can hold every change (else with the base "
        f"model inside). Made by linrec {record['versions']['linrec']} "
        f"(torch {record['versions']['torch']}, transformers {record['versions']['transformers']}) "
        f"at {record['created_at']}.",
        "",
    ]
    return "\n".join(lines)


def report_figure(record: dict) -> Figure:
    """Two panels over the steps: the joint ΔPPL with its 95 % interval (the one-shot maps' beside it when the maps
    were re-fitted; the budget dashed, or named in the legend when far above), and the numbers saved (in thousands
    or millions); a step left out is drawn in grey."""
    import seaborn as sns
    from matplotlib.figure import Figure

    steps = pd.DataFrame(record["steps"])
    labels = ["model" if b is None else f"+{b}" for b in (s["block"] for s in record["steps"])]
    x = range(len(steps))
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    delta, saved = fig.subplots(1, 2)
    colour, other = sns.color_palette(n_colors=2)
    grey = "0.6"
    kept = steps.kept.astype(bool)
    if "one_shot_delta_ppl" in steps:
        one = steps.one_shot_delta_ppl
        errors = [one - steps.one_shot_delta_ppl_low, steps.one_shot_delta_ppl_high - one]
        delta.errorbar([i + 0.15 for i in x], one, yerr=errors, fmt="s", color=other, capsize=3, label="one-shot map")
    for mask, face, label in ((kept, colour, "kept"), (~kept, grey, "left out")):
        if mask.any():
            rows, at = steps[mask], [i for i, k in zip(x, mask) if k]
            errors = [rows.delta_ppl - rows.delta_ppl_low, rows.delta_ppl_high - rows.delta_ppl]
            delta.errorbar(at, rows.delta_ppl, yerr=errors, fmt="o", color=face, capsize=3, label=label)
    budget = record["selection"].get("max_delta_ppl")
    top = max(steps.filter(like="delta_ppl_high").max())
    if budget is not None and budget <= 2 * max(top, 0):
        delta.axhline(budget, color="0.3", ls="--", lw=1, label="budget")
    elif budget is not None:  # far above every step: a line there would flatten them all
        delta.plot([], [], " ", label=f"budget {budget:.4g} (above)")
    delta.axhline(0, color="0.6", lw=0.8, zorder=0)
    delta.set(xlabel="step (block added)", ylabel="joint ΔPPL (perplexity points)", title="Cost")
    delta.legend(fontsize=9, frameon=False)
    scale, unit = (1e6, "millions") if steps.params_saved.max() >= 1e6 else (1e3, "thousands")
    saved.bar(x, steps.params_saved / scale, color=[colour if k else grey for k in kept])
    saved.set(xlabel="step (block added)", ylabel=f"numbers saved ({unit})", title="Saving")
    for ax in (delta, saved):
        ax.set_xticks(list(x), labels, fontsize=9, rotation=45 if len(labels) > 8 else 0)
    return fig


def _saved(params: dict) -> str:
    """The numbers a replacement saves, or adds where its blocks keep their FFN in use (``first-apart:own``,
    ``gated``), in words."""
    before, after = params["model_before"], params["model_after"]
    if after > before:
        return f"{after - before:,} more, +{(after - before) / before:.2%}: these blocks keep their FFN in use"
    return f"{before - after:,} fewer, {(before - after) / before:.2%}"


def _ratio(ratio: float) -> str:
    """A kind's numbers against the FFN's (``ratio``: the FFN's over the kind's), in words."""
    return f"{ratio:.3g}x fewer than the FFN" if ratio >= 1 else f"{1 / ratio:.3g}x the FFN's: it keeps the FFN in use"
