# %% [markdown]
# # Heterogeneity: recoverability changes from block to block
#
# **Claim under test.** Inside one trained model, how much of an FFN block a closed-form affine map
# recovers is not a constant of the architecture: it varies from block to block, by a lot between
# neighbours and not monotonically with depth; the paper reports adjacent blocks ranging from above
# 0.99 to below 0.3 {cite}`whipp2026linear` (its Figure 2). Swapping a block for its affine map shows
# what the number means for the model's predictions.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the book build injects its own
SEED = 0
MODELS = None  # None: every model of the profile
SWAP = True  # the zero-shot swap ΔPPL beneath the profiles (one perplexity pass per block and model)
SWAP_TOKENS = None  # eval tokens per perplexity pass; None: a quarter of the profile's eval_tokens
HIGH, LOW = 0.99, 0.3  # the paper's bounds: "near-linear" above HIGH, "strongly nonlinear" below LOW
SIGMAS = 2.0  # a step between adjacent blocks counts when it exceeds this many k-fold std
FIRST = 1  # leading positions of each window set aside in "Where the rows come from" (position 0 alone by default)
PRETRAINED = None  # real pretrained models measured beside the zoo; None: the profile's (SmolLM2-135M offline)

# %%
import pandas as pd
from IPython.display import display

from linrec.analysis.depth import depth_summary, depth_table, heterogeneity_claims, swap_range
from linrec.analysis.positions import position_claims, position_effect, position_extremes
from linrec.analysis.pretrained import convergence_claim, row_convergence
from linrec.book import chapter
from linrec.book.params import check_params
from linrec.experiment.measurement import measurement
from linrec.experiment.swaps import affine_swaps
from linrec.plots import depth, pretrained
from linrec.report.tables import show, with_interval

check_params(globals(), integer=["SEED"], names_or_none=["MODELS"], names_empty_or_none=["PRETRAINED"], flag=["SWAP"],
             positive_int=["FIRST"], positive_int_or_none=["SWAP_TOKENS"], fraction=["HIGH", "LOW"], positive_number=["SIGMAS"])
ch = chapter.start("02_heterogeneity", PROFILE, seed=SEED)
profile = ch.profile
PROFILE = profile.name
MODELS = list(MODELS or profile.models)
PRETRAINED = list(profile.pretrained if PRETRAINED is None else PRETRAINED)
SWAP_TOKENS = SWAP_TOKENS or profile.eval_tokens // 4

# %% [markdown]
# ## Measuring every block of every model
#
# Each model of the profile is run once over the profile's main corpus, and every FFN block's
# input and output rows are summarised in float64 moments, split into folds by sequence
# (chapter 1). The closed-form map is fitted on all folds but one and scored on the one held out,
# once per fold; {numref}`fig-heterogeneity` shows the mean over folds and, as error bars, their
# standard deviation.
# The measurements are cached, so later chapters reuse them rather than running the models again.

# %%
measured = {m: measurement(profile, m, progress=ch.progress) for m in MODELS}
table = depth_table(measured.values(), profile)
info = next(iter(measured.values())).info
print(f"{len(MODELS)} models, {info.rows:,} rows per block on {info.corpus}, "
      f"{info.folds} folds by sequence (each held-out fold ≈ {info.rows // info.folds:,} rows)")
show(table[["model", "block", "r2_lin", "r2_lin_std", "r2_feature_median", "input_condition", "null_dims"]],
     fold="R²_lin, its k-fold std, the median per-feature R², the input condition number and null dims of every block")

# %% [markdown]
# ## The zero-shot swap
#
# A profile says how much *variance* the affine map misses; the swap says what missing it costs.
# Each block alone is replaced by its closed-form map, fitted on all captured rows, and the model's
# perplexity is measured on the eval split of the profile's evaluation corpus, text that none of the
# fitted rows came from. Nothing is retrained: this is the paper's "zero-shot" swap. Every variant of
# a model is scored on the same tokens, so the differences are much steadier than the perplexities
# themselves; that is why a quarter of the profile's evaluation tokens suffices here (chapter 5, on
# compression, uses all of them).

# %%
if SWAP:
    swaps = affine_swaps(profile, measured.values(), max_tokens=SWAP_TOKENS, progress=ch.progress, cache=True)
    print(f"perplexity on {swaps['eval_tokens'].iloc[0]:,} tokens of {swaps['eval_corpus'].iloc[0]} (eval split)")
    wide = swaps.assign(cell=with_interval(swaps, "delta_ppl")).pivot(index="block", columns="model", values="cell")
    display(show(wide[MODELS].rename(columns=lambda m: f"{m}: ΔPPL [95% interval]")))
    display(show(swaps.groupby("model")["base_ppl"].first().loc[MODELS].rename("PPL, unmodified").to_frame()))
else:
    swaps = pd.DataFrame(columns=["model", "block", "delta_ppl"])
    print("SWAP = False: the swap panel is left empty")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Top: held-out $R^2_\\text{lin}$ of every FFN block of every model of the profile ($k$-fold mean ± std), with the paper's reported bounds (0.99 and 0.3) dashed. Bottom: the change in perplexity when that block alone is swapped for its closed-form affine map (zero-shot, symmetric-log axis, with its 95% bootstrap interval over evaluation windows; empty when `SWAP` is off).", "name": "fig-heterogeneity"}}
fig = depth.heterogeneity_figure(table, swaps, reference=(HIGH, LOW), order=MODELS)
ch.figure(fig, {"r2_lin": table, "swaps": swaps}, "fig-heterogeneity")

# %% [markdown]
# ## The numbers behind the figure
#
# For each model of {numref}`fig-heterogeneity`: the lowest and highest block, the range between them, the largest jump between
# *adjacent* blocks and its size in units of the combined k-fold spread
# $\sqrt{s_i^2 + s_{i+1}^2}$, and how many adjacent steps go up or down by more than `SIGMAS` of those
# units. A profile with at least one such rise and one such fall is called non-monotone.

# %%
summary = depth_summary(table, sigmas=SIGMAS)
show(summary)

# %% [markdown]
# The paper's claim has four parts, and each is checked separately below: the column "this run
# (measured)" is computed from the table above, the column "paper (reported)" is the paper's.

# %%
claims = heterogeneity_claims(table, high=HIGH, low=LOW, sigmas=SIGMAS) + ([swap_range(swaps)] if SWAP else [])
ch.report(claims, figure="fig-heterogeneity")

# %% tags=["remove-input"]
ch.caveat()

# %% [markdown]
# Under `paper` the sentence above is a direct test of the paper's Figure 2. The part the small
# offline models most often miss is the extreme, "below 0.3 next to above 0.99", which only the
# `paper` profile can check.
#
# ## Where the rows come from
#
# Every row counts once in R²_lin, but rows are not alike. The first token of a window is special to
# a causal model: it attends only to itself, and many GPT-2-style models give it very large
# activations, whatever the token is (other positions use it as a place to park attention). A block whose first-position
# rows are large and easy to predict can show a high global R²_lin that says little about the other
# positions. Here each block is measured a second time with the first `FIRST` position(s) of every
# window left out of the capture (not out of the model: every token is still computed from the
# whole window), and {numref}`fig-heterogeneity-positions` sets the two R²_lin side by side, with
# the share of the output variance the left-out positions carry (about the all-rows mean, so rows
# far from the rest count fully) against their share of the rows.

# %% mystnb={"figure": {"caption": "Left: held-out $R^2_\\text{lin}$ of every block on all rows and with the first position(s) of every window left out of the capture. Right: the share of each block's output sum of squares carried by those first positions; dashed: their share of the rows.", "name": "fig-heterogeneity-positions"}}
positions = pd.concat([position_effect(profile, m, FIRST, progress=ch.progress) for m in MODELS], ignore_index=True)
fig = depth.position_figure(positions, order=MODELS)
ch.figure(fig, positions, "fig-heterogeneity-positions")

# %%
ch.report(position_claims(positions, FIRST, profile.seq_len))
heavy, moved = position_extremes(positions)
ch.glue(first=FIRST, rows_first=heavy.rows_first, variance_first=heavy.variance_first,
        heavy_block=f"{heavy.model} block {int(heavy.block)}", change=moved.change,
        moved_block=f"{moved.model} block {int(moved.block)}, {moved.r2_lin:.3f} → {moved.r2_lin_later:.3f}",
        median_change=positions.change.median(),
        reading="no block's global R²_lin moves by 0.05 or more without its first positions"
        if positions.change.abs().max() < 0.05 else
        "some block's global R²_lin depends on its first positions: read those blocks' numbers with that in mind")
show(positions[["model", "block", "r2_lin", "r2_lin_later", "change", "variance_first"]],
     fold="R²_lin of every block with and without the first positions")

# %% [markdown]
# The first {glue:text}`first` position(s) are {glue:text}`rows_first:.1%` of the rows. Their share of a
# block's output variance reaches **{glue:text}`variance_first:.1%`** ({glue:text}`heavy_block`), and leaving
# them out moves R²_lin by at most **{glue:text}`change:+.3f`** ({glue:text}`moved_block`); the median change
# over all blocks is {glue:text}`median_change:+.4f`. So in this run {glue:text}`reading`.

# %% [markdown]
# ## A real pretrained model
#
# The zoo's models are small and were trained here for about a million tokens. The offline profile
# also measures a real language model that installs from the package index with nothing
# downloaded at run time: SmolLM2-135M-Instruct, a Llama-architecture model (RMSNorm, gated SiLU
# FFNs) with 30 blocks of width 576, trained by its authors on trillions of tokens, instruction-tuned,
# and shipped with its weights rounded to 4 bits (Q4_1), which linrec dequantises to float32 once.
# It is measured on the same rows of the same corpus as the zoo. At width 576 the profile's rows
# give each fit about 11 training rows per input dimension, so the first question is whether that
# is enough: each fit is repeated on fewer of the folds it already has, which needs no extra pass.

# %%
real = {m: measurement(profile, m, progress=ch.progress) for m in PRETRAINED}
real_table = depth_table(real.values(), profile) if real else pd.DataFrame()
convergence = {m: row_convergence(r.moments, r.rcond) for m, r in real.items()}
if not real:
    print("This profile measures no pretrained model (PRETRAINED is empty); the sections on one are skipped.")
for m, conv in convergence.items():
    gained = convergence_claim(conv).of(m)
    ch.report([gained])
    display(gained)
    display(show(conv.pivot(index="block", columns="train_rows", values="r2_lin")
                 .rename(columns=lambda rows: f"R²_lin, {rows:,} training rows"),
                 fold=f"{m}: R²_lin of every block against the number of training rows"))

# %% [markdown]
# The table gives held-out R²_lin per block (rows) against the number of training rows per fit
# (columns; the last is the profile's own number). Where the last steps still raise it, the profile below is a lower bound on what more text
# would show, most in the least linear blocks, and a ranking of blocks rather than final values.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The real pretrained model of the profile: held-out $R^2_\\text{lin}$ of each of its FFN blocks, variance-weighted ($k$-fold mean ± std), and the median over output features of each feature's own $R^2$.", "name": "fig-heterogeneity-real"}}
for m in PRETRAINED:
    fig = pretrained.profile_figure(real_table[real_table.model == m], f"{m}: R²_lin per block")
    ch.figure(fig, real_table[real_table.model == m], f"fig-heterogeneity-real-{m}")

# %%
for m in PRETRAINED:
    ch.report([c.of(m) for c in heterogeneity_claims(real_table[real_table.model == m], high=HIGH, low=LOW,
                                                      sigmas=SIGMAS)], figure="fig-heterogeneity-real")

# %% [markdown]
# The variance-weighted number and the per-feature median part ways in some blocks: where one output
# channel carries most of a block's variance, the map that predicts that channel scores high on the
# first whatever it does with the other 575. This model has such a channel, and it lives at the
# first position of every window. The figure below repeats the position
# analysis of the previous section on it.

# %% mystnb={"figure": {"caption": "The real pretrained model. Left: held-out $R^2_\\text{lin}$ of every block on all rows and with the first position(s) of every window left out (values below −1 are drawn at −1 and labelled). Right: the share of each block's output sum of squares carried by those positions; dashed: their share of the rows.", "name": "fig-heterogeneity-real-positions"}}
real_positions = pd.concat([position_effect(profile, m, FIRST, progress=ch.progress) for m in PRETRAINED],
                           ignore_index=True) if PRETRAINED else pd.DataFrame()
if PRETRAINED:
    fig = depth.position_figure(real_positions, order=PRETRAINED)
    ch.figure(fig, real_positions, "fig-heterogeneity-real-positions")

# %%
real_reading = dict.fromkeys(["real_heavy", "real_heavy_share", "real_moved", "real_steady", "real_steady_change"],
                             "n/a (no pretrained model in this profile)")
if PRETRAINED:
    ch.report([c.of(", ".join(PRETRAINED)) for c in position_claims(real_positions, FIRST, profile.seq_len)])
    real_heavy, real_moved = position_extremes(real_positions)
    steady = real_positions[real_positions.variance_first < 0.01]
    real_reading = {"real_heavy": f"{real_heavy.model} block {int(real_heavy.block)}",
                    "real_heavy_share": f"{real_heavy.variance_first:.1%}",
                    "real_moved": f"block {int(real_moved.block)}: {real_moved.r2_lin:.3f} → {real_moved.r2_lin_later:.3f}",
                    "real_steady": f"{len(steady)} of {len(real_positions)}",
                    "real_steady_change": f"{steady.change.abs().max():.4f}" if len(steady) else "n/a"}
    display(show(real_positions[["model", "block", "r2_lin", "r2_lin_later", "change", "variance_first"]],
                 fold="R²_lin of every block with and without the first positions"))
ch.glue(**real_reading)

# %% [markdown]
# In this run the first position carries up to {glue:text}`real_heavy_share` of a block's output
# variance ({glue:text}`real_heavy`), and leaving it out changes the most affected block from
# {glue:text}`real_moved`. In the {glue:text}`real_steady` blocks where it carries less than 1 % of
# the variance, R²_lin moves by at most {glue:text}`real_steady_change`.
# So for this model the highest variance-weighted numbers are a statement about one channel at one
# position: a map that keeps that channel is near-perfect there and can be poor everywhere else.
# Read the real model's profile with the position column beside it, and prefer the
# without-position-0 numbers when the question is what the block does to ordinary tokens.
#
# What a 135M instruction-tuned model at 4-bit precision can show here: that a real, well-trained
# language model has strongly heterogeneous blocks, and how its outlier channel shapes the number.
# What it cannot show: GPT-2's or Pythia's profiles (the paper's models need the hub), or whether the
# 4-bit rounding of its weights moved any block (its full-precision weights are not packaged).

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
    display(pd.DataFrame({
        "highest R²_lin: block": merged.loc[merged.groupby("model")["r2_lin"].idxmax()].set_index("model")["block"],
        "cheapest swap: block": merged.loc[merged.groupby("model")["delta_ppl"].idxmin()].set_index("model")["block"],
        "cheapest swap: ΔPPL": merged.groupby("model")["delta_ppl"].min(),
    }))

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
    display(merged.groupby("model")[["r2_lin", "delta_ppl"]].corr(method="spearman").xs("r2_lin", level=1)["delta_ppl"]
            .rename("Spearman ρ(R²_lin, ΔPPL)").to_frame())

# %% [markdown]
# :::{solution-end}
# :::
#
# ## Provenance

# %%
ch.provenance()
