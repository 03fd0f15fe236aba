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
# really costs, and asks which score predicts that cost.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: the profile's models (offline: all but Gemma 3, whose passes cost some 20 minutes more)
EVAL_TOKENS = None  # held-out tokens per perplexity pass; None: a quarter of each model's evaluation tokens
BUDGET = "5%"  # the practical test: drop blocks until the joint ΔPPL passes this (share of PPL, or absolute)
SINK_MODEL = None  # whose swaps are drawn block by block; None: the first model with a sink block, else the first

# %%
import pandas as pd

import linrec
from linrec.analysis import pruning
from linrec.notebook import chapter
from linrec.plots import compression as compression_plots
from linrec.plots import pruning as pruning_plots

ch = chapter.begin(
    "11_pruning",
    globals(),
    names_or_none=["MODELS"],
    name_or_none=["SINK_MODEL"],
    positive_int_or_none=["EVAL_TOKENS"],
    ppl_budget=["BUDGET"],
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
