# %% [markdown]
# # Across scale: does the profile survive from small models to large ones?
#
# **Question.** The paper measures three models of about 160M parameters each
# {cite}`whipp2026linear`. Is a profile that changes from block to block a trait of small models
# that larger ones smooth out, or does it persist? This chapter is not in the paper: it measures
# the same quantities on a series of models of different sizes and sets every number against the
# model's parameter count. Under `offline` the series is the profile's own models (the small ones
# trained here, SmolLM2-135M and Gemma 3 270M); under `scale` (`make install-scale`, then
# `make book PROFILE=scale`) it adds Qwen2.5-Coder 0.5B and 1.5B; under `paper` it is the Pythia
# suite from 70M to 1.4B parameters (to 12B on a GPU): one training recipe at many sizes, the
# cleanest scale series there is.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: the profile's scale series (its series, else its models; larger ones on a GPU)
SWAP = True  # the zero-shot swap ΔPPL of the blocks at fixed relative depths (one perplexity pass each)
SWAP_TOKENS = None  # eval tokens per perplexity pass; None: a quarter of each model's evaluation tokens
KEEPS = 0.5  # heterogeneity persists when the largest model keeps this share of the smallest's spread (sd)

# %%
from linrec.analysis import depth, scale
from linrec.experiment import measurement, sizes
from linrec.notebook import chapter
from linrec.plots import scale as scale_plots

ch = chapter.begin(
    "10_scale",
    globals(),
    names_or_none=["MODELS"],
    flag=["SWAP"],
    positive_int_or_none=["SWAP_TOKENS"],
    fraction=["KEEPS"],
)
series = ch.profile.series_profile()
MODELS = list(MODELS or series.models)

# %% [markdown]
# ## The series
#
# Each model is measured as in chapter 2: once over its own main text, every FFN block's rows in
# float64 moments, five folds by document, and the first position of every window kept apart. The
# table gives each model's size and the statistics of its profile that the rest of the chapter sets
# against size: the median, range, interquartile range (IQR) and standard deviation of R²_lin over
# its blocks, the
# largest step between adjacent blocks, the first position's share of the output variance (its
# median, mean and largest over blocks), R²_lin without the first position, and how far the median block is from
# converged (R²_lin minus R²_lin at half the training rows; near 0 is converged). Parameters are
# counted as loaded, each tensor once: the Qwen models load with their output matrix apart from the
# input embedding, 151,936 × width numbers more than their published counts, where the two are one.

# %%
measured = {m: measurement.measurement(series, m, progress=ch.progress) for m in MODELS}
parameters = {m: sizes.parameter_count(series, m, progress=ch.progress) for m in MODELS}
table = scale.with_depth(depth.depth_table(measured.values(), series))
summary = scale.scale_summary(table, parameters)
ch.show(
    summary,
    {"parameters": ",d", "rows_per_dim": ".0f"},
    fold="Each model's size and the statistics of its R²_lin profile, smallest first",
)

# %% [markdown]
# ## The profiles at relative depth
#
# Models of different depths line up at relative depth: 0 is the first block, 1 the last.
# {numref}`fig-scale-profiles` draws each model in its own panel, smallest first, so that no line
# hides another.

# %% mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every FFN block against its relative depth, one panel per model, smallest first ($k$-fold mean ± std); dashed: with the first position of every window left out of fit and evaluation (values below the axis are drawn at its floor).", "name": "fig-scale-profiles"}}
fig = scale_plots.depth_curves_figure(table, summary)
ch.figure(fig, table, "fig-scale-profiles")

# %% [markdown]
# ## Swapping the same places in every model
#
# Which blocks to swap was fixed before any result: in every model, the blocks nearest the relative
# depths 0, ¼, ½, ¾ and 1. Each is replaced alone by its closed-form affine map (fitted on all
# captured rows) and the model's perplexity is scored on the evaluation split of its own text. A
# ΔPPL is shown as a share of the model's own perplexity, so that models of different quality can be
# set side by side. Where a profile's chapter 2 already swapped these blocks, the scores are read
# from the cache.

# %%
if SWAP:
    swaps = scale.fixed_depth_swaps(
        series, measured, table, SWAP_TOKENS, progress=ch.progress
    )
    ch.show(
        swaps[["model", "block", "depth", "r2_lin", "base_ppl", "delta_ppl", "relative"]],
        {"relative": ".2%"},
        fold="Each fixed block swapped alone: its R²_lin, the perplexity before, ΔPPL and its share",
    )
else:
    swaps = scale.NO_SWAPS
    print("SWAP = False: the swap panel is left empty")

# %% [markdown]
# ## Against size
#
# {numref}`fig-scale-trends` sets each model's statistics against its parameters.

# %% mystnb={"figure": {"caption": "Against parameters (log scale), one point per model. Left: the spread of held-out $R^2_\\text{lin}$ over a model's blocks (range, interquartile range, standard deviation, largest step between adjacent blocks). Middle: the share of a block's output variance carried by the first position of each window (mean over blocks and largest block), and the median $R^2_\\text{lin}$ without it. Right: ΔPPL of swapping the block at each fixed relative depth, as a share of the model's perplexity (symmetric-log axis).", "name": "fig-scale-trends"}}
fig = scale_plots.trends_figure(summary, swaps)
ch.figure(fig, {"summary": summary, "swaps": swaps}, "fig-scale-trends")

# %% [markdown]
# Two statements are tested, each by a rule fixed before the numbers (both written in
# `linrec.analysis.scale.scale_claims`): the profile's spread does
# not shrink toward a uniform profile as models grow (the largest model keeps at least `KEEPS` of
# the smallest model's standard deviation of R²_lin over blocks, with 95% confidence; of the
# spreads in the table it is the one every block counts in, so it depends least on which blocks
# happen to be measured), and the first position's share changes with size
# (the slope of its mean over blocks on log parameters has a 95% interval that excludes 0; the mean,
# not the median, because a sink sits in a few blocks and the median block does not see it). Both intervals
# resample each model's blocks: they say how firmly these models' blocks fix the numbers, not how
# another set of models would behave.

# %%
ch.report(
    scale.scale_claims(table, parameters, keeps=KEEPS, seed=SEED),
    figure="fig-scale-trends",
)

# %% [markdown]
# ## What a few models can and cannot show
#
# A trend across four or six models is a description of those models, not a law. The sizes here
# also differ in more than size: under `offline` the smallest models were trained here for minutes
# on Python's standard library, SmolLM2-135M and the Qwen models are instruction-tuned, Gemma 3 270M
# is a base model, and the Qwen models are tuned for code while the text measured is English prose;
# their weights are 4-bit quantisations. A difference between two of them may come from the recipe,
# the data or the quantisation as well as the size. What the series can show is whether the
# profile's heterogeneity and the first position's weight are *confined* to small models: one large
# model with a heterogeneous profile is enough to say they are not. What it cannot show is a
# scaling law (a slope fitted through so few points, of different recipes, would not survive the
# next model). The Pythia suite under `paper` holds the recipe and the data fixed across eight
# sizes; it is the series to read a trend from.
#
# Larger models are a matter of memory and time, not of method. Every fold's moments are $3d^2$
# float64 numbers per block; a capture keeps only the live fold of each block in memory and moves
# finished folds to disk (`linrec measure --spill DIR`; the book does it for any model whose moments
# exceed 2 GB), so memory is the model's weights plus one fold of moments, and the forward pass over
# 64 rows per input dimension is the time. Where the moments of every block still do not fit, the
# capture plans its memory (`--memory`, by default most of what is free): it measures the blocks in
# groups that fit, each resumed from the residual stream where the previous group stopped, so the
# forward pass is still paid about once and the numbers are those of one pass, to the last bit. The
# table gives these sizes for a few larger open models.

# %%
ch.show(
    scale.capture_needs(scale.LARGER, folds=ch.profile.folds),
    {"rows": ",d"},
    fold="Measuring every block of a larger model at 64 rows per input dimension: memory, disk and arithmetic",
)

# %% [markdown]
# The forward pass's arithmetic divided by a machine's sustained float32 rate gives most of a
# capture's time; the float64 sums add to it (for SmolLM2 on this book's two CPU cores, about half
# again). The page 'Models, texts and profiles' gives what this book's own builds took.
#
# ## Exercises
#
# :::{exercise} A slope from four points
# :label: ex-scale-slope
# The sink claim's interval resamples blocks, not models. Drop one model (set `MODELS`) and run the
# chapter again: how much does the slope move? What does that say about the interval's meaning?
# :::
#
# :::{solution} ex-scale-slope
# :class: dropdown
# Leaving out one of few models can move the slope by more than its interval is wide, because the
# interval only describes how well each model's blocks fix that model's median, with the models
# taken as given. The spread of slopes over "leave one model out" is a rough measure of the
# between-model uncertainty that the interval does not contain; with so few models it is the larger
# of the two.
# :::
#
# ## Provenance

# %%
ch.provenance()
