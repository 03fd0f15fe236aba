# %% [markdown]
# # Which score says which block to drop?
#
# **Question.** A practitioner who wants a smaller model picks the blocks to drop by a score, and the
# field offers several. The paper's own candidate is $R^2_\text{lin}$: a block whose output an affine
# map recovers well should be safe to swap for that map {cite}`whipp2026linear`. Layer-pruning work
# uses scores of the residual stream instead: ShortGPT's Block Influence {cite}`men2024shortgpt`,
# the angular distance of {cite:t}`gromov2024unreasonable`, which ReplaceMe
# {cite}`shopkhoev2025replaceme` also selects its blocks by, and the linearity score of
# {cite:t}`razzhigaev2024secretly`. This chapter is not in the paper. It computes
# every one of these scores on the same tokens, for every block, measures what dropping each block
# really costs, and asks which score predicts that cost. Its last section asks what is left of a
# costly swap once a gate sends the few rows a map cannot carry to the block's own FFN.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: the profile's models (offline: all but Gemma 3, whose passes cost some 20 minutes more)
EVAL_TOKENS = None  # held-out tokens per perplexity pass; None: a quarter of each model's evaluation tokens
BUDGET = "5%"  # the practical test: drop blocks until the joint ΔPPL passes this (share of PPL, or absolute)
SINK_MODEL = None  # whose swaps are drawn block by block; None: the first model with a sink block, else the first
GATE_MODELS = None  # the models of the last section, gated; None: those of MODELS
GATE_BLOCKS = None  # blocks gated in each; None: two costliest swaps, one median
# shares of rows a gate routes to the map (1, the plain map, is always scored)
GATE_SHARES = [0.25, 0.5, 0.9, 0.99]

# %%
import pandas as pd

import linrec
from linrec.analysis import gating, pruning
from linrec.notebook import chapter
from linrec.plots import compression as compression_plots
from linrec.plots import gating as gating_plots
from linrec.plots import pruning as pruning_plots

ch = chapter.begin(
    "11_pruning",
    globals(),
    names_or_none=["MODELS", "GATE_MODELS"],
    name_or_none=["SINK_MODEL"],
    positive_int_or_none=["EVAL_TOKENS"],
    ppl_budget=["BUDGET"],
    indices_or_none=["GATE_BLOCKS"],
    shares=["GATE_SHARES"],
)
MODELS = ch.profile.scored(MODELS)
print(ch.profile.left_out(MODELS))

# %% [markdown]
# ## The scores
#
# Each score is read from the capture's own forward pass (no pass of its own), on the rows chapter 2
# measures: the block's input and output for $R^2_\text{lin}$, and the residual stream around the
# block for the rest. Write $h$ for the stream entering the block's layer, $h'$ for the stream
# leaving it, and $a$ for what the FFN adds to it, so that $h' - a$ is the stream the FFN writes
# into. Every score is defined once in `linrec.core.scores`, with a test against a direct
# computation.
#
# | score | what it measures | a large value says |
# | --- | --- | --- |
# | `r2_lin` | held-out share of the FFN's output its affine map recovers | cheap to swap |
# | `r2_lin_after_first` | the same with the first position of every window left out | cheap to swap |
# | `unexplained_energy` | $(1 - R^2_\text{lin})\,\sum\lVert a - \bar a\rVert^2 / \sum\lVert h' - a\rVert^2$: what a swap perturbs, next to the stream | costly |
# | `output_energy` | $\sum\lVert a\rVert^2 / \sum\lVert h' - a\rVert^2$: how much the FFN writes | costly |
# | `ffn_block_influence` | $1 - $ mean $\cos(h' - a, h')$: Block Influence of the FFN alone | costly |
# | `ffn_angular_distance` | mean $\arccos(\cdot)/\pi$ of the same cosine | costly |
# | `block_influence` | $1 - $ mean $\cos(h, h')$ over the whole layer {cite}`men2024shortgpt` | costly |
# | `angular_distance` | mean $\arccos(\cos(h, h'))/\pi$ {cite}`gromov2024unreasonable` | costly |
# | `layer_linearity` | held-out share of $h'$ (centred) an affine map from $h$ explains {cite}`razzhigaev2024secretly` | cheap to drop |
#
# Three conventions differ from the peers' own code, and each moves their numbers a little:
#
# - **Which tokens.** Gromov et al. compare the last token of each text, and so do PruneMe and
#   ReplaceMe, which ranks spans of layers by that token's angular distance (its `distance.py`), not
#   by Block Influence. Here every captured row counts, for every score.
# - **The last block.** ShortGPT's and PruneMe's code read the model's list of hidden states, whose
#   last entry comes after the final norm, so for the last block they compare its input with a
#   normalised output. Here $h'$ is the layer's own output in every block, the last included: the
#   final norm stays when a block is dropped, so the score should see what the block itself writes.
# - **In sample or held out.** Razzhigaev et al.'s LLM-Microscope scores the layer linearity in
#   sample, on every row. Its moments would be as large as the block's own, so here it is fitted on a
#   seeded sample of the rows (4,096 at these models' widths): `layer_linearity` holds the sample's
#   folds out, and `layer_linearity_in_sample`, the score as the paper defines it, read up to 0.027
#   above LLM-Microscope's all-rows score where the two were compared, since an in-sample fit on
#   fewer rows overfits more.
#
# ## What dropping a block costs
#
# For each block alone, perplexity on held-out text with the block's FFN removed (`zero`), replaced
# by its mean output (`mean`), by its affine map (`affine`), by the map with the first position
# apart (below), and with the whole block removed, attention and FFN (`layer`: the layer hands its
# input on, as layer pruning does). ΔPPL carries a 95 % bootstrap interval over evaluation windows.
# Each model is measured again here, on exactly the rows of chapter 2, with the first position of
# every window kept apart and with the residual-stream scores, which the measurements the other
# chapters share leave out. The affine swaps alone are chapter 5's, read from the cache: the same
# maps scored on the same tokens. Everything is cached.

# %%
runs = {
    m: linrec.experiment.pruning.pruning_costs(
        ch.profile,
        m,
        eval_tokens=EVAL_TOKENS or ch.profile.budget(m).eval_tokens // 4,
        budget=BUDGET,
        progress=ch.progress,
    )
    for m in MODELS
}
tables, costs, walks = (
    [run[part] for run in runs.values()] for part in ("table", "costs", "walks")
)
blocks = pruning.scored_blocks(tables, costs)
ch.show(
    pd.concat(costs)
    .groupby(["model", "kind"], sort=False)
    .delta_ppl.describe()[["min", "50%", "max"]],
    fold="Each model's ΔPPL per kind of drop: the cheapest block, the median and the costliest",
)

# %% [markdown]
# ## The first position apart
#
# With causal attention the first position of a window sees only its own token, and in some models
# a few blocks write an enormous, nearly constant vector there: the attention sink
# {cite}`xiao2023attention`, which chapter 2 finds in every table. A least-squares map fitted on
# all rows is pulled towards those few huge rows. The kind `first-apart` fits the affine map on the
# later positions alone and puts at the first position either that position's mean output
# (`first-apart:mean`, exact when every window starts with the same token) or the block's own
# output (`first-apart:own`, exact, at the price of keeping the FFN for one position per window).
# {numref}`fig-pruning-first` draws every block of `SINK_MODEL`.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "ΔPPL (symmetric-log axis, with its 95% bootstrap interval over evaluation windows) of each block alone swapped for its affine map, and for the map fitted without the first position with the first position's mean or the block's own output there.", "name": "fig-pruning-first"}}
sinks = pruning.sink_swaps(pd.concat(tables), pd.concat(costs))
SINK_MODEL = SINK_MODEL or (sinks.model.iloc[0] if not sinks.empty else MODELS[0])
drawn = pd.concat(costs).query(
    "model == @SINK_MODEL and kind in ['affine', 'first-apart:mean', 'first-apart:own']"
)
fig = compression_plots.swap_figure(
    drawn.assign(ratio=drawn.original_params / drawn.params)
)
ch.figure(fig, drawn, "fig-pruning-first")

# %%
ch.show(
    sinks,
    {"first_position_share": ".1%"},
    fold="The sink blocks (the first position carries half the output variance or more) and their swaps",
)

# %% [markdown]
# ## Which score orders the blocks by cost?
#
# Each score is read as a predicted cost (an $R^2$ turned round: a high one predicts a cheap drop),
# and its Spearman rank correlation with each cost is taken within each model, then combined over
# the models (a bootstrap over blocks gives the interval). A score that orders the blocks exactly as
# their cost has $\rho = 1$. {numref}`fig-pruning-rho` shows the combined $\rho$ of every score
# with every cost.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Spearman ρ of each score, read as a predicted cost, with what dropping each block alone costs (ΔPPL), within each model and combined over the models; 1: the score orders the blocks exactly by cost.", "name": "fig-pruning-rho"}}
rho = pruning.score_correlations(blocks, seed=SEED)
group = (
    "combined"
    if (rho.group == "combined").any()
    else (rho.group.iloc[0] if len(rho) else None)
)
fig = pruning_plots.correlation_figure(rho, group)
ch.figure(fig, rho, "fig-pruning-rho")

# %%
main = rho[rho.cost.isin(["affine", "layer"]) & (rho.group == group)].sort_values(
    ["cost", "rho"], ascending=[True, False]
)
ch.show(
    main[["cost", "score", "blocks", "rho", "low", "high"]],
    {"rho": "+.2f", "low": "+.2f", "high": "+.2f"},
    fold="ρ with the cost of the two mechanisms a practitioner uses, best first, with 95% intervals",
)

# %% [markdown]
# {numref}`fig-pruning-scores` draws each score against the cost of the affine swap, block by block.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Each score against what swapping each block alone for its affine map costs (ΔPPL, symmetric-log axis), one point per block, colour by model.", "name": "fig-pruning-scores"}}
shown = [s for s in pruning_plots.LABELS if s in blocks and blocks[s].notna().any()]
fig = pruning_plots.scores_figure(blocks, "affine", shown)
ch.figure(fig, blocks, "fig-pruning-scores")

# %% [markdown]
# ## The practical test
#
# A correlation over all blocks says little about the few cheapest, which are the ones a
# practitioner drops. So each score's order is followed, cheapest first, dropping one block more at a
# time until the joint ΔPPL passes `BUDGET` of the model's perplexity, by each of two mechanisms:
# the FFN swapped for its affine map (what `linrec replace` installs) and the whole block removed
# (what layer pruning does). The reference is the order of each block's own measured cost, which is
# what `linrec replace --max-ppl-increase` follows. {numref}`fig-pruning-budget` counts the blocks each
# order drops.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Blocks each order drops (its number in each cell), one at a time, before the joint ΔPPL passes the budget: each FFN swapped for its affine map (left), each whole block removed (right); 'measured' orders the blocks by their own measured cost.", "name": "fig-pruning-budget"}}
budget = pruning.budget_table(walks)
fig = pruning_plots.budget_figure(budget)
ch.figure(fig, budget, "fig-pruning-budget")

# %% [markdown]
# ## The verdict
#
# The rule was written before any number was computed (`linrec.analysis.pruning.RULE`, applied by
# `pruning_claims` in the same module):

# %%
ch.markdown(pruning.RULE)

# %%
ch.report(pruning.pruning_claims(rho, budget, sinks), figure="fig-pruning-rho")

# %% [markdown]
# **For practitioners.** Read the table above before trusting any score: where the best score's
# interval stays above 0.5 it orders blocks well enough to choose candidates, but only measuring
# each candidate's own cost (`linrec replace --max-ppl-increase`) guarantees the budget. A block
# whose first position carries most of its output variance should be swapped with the first
# position apart (`--kind first-apart:own`, or `first-apart:mean` when every window starts with a
# BOS token), never judged by its plain $R^2_\text{lin}$.

# %% [markdown]
# ## The map for the many, the FFN for the few
#
# A plain swap asks one affine map to carry every row of a block, and the first position apart
# shows how much a single row per window can decide: with it kept for the FFN, a sink block's
# cost can fall by orders of magnitude. Whether it falls far enough, the sink table above says.
# Under the `offline` profile chapter 2 finds blocks of SmolLM2-135M where, with the first
# position left out, a handful of the remaining rows still carry most of the output variance
# (`top_rows_share_after_first`), and a map fitted through those few rows serves the many
# badly. The first position is a rule by position. A *gate* is a rule by content: it scores
# every row of the FFN's input, sends the rows that score at most a threshold through the
# affine map and the rest through the block's own FFN, and the map is fitted, in closed form,
# on exactly the rows it will serve. The threshold is read from the fit rows so that a chosen
# share of them goes to the map. Two gates are compared:
#
# - the **norm gate**: a row's score is the Euclidean norm of the FFN's input, so the rows of
#   largest input keep the FFN; nothing is learned or stored;
# - the **logistic gate**: a logistic classifier of $d + 1$ numbers, trained on a sample of the
#   fit rows to find the rows that an affine map of the typical rows gets most wrong. This is the
#   form of the gate of {cite:t}`balogh2026half`, who route each GPT-2 and Pythia token through
#   the MLP or through a precomputed linear map with it.
#
# What the logistic gate is taught matters most where a block has a sink. A least-squares map of
# all rows is pulled towards the few huge rows, so those are the rows it gets nearly right, and
# labels read from its errors would leave them with the map. The labels are therefore read from
# a map that starts on the rows of least output and is refitted once on the rows it errs on
# least (a step of least trimmed squares, `linrec.interventions.gating.needs_ffn`): the huge rows
# are then the ones it gets wrong. The norm gate needs no labels; it finds the huge rows only
# where they come with large inputs.
#
# For each model of `GATE_MODELS`, the blocks gated are the two whose plain swap costs most
# and one of median cost (or `GATE_BLOCKS`), each gated alone at every share of `GATE_SHARES`,
# and at 100 %, the plain map. Each is scored on the same held-out tokens as the costs above,
# with the same 95 % bootstrap interval over evaluation windows; the largest share whose ΔPPL
# stays under 1 % of the model's perplexity is the study's measure of how much of a block
# is linear. A gated block keeps its whole FFN for the rows it does not route, so it stores
# more numbers than the block, not fewer: what it can save is compute, and only where a kernel
# skips the routed rows. Everything is cached; the last column below is what the gated passes
# took the run that computed them.

# %%
GATE_MODELS = ch.profile.scored(GATE_MODELS) if GATE_MODELS else MODELS
print(ch.profile.left_out(GATE_MODELS, parameter="GATE_MODELS"))
gated = {
    m: linrec.experiment.gating.gating_study(
        ch.profile,
        m,
        blocks=GATE_BLOCKS,
        shares=GATE_SHARES,
        eval_tokens=EVAL_TOKENS or ch.profile.budget(m).eval_tokens // 4,
        budget=BUDGET,
        progress=ch.progress,
    )
    for m in GATE_MODELS
}
curves, largest, gated_blocks, agreements = (
    [run[part] for run in gated.values()]
    for part in ("curve", "largest", "blocks", "agreement")
)
summary = gating.gated_summary(curves, largest, gated_blocks)
ch.show(
    pd.concat(run["run"] for run in gated.values())[
        ["model", "fit_corpus", "fit_rows", "eval_tokens", "seconds"]
    ],
    {"seconds": ".0f"},
)

# %% [markdown]
# {numref}`fig-pruning-gate` draws each gated block's cost as its gate sends more of its rows
# to the map, with the first position apart beside it at the share of rows that rule routes.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "ΔPPL (symmetric-log axis, with its 95% bootstrap interval over evaluation windows as a band) of each gated block alone against the share of its rows routed to the affine map (100%: the plain swap), for the norm gate and the logistic gate; the diamond is the first position apart (first-apart:own), the dashed line 1% of the model's perplexity. The x axis is stretched towards 100%, where the few rows that decide a block's cost are.", "name": "fig-pruning-gate"}}
fig = gating_plots.curve_figure(pd.concat(curves), pd.concat(gated_blocks))
ch.figure(
    fig,
    {"curve": pd.concat(curves), "blocks": pd.concat(gated_blocks)},
    "fig-pruning-gate",
)

# %% [markdown]
# Block by block: the plain swap's cost and the first position apart's, the better gate and
# the largest share of rows it routes within 1 % of perplexity, that gate's cost at the share of
# the grid nearest the first-position rule's, and what $R^2_\text{lin}$ reads once the rows the
# gate keeps for the FFN are out: `r2_routed` is the held-out $R^2$ of the map on the rows routed
# at 90 %, `r2_gated` the share of the whole block's output variance the gated block recovers
# (the FFN's rows exact).

# %%
ch.show(
    summary[
        [
            "model", "block", "r2_lin", "top_rows_share_after_first", "first_position_share",
            "base_ppl", "affine", "first_apart", "gate", "largest_share", "matched_delta",
            "r2_routed", "r2_gated",
        ]
    ].rename(columns={"affine": "delta_ppl_affine", "first_apart": "delta_ppl_first_apart",
                      "matched_delta": "delta_ppl_gate_near_first"}),
)  # fmt: skip

# %% [markdown]
# ## What the measurement says of a gate
#
# If the few rows a map cannot carry are what makes a block costly, then the measurement should
# say ahead of time how far a gate gets: a block whose remaining variance sits in a handful of
# rows (`top_rows_share_after_first` near 1) should route most of its rows once those few keep the
# FFN, whatever its $R^2_\text{lin}$. {numref}`fig-pruning-gate-relation` sets the largest share
# against the measurement's columns; the table gives Spearman's $\rho$ over every gated block
# pooled, with a bootstrap interval (few blocks, so a wide one), and, for reference, $\rho$ with
# what the plain swap costs relative to perplexity (`affine_relative`).

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The better gate's largest share of rows routed to the map with ΔPPL under 1% of perplexity, against R²_lin with and without the first position and against the share of the output variance in the largest rows (first position out) and at the first position; one point per gated block, hollow where the plain affine swap was within 1% already.", "name": "fig-pruning-gate-relation"}}
fig = gating_plots.relation_figure(summary)
ch.figure(fig, summary, "fig-pruning-gate-relation")

# %%
related = gating.relations(summary, seed=SEED)
ch.show(related, {"rho": "+.2f", "low": "+.2f", "high": "+.2f"})

# %% [markdown]
# ## Does a gate carry from one text to another?
#
# A gate is trained on the rows of one text. If the rows that need the FFN are the same kind of
# row wherever they occur, a gate trained on another text should pick the same ones. Two logistic
# gates per block, one trained on the model's fit text and one on a second corpus of the profile,
# each on all but one fold of a sample of its text's rows, both at a 90 % share, are compared on
# the held-out fold of each text, rows neither was trained on: `alike` is the share of rows both
# route the same way, `chance` what two gates that pick their 10 % at random would share, and
# Cohen's $\kappa$ how far above chance the two are (0: chance, 1: the same rows);
# `score_correlation` is the Pearson correlation of their two scores.

# %%
agreement = gating.agreement_summary(agreements)
ch.show(
    agreement.groupby(["model", "gate", "other", "rows_of"], sort=False)[
        ["held_out_rows", "alike", "chance", "kappa", "score_correlation"]
    ].median(),
    {"kappa": "+.2f", "score_correlation": "+.2f", "held_out_rows": ",.0f"},
    fold="Per model and held-out text, the median over its gated blocks",
)

# %% [markdown]
# ## Beside the study
#
# The study's own figures, as its abstract reports them, beside what this run measured on its
# own models. They are set side by side, not compared as equals: the study sweeps the layers of
# GPT-2 and Pythia models of 162M to 2.8B parameters, on its own corpora and protocol, while this
# run gates a few blocks of each of its models, chosen as its costliest swaps and one typical
# block. Under the `offline` profile those models are small ones trained here and SmolLM2-135M,
# not GPT-2 or Pythia (the zoo's `zoo-gpt2` and `zoo-neox` share only the two families'
# architectures); under `paper` they include GPT-2 and Pythia-160m, the study's two families,
# though not necessarily its sizes. The cross-text rows differ in kind as well: the study's
# routing lists are per token, built by token identity, while the gates here read each row's
# whole FFN input, and each is trained on the errors of its own text's map.

# %%
ch.show(gating.beside_the_study(summary, agreement))

# %% [markdown]
# ## What the gate says
#
# The rules, fixed before any number was computed (`linrec.analysis.gating.RULE`, applied by
# `gating_claims` in the same module):

# %%
ch.markdown(gating.RULE)

# %%
ch.report(gating.gating_claims(summary, agreement, related), figure="fig-pruning-gate")

# %% [markdown]
# **For practitioners.** Where a block's plain swap is too costly, the curve above says whether
# the cost sits in a few rows: a curve that stays under the budget up to 90 % or 99 % and rises
# only at 100 % belongs to a block that a gate (`linrec replace --kind gated:logistic:0.9`, or
# `gated:norm:0.9`) or the first position apart (`--kind first-apart:own`) can rescue; a curve
# that rises early belongs to a block that is nonlinear throughout, for which no cheap gate will
# do. A gated block stores its map and gate beside the whole FFN, so it shrinks nothing on disk;
# whether it runs faster depends on a kernel that skips the routed rows, which only measuring the
# decoding speed on the target device can tell.
