# %% [markdown]
# # What the smaller model can still do
#
# **Question.** Every chapter so far judges a smaller model, its blocks swapped for their affine
# maps or removed whole, by one number: its perplexity on held-out text. A practitioner keeps a
# model for what it can do. The layer-pruning papers read that from zero-shot accuracy on
# multiple-choice benchmarks, SLEB {cite}`song2024sleb` among them, scored by lm-evaluation-harness
# {cite}`gao2024harness`, and from HumanEval, which runs the code a model writes against its tests
# {cite}`chen2021evaluating`. {cite:t}`shrestha2026limits` report that pruned models lose GSM8K and
# HumanEval and do not win them back even after long fine-tuning, while their perplexity looks
# fine. So does a replacement chosen by perplexity keep what the model can do? This chapter is not
# in the paper. It walks each model's blocks in the order `linrec replace --max-ppl-increase`
# follows, cheapest first, drops one, two, four and eight of them together, by each of the two
# mechanisms of chapter 11 (each FFN swapped for its affine map, each whole block removed), and sets
# each step's perplexity beside what the tasks say of the same model.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: the profile's real models less its slow ones (offline: SmolLM2-135M); the zoo's where it has none
EVAL_TOKENS = None  # held-out tokens per perplexity pass; None: a quarter of each model's evaluation tokens
STEPS = [1, 2, 4, 8]  # blocks each step drops, cheapest first (fewer than a model's)
ITEMS = None  # items per task; None: 150 on a real model, 24 on a model of the zoo
HUMANEVAL_LIMIT = None  # HumanEval's first problems scored; None: 20 on a real model, none on a model of the zoo
TASK_WALK = None  # score the tasks at every step, not only on the model itself; None: on, except on the offline profile
RECORD_WALK = False  # keep this run's walk, scored at every step, as the package's record for builds without one

# %%
import pandas as pd

import linrec
from linrec.analysis import tasks
from linrec.notebook import chapter
from linrec.plots import tasks as tasks_plots
from linrec.report.claims import claims_table

ch = chapter.begin(
    "12_tasks",
    globals(),
    names_or_none=["MODELS"],
    positive_int_or_none=["EVAL_TOKENS", "ITEMS", "HUMANEVAL_LIMIT"],
    indices_or_none=["STEPS"],
    flag_or_none=["TASK_WALK"],
    flag=["RECORD_WALK"],
)
MODELS = linrec.experiment.tasks.study_models(ch.profile, MODELS)
TASK_WALK = PROFILE != "offline" if TASK_WALK is None else TASK_WALK
linrec.experiment.task_record.check_recording(RECORD_WALK, TASK_WALK)
print(ch.profile.left_out(MODELS))

# %% [markdown]
# ## The tasks
#
# The benchmarks the pruning papers report (PIQA, WinoGrande, HellaSwag, ARC) are datasets on the
# Hugging Face hub, which an offline build cannot read. So the chapter cuts two tasks of its own
# from the held-out split of two of the profile's texts, text no map was fitted on, and hands them
# to lm-evaluation-harness in its own task format, so that it scores them as it scores PIQA: one of
# prose (two sentences of a paragraph, and four candidates for the sentence that followed) and one of
# code (two lines of a source file, and four candidates for the next line). The three wrong
# candidates are passages of about the true one's length from elsewhere in the same text. A model
# is right when it gives the true continuation the highest log-likelihood; guessing scores 25 %
# (`linrec.interventions.tasks.continuation`). These tasks ask what a model must do to read a text,
# nothing of the world knowledge PIQA or ARC ask for: they are no stand-in for those benchmarks'
# numbers, only a second reading of the model beside its perplexity that needs no network. Each
# task's interval is the normal one from its standard error, so 150 items give a share to about
# ±8 points and a change between two models, their errors combined as if independent, to about ±11.
# The items are drawn by the profile's seed; an item whose answer is longer than a model's context
# is left out for that model (only the smoke zoo's 64 positions are that short). Where the profile
# can read the hub (`paper`), the profile's `evaluations` are scored beside them: the pruning
# papers' zero-shot suite (PIQA, WinoGrande, HellaSwag, ARC-easy and ARC-challenge) on the first
# `ITEMS` items of each, so its figures are those of the first items, not of the whole benchmarks
# the papers report, and their WikiText-2 perplexity (the test split joined with blank lines, in
# windows of 2,048 tokens, as SLEB computes it), shown beside the tasks and read by no budget.

# %% [markdown]
# ## The walk
#
# For each model the two orders are chapter 11's: every block's own ΔPPL swapped alone for its
# affine map (chapter 5's swaps) and removed alone, on the same held-out tokens, read from the
# cache. Each step drops the first *k* blocks of an order together and scores perplexity with all of
# them dropped, the joint ΔPPL with its 95 % bootstrap interval over evaluation windows (at *k* = 1
# it is the block's own cost, the same pass). The maps are those of chapter 5, fitted on every row
# of the model's measurement. On the model itself, and with `TASK_WALK` on every step's model too,
# the tasks are scored, and HumanEval's first `HUMANEVAL_LIMIT` problems (greedy pass@1, the prompts
# as they are) where the model is a real one: a model of the zoo, trained here on a few megabytes of
# Python's own text, writes no Python function, and neither does a model that writes no function
# body from a raw HumanEval prompt, whatever it loses. So the walk reads HumanEval only on a model
# trained for code, the Qwen2.5-Coder models of the `scale` profile. Everything is cached; the
# `seconds` columns are what the run that computed them took.

# %%
runs = {
    m: linrec.experiment.tasks.task_study(
        ch.profile,
        m,
        steps=STEPS,
        items=ITEMS,
        humaneval_limit=HUMANEVAL_LIMIT,
        walk=TASK_WALK,
        eval_tokens=EVAL_TOKENS or ch.profile.budget(m).eval_tokens // 4,
        progress=ch.progress,
    )
    for m in MODELS
}
walks, changes, scores, items, run = (
    [study[part] for study in runs.values()]
    for part in ("walk", "changes", "scores", "items", "run")
)
table = tasks.steps_table(walks, changes)
ch.show(
    pd.concat(run)[
        ["model", "eval_tokens", "items", "humaneval_limit", "walk", "tasks_seconds",
         "humaneval_seconds", "seconds"]
    ],
    {"tasks_seconds": ".0f", "humaneval_seconds": ".0f", "seconds": ".0f"},
)  # fmt: skip

# %% [markdown]
# The tasks each model was scored on, and an item of each as the harness reads it:

# %%
ch.show(
    pd.concat(study["tasks"] for study in runs.values()).drop(columns="sha256"),
    {"chance": ".0%"},
)
ch.show(tasks.example_items(items[0]))

# %% [markdown]
# The model itself on each task, with its 95 % interval:

# %%
ch.show(pd.concat(scores), {"value": ".3f", "stderr": ".3f", "low": ".3f", "high": ".3f"})

# %% [markdown]
# {numref}`fig-tasks-walk` draws each step's joint ΔPPL and, where this build scored the tasks
# along the walk, each task's change against it.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Left: the joint ΔPPL (perplexity points, symmetric-log axis, with its 95% bootstrap interval over evaluation windows) of each step against the number of blocks it drops, cheapest first, each FFN swapped for its affine map or each whole block removed; the dashed line is 5% of the model's perplexity. Right, where this build scored the tasks along the walk: each task's change in accuracy (points, with its 95% interval) against the step's ΔPPL, a marker per step.", "name": "fig-tasks-walk"}}
fig = tasks_plots.walk_figure(pd.concat(walks), table)
ch.figure(fig, {"walk": pd.concat(walks), "steps": table}, "fig-tasks-walk")

# %%
print(tasks.walk_note(table, run, "TASK_WALK = True"))
ch.show(
    table.drop(columns=["delta_ppl_low", "delta_ppl_high"]),
    {
        "before": ".3f",
        "after": ".3f",
        "change": "+.3f",
        "change_low": "+.3f",
        "change_high": "+.3f",
    },
    fold="Every step, and each task's change at it where the tasks were scored along the walk",
)

# %% [markdown]
# ## Where perplexity and the tasks part ways
#
# A step is kept by perplexity's budget as `linrec replace --max-ppl-increase 5%` keeps it, and by
# a task as `--max-accuracy-drop 0.02` would. The two part ways where they disagree beyond the
# task's interval. The rules were written before any number was computed
# (`linrec.analysis.tasks.RULE`, applied by `task_claims` in the same module):

# %%
ch.markdown(tasks.RULE)

# %%
ch.report(tasks.task_claims(table, scores, walks, seed=SEED), figure="fig-tasks-walk")

# %%
ch.caveat()

# %% [markdown]
# ## The run this build cannot afford
#
# Scoring both tasks once on SmolLM2-135M takes minutes of one core here (`tasks_seconds` above;
# the line beneath the figure multiplies it by the steps), so scoring them at every step of both
# walks would add about half an hour to the offline build, which its hour cannot spare: under
# `offline` the tasks are scored on the model itself and the walk by perplexity alone, and the
# verdicts above that need the tasks along the walk are untestable there. A run that scores them
# at every step can be kept in the package (`linrec.experiment.task_record`, with its date, machine,
# command and commit, and a digest that a changed file fails), and a build that did not score the
# walk shows that run's figures here, labelled as that run's:

# %%
record = linrec.experiment.task_record
RECORD_COMMAND = record.record_command(ch.profile.name)
walked = bool((table.reading != "").any())
if RECORD_WALK:
    print(f"recorded in {record.record_walk(runs, ch.profile.name, RECORD_COMMAND)}")
recorded = None if walked else record.recorded_walk()
ch.markdown(tasks.recorded_note(recorded and recorded.label(), walked, RECORD_COMMAND))

# %%
if recorded is not None:
    past = tasks.steps_table([recorded.tables["walk"]], [recorded.tables["changes"]])
    ch.show(
        past.drop(
            columns=["delta_ppl_low", "delta_ppl_high", "relative", "metric", "before"]
        ),
        {
            "after": ".3f",
            "change": "+.3f",
            "change_low": "+.3f",
            "change_high": "+.3f",
        },
        fold="The recorded run: every step, and each task's change at it",
    )
    said = tasks.task_claims(
        past, [recorded.tables["scores"]], [recorded.tables["walk"]], seed=SEED
    )
    ch.show(claims_table(said), fold="The recorded run's verdicts, by the rule above")

# %% [markdown]
# The runs that give such figures:
#
# - SmolLM2-135M with the tasks at every step, offline, on one core (about half an hour), kept as
#   the record: `python book/build.py execute --profile offline --only 12_tasks --param
#   TASK_WALK=true --param RECORD_WALK=true`;
# - the Qwen2.5-Coder models of the `scale` profile, with HumanEval at every step (where a model
#   that writes code can lose it), on a GPU: `make install-scale`, then
#   `python book/build.py execute --profile scale --only 12_tasks`;
# - the pruning papers' own zero-shot suite and HumanEval, on any model or replacement, with the
#   Hugging Face hub at hand: `linrec evaluate --model MODEL --tasks zero-shot,humaneval`, and the
#   same tasks as a budget of their own while `linrec replace` chooses:
#   `linrec replace ... --tasks zero-shot --max-accuracy-drop 0.02`.
#
# **For practitioners.** Perplexity is measured on text of the kind it was given; a task asks for a
# skill. Where a smaller model must keep one, score it on that skill before and after, as
# `linrec replace --tasks ... --max-accuracy-drop` does at every step it keeps, and read a change
# with its interval: on a few hundred items, a change of a few points is within the noise.
