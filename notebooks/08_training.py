# %% [markdown]
# # Linearity over training: when does the profile form?
#
# **Claim under test.** If recoverability is learned, the depth profile should be *made* during
# training: absent, or different, at initialisation and shaped as the model learns. The paper
# measures final models only; its readers asked how linearity evolves during training, which Pythia's
# public intermediate checkpoints allow {cite}`biderman2023pythia`. This chapter follows R²_lin of
# every block across checkpoints: the zoo's own (offline) or Pythia-160m's (paper profile).

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: every model of the profile that has checkpoints along training (a packaged model has none)
CHECKPOINTS = None  # None: all of each model's checkpoints (Profile.checkpoints); or a list of names
LOSS_CORPUS = None  # whose held-out loss is drawn beside R²_lin (zoo models); None: the profile's eval corpus
SIGMAS = 2.0  # a step between adjacent blocks counts when it exceeds this many k-fold std

# %%
import pandas as pd

from linrec.analysis import depth, training
from linrec.experiment import measurement
from linrec.notebook import chapter
from linrec.plots import depth as depth_plots

ch = chapter.begin(
    "08_training",
    globals(),
    names_or_none=["MODELS", "CHECKPOINTS"],
    name_or_none=["LOSS_CORPUS"],
    positive_number=["SIGMAS"],
)
MODELS = list(
    MODELS
    or [
        m
        for m in ch.profile.models
        if m not in ch.profile.packaged
        and len(depth.training_checkpoints(ch.profile, m)) > 1
    ]
)
LOSS_CORPUS = LOSS_CORPUS or ch.profile.eval_corpus
schedule = {
    m: [
        (name, step)
        for name, step in depth.training_checkpoints(ch.profile, m)
        if CHECKPOINTS is None or name in CHECKPOINTS
    ]
    for m in MODELS
}
ch.show(
    pd.DataFrame(
        {m: pd.Series({name: step for name, step in s}) for m, s in schedule.items()}
    ).rename_axis("checkpoint (optimiser step)")
)

# %% [markdown]
# ## Checkpoints
#
# Under `offline` and `smoke` the checkpoints are the zoo's: every model is saved at initialisation,
# at a few fractions of its schedule and at the end, so the columns above are optimiser steps of
# the same run. Under `paper` they are Pythia-160m's published revisions, a roughly logarithmic
# subset of its 154 (`linrec.experiment.profiles.PYTHIA_DYNAMICS`); GPT-2 and llama-160m publish no training
# checkpoints and are left out. Every checkpoint is measured on the same rows of the same corpus,
# with the same folds, so differences between columns are differences between weights. The
# heatmaps of {numref}`fig-training-heatmaps` give every value; {numref}`fig-training-lines` draws
# the same numbers against the optimiser step.

# %% mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every block (rows) at every checkpoint (columns, in training order), one heatmap per model.", "name": "fig-training-heatmaps"}}
measured = [
    measurement.measurement(
        ch.profile, m, checkpoint=name, keep="table", progress=ch.progress
    )
    for m in MODELS
    for name, _ in schedule[m]
]
table = depth.depth_table(measured, ch.profile)
fig = depth_plots.training_heatmaps(table, order=MODELS)
ch.figure(fig, table, "fig-training-heatmaps")

# %% mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every block against the optimiser step (symmetric-log axis, $k$-fold mean ± std), one panel per model; the dashed grey curve is the model's held-out loss while it trained (zoo models).", "name": "fig-training-lines"}}
losses = pd.concat(
    [depth.training_losses(ch.profile, m) for m in MODELS], ignore_index=True
)
fig = depth_plots.training_lines(
    table, losses if len(losses) else None, loss_corpus=LOSS_CORPUS, order=MODELS
)
ch.figure(fig, {"r2_lin": table, "losses": losses}, "fig-training-lines")

# %% [markdown]
# The dashed grey curve of {numref}`fig-training-lines` (zoo models) is the model's held-out loss on `LOSS_CORPUS`, recorded while it
# trained: it shows whether the profile moves while the model is still learning or after.
#
# ## From the first to the last checkpoint
#
# Per model: mean and range of R²_lin over blocks at the first and the last checkpoint, whether the
# final profile is non-monotone (steps beyond `SIGMAS` k-fold std both up and down), the RMS distance
# of the first profile to the final one, and the first step whose profile is within half that
# distance of the final one: a rough "when did the profile form". {numref}`fig-training-drift` draws
# the distance to the final profile for every checkpoint.

# %%
summary = depth.training_summary(table, sigmas=SIGMAS)
ch.show(summary)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Root-mean-square distance of each checkpoint's $R^2_\\text{lin}$ profile to the final one, against the optimiser step (symmetric-log axis), one line per model.", "name": "fig-training-drift"}}
drift = depth.drift_table(table)
fig = depth_plots.drift_figure(drift, order=MODELS)
ch.figure(fig, drift, "fig-training-drift")

# %% [markdown]
# ## Against the reference observations
#
# Two reference observations come from a run of this project recorded in its issue tracker, not from the
# paper: a GPT-2-style model started at about 0.955, flat across blocks, and ended non-monotone; a Llama
# started near 0. They are listed beside what this run measured for the same family (not tuned
# toward them: the zoo's widths, data and schedules differ from that run's, so agreement is not
# expected digit for digit).

# %%
ch.show(training.reference_table(summary, ch.profile))

# %%
ch.report(depth.training_claims(summary))
ch.markdown(training.formation_note(summary, PROFILE))

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** How every block's R²_lin changes from initialisation to the end of training, per model,
# with k-fold error bars; whether the block-to-block differences of the final model exist at
# initialisation; and, for the zoo, how the changes line up with the fall of the held-out loss.
#
# **Cannot show.** The zoo's models train for minutes on about a million tokens with a cosine
# schedule, so their "late training" is short and their checkpoints few; whether profiles keep
# changing, settle or reverse over hundreds of billions of tokens is a question for Pythia's
# checkpoints under the `paper` profile. One training run per architecture (plus one extra GPT-2
# seed) gives one trajectory each, not a distribution. Checkpoints are measured on the final
# tokenizer's text with the same rows, which isolates the weights but says nothing about what each
# checkpoint's own training batches looked like.
#
# ## Exercises
#
# :::{exercise} Init is not neutral
# :label: ex-training-init-is-not-neutral
# Before looking at {numref}`fig-training-heatmaps`, predict R²_lin at initialisation for a
# GELU MLP with GPT-2's default initialisation (weights of standard deviation 0.02) and for a
# SwiGLU MLP. Then compare with the first column of each heatmap.
# :::
#
# :::{solution} ex-training-init-is-not-neutral
# :class: dropdown
# GELU: with small weights, pre-activations are small and GELU is close to its tangent line
# $\tfrac12 z$ plus a small quadratic term (chapter 1's map, near scale 0 and offset 0), so R²_lin
# is high and similar across blocks. SwiGLU computes $\mathrm{SiLU}(xW_1)\odot(xW_3)$: for small
# pre-activations $\mathrm{SiLU}(z) \approx z/2$, so the output is approximately a *product* of two
# linear functions of $x$, an even (quadratic) function that no affine map captures for symmetric
# inputs, so R²_lin starts low. How high or low depends on the width and the init scale, so measure.
# :::
#
# :::{exercise} Is the change monotone in time?
# :label: ex-training-is-the-change-monotone
# For each block, does R²_lin move steadily from its initial
# to its final value, or does it overshoot? Count the blocks whose R²_lin leaves the interval between
# its first and last value by more than two k-fold std at some intermediate checkpoint.
# :::
#
# :::{solution-start} ex-training-is-the-change-monotone
# :class: dropdown
# :::
# The code below counts them per model. Overshoots mean the profile is not simply "grown" toward its
# final shape: intermediate training can make a block more (or less) linear than it ends up.


# %% tags=["solution"]
def overshoots(g: pd.DataFrame) -> int:
    g = g.sort_values("step")
    first, last = g["r2_lin"].iloc[0], g["r2_lin"].iloc[-1]
    low, high = min(first, last), max(first, last)
    middle = g.iloc[1:-1]
    return int(
        (
            (middle["r2_lin"] < low - 2 * middle["r2_lin_std"])
            | (middle["r2_lin"] > high + 2 * middle["r2_lin_std"])
        ).any()
    )


per_block = table.groupby(["model", "block"]).apply(overshoots)
ch.show(
    per_block.groupby("model")
    .sum()
    .rename("blocks that overshoot")
    .to_frame()
    .assign(blocks=table.groupby("model")["block"].nunique())
)

# %% [markdown]
# :::{solution-end}
# :::
#
# ## Provenance

# %%
ch.provenance()
