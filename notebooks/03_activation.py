# %% [markdown]
# # Activation independence: is recoverability learned?
#
# **Claim under test.** Two models with the same width and the same GELU activation (GPT-2 and
# Pythia-160m) have sharply different R²_lin profiles, so how linear a block is was *learned* by
# that block, not imposed by the architecture {cite}`whipp2026linear`. The paper compares two trained
# models; a difference between them could still come from the architecture, or from how large
# training made the weights. This chapter tests the claim directly, on the models of the profile:
# the trained weights against the same weights with their arrangement destroyed, over several seeds.
# It then describes what the other comparisons its reviewers asked for can and cannot separate: the
# same architectures at random initialisation, a second training seed, the conditioning of each
# block's inputs, normalised inputs, and cross-feeding one model's block inputs into another model's
# FFN.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODELS = None  # None: every model of the profile
GRID_MODELS = None  # cross-fed models (they must share one width); None: those of MODELS as wide as the first
GRID_BLOCKS = 3  # blocks per model in the cross-feeding grid, spread evenly over depth; None: every block
NORMALISATIONS = ("standardise", "whiten")
SIGMAS = 2.0  # a step between adjacent blocks counts when it exceeds this many k-fold std
CONTROL_SEEDS = (0, 1, 2)  # shuffled-weights control seeds (the verdict needs 3 or more)
CONTROL_MODELS = None  # models measured against shuffled weights; None: those of MODELS the profile measures again

# %%
import pandas as pd

from linrec.analysis import activation, depth, identity, learned
from linrec.experiment import measurement, resolve
from linrec.interventions import crossfeed
from linrec.notebook import chapter
from linrec.plots import activation as activation_plots
from linrec.plots import depth as depth_plots

ch = chapter.begin(
    "03_activation",
    globals(),
    names_or_none=["MODELS", "GRID_MODELS", "NORMALISATIONS", "CONTROL_MODELS"],
    seeds=["CONTROL_SEEDS"],
    positive_int_or_none=["GRID_BLOCKS"],
    positive_number=["SIGMAS"],
)
MODELS = list(MODELS or ch.profile.models)
GRID_MODELS = list(
    GRID_MODELS
    or [m for m in MODELS if ch.profile.width(m) == ch.profile.width(MODELS[0])]
)
CONTROL_MODELS = ch.profile.measured_again(CONTROL_MODELS, among=MODELS)

# %% [markdown]
# ## What "learned, not architectural" predicts, and how to test it
#
# If a block's linearity were set by the architecture, any weights of that architecture would give
# it; if it were set by how large training made the weights, any weights of that size would. If it
# was learned, it lives in the *arrangement* of the trained values: which input each weight
# multiplies. One control separates these readings. Each weight matrix of the trained model keeps
# its exact values, and so its scale, but they are shuffled across the matrix by a seeded
# permutation (`linrec.models.controls`; norm gains and biases stay as trained). The shuffled model
# is measured on the same rows as the trained one, block by block.
#
# One shuffle is one draw; several seeds show how much the control varies by chance, and that
# variation is the yardstick. With $n$ seeds, a block's control values have mean $m$ and standard
# deviation $s$, and one more seed would fall within $m \pm t_{n-1}\, s \sqrt{1 + 1/n}$ with 95 %
# probability (Student's $t$, because $s$ itself comes from only a few seeds). The rule, fixed
# before any result: **the claim holds when the trained R²_lin lies outside that band in a majority
# of the blocks.** If the trained weights were just another draw of the control, each block would
# leave the band with probability 0.05, and four or more of six blocks would do so by chance with
# probability about 10⁻⁴. The rule needs at least three seeds (`CONTROL_SEEDS`); it is written in
# `linrec.analysis.learned.learned_claims`.
#
# The other comparisons of this chapter are descriptions, not tests of this claim. A random
# initialisation has the initialiser's scale, not the trained one. Two seeds and two families
# separate one training run from another. Cross-feeding and normalised inputs separate what a
# block's weights do from what its inputs are. A weight pattern that every model shares by design,
# without any learning, would look the same in all of them, which is why none of them enters the
# verdict.
#
# Which models take part is the profile's choice: the `offline` zoo has a GPT-2, a GPT-NeoX (the
# Pythia architecture: parallel residual, rotary, untied embeddings), a Llama and a second seed of
# the GPT-2, all of one width and depth, trained on the same text mix with the same schedule (the
# seed-0 models on exactly the same batches; the seed sets both the initialisation and the batch
# order, see `linrec.models.zoo`), and two real pretrained models of other families: SmolLM2-135M
# (Llama architecture, gated SiLU, RMSNorm before each MLP) and Gemma 3 270M (gated GELU, RMSNorm
# before and after each MLP), read on English prose. So the rule is tested on a real model, not
# only on the zoo: under `offline` the shuffled controls run on SmolLM2 and the zoo, while Gemma 3's
# (three more measurements of about 2.5 core-minutes each, beyond what the build's hour holds) come
# back by naming it in `CONTROL_MODELS`; its trained profile is in every other comparison below.
# The cross-feeding grid needs one width, so it takes the models as wide as the first. The hub
# models of the `paper` profile have no second seed, and only Pythia publishes its initial
# checkpoint.

# %%
identities = {
    m: identity.model_identity(
        ch.profile,
        m,
        None
        if ch.profile.zoo is not None or ch.profile.width(m)
        else resolve.load_profile_model(ch.profile, m, progress=ch.progress)[0],
    )
    for m in MODELS
}
untrained = [m for m in MODELS if len(depth.training_checkpoints(ch.profile, m)) > 1]
measured = {
    (m, "final"): measurement.measurement(ch.profile, m, progress=ch.progress)
    for m in MODELS
}
measured |= {
    (m, "init"): measurement.measurement(
        ch.profile, m, checkpoint="init", keep="table", progress=ch.progress
    )
    for m in untrained
}
# R²_lin and input statistics
profiles = pd.concat(
    [activation.conditioning_table(m) for m in measured.values()], ignore_index=True
)
ch.show(
    pd.DataFrame(
        {
            "family": {m: i.family for m, i in identities.items()},
            "activation": {
                m: identity.ACTIVATIONS.get(i.family, "?") for m, i in identities.items()
            },
            "seed": {m: i.seed for m, i in identities.items()},
            "measured at init": {m: m in untrained for m in MODELS},
        }
    ).rename_axis("model")
)

# %% [markdown]
# ## Every model against its shuffled weights
#
# {numref}`fig-activation-learned` draws each model's trained profile with its shuffled controls
# and the band one more shuffle would fall in; ringed points are blocks whose trained R²_lin lies
# outside it. The table below it gives the same per block, and the claims table applies the rule
# to all the models measured against their shuffled weights together (`CONTROL_MODELS`: under
# `offline` every model but Gemma 3, as the line below says).

# %% mystnb={"figure": {"caption": "Each model's held-out $R^2_\\text{lin}$ per block with its trained weights (thick) and with the entries of every weight matrix shuffled, one thin line per seed ($k$-fold mean ± std); shaded: the 95 % prediction band for one more shuffle; ringed: blocks whose trained value lies outside it.", "name": "fig-activation-learned"}}
print(
    ch.profile.left_out(
        CONTROL_MODELS,
        among=MODELS,
        parameter="CONTROL_MODELS",
        why=ch.profile.main_text_only,
    )
)
shuffled = pd.concat(
    [
        learned.control_tables(ch.profile, m, CONTROL_SEEDS, progress=ch.progress)
        for m in CONTROL_MODELS
    ],
    ignore_index=True,
)
bands = learned.control_bands(shuffled)
fig = activation_plots.controls_figure(shuffled, bands, order=CONTROL_MODELS)
ch.figure(fig, {"profiles": shuffled, "bands": bands}, "fig-activation-learned")

# %%
ch.report(learned.learned_claims(shuffled), figure="fig-activation-learned")

# %% tags=["hide-input"]
ch.show(
    bands[["model", "block", "trained", "control_mean", "low", "high", "departs"]],
    {"trained": ".3f", "control_mean": ".3f", "low": ".3f", "high": ".3f"},
    fold="every block's trained R²_lin against its shuffled controls' band",
)

# %% [markdown]
# The verdict above is this chapter's conclusion on whether recoverability is learned: its first
# row pools every model measured against its controls, the others judge each model alone by the
# same rule. The comparisons in the rest of the chapter describe the profiles and do not change it.
#
# A model whose blocks mostly sit inside the band has a profile that shuffled weights reproduce:
# for it, the values training gave each matrix (their scale and spread) set how linear its blocks
# are, not where those values sit. Departures count in both directions: a block below its band is
# less linear than its own weight values at random positions would make it, and that too is
# something training arranged. One family with large departures can carry the verdict over all
# blocks, which is why each model is also judged on its own in the claims table.

# %% [markdown]
# ## Trained and untrained profiles
#
# {numref}`fig-activation-profiles` draws every model's profile after training and, where the
# model has an initial checkpoint, at random initialisation; the table below it summarises the shape
# of each profile.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ per block of every model of the profile, trained (solid) and at random initialisation (dashed, where measured); $k$-fold mean ± std.", "name": "fig-activation-profiles"}}
fig = depth_plots.curves_figure(
    profiles,
    style="checkpoint",
    order=MODELS,
    title="R²_lin per block, trained (solid) and at random initialisation (dashed)",
)
ch.figure(fig, profiles, "fig-activation-profiles")

# %%
shape = depth.depth_summary(profiles, by=("model", "checkpoint"), sigmas=SIGMAS)
ch.show(
    shape[
        [
            "model",
            "checkpoint",
            "r2_min",
            "r2_max",
            "r2_range",
            "max_jump",
            "jump",
            "jump_sigma",
            "non_monotone",
        ]
    ],
    {"jump": ".3f", "jump_sigma": ".2f"},
)

# %% [markdown]
# ## Seeds, families and training: how far apart are two profiles?
#
# The distance between two profiles of the same depth is the root-mean-square difference of
# R²_lin over their blocks. Every pair of profiles that differs in exactly one respect is listed:
# the seed (same architecture), the family (split by whether the MLP activation is the same), or
# training (a model against its own initialisation). {numref}`fig-activation-distances` shows every
# distance, the table below it their summary by kind.

# %% mystnb={"figure": {"caption": "Root-mean-square difference of $R^2_\\text{lin}$ over blocks between two depth profiles that differ in one respect only (seed, family or training); one dot per pair, the bar is the mean of its kind.", "name": "fig-activation-distances"}}
distances = identity.distance_table(profiles, identities)
fig = activation_plots.distance_figure(distances)
ch.figure(fig, distances, "fig-activation-distances")

# %% tags=["hide-input"]
ch.show(
    distances.groupby("kind", sort=False)["distance"].agg(
        ["count", "mean", "min", "max"]
    ),
    {"mean": ".3f", "min": ".3f", "max": ".3f"},
)

# %% [markdown]
# With a single pair of seeds the seed-to-seed distance is one number, not a distribution: it sets
# the scale of what an unlucky seed can do, without an error bar of its own. Read the comparison
# with families as "larger or smaller than that one number", no more.
#
# ## The inputs: conditioning, effective rank, outlier dimensions
#
# A block's R²_lin is a property of a map *and* of the input distribution it is scored on. Per
# block: the condition number of the input covariance over its non-null spectrum, the number of
# null directions (one per LayerNorm-fed block), the effective rank of the inputs (participation
# ratio of the covariance eigenvalues) and the outlier ratio (largest per-dimension variance over
# the median one). {numref}`fig-activation-conditioning` sets R²_lin against the first and the
# third; the table gives the rank correlation of R²_lin with each statistic, with its interval.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every block against the log10 condition number of its input covariance (left) and the effective rank of its inputs (right); colour: model, marker: checkpoint.", "name": "fig-activation-conditioning"}}
fig = activation_plots.conditioning_figure(profiles, order=MODELS)
ch.figure(fig, profiles, "fig-activation-conditioning")

# %%
trained_blocks = profiles[profiles["checkpoint"] == "final"]
if trained_blocks.groupby("model").size().max() >= 4:
    ch.show(activation.predictor_table(trained_blocks))
else:
    print(
        f"Profile '{PROFILE}': no model has the 4 blocks a correlation within it needs."
    )

# %% [markdown]
# Each correlation is taken within one model and the models' values are then combined (Fisher's $z$,
# weighted by blocks): pooled over models, a family with both larger values of a statistic and lower
# R²_lin would make a correlation that no single model shows. The pooled value is listed beside it,
# unused, so a reader can see how much the pooling would change. A model with few blocks gives a
# coarse correlation of its own, and the combined interval stays wide accordingly.
#
# ## Normalised inputs
#
# Each block whose rows the measurement sampled (every block of a model trained here; every
# `every`-th and the last of a real model, as for the probes of chapter 4) is run on its own sampled
# inputs transformed to a common shape
# (`linrec.core.normalise.input_transform`): *standardised* (every dimension to the block's average
# variance) or *whitened* (every non-null direction to that variance, so the covariance becomes
# isotropic). The means are kept, so the FFN stays near its operating point; R²_lin is then measured
# on the new (input, output) pairs with the same folds ({numref}`fig-activation-normalised`).
#
# Both transforms respect the constraint a LayerNorm puts on its outputs. Its normalised features
# sum to zero, so every captured row has the same projection on the direction 1/γ (γ: the norm's
# gain), and the FFN has never seen an input move along it. Rescaling dimensions one by one would
# tilt that direction and push rows off the surface they live on, and part of any change in R²_lin
# would then be the FFN's response to impossible inputs. A norm also fixes each row's length in its
# normalised coordinates $z = (x - \beta)/\gamma$ ($\lVert z \rVert^2 = d$, slightly less with the
# norm's $\epsilon$), which neither transform keeps, and an RMSNorm has no null direction at all.
# So each transformed row is put back on its norm's surface: $z$ is centred (LayerNorm only) and
# rescaled to the captured rows' mean length (`linrec.core.normalise.NormManifold`). Tested on
# GPT-2, GPT-NeoX and Llama blocks: spread along 1/γ at most 10⁻⁶ of the row scale, and row length
# within 10⁻⁴ of the captured rows'.

# %% mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ per block of each model on its own captured inputs (solid) and on the same inputs standardised or whitened ($k$-fold mean ± std).", "name": "fig-activation-normalised"}}
normalised = pd.concat(
    [
        activation.measured_normalisation(
            ch.profile, measured[(m, "final")], NORMALISATIONS, progress=ch.progress
        )
        for m in MODELS
    ],
    ignore_index=True,
)
fig = activation_plots.normalisation_figure(normalised, order=MODELS)
ch.figure(fig, normalised, "fig-activation-normalised")

# %% tags=["hide-input"]
ch.show(activation.normalisation_summary(normalised))

# %% [markdown]
# Whitening is the stronger intervention: it inflates the directions the block almost never saw
# varied, so the FFN is evaluated partly off its training distribution. A large change under
# whitening therefore says the block's linearity depends on *where* its inputs lie, which is not the
# same as saying the measured profile is an artefact.
#
# ## Cross-feeding: weights or inputs?
#
# Block $j$ of model $B$ is run on the rows captured at block $i$ of model $A$ (all models here share
# one width), and R²_lin of those (input, output) pairs is measured with the rows' own folds. A's rows
# carry A's norm gain and bias, so each is first rewritten as B's norm would have produced it from the
# same normalised features: $z = (x_A - \beta_A)/\gamma_A$ is put on B's norm surface (centred when
# B's norm is a LayerNorm, rescaled to the length of B's own rows), then
# $x' = \gamma_B \odot z + \beta_B$ (for RMSNorm, no $\beta$). B's FFN then sees inputs on its own
# manifold, at its own per-dimension scales, and what differs is the features alone. The
# grid ({numref}`fig-activation-crossfeed`) holds every pair of the chosen blocks; its diagonal is
# each block on its own inputs. If R²_lin were a property of the inputs, each row of the grid would be
# uniform; if it is a property of the weights, each column would.

# %% mystnb={"figure": {"caption": "Cross-feeding: held-out $R^2_\\text{lin}$ of the FFN of each column's block run on the inputs captured at each row's block; white lines separate models, the diagonal is each block on its own inputs.", "name": "fig-activation-crossfeed"}}
nets = {
    m: resolve.load_profile_model(ch.profile, m, progress=ch.progress)[0]
    for m in GRID_MODELS
}
depth_of = min(len(measured[(m, "final")].blocks) for m in GRID_MODELS)
blocks = crossfeed.spread_blocks(depth_of, GRID_BLOCKS)
print(
    f"cross-feeding blocks {'all' if blocks is None else blocks} of {', '.join(GRID_MODELS)}"
)
grid = crossfeed.crossfeed_grid(
    {m: measured[(m, "final")].samples for m in GRID_MODELS},
    {m: nets[m] for m in GRID_MODELS},
    ch.profile.folds,
    blocks=blocks,
)
fig = activation_plots.crossfeed_heatmap(grid, order=GRID_MODELS)
ch.figure(fig, grid, "fig-activation-crossfeed")

# %% [markdown]
# The grid's variance splits exactly into a part explained by *which FFN runs* (column means), a
# part explained by *whose inputs* it runs on (row means) and an interaction. Across models (cells
# where inputs and FFN come from different models), the cross-fed value is also correlated with the
# FFN's own-input R²_lin and with the input block's own R²_lin. Because a SwiGLU and a GELU block
# differ at any weights, the decomposition is repeated on the models that share the GELU activation,
# the paper's own comparison.

# %%
gelu = [
    m for m in GRID_MODELS if identity.ACTIVATIONS.get(identities[m].family) == "GELU"
]
shares = {"all models": activation.grid_shares(grid)}
if len(gelu) >= 2 and len(gelu) < len(GRID_MODELS):
    shares["GELU models"] = activation.grid_shares(grid, models=gelu)
pd.concat({label: s.frame() for label, s in shares.items()}, axis=1)

# %% [markdown]
# The grid above moves every foreign row into the receiving block's norm coordinates. Fed as captured
# instead, A's rows also carry A's norm gain and bias, and
# part of what the grid measures is B's FFN meeting the wrong per-dimension scales. The same
# decomposition on that unaligned grid shows how much the choice matters here: where the two columns
# differ, the verdict rows for cross-feeding below can differ too, and the aligned grid is the one they
# use.

# %%
unaligned = crossfeed.crossfeed_grid(
    {m: measured[(m, "final")].samples for m in GRID_MODELS},
    {m: nets[m] for m in GRID_MODELS},
    ch.profile.folds,
    blocks=blocks,
    align=False,
)
unaligned_shares = {"all models": activation.grid_shares(unaligned)}
if "GELU models" in shares:
    unaligned_shares["GELU models"] = activation.grid_shares(unaligned, models=gelu)
pd.concat(
    {
        (label, version): s[label].frame()["value"]
        for label in shares
        for version, s in (("aligned", shares), ("as captured", unaligned_shares))
    },
    axis=1,
)

# %% [markdown]
# The last row of these tables compares each FFN on its own inputs with the same FFN on other models' inputs. A
# negative value means blocks are *less* linear on the inputs they were trained with than on foreign
# ones: the nonlinearity is tuned to the block's own input distribution, which is a statement about
# weights and inputs together (the interaction share), not about either alone.
#
# Aligning the norms removes the gain and bias another model's rows carry, but not every difference:
# the normalised features themselves (how variance spreads over directions, which ones are large) still
# come from model A. A cross-fed R²_lin is thus "this FFN on features like A's, in its own coordinates",
# not "this FFN on inputs like its own but from elsewhere".
#
# ## Headline numbers
#
# The distances and shares above are recorded for the appendix as numbers without a verdict: they
# say how far apart trainings and architectures land and whether a cross-fed block follows its
# weights or its inputs, which is a different question from whether what the weights carry was
# learned.

# %%
ch.report(activation.activation_claims(distances, shares))

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** Whether each model's blocks are as linear as the same architecture with the same
# weight values in a random arrangement, judged against the spread of that control over seeds; and,
# as descriptions, whether the profile exists before training, how large the seed-to-seed variation
# is next to the differences between architectures, whether input conditioning or a change of input
# shape predicts R²_lin, and whether an FFN keeps its recoverability on someone else's inputs.
#
# **Cannot show.** Which part of training (data, schedule, for SmolLM2 the instruction tuning) put
# a block's linearity there; chapter 8 follows it along training on the zoo. The shuffle keeps what
# lies in a matrix's values alone (their scale and distribution) and destroys whatever lies in their
# arrangement, learned or imposed by an initialiser; norm gains and biases stay as trained.
# "Learned" and "architectural" are not exclusive: training shapes weights *within* an
# architecture, so a difference between families that is stable across seeds (if the table shows
# one) is learned *and* architecture-specific, and these controls cannot say which architectural
# detail (parallel residual, tied embeddings, rotary embeddings) causes it. One second seed gives a
# single seed-to-seed distance, not its distribution. The zoo's models are small and briefly trained;
# the hub models of the `paper` profile have no second seed, and only Pythia has an initial
# checkpoint, so there the init and seed tests are partial. Cross-feeding and whitening move the FFN
# off its own input distribution, so they test robustness of the map, not the map in its native use.
#
# ## Exercises
#
# :::{exercise} Is the grid symmetric?
# :label: ex-activation-is-the-grid-symmetric
# Running $B_j$ on $A_i$'s inputs and $A_i$ on $B_j$'s inputs are
# different experiments. How correlated are the two across the grid, and what would perfect symmetry
# mean?
# :::
#
# :::{solution-start} ex-activation-is-the-grid-symmetric
# :class: dropdown
# :::
# Symmetry would mean R²_lin depends only on the *pair* of blocks, not on which supplies the inputs
# and which the weights, something neither the "weights" nor the "inputs" reading predicts. A
# weights-driven grid has near-constant columns, so a cell and its transpose are unrelated unless the
# two FFNs happen to agree; the code below computes the correlation between each cell and its
# transpose.

# %% tags=["solution"]
transposed = grid.rename(
    columns={
        "input_model": "weight_model",
        "input_block": "weight_block",
        "weight_model": "input_model",
        "weight_block": "input_block",
    }
)
paired = grid.merge(
    transposed,
    on=["input_model", "input_block", "weight_model", "weight_block"],
    suffixes=("", "_transposed"),
)
paired = paired[
    (paired["input_model"] != paired["weight_model"])
    | (paired["input_block"] != paired["weight_block"])
]
print(
    f"Pearson r between a cell and its transpose: {paired['r2_lin'].corr(paired['r2_lin_transposed']):+.3f} "
    f"over {len(paired)} off-diagonal cells"
)

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Which inputs are foreign?
# :label: ex-activation-which-inputs-are-foreign
# Before reading a cross-fed value, which column of the conditioning
# table tells you whether model A's inputs are at a scale model B's FFN has seen, and how would you
# remove that difference?
# :::
#
# :::{solution-start} ex-activation-which-inputs-are-foreign
# :class: dropdown
# :::
# `input_rms` (and the input mean, which the table does not show): if A's block inputs have a very
# different RMS from B's, B's units operate in another regime of the activation. The grid above already
# rewrites A's rows in B's norm coordinates (`linrec.interventions.crossfeed.align_inputs`), which
# removes the per-dimension gain and offset; `crossfeed_grid(..., align=False)` feeds them as captured,
# for comparison. The code below prints the input RMS per model and block.

# %% tags=["solution"]
ch.show(trained_blocks.pivot(index="block", columns="model", values="input_rms")[MODELS])

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} A stricter seed test
# :label: ex-activation-a-stricter-seed-test
# With only one seed pair, what would you need to measure to say that
# two architectures differ "beyond seed variation" with some confidence?
# :::
#
# :::{solution} ex-activation-a-stricter-seed-test
# :class: dropdown
# Several seeds per architecture (at least three to five): then the within-architecture distances
# form a distribution, and the between-architecture distances can be compared with it by a
# permutation test (shuffle architecture labels across trained models and recompute the mean
# between-label distance). With the zoo, add entries with other seeds to `linrec.models.zoo.ZOOS` and
# rebuild; each small model trains in minutes.
# :::
#
# ## Provenance

# %%
ch.provenance()
