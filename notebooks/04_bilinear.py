# %% [markdown]
# # The bilinear residual: is what the affine map misses a low-rank quadratic?
#
# **Claim under test.** Adding a rank-16 degree-2 (bilinear) term to the closed-form affine map buys
# only a few points of held-out R², and how much it buys does not track how nonlinear the block is
# (Pearson r ≈ 0 against 1 − R²_lin) {cite}`whipp2026linear` (its Figure 3); separately, a high
# global R²_lin can hide blocks whose score is carried by a few high-variance output dims (its
# Figure 4).
#
# A small gain alone cannot carry that claim: a probe that failed to learn would show one too, a
# rank-16 probe captures little of *any* wide FFN's residual, trained or not, and a correlation of the
# gain with $1 - R^2_\text{lin}$ mostly measures how much the blocks leave over. So this chapter adds
# what a referee would ask for: the *share* of the residual the probe captures, with an interval over
# held-out sequences and probe seeds; probes run until validation stops improving; and planted
# residuals at the chapter's width and budget that bracket the real blocks: a low-rank quadratic the
# probe must capture, the residuals of random (untrained) GELU and SwiGLU FFNs, and an odd residual
# with no quadratic part, which it must not. Every verdict follows a rule fixed in
# `linrec.analysis.bilinear_claims.bilinear_claims`, and the tests run each rule on a planted case where the
# claim is true and one where it is false.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: every model of the profile (each probed on the blocks its budget names: `every` in the profile)
RANK = None  # rank r of the bilinear term; None: the profile's probe.rank (16 on paper and offline)
STEPS = None  # the bilinear probe's Adam step cap (early stopping may end it sooner); None: 10 × the profile's
#               probe.steps (seeded-poly keeps the profile's own budget, as in chapters 5 and 7)
TOP_DIMS = 4  # the "few dims": how many of the highest-variance output dims to single out
# the bilinear probe runs with this many seeds per block; its interval spans them
PROBE_SEEDS = 2
FEW_POINTS = 0.05  # "a few points of R²", read as a median gain of at most 5 points
# blocks at or above this R²_lin count as near-linear for the gate question
NEAR_LINEAR = 0.95
LOW_RANK = 1.5  # an output effective rank at or below this counts as "low-rank"
GAP = 0.05  # global R²_lin above the median per-feature R² by more than this counts as a gap

# %%
import pandas as pd

from linrec.analysis import bilinear, bilinear_claims, bilinear_controls, bilinear_outputs
from linrec.core import fit, moments, sample
from linrec.experiment import measurement, resolve
from linrec.interventions import probes
from linrec.notebook import chapter
from linrec.plots import bilinear as bilinear_plots

ch = chapter.begin(
    "04_bilinear",
    globals(),
    names_or_none=["MODELS"],
    positive_int_or_none=["RANK", "STEPS"],
    positive_int=["TOP_DIMS", "PROBE_SEEDS"],
    fraction=["FEW_POINTS", "NEAR_LINEAR", "GAP"],
    positive_number=["LOW_RANK"],
)
MODELS = list(MODELS or ch.profile.models)
probe = ch.profile.probe
config = resolve.probe_config(
    probe, seed=SEED, rank=RANK, steps=STEPS or 10 * probe.steps, device=ch.profile.device
)
seeded_config = resolve.probe_config(
    probe, seed=SEED, rank=RANK, device=ch.profile.device
)

# %% [markdown]
# ## The probe, exactly
#
# The paper does not publish its probe, so `linrec` fixes one and this section states it in full.
# Every quantity below is computed from the block's *training* rows (all folds but one; chapter 1).
# The probe predicts
#
# $$
# \hat y = \mu_y + s\,\Big[\tilde x A + a + g\,\hat P\big((\hat U\tilde x)\odot(\hat V\tilde x)\big)\Big],
# \qquad \tilde x = (x - \mu_x)/\sigma_x,
# $$
#
# where
#
# - $\tilde x$ is the input with each coordinate standardised by its training mean and standard
#   deviation;
# - $\mu_y$ is the training mean of the outputs and $s$ one number, the RMS size of the centred
#   training outputs; with a single scale, a mean squared error in these units is the plain one up
#   to a constant, and R² does not change;
# - $A$ and $a$ are the closed-form affine map rewritten in these units, so that with $g = 0$ the
#   probe *is* the closed form;
# - $\hat U, \hat V$ are $r \times d_\text{in}$ matrices whose rows are rescaled to unit length
#   (they carry directions only), and $\hat P$ is a $d_\text{out} \times r$ matrix rescaled to
#   Frobenius norm $\sqrt{d_\text{out}}$: the products $(\hat U\tilde x)_k(\hat V\tilde x)_k$ are
#   $r$ quadratic features and $\hat P$ mixes them into the outputs. Up to the standardisation,
#   this spans every rank-$r$ map $P((Ux)\odot(Vx))$;
# - $g$, the **gate**, is a single learned scalar. Since none of $\hat U, \hat V, \hat P$ has a free
#   scale, $g$ alone sets how large the quadratic term is; its sign can be absorbed into $\hat P$,
#   so $|g|$ is what is reported. It starts at 0.1 (a term about a tenth of the output RMS) and can
#   be driven to 0, which switches the term off: "de-recruiting" it.
#
# Two probes use this form. The **bilinear probe** freezes $A$ at the closed form and trains $U$,
# $V$, $P$, $g$ and the offset $a$: it models what the affine map leaves over. **Seeded-poly** trains
# everything, starting $A$ and $a$ from the closed form (the "seed") at a learning rate a hundred
# times smaller than the quadratic part's. Both use Adam on minibatches of 512 training rows, keep a
# random tenth of the training rows aside to stop early (the best validation state is kept; a probe
# stops once its validation loss has not improved for `patience` checks, and the step count is only a
# cap), and are scored on the held-out fold. The gain is the probe's held-out R² minus the closed form's on *the
# same* held-out rows, so it is a paired difference.
#
# The probes train on the rows sampled during the measurement (at most `probe.sample_rows` per
# block). The settings of this run:

# %%
measured = {
    m: measurement.measurement(ch.profile, m, progress=ch.progress) for m in MODELS
}
widths = {m: bilinear.block_width({m: r}) for m, r in measured.items()}
probed = {
    m: r.sampled_blocks for m, r in measured.items()
}  # the blocks whose rows the budget samples
ch.show(bilinear.measured_table(measured))
ch.show(bilinear.probe_settings(config, seeded_config, PROBE_SEEDS))

# %% [markdown]
# ## Gain against nonlinearity
#
# Both probes run on every block of the models trained here; a real model's blocks are wider and its
# probes cost far more, so they run on a subset its budget fixes by depth before any probe is trained
# (every `every`-th block from the first, and the last; the table above lists them). A block far from linear has more left over for a
# quadratic term to explain, so if the residual were mostly low-rank quadratic the gain would grow
# with $1 - R^2_\text{lin}$. The paper finds no such trend; {numref}`fig-bilinear-gain` shows what
# this run finds.

# %%
sweep = pd.concat(
    [
        bilinear.probe_sweep(
            {m: r},
            config,
            blocks=probed[m],
            progress=ch.progress,
            cache=True,
            seeded=seeded_config,
            seeds=PROBE_SEEDS,
        )
        for m, r in measured.items()
    ],
    ignore_index=True,
)
correlations = bilinear.gain_correlations(sweep)
ch.show(
    sweep[
        [
            "model",
            "block",
            "r2_lin",
            "r2_poly",
            "gain",
            "r2_seeded",
            "gain_seeded",
            "gate",
            "n_train",
            "n_test",
        ]
    ],
    fold="both probes' R² and gain over the closed form, block by block",
)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out R² gain of the bilinear probe and of seeded-poly over the closed-form affine map (same test rows) against the block's residual nonlinearity $1 - R^2_\\text{lin}$; one point per block and probe, Pearson $r$ with its 95% interval in the legend.", "name": "fig-bilinear-gain"}}
fig = bilinear_plots.gain_figure(sweep, correlations)
ch.figure(fig, sweep, "fig-bilinear-gain")

# %% [markdown]
# ## How much of the residual does the probe capture?
#
# A gain is measured in points of the block's output variance, so a block that leaves little over can
# only show a small gain. Dividing by what the closed form leaves gives the share of the residual the
# probe captures, gain / (1 − R²_lin): on the same test rows this is one minus the probe's squared error
# over the closed form's, so it reads 1 when the probe removes the whole residual and 0 when it
# removes none. Rows of one sequence are not independent, and two probe seeds can land on
# different shares, so the 95% interval does both: each seed's bootstrap resamples whole held-out
# sequences (the sampled rows lie in stream order, one sequence after another, so runs of a
# sequence's worth of rows stand for sequences), and the interval reported runs from the lowest
# seed's low end to the highest seed's high end ({glue:text}`probe_seeds` seeds per block).
#
# A small share alone does not say the residual is special: an untrained FFN's residual is mostly
# quadratic, yet a rank-16 term captures less and less of it as the width grows, because a full
# quadratic map of $d$ inputs has about $d^2/2$ independent terms per output. So the probe is first run
# at the same settings, and at the real blocks' width ({glue:text}`width`), on four planted residuals:
# inputs drawn from a symmetric distribution, an exact linear map, and a residual carrying about 30 %
# of the output variance that is
#
# - a rank-8 quadratic, which the probe can represent: it should capture nearly all of it;
# - the residual of a random GELU FFN (hidden width 4d, as GPT-2) and of a random SwiGLU FFN (hidden
#   width 8d/3, as Llama), with their linear parts removed: what a *generic* FFN of this width leaves
#   over, the middle control each real block is read against;
# - an odd cubic with no quadratic part (uncorrelated with every quadratic of symmetric inputs): the
#   probe should capture none of it.
#
# {numref}`fig-bilinear-captured` then shows the share every real block's probe captures, with the
# controls as reference lines and the random FFNs' interval shaded.

# %%
controls_at = {
    w: bilinear_controls.probe_controls(
        config, d=w, seed=SEED, seeds=PROBE_SEEDS, cache=True
    )
    for w in dict.fromkeys(widths.values())
}
width = widths[MODELS[0]]
controls = controls_at[width]
same = [
    m for m in MODELS if widths[m] == width
]  # the models the controls of this width apply to
ch.show(
    pd.concat(
        [c.assign(width=w) for w, c in controls_at.items()], ignore_index=True
    ).drop(columns="kind"),
    fold="the planted controls at every width of the profile's models",
)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Share of what the closed form leaves over that the bilinear probe captures, gain / (1 − $R^2_\\text{lin}$), with 95% intervals (held-out sequences resampled, spanning the probe seeds), against the block's residual nonlinearity; dotted lines: the shares of the planted controls; shaded: the interval of the random-FFN controls at this width.", "name": "fig-bilinear-captured"}}
fig = bilinear_plots.captured_figure(sweep[sweep.model.isin(same)], controls)
ch.figure(
    fig,
    {"probes": sweep[sweep.model.isin(same)], "controls": controls},
    "fig-bilinear-captured",
)

# %% tags=["remove-cell"]
at_budget = int(sweep.at_budget.sum())
ffn_low, ffn_high = bilinear_controls.ffn_reference(controls)
ch.glue(
    share_median=sweep.captured.median(),
    blocks=len(sweep),
    share_min=sweep.captured.min(),
    share_max=sweep.captured.max(),
    at_budget=at_budget,
    steps=config.steps,
    probe_seeds=PROBE_SEEDS,
    width=width,
    ffn_low=ffn_low,
    ffn_high=ffn_high,
    below=int((sweep.captured_high < ffn_low).sum()),
    above=int((sweep.captured_low > ffn_high).sum()),
    at_budget_reading=bilinear_claims.budget_reading(at_budget),
)

# %% [markdown]
# Median share captured: **{glue:text}`share_median:.3f`** over {glue:text}`blocks` blocks (range
# {glue:text}`share_min:.3f` to {glue:text}`share_max:.3f`). Of a random FFN's residual at this width the
# probe captures between {glue:text}`ffn_low:.3f` and {glue:text}`ffn_high:.3f`; {glue:text}`below` blocks'
# intervals lie wholly below that range and {glue:text}`above` wholly above it. {glue:text}`at_budget` of
# {glue:text}`blocks` blocks had a bilinear probe still improving when it reached the cap of
# {glue:text}`steps` steps ({glue:text}`at_budget_reading`).
#
# The verdict on "the residual is not low-rank quadratic" reads the blocks against the random FFNs,
# not against a fixed share. It is "untestable" when the probe fails its quadratic or odd control.
# When the random FFNs' range lies above the odd control's, it is "yes" if more than half of the
# blocks lie wholly below that range (their residual is *less* low-rank quadratic than a generic
# FFN's) and "no" otherwise. When it does not, the probe takes no more of a generic FFN's residual
# than of one with no quadratic part, so no block can be shown below it and a small share says
# nothing; blocks can still lie wholly *above* it, and then the verdict is "no" if more than half
# do (the probe captures more of their residual than of any untrained FFN's), "untestable"
# otherwise.

# %% [markdown]
# ## The paper's statistic, and one that can decide
#
# The paper reports Pearson's r between the gain and $1 - R^2_\text{lin}$ across blocks. That number
# cannot tell residuals apart: the gain is the captured share times $1 - R^2_\text{lin}$, so when the
# blocks differ mainly in how much they leave over and the share is roughly constant, r is near +1
# whether the probe captures 95 % of each residual or 5 %. (The tests plant exactly this: a constant
# 10 % share gives r ≈ +1.) It is kept below as the paper's statistic. The question it was meant to
# ask, whether the probe does better on less linear blocks, is asked of the share instead, with
# Spearman's ρ within each model (so that differences between models cannot make the trend) and
# pooled. Intervals are Fisher-z; the blocks of one model are not independent draws, so read them as
# optimistic.
#
# The paper's claim is that r is about 0. An interval that merely contains 0 passes whenever there
# are too few blocks to see anything, so the verdict is an equivalence rule: "yes" when the whole 95%
# interval lies within ±0.3 (below a "medium" correlation in Cohen's convention), "no" when it
# excludes 0, and "untestable" when it contains 0 but reaches past ±0.3. With a couple of dozen
# blocks the interval is about ±0.4 wide, so only a clear correlation can decide it.

# %%
ch.show(bilinear.residual_correlations(sweep))

# %% [markdown]
# And the gains themselves, for both probes:

# %% tags=["hide-input"]
ch.show(bilinear.gain_table(sweep, correlations))

# %% [markdown]
# ## Does the gate de-recruit?
#
# Seeded-poly starts with a small quadratic term switched on. Where the block is already almost
# affine, that term can only add noise, and gradient descent should shrink the gate; where the
# affine map leaves structure over that a quadratic term can use, the gate should grow
# ({numref}`fig-bilinear-gate`).
#
# A gate that falls on near-linear blocks shows de-recruitment only if it would not also fall where
# the term is needed. So seeded-poly is first run, with the same settings, on the quadratic control's
# planted block (rank-8 quadratic residual, 30 % of the variance), whose residual the bilinear probe
# captures; the term needed there has an RMS of about 0.65 output units, six times the initial gate.
# (A near-linear reference would be closer to the claim, but at the zoo's width the probe captures
# none of a quadratic residual that small.) The gate verdict is "untestable" unless the probe captures
# the reference's residual (≥ 0.9) and the reference's gate ends at or above where it started; then it
# is "yes" when most near-linear real blocks' gates end below the initial value, and "no" otherwise.

# %%
references = {
    w: bilinear_controls.gate_reference(config, seeded_config, d=w, seed=SEED)
    for w in controls_at
}
reference = references[width]
ch.show(
    pd.Series(reference, name="planted block, captured quadratic residual").to_frame()
)

# %% mystnb={"figure": {"caption": "Seeded-poly's gate $|g|$ after fitting (log scale) against the block's $R^2_\\text{lin}$, one point per block; the dashed line is the value every gate started from.", "name": "fig-bilinear-gate"}}
gates = bilinear.gate_summary(sweep, config.gate_init)
fig = bilinear_plots.gate_figure(sweep, config.gate_init)
ch.figure(fig, sweep, "fig-bilinear-gate")

# %% tags=["remove-cell"]
ch.glue(
    shrunk=gates["shrunk"],
    gate_blocks=gates["blocks"],
    median_ratio=gates["median_ratio"],
    reference_gate=reference["gate"],
    reference_captured=reference["captured"],
    gate_link=bilinear_claims.gate_link(gates["rho"]),
)

# %% [markdown]
# After fitting, the gate ended below its initial value on **{glue:text}`shrunk:.0%`** of
# {glue:text}`gate_blocks` blocks (median |g| / initial = {glue:text}`median_ratio:.2f`). On the planted
# reference block, whose quadratic residual the bilinear probe captures ({glue:text}`reference_captured:.2f`),
# the gate ended at {glue:text}`reference_gate:.3f`: where that is below the initial value, a falling gate on
# real blocks is no sign of de-recruitment, and the verdict below says so.
# {glue:text}`gate_link`

# %% [markdown]
# ## Global against per-feature R²
#
# Global $R^2_\text{lin}$ sums squared errors over output dims before dividing, so a dim with a
# hundred times the variance of another counts a hundred times as much. The median per-feature R²
# gives every dim one vote. Where the two agree, the block is linear across the board; where the
# global value is far above the median, a few high-variance dims are predicted well and most others
# are not. Point size is the effective rank of the block's outputs (the participation ratio of
# the output covariance's eigenvalues: 1 when one direction carries everything) in
# {numref}`fig-bilinear-features`.

# %% mystnb={"figure": {"caption": "Median per-feature R² (every output dim counts once) against global $R^2_\\text{lin}$ (dims weighted by their variance), one point per block; point area is proportional to the effective rank of the block's outputs, the dashed diagonal is where the two agree.", "name": "fig-bilinear-features"}}
concentration = bilinear_outputs.output_concentration(measured, top=TOP_DIMS)
fig = bilinear_plots.feature_figure(concentration)
ch.figure(fig, concentration, "fig-bilinear-features")

# %% [markdown]
# Which dims carry the variance? For each block: the share of output variance held by its
# `TOP_DIMS` highest-variance dims (next to the share they would hold if all dims were equal), and
# the R² of those dims against the rest (variance-weighted means of their per-feature R²).

# %%
ch.show(
    concentration[
        [
            "model",
            "block",
            "r2_lin",
            "r2_feature_median",
            "gap",
            "effective_rank_out",
            "top_share",
            "uniform_share",
            "r2_top",
            "r2_rest",
        ]
    ],
    fold="global and per-feature R² of every block",
)

# %% [markdown]
# The block where global and median per-feature R² differ most, dim by dim
# ({numref}`fig-bilinear-dims`, then its highest-variance dims):

# %% mystnb={"figure": {"caption": "Every output dim of the block with the widest gap between global and median per-feature R²: its held-out per-feature R² against its share of the block's output variance (log), the highest-variance dims marked.", "name": "fig-bilinear-dims"}}
widest = bilinear_outputs.widest_gap(concentration)
dims = bilinear_outputs.output_dims(measured[widest.model], int(widest.block))
fig = bilinear_plots.dims_figure(
    dims,
    TOP_DIMS,
    title=f"{widest.model}, block {int(widest.block)}: global R²_lin "
    f"{widest.r2_lin:.3f}, median per-feature {widest.r2_feature_median:.3f}",
)
ch.figure(fig, dims, "fig-bilinear-dims")

# %% tags=["hide-input"]
ch.show(dims.head(TOP_DIMS + 2))

# %% tags=["remove-cell"]
ch.glue(
    widest_block=f"{widest.model} block {int(widest.block)}",
    top_dims=TOP_DIMS,
    d_out=int(widest.d_out),
    top_share=widest.top_share,
    uniform_share=widest.uniform_share,
    r2_top=widest.r2_top,
    r2_rest=widest.r2_rest,
)

# %% [markdown]
# In {glue:text}`widest_block`, the {glue:text}`top_dims` highest-variance output dims (of {glue:text}`d_out`)
# hold {glue:text}`top_share:.0%` of the output variance (equal dims would hold {glue:text}`uniform_share:.0%`);
# their R² is {glue:text}`r2_top:.3f` against {glue:text}`r2_rest:.3f` for the rest.

# %% [markdown]
# ## Paper against this run
#
# Each claim is checked separately; "this run (measured)" is computed from the tables above, with
# the thresholds of the parameters cell. Not all of them are the paper's: the planted controls and
# the gate's de-recruitment are checks this book adds, and the verdict marks each claim as the
# paper's (with the figure it comes from) or this book's.

# %%
probed_concentration = pd.concat(
    [
        concentration[(concentration.model == m) & concentration.block.isin(probed[m])]
        for m in MODELS
    ],
    ignore_index=True,
)
claims = bilinear_claims.bilinear_claims(
    sweep[sweep.model.isin(same)],
    probed_concentration[probed_concentration.model.isin(same)],
    config.gate_init,
    few=FEW_POINTS,
    near_linear=NEAR_LINEAR,
    low_rank=LOW_RANK,
    gap=GAP,
    controls=controls,
    reference=reference,
)
for m in MODELS:
    claims += [
        c.of(m)
        for c in bilinear_claims.bilinear_claims(
            sweep[sweep.model == m],
            probed_concentration[probed_concentration.model == m],
            config.gate_init,
            few=FEW_POINTS,
            near_linear=NEAR_LINEAR,
            low_rank=LOW_RANK,
            gap=GAP,
            controls=controls_at[widths[m]],
            reference=references[widths[m]],
        )
    ]
ch.report(claims, figure="fig-bilinear-gain")

# %% [markdown]
# The bilinear probe trains until its validation loss stops improving, under a step cap (the probes
# that reach the cap are counted above). The gain says how many points of R² the probe adds; the share says
# how much of what the closed form leaves it explains; the planted controls say whether a small share
# could be the probe's failure rather than the residual's shape, and the random FFNs whether it is
# any different from what an untrained FFN of the same width would show. Each verdict states its
# rule above, and the docstring of `bilinear_claims` gives the basis of each threshold; the tests
# (`tests/analysis/test_bilinear_claims.py`) run every rule on a planted case where the claim holds and one where it
# does not.
#
# Under `paper` the probe runs on the paper's three models and corpus with the paper's rank, a direct
# check of its Figures 3 and 4 (with a probe that is necessarily our own parametrisation). The "two
# regimes" claim in particular rests on the handful of huge residual-stream dims of
# GPT-2-scale models, which are reported to emerge with scale {cite}`dettmers2022llmint8`; the
# zoo's models are far smaller. Under `smoke` the probes train for a few
# dozen steps.

# %% tags=["remove-input"]
ch.caveat()

# %% [markdown]
# The first rows of the claims table pool the models of width {glue:text}`width` (the captured-share
# figure and its controls are at that width); the rows after a model's name judge each model alone,
# against the planted controls and the gate's reference block at its own width. A real model's
# blocks are far wider than the zoo's, and at width 576 or 640 the probe's rank-16 term is a much
# smaller share of what a full quadratic map could hold, so a small captured share there is expected
# whether or not the residual is low-rank. The controls at that width say how small, and whether the
# probe learns even the planted quadratic within its budget: where it does not, the share and gate
# claims read "cannot be tested here" for that model, never "reproduced". What the real models add
# to the zoo's: whether the probe's gain on models trained on trillions of tokens is as small as the
# paper reports for GPT-2, and whether the gate behaves the same on their near-linear blocks.

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** For each block, how much a gated rank-r quadratic term adds to the closed form on
# held-out rows, with the closed form and the probe scored on the same rows; how much of the
# residual that is, against what the same probe takes of a random FFN's residual at the same width;
# whether that gain follows the block's nonlinearity across blocks and models; whether the fitted
# gate shrinks where it would not on a block that needs the term; and whether global R²_lin is
# carried by a few output dims.
#
# **Cannot show.** A small gain says that *this* probe, trained for *this* budget, found little;
# a probe trained longer or with another parametrisation might find more (exercise 1 shows how
# much the budget matters). A rank-r quadratic is one family of nonlinear maps: a small gain
# says the residual is not low-rank quadratic, not what it is, and at a width where the probe
# takes as little of a random FFN's residual, it does not say even that. The planted inputs are
# isotropic Gaussians; a real block's inputs concentrate in fewer directions, which makes any
# quadratic of them easier for a low-rank term, so a trained block captured above the random FFNs
# is read against controls that are, in that respect, harder. Correlations over a dozen or two
# blocks have wide intervals, and blocks of one model are not independent. Per-feature statistics
# are tied to the output basis (exercise 3); the effective rank is basis-free, the top-dim share
# is not.
#
# ## Exercises
#
# :::{exercise} An under-trained probe
# :label: ex-bilinear-an-under-trained-probe
# Rerun the bilinear probe on the least linear block with the
# quadratic part's learning rate at 1e-3 (the profile's `probe.lr`, the Adam baseline's) instead of
# 1e-2. What happens to the gain, and why does this matter for the claim?
# :::
#
# :::{solution-start} ex-bilinear-an-under-trained-probe
# :class: dropdown
# :::
# The gain shrinks towards zero, because with the same budget the quadratic term barely moves from
# its random start and early stopping keeps a state close to the closed form. A probe that is
# under-trained *understates* what a nonlinear term can add, in the very direction of the paper's
# claim ("only a few points"), so an honest probe must be trained to convergence, which is the same
# pitfall chapter 6 shows for trained linear maps. The code below runs both.

# %% tags=["solution"]
from dataclasses import replace

worst = sweep.loc[sweep.r2_lin.idxmin()]
m = measured[worst.model]
rows, folds = m.samples[int(worst.block)], m.moments[int(worst.block)]
slow = probes.bilinear_probe(
    rows, folds, 0, replace(config, lr=probe.lr), int(worst.block)
)
print(
    f"{worst.model} block {int(worst.block)}: gain {worst.gain:+.4f} at lr {config.lr:g}, "
    f"{slow.gain:+.4f} at lr {probe.lr:g} ({slow.steps} steps)"
)

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} A planted quadratic
# :label: ex-bilinear-a-planted-quadratic
# Build rows whose output is an exact rank-4 bilinear function of
# Gaussian inputs plus a linear part. What should the closed form score, what should the probe
# add, and where should seeded-poly's gate go?
# :::
#
# :::{solution-start} ex-bilinear-a-planted-quadratic
# :class: dropdown
# :::
# With centred Gaussian inputs the quadratic part is uncorrelated with every linear function
# (its odd moments vanish), so the closed form recovers exactly the linear part's share of the
# variance, and the probe, whose form contains the planted map, can recover the rest: the gain
# is large, and the gate grows instead of shrinking. A small gain on real blocks therefore is a
# property of the blocks, not an inability of the probe. The code below checks it.

# %% tags=["solution"]
import torch

g = torch.Generator().manual_seed(SEED)
n, d = 4000, 16
x = torch.randn(n, d, generator=g)
u, v, p = (
    torch.randn(4, d, generator=g),
    torch.randn(4, d, generator=g),
    torch.randn(d, 4, generator=g) / 2,
)
# a linear and a bilinear part of similar size
y = x @ torch.randn(d, d, generator=g) / d**0.5 + ((x @ u.T) * (x @ v.T)) @ p.T / d
planted = sample.Rows(x, y, torch.arange(n) // 50 % 5)
toy = replace(config, rank=4, steps=max(config.steps, 600), eval_every=25)
plain = probes.bilinear_probe(planted, config=toy)
seeded = probes.seeded_poly(planted, config=toy)
print(
    f"closed form R² {plain.r2_lin:.3f}; bilinear probe {plain.r2_poly:.3f} (gain {plain.gain:+.3f}); "
    f"seeded-poly {seeded.r2_poly:.3f}, gate {config.gate_init:g} -> {seeded.gate:.3f}"
)

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Rotating the outputs
# :label: ex-bilinear-rotating-the-outputs
# Replace each block's outputs $y$ by $yQ$ for a random orthogonal
# $Q$. Which of global R²_lin, the median per-feature R² and the output effective rank change?
# :::
#
# :::{solution-start} ex-bilinear-rotating-the-outputs
# :class: dropdown
# :::
# Global R²_lin does not: the sum of squared errors and the total sum of squares are both
# unchanged by an orthogonal map of the output space, and the best affine map just rotates along.
# The effective rank does not either (the output covariance's eigenvalues are unchanged). The
# median per-feature R² does: a rotation mixes high- and low-variance dims, so dims that were
# poorly predicted borrow from well-predicted ones. Per-feature summaries, and the "top dims" of
# this chapter, are statements about the basis the model happens to use, which for a residual
# stream with outlier dims is a meaningful basis. The code below rotates the moments of the
# widest-gap block (no rows needed).

# %% tags=["solution"]
q, _ = torch.linalg.qr(
    torch.randn(int(widest.d_out), int(widest.d_out), generator=g, dtype=torch.float64)
)
folds = measured[widest.model].moments[int(widest.block)]
rotated = [
    moments.Moments(f.n, f.mean_x, f.mean_y @ q, f.cxx, f.cxy @ q, q.T @ f.cyy @ q)
    for f in folds
]
before, after = fit.kfold(0, folds), fit.kfold(0, rotated)
pd.DataFrame(
    {
        "original outputs": [
            before.r2_lin,
            before.r2_feature_median,
            before.effective_rank_out,
        ],
        "rotated outputs": [
            after.r2_lin,
            after.r2_feature_median,
            after.effective_rank_out,
        ],
    },
    index=["global R²_lin", "median per-feature R²", "output effective rank"],
)

# %% [markdown]
# :::{solution-end}
# :::
#
# ## Provenance

# %%
ch.provenance()
