# %% [markdown]
# # Heterogeneity: recoverability changes from block to block
#
# **Claim under test.** Inside one trained model, how much of an FFN block a closed-form affine map
# recovers is not a constant of the architecture: it varies from block to block, by a lot between
# neighbours and not monotonically with depth; the paper reports adjacent blocks ranging from above
# 0.99 to below 0.3 {cite}`whipp2026linear` (its Figure 2). Swapping a block for its affine map shows
# what the number means for the model's predictions.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: every model of the profile, real and trained here alike
SWAP = True  # the zero-shot swap ΔPPL beneath the profiles (one perplexity pass per block and model)
SWAP_TOKENS = None  # eval tokens per perplexity pass; None: a quarter of each model's evaluation tokens
# the paper's bounds: "near-linear" above HIGH, "strongly nonlinear" below LOW
HIGH, LOW = 0.99, 0.3
SIGMAS = 2.0  # a step between adjacent blocks counts when it exceeds this many k-fold std
DEPENDS = 0.05  # a block's headline depends on the first position when leaving it out moves R²_lin this much

# %%
import pandas as pd

import linrec
from linrec.analysis import depth, positions
from linrec.experiment import measurement
from linrec.notebook import chapter
from linrec.plots import depth as depth_plots
from linrec.report import tables

ch = chapter.begin(
    "02_heterogeneity",
    globals(),
    names_or_none=["MODELS"],
    flag=["SWAP"],
    positive_int_or_none=["SWAP_TOKENS"],
    fraction=["HIGH", "LOW", "DEPENDS"],
    positive_number=["SIGMAS"],
)
MODELS = list(MODELS or ch.profile.models)

# %% [markdown]
# ## Measuring every block of every model
#
# Each model of the profile is run once over its own main text, and every FFN block's input and
# output rows are summarised in float64 moments (chapter 1). The windows are spread evenly over the
# whole text, never cross a document (a module of the standard library, a book of the Bible), and
# the folds deal out whole documents: each fold's map is fitted on the other folds and scored on
# documents it never saw, once per fold. {numref}`fig-heterogeneity` shows the mean over folds
# and, as error bars, their standard deviation. Each model has its own budget, fixed in the
# profile before any result: the models trained here read the text they were trained on, the
# real models read English prose, and a real model gets 64 captured rows per input dimension,
# which the next section checks is enough.
# The measurements are cached, so later chapters reuse them rather than running the models again.

# %%
measured = {
    m: measurement.measurement(ch.profile, m, progress=ch.progress) for m in MODELS
}
table = depth.depth_table(measured.values(), ch.profile)
budgets = pd.DataFrame(
    [
        {
            "model": m,
            "text": r.info.corpus,
            "rows per block": r.info.rows,
            "input width": int(table[table.model == m].d_in.iloc[0]),
            "rows per input dimension": r.info.rows
            / table[table.model == m].d_in.iloc[0],
            "folds (by document)": r.info.folds,
            "blocks": len(r.blocks),
        }
        for m, r in measured.items()
    ]
)
ch.show(budgets, {"rows per input dimension": ".0f"})

# %%
ch.show(
    table[
        [
            "model",
            "block",
            "r2_lin",
            "r2_lin_std",
            "r2_lin_half_rows",
            "first_position_share",
            "r2_lin_after_first",
            "r2_feature_median",
            "input_condition",
            "null_dims",
        ]
    ],
    fold="R²_lin with its k-fold std, at half the training rows, the first position's share and R²_lin without it, "
    "the median per-feature R², the input condition number and null dims of every block",
)

# %% [markdown]
# ## Enough rows?
#
# A fit of $d$ inputs on too few rows explains noise in the rows it saw and less of the rows it did
# not, so held-out R²_lin starts low and rises towards its limit as rows are added. Each model's
# folds give that curve at no extra cost: the same k-fold score, computed on 2, 3, …, k of the folds,
# trains each map on a growing share of the rows. {numref}`fig-heterogeneity-rows` draws it in rows
# per input dimension, so that models of different widths can be read on one axis; the table's
# `r2_lin_half_rows` column is the same check on every block at half the training rows.

# %% mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ against the training rows each fit is given, per input dimension (log scale), for every model of the profile: the median over its blocks (solid) and its lowest block (dashed). A curve that has flattened at its right end is measured to convergence.", "name": "fig-heterogeneity-rows"}}
convergence = pd.concat(
    [linrec.analysis.convergence.measured_convergence(r) for r in measured.values()],
    ignore_index=True,
)
fig = depth_plots.convergence_figure(convergence, order=MODELS)
ch.figure(fig, convergence, "fig-heterogeneity-rows")

# %%
ch.report(
    [
        linrec.analysis.convergence.convergence_claim(
            convergence[convergence.model == m]
        ).of(m)
        for m in MODELS
    ],
    figure="fig-heterogeneity-rows",
)

# %% [markdown]
# ## The zero-shot swap
#
# A profile says how much *variance* the affine map misses; the swap says what missing it costs.
# Each block alone is replaced by its closed-form map, fitted on all captured rows, and the model's
# perplexity is measured on the evaluation split of the model's own text, which none of the fitted
# rows came from. Nothing is retrained: this is the paper's "zero-shot" swap. Every block of every
# model is swapped, so no subset can miss the extremes (the `scale` profile, whose models are up to
# ten times larger, swaps only the blocks at five fixed relative depths, those of the chapter
# across scale). Every variant of a model is scored on the same tokens, so the differences are much
# steadier than the perplexities themselves; that is why a quarter of each model's evaluation
# tokens suffices here (chapter 5, on compression, combines swaps).

# %%
if SWAP:
    swaps = pd.concat(
        [
            linrec.experiment.swaps.affine_swaps(
                ch.profile,
                [r],
                max_tokens=SWAP_TOKENS or ch.profile.budget(m).eval_tokens // 4,
                progress=ch.progress,
                cache=True,
                blocks=ch.profile.swap_blocks(len(r.blocks)),
            )
            for m, r in measured.items()
        ],
        ignore_index=True,
    )
    ch.show(
        swaps.groupby("model", sort=False)
        .agg(
            text=("eval_corpus", "first"),
            tokens=("eval_tokens", "first"),
            ppl=("base_ppl", "first"),
        )
        .rename(
            columns={
                "text": "evaluation text",
                "tokens": "tokens per pass",
                "ppl": "PPL, unmodified",
            }
        )
    )
    wide = swaps.assign(cell=tables.with_interval(swaps, "delta_ppl")).pivot(
        index="block", columns="model", values="cell"
    )
    ch.show(
        wide[MODELS].rename(columns=lambda m: f"{m}: ΔPPL [95% interval]"),
        fold="ΔPPL of every block swapped alone, per model",
    )
else:
    swaps = pd.DataFrame(columns=["model", "block", "delta_ppl"])
    print("SWAP = False: the swap panel is left empty")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Top: held-out $R^2_\\text{lin}$ of every FFN block of every model of the profile ($k$-fold mean ± std), with the paper's reported bounds (0.99 and 0.3) dashed. Bottom: the change in perplexity when that block alone is swapped for its closed-form affine map (zero-shot, symmetric-log axis, with its 95% bootstrap interval over evaluation windows; empty when `SWAP` is off).", "name": "fig-heterogeneity"}}
fig = depth_plots.heterogeneity_figure(table, swaps, reference=(HIGH, LOW), order=MODELS)
ch.figure(fig, {"r2_lin": table, "swaps": swaps}, "fig-heterogeneity")

# %% [markdown]
# ## The numbers behind the figure
#
# For each model of {numref}`fig-heterogeneity`: the lowest and highest block, the range between them, the largest jump between
# *adjacent* blocks and its size in units of the combined k-fold spread
# $\sqrt{s_i^2 + s_{i+1}^2}$, and how many adjacent steps go up or down by more than `SIGMAS` of those
# units. A profile with at least one such rise and one such fall is called non-monotone.

# %%
summary = depth.depth_summary(table, sigmas=SIGMAS)
ch.show(summary)

# %% [markdown]
# The paper's claim has four parts, and each is checked separately below: the column "this run
# (measured)" is computed from the table above, the column "paper (reported)" is the paper's. The
# first rows pool every model of the profile; the rows after a model's name judge that model alone.

# %%
claims = depth.heterogeneity_claims(table, high=HIGH, low=LOW, sigmas=SIGMAS) + (
    [depth.swap_range(swaps)] if SWAP else []
)
for m in MODELS:
    claims += [
        c.of(m)
        for c in depth.heterogeneity_claims(
            table[table.model == m], high=HIGH, low=LOW, sigmas=SIGMAS
        )
    ]
ch.report(claims, figure="fig-heterogeneity")

# %% tags=["remove-input"]
ch.caveat()

# %% [markdown]
# Under `paper` the sentence above is a direct test of the paper's Figure 2. The part the small
# offline models most often miss is the extreme, "below 0.3 next to above 0.99", which only the
# `paper` profile can check.
#
# ## Where the variance sits: the first position
#
# Every row counts once in R²_lin, but rows are not alike. The first token of a window is special to
# a causal model: it attends only to itself, and many trained models give it very large activations,
# whatever the token is (other positions use it as a place to park attention, an "attention sink").
# A block whose first-position rows are large and easy to predict can show a high global R²_lin
# that says little about the other positions. The capture keeps each window's first row apart, so
# every table above already carries the first position's share of each block's output variance
# (about the all-rows mean) and R²_lin with that position left out of both fit and evaluation;
# {numref}`fig-heterogeneity-positions` sets them side by side. A block is named below when leaving
# the first position out moves its R²_lin by `DEPENDS` or more: its headline is about the sink.

# %% mystnb={"figure": {"caption": "Left: held-out $R^2_\\text{lin}$ of every block on all rows and with the first position of every window left out of fit and evaluation (values below −1 are drawn at −1 and labelled). Right: the share of each block's output sum of squares carried by the first position; dashed: its share of the rows.", "name": "fig-heterogeneity-positions"}}
sinks = positions.sink_table(table, ch.profile.seq_len)
fig = depth_plots.position_figure(sinks, order=MODELS)
ch.figure(fig, sinks, "fig-heterogeneity-positions")

# %%
pooled = positions.position_claims(sinks, DEPENDS)
ch.report(
    pooled
    + [
        c.of(m)
        for m in MODELS
        for c in positions.position_claims(sinks[sinks.model == m], DEPENDS)
    ],
    figure="fig-heterogeneity-positions",
)
heavy, moved = positions.position_extremes(sinks)
ch.glue(
    rows_first=heavy.rows_first,
    variance_first=heavy.first_position_share,
    heavy_block=f"{heavy.model} block {int(heavy.block)}",
    change=moved.change,
    moved_block=f"{moved.model} block {int(moved.block)}, {moved.r2_lin:.3f} → {moved.r2_lin_after_first:.3f}",
    median_change=sinks.change.median(),
    reading=positions.dependence_reading(sinks, DEPENDS),
)
few = pooled[-1]  # the blocks whose R²_lin without the first position rests on a few rows
ch.glue(few_share=positions.FEW, few=f"{few.measured} blocks ({few.note})")
ch.show(
    sinks[
        [
            "model",
            "block",
            "r2_lin",
            "r2_lin_after_first",
            "change",
            "first_position_share",
            "top_rows_share_after_first",
        ]
    ],
    fold="R²_lin of every block with and without the first position, and what its largest rows carry",
)

# %% [markdown]
# The first position is {glue:text}`rows_first:.1%` of the rows. Its share of a block's output
# variance reaches **{glue:text}`variance_first:.1%`** ({glue:text}`heavy_block`), and leaving it out
# moves R²_lin by at most **{glue:text}`change:+.3f`** ({glue:text}`moved_block`); the median change
# over all blocks is {glue:text}`median_change:+.4f`. In this run {glue:text}`reading`.
#
# Where a block's first position carries most of its output variance, its high variance-weighted
# R²_lin is a statement about one large, predictable row per window: a map that gets that row right
# is near-perfect by the measure and may be poor on every ordinary token. For such blocks the number
# without the first position is the one that says what the block does to text, and chapter 5 shows
# what replacing them costs.
#
# Leaving the first position out does not always leave ordinary rows behind. The last column is the
# share of the remaining output variance carried by the largest 0.1 % of the remaining rows (found
# exactly in the same pass: `linrec.core.tails`); for a block where that share is large, a few
# dozen rows decide each fold's R²_lin, and the mean over folds depends on which folds drew them (the
# table's `r2_lin_after_first_folds` lists each fold's value). In this run the largest 0.1 % carry
# {glue:text}`few_share:.0%` or more of the rest in {glue:text}`few`.
#
# What the real models here can show: that well-trained language models of two families, with
# different activations (SiLU and GELU gates) and norm placements, have strongly heterogeneous
# blocks, and how their first-position rows shape the number. What they cannot show: GPT-2's or
# Pythia's own profiles (the paper's models need the hub), or whether the 4-bit rounding of their
# packaged weights moved any block (their full-precision weights are not packaged).

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** Per-block recoverability of every FFN block of the profile's models with a held-out
# error bar, how far apart neighbouring blocks are compared with that error bar, whether the profile
# goes up and down with depth, and what swapping each block for its affine map costs in perplexity
# on unseen text. Whether high R²_lin and small ΔPPL go together block by block can be read off the
# two panels of {numref}`fig-heterogeneity`, and how much of each block's number rests on the first
# position(s) of the windows off {numref}`fig-heterogeneity-positions`.
#
# **Cannot show.** Why a block is more or less linear: that the differences are *learned* rather than
# fixed by the architecture or by the inputs each block happens to see is the next chapter's
# question. The k-fold spread is a spread over folds of one capture from one corpus: it says how
# stable the number is to which sequences are held out, not how it changes with another corpus
# (chapter 7) or another training seed (chapter 3). A single-block swap says nothing about swapping
# several blocks at once (chapter 5), and ΔPPL is measured on one evaluation text.
#
# ## Exercises
#
# :::{exercise} First in line
# :label: ex-heterogeneity-first-in-line
# For each model, which block would you replace by its affine map first, and
# what does it cost? Is it the block with the highest R²_lin?
# :::
#
# :::{solution-start} ex-heterogeneity-first-in-line
# :class: dropdown
# :::
# Take the block with the smallest ΔPPL and compare it with the block with the highest R²_lin; the
# code below lists both per model. They need not coincide: R²_lin is the fraction of the block's
# *own* output variance the map misses, while ΔPPL depends on how large that missed part is next to
# the residual stream and on whether later layers read it. A block with a large output can cost
# more with a few percent missing than a block with a small output and a fifth missing.

# %% tags=["solution"]
if SWAP:
    merged = table.merge(swaps[["model", "block", "delta_ppl"]], on=["model", "block"])
    by_model = merged.groupby("model")
    best_fit = merged.loc[by_model["r2_lin"].idxmax()].set_index("model")
    cheapest = merged.loc[by_model["delta_ppl"].idxmin()].set_index("model")
    ch.show(
        pd.DataFrame(
            {
                "highest R²_lin: block": best_fit["block"],
                "cheapest swap: block": cheapest["block"],
                "cheapest swap: ΔPPL": cheapest["delta_ppl"],
            }
        )
    )

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Signal or noise?
# :label: ex-heterogeneity-signal-or-noise
# The error bars are the standard deviation over folds. In what sense is a
# jump of two such units between adjacent blocks a conservative threshold, and in what sense is it
# lenient?
# :::
#
# :::{solution} ex-heterogeneity-signal-or-noise
# :class: dropdown
# Conservative: the plotted value is the *mean* over $k$ folds, whose fluctuation is about
# $s/\sqrt{k}$, not $s$; and both blocks are scored on the same held-out sequences, so their
# errors are likely to be positively correlated and the *difference* fluctuates less than
# $\sqrt{s_i^2 + s_{i+1}^2}$ suggests (a paired, per-fold comparison would be sharper still).
# Lenient: the spread over folds misses everything the folds share, namely which sequences were
# captured at all and the rows the training splits have in common, so it understates how much the
# number would change with a new capture of the same corpus. The `jump_sigma` column gives the
# largest jump in these units; chapter 7 shows how much a block moves with another corpus.
# :::
#
# :::{exercise} Does R²_lin rank the swaps?
# :label: ex-heterogeneity-rank-the-swaps
# Across the blocks of each model, compute Spearman's rank
# correlation between R²_lin and ΔPPL. What sign would make R²_lin a good guide to which block to
# swap, and what sign do you find?
# :::
#
# :::{solution-start} ex-heterogeneity-rank-the-swaps
# :class: dropdown
# :::
# A good guide gives a negative ρ: the more of a block the map recovers, the less the swap hurts.
# Whether that holds is an empirical question, and the code below measures it. A positive ρ means
# the blocks the map recovers best are among those whose replacement costs most, for the reason in
# {ref}`exercise 1 <ex-heterogeneity-first-in-line>`: R²_lin is relative to each block's own output variance, ΔPPL to what the model needs.
# With a handful of blocks per model the estimate is very uncertain; chapter 5 pools models and adds
# a confidence interval.

# %% tags=["solution"]
if SWAP:
    rho = by_model[["r2_lin", "delta_ppl"]].corr(method="spearman").xs("r2_lin", level=1)
    ch.show(rho["delta_ppl"].rename("Spearman ρ(R²_lin, ΔPPL)").to_frame())

# %% [markdown]
# :::{solution-end}
# :::
#
# ## Provenance

# %%
ch.provenance()
