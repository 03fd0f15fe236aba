# %% [markdown]
# # Method: distillation as measurement
#
# **Claim under test.** How much of a feed-forward block an affine map can reproduce is a number you
# can *compute*, exactly and cheaply, from second moments of the block's inputs and outputs, with no
# training; this chapter builds that number, checks it against cases with known answers, and runs it
# on a real transformer, first untrained and then trained.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
ROWS = 6000  # rows per synthetic ("planted") block
WIDTH = 16  # input and output width of the planted blocks
FOLDS = 5  # k of the k-fold held-out split
TINY_LAYERS = 4  # the randomly initialised GPT-2 of the last section
TINY_WIDTH = 64
TINY_HEADS = 4  # attention heads; they must divide TINY_WIDTH
TINY_SEQUENCES = 64
SEQ_LEN = 32

# %%
import math

import numpy as np
import pandas as pd
import torch
from transformers import AutoConfig, AutoModel, GPT2Config, GPT2LMHeadModel

import linrec
from linrec.analysis import method
from linrec.experiment import measurement
from linrec.notebook import chapter, exercises
from linrec.plots import depth as depth_plots
from linrec.plots import method as method_plots

ch = chapter.begin(
    "01_method",
    globals(),
    positive_int=[
        "ROWS",
        "WIDTH",
        "TINY_LAYERS",
        "TINY_WIDTH",
        "TINY_HEADS",
        "TINY_SEQUENCES",
        "SEQ_LEN",
    ],
    folds=["FOLDS"],
    multiple_of=[("TINY_WIDTH", "TINY_HEADS")],
    at_least=[("TINY_SEQUENCES", "FOLDS")],
)
DEVICE = linrec.pick_device()

# %% [markdown]
# Everything up to the section on a trained model is the same under every profile and runs in
# seconds: it needs no corpus and no pretrained weights. That last section measures the profile's
# first model (GPT-2 under `paper`; under `offline` and `smoke` the zoo's GPT-2-style model, which
# is trained on first use and then cached for all chapters).
#
# ## What is measured: X and Y of each block
#
# A pre-norm transformer layer updates its residual stream $h$ twice: once with attention and once
# with the feed-forward block, $h \leftarrow h + \mathrm{FFN}(\mathrm{Norm}(h))$. The measurement
# treats the FFN as a black box and records, for every token position,
#
# - $X$: what enters the FFN, i.e. the output of the norm in front of it, and
# - $Y$: what the FFN returns, before it is added to the residual stream.
#
# Each token gives one row $(x, y)$, and the block's linear recoverability is a property of the cloud
# of such rows. `linrec.models.arch` knows where each architecture keeps these two points. The table below
# is not typed by hand: it builds a one-layer model of every supported architecture from its config
# class (no download) and asks `linrec.ffn_blocks` where it would hook.

# %%
TINY = dict(
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    vocab_size=64,
    max_position_embeddings=32,
    bos_token_id=0,
    eos_token_id=0,
    pad_token_id=0,
)
EXTRA = {"gpt2": {"n_inner": 32}, "opt": {"ffn_dim": 32, "word_embed_proj_dim": 16}}

where = []
for model_type in linrec.SUPPORTED:
    config = AutoConfig.for_model(model_type, **TINY, **EXTRA.get(model_type, {}))
    model = AutoModel.from_config(config)
    block = linrec.ffn_blocks(model)[0]
    ffn = dict(model.named_modules())[block.input]
    where.append(
        {
            "model_type": model_type,
            "X: input of": block.input,
            "Y: output of": block.output,
            "hooked": type(ffn).__name__
            if block.input == block.output
            else "first, last Linear",
        }
    )
ch.show(pd.DataFrame(where))

# %% [markdown]
# Three differences matter later. In GPT-2 {cite}`radford2019language` the MLP reads the attention
# output after a LayerNorm. Pythia {cite}`biderman2023pythia` (GPT-NeoX) uses a *parallel* residual:
# its MLP reads the normalised *block input*, not the attention output. Llama-style models
# {cite}`touvron2023llama` normalise with RMSNorm and use a gated SiLU MLP {cite}`shazeer2020glu`.
# Encoders (BERT, RoBERTa) and OPT have no MLP module wrapping both linear layers, so X is read at the
# first linear layer and Y at the second. Any other model can be measured by naming the two modules
# yourself (`spec=[(input_name, output_name), ...]`).
#
# ## Windows of text, and what position 0 holds
#
# A corpus is tokenised as one stream and cut into consecutive, non-overlapping windows of
# `seq_len` tokens; every position of every window gives one row. The first position of a window
# has seen nothing else, so what stands there is a choice, and linrec makes the one each model was
# trained with. A tokenizer that starts every text with a beginning-of-sequence token (Llama's `<s>`,
# as llama-160m saw its training texts) gets that token at position 0 of every window, followed by
# `seq_len - 1` text tokens. Tokenizers that put nothing before a text (GPT-2's and Pythia's, whose
# `<|endoftext|>` separates documents in training but is not added by the tokenizer, and the
# tokenizers of this book's own small models) give windows of text tokens only.
# `linrec.data.tokens.bos_policy` names the choice for a tokenizer, and every chapter that measures a
# profile's models states it per model in its provenance line ("windows start: ...").
#
# ## The data flow
#
# The whole method is one forward pass and one small linear solve per block. The model is never
# trained or modified; {numref}`fig-method-pipeline` shows what flows where.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The data flow of one measurement. Rows $(x, y)$ exist only inside the forward pass; below the dashed line everything is computed from float64 moments, whose size does not depend on the number of tokens.", "name": "fig-method-pipeline"}}
fig = method_plots.draw_pipeline()
ch.figure(fig, None, "fig-method-pipeline")

# %% [markdown]
# ## From moments to $R^2_\text{lin}$
#
# Write rows as row vectors and split them into a training set and a test set (by *sequence*, so
# that neighbouring, correlated tokens never straddle the split). For each set keep only
#
# $$
# n,\quad \bar x,\quad \bar y,\quad C_{xx} = \sum_i (x_i-\bar x)^\top (x_i-\bar x),\quad
# C_{xy} = \sum_i (x_i-\bar x)^\top (y_i-\bar y),\quad C_{yy} = \sum_i (y_i-\bar y)^\top (y_i-\bar y).
# $$
#
# These are sums, so two chunks of rows can be combined without revisiting them; `linrec` merges
# chunks with the pairwise update of {cite:t}`chan1979updating`, which stays accurate when a few
# coordinates are orders of magnitude larger than the rest {cite}`chan1983algorithms`. Everything
# is accumulated in float64.
#
# **Fit (training moments).** Minimising $\sum_i \lVert y_i - x_iW - b\rVert^2$ gives
#
# $$ W = C_{xx}^{+}\, C_{xy}, \qquad b = \bar y - \bar x W .$$
#
# The $^{+}$ is a pseudo-inverse {cite}`penrose1955generalized`, and it is needed: after a LayerNorm
# (before its gain and bias) the features of every row sum to zero, so $C_{xx}$ has an exact null
# direction and a plain inverse would be meaningless. `linrec` rescales $C_{xx}$ to a correlation
# matrix, eigendecomposes it and drops the directions whose eigenvalue is small both next to the
# largest and next to what rounding of the captured rows could produce.
#
# **Score (test moments).** For output coordinate $j$, the squared error of the map on the test
# rows can be expanded around the test means, and every term is a test moment:
#
# $$
# \mathrm{SSE}_j = (C_{yy})_{jj} - 2\,(W^\top C_{xy})_{jj} + (W^\top C_{xx} W)_{jj} + n\,\delta_j^2,
# \qquad \delta = \bar y - (\bar x W + b),
# $$
#
# where $\delta$ is the error of the map at the test means (the cross terms vanish because centred
# sums are zero). The test rows' own spread is $\mathrm{SST}_j = (C_{yy})_{jj}$, and
#
# $$ R^2_\text{lin} = 1 - \frac{\sum_j \mathrm{SSE}_j}{\sum_j \mathrm{SST}_j}. $$
#
# Summing before dividing weights each output coordinate by its variance, the convention of
# scikit-learn's `r2_score(..., multioutput="variance_weighted")`. On held-out rows the value can be
# negative; it is never clipped. With $k$ folds, each fold is scored once by the map fitted on the
# other $k-1$, and the chapter reports the mean and standard deviation over folds.
#
# Two checks that the moment route equals the row route, on random rows: the moments of all rows
# equal the merged moments of two halves, and the held-out error computed from test *moments*
# equals the error computed from the test *rows*.

# %%
gen = torch.Generator().manual_seed(SEED)


def randn(*shape: int) -> torch.Tensor:
    """Seeded standard normal float64 numbers (every random draw of this chapter comes from here)."""
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


# columns at scales 1 ... 1000
x = randn(ROWS, WIDTH) * torch.logspace(0, 3, WIDTH, dtype=torch.float64)
y = torch.tanh(x / 100) + 0.1 * randn(ROWS, WIDTH)

whole = linrec.Moments.from_rows(x, y)
cut = ROWS // 3
halves = linrec.Moments.from_rows(x[:cut], y[:cut]) + linrec.Moments.from_rows(
    x[cut:], y[cut:]
)
train, test = slice(0, 4 * ROWS // 5), slice(4 * ROWS // 5, None)
fit = linrec.fit_affine(linrec.Moments.from_rows(x[train], y[train]))
from_moments = linrec.core.fit.held_out(fit, linrec.Moments.from_rows(x[test], y[test]))
residual = y[test] - fit(x[test])
sse_rows = (residual**2).sum(0)
sst_rows = ((y[test] - y[test].mean(0)) ** 2).sum(0)

pd.Series(
    {
        "merged Cxx vs one-shot Cxx (max rel. diff)": float(
            (halves.cxx - whole.cxx).abs().max() / whole.cxx.abs().max()
        ),
        "SSE from moments vs rows (max rel. diff)": float(
            ((from_moments.sse - sse_rows).abs() / sse_rows).max()
        ),
        "R² from moments": from_moments.r2,
        "R² from rows": float(1 - sse_rows.sum() / sst_rows.sum()),
    },
    name="value",
).to_frame()

# %% [markdown]
# The input here spans three orders of magnitude across coordinates on purpose, to mimic the
# outlier dimensions of real residual streams; the two routes still agree to rounding error.
#
# ## Planted blocks: cases with known answers
#
# A measurement is only trustworthy if it returns the right value where the right value is known.
# Take $x \sim \mathcal N(0, I)$, a distribution symmetric about zero, and three "blocks":
#
# - **affine**: $y = xA + c$. The map is recoverable exactly, so $R^2_\text{lin}$ should be 1.
# - **affine + noise**: $y = xA + c + \sigma\varepsilon$. Only the noise is unrecoverable, so the
#   answer is $\lVert A\rVert_F^2 / (\lVert A\rVert_F^2 + d\,\sigma^2)$.
# - **even**: $y_j = (x b_j)^2$. An even function of a symmetric input is uncorrelated with every
#   linear function of it (all odd moments vanish), so the best affine map is a constant and
#   $R^2_\text{lin}$ should be about 0, slightly negative on held-out rows.
#
# `linrec.core.planted.recover_rows` deals rows into $k$ folds and calls the same `kfold` that
# `linrec.core.measure` uses.

# %%
x = randn(ROWS, WIDTH)
A, B, c = randn(WIDTH, WIDTH), randn(WIDTH, WIDTH) / math.sqrt(WIDTH), randn(WIDTH)
sigma = 1.0
linear_part = x @ A + c
even_part = (x @ B) ** 2
v_lin = float((A**2).sum())  # variance of the linear part, summed over outputs
v_even = float(2 * ((B**2).sum(0) ** 2).sum())  # Var((x b)^2) = 2 |b|^4 for Gaussian x

planted = {
    "affine": (linear_part, 1.0),
    "affine + noise": (
        linear_part + sigma * randn(ROWS, WIDTH),
        v_lin / (v_lin + WIDTH * sigma**2),
    ),
    "even (quadratic)": (even_part, 0.0),
}
reports = {
    name: linrec.core.planted.recover_rows(x, y, FOLDS)
    for name, (y, _) in planted.items()
}
ch.show(
    pd.DataFrame(
        {
            "expected R²_lin": {
                name: expected for name, (_, expected) in planted.items()
            },
            "R²_lin (measured)": {name: r.r2_lin for name, r in reports.items()},
            "R²_lin std over folds": {name: r.r2_lin_std for name, r in reports.items()},
        }
    ).rename_axis("planted block")
)

# %% [markdown]
# Mixing the two parts, $y = (1-\alpha)(xA + c) + \alpha\,(xB)^{\circ 2}$, gives a whole family
# with a known answer. The parts are uncorrelated, so their variances $v_\text{lin}$ and
# $v_\text{even}$ add, and
#
# $$ R^2_\text{lin}(\alpha) = \frac{(1-\alpha)^2 v_\text{lin}}{(1-\alpha)^2 v_\text{lin} + \alpha^2 v_\text{even}}. $$
#
# {numref}`fig-method-mixture` sets the measured value at eleven values of $\alpha$ against this curve.

# %%
alphas = np.linspace(0, 1, 11)
mixed = [
    linrec.core.planted.recover_rows(x, (1 - a) * linear_part + a * even_part, FOLDS)
    for a in alphas
]
sweep = pd.DataFrame(
    {
        "alpha": alphas,
        "r2_lin": [r.r2_lin for r in mixed],
        "r2_lin_std": [r.r2_lin_std for r in mixed],
    }
)
fine = np.linspace(0, 1, 201)
theory = pd.DataFrame(
    {
        "alpha": fine,
        "r2_lin": (1 - fine) ** 2 * v_lin / ((1 - fine) ** 2 * v_lin + fine**2 * v_even),
    }
)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Planted blocks mixing an affine and an even part: held-out $R^2_\\text{lin}$ measured by `linrec` (points, $k$-fold mean ± std) against the exact population value (line).", "name": "fig-method-mixture"}}
fig = method_plots.mixture_figure(sweep, theory, FOLDS, ROWS)
ch.figure(fig, {"measured": sweep, "exact": theory}, "fig-method-mixture")

# %% [markdown]
# ## One activation, any recoverability
#
# The paper's headline is that recoverability is *learned*. Here is the simplest illustration. Take
# a GELU block {cite}`hendrycks2016gelu` $y = \mathrm{GELU}(s\,xQ + \beta)\,C$ with $Q$ a random
# rotation: every hidden unit sees an independent pre-activation $s z + \beta$ with
# $z \sim \mathcal N(0,1)$.
# The architecture is fixed; only the scale $s$ and offset $\beta$, which training would set,
# change. For one unit the exact answer is $R^2 = \mathrm{Cov}(z, g)^2 / \mathrm{Var}(g)$ with
# $g = \mathrm{GELU}(sz + \beta)$, and with independent units the whole block has the same value. We
# compute it by Gauss–Hermite quadrature ({numref}`fig-method-gelu-map`) and compare it with what
# `linrec` measures on rows ({numref}`fig-method-gelu-check`).

# %%
scales = torch.logspace(-1, 1, 41, dtype=torch.float64)
offsets = torch.linspace(-4, 2, 41, dtype=torch.float64)
grid = linrec.core.planted.gelu_r2(scales[None, :], offsets[:, None])

Q, _ = torch.linalg.qr(randn(WIDTH, WIDTH))
C = randn(WIDTH, WIDTH)
gelu_table = pd.DataFrame(
    [(s, b) for s in (0.2, 0.6, 1.5, 4.0) for b in (-3.0, -1.0, 0.0, 1.5)],
    columns=["scale", "offset"],
)
gelu_table["exact"] = linrec.core.planted.gelu_r2(
    torch.tensor(gelu_table["scale"].to_numpy()),
    torch.tensor(gelu_table["offset"].to_numpy()),
)
gelu_table["measured"] = [
    linrec.core.planted.recover_rows(
        x, torch.nn.functional.gelu(s * (x @ Q) + b) @ C, FOLDS
    ).r2_lin
    for s, b in zip(gelu_table["scale"], gelu_table["offset"])
]

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Exact $R^2_\\text{lin}$ of a GELU block $y = \\mathrm{GELU}(s\\,xQ + \\beta)\\,C$ with Gaussian inputs, over the scale $s$ and offset $\\beta$ of its pre-activations (Gauss–Hermite quadrature). White dots: the blocks measured on rows in {numref}`fig-method-gelu-check`.", "name": "fig-method-gelu-map"}}
fig = method_plots.gelu_map_figure(
    scales.numpy(), offsets.numpy(), grid.numpy(), gelu_table
)
ch.figure(
    fig,
    {
        "map": method_plots.gelu_map_table(scales.numpy(), offsets.numpy(), grid.numpy()),
        "blocks": gelu_table,
    },
    "fig-method-gelu-map",
)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ that `linrec` measures on rows of the GELU blocks marked in {numref}`fig-method-gelu-map` against the exact value; the dashed diagonal is perfect agreement.", "name": "fig-method-gelu-check"}}
fig = method_plots.gelu_check_figure(gelu_table, ROWS)
ch.figure(fig, gelu_table, "fig-method-gelu-check")

# %% [markdown]
# The same nonlinearity ranges from essentially linear (small scale, or offsets that keep units in
# their near-linear regime) to essentially unrecoverable: around $\beta \approx -1$ with a small
# scale the units sit near the minimum of GELU, where it is locally an even function. Where a
# trained block lands on this map is decided by its weights, which is why the chapters that follow
# measure trained models block by block rather than reasoning from the activation function.
#
# ## The real pipeline on a tiny GPT-2
#
# Finally, the full path through a transformer: a four-layer GPT-2 built from `GPT2Config` with
# random weights (nothing is downloaded), fed uniformly random token ids. First a check that the
# hooks capture exactly the block's input and output: a custom sink collects the rows of block 0
# and we feed the captured $X$ back through that block's MLP.

# %%
config = GPT2Config(
    n_layer=TINY_LAYERS,
    n_embd=TINY_WIDTH,
    n_head=TINY_HEADS,
    vocab_size=512,
    n_positions=SEQ_LEN,
    bos_token_id=0,
    eos_token_id=0,
)
torch.manual_seed(SEED)
gpt = GPT2LMHeadModel(config).to(DEVICE).eval().requires_grad_(False)
ids = torch.randint(0, config.vocab_size, (TINY_SEQUENCES, SEQ_LEN), generator=gen)
batches = linrec.TokenBatches(ids, torch.ones_like(ids), batch_size=16)


# keeps every row here; measure() keeps only moments
sink = linrec.RowSample(sample_rows=batches.n_rows, seed=SEED)
blocks = linrec.ffn_blocks(gpt)
linrec.run_capture(
    gpt, batches, blocks[:1], [sink], batches.folds(FOLDS, SEED), progress=ch.progress
)
X0, Y0 = sink.rows(0).x.to(DEVICE), sink.rows(0).y.to(DEVICE)
mlp0 = dict(gpt.named_modules())[blocks[0].input]
gap = (mlp0(X0) - Y0).abs().max()
print(f"block 0: X {tuple(X0.shape)}, Y {tuple(Y0.shape)}; max |MLP(X) - Y| = {gap:.2e}")

# %%
table = linrec.measure(
    gpt, batches, folds=FOLDS, seed=SEED, progress=ch.progress, extras="output-covariance"
)
SHOWN = [  # the columns read here; linrec.core.fit.COLUMNS says what each means
    "block",
    "r2_lin",
    "r2_lin_std",
    "r2_feature_median",
    "effective_rank_out",
    "input_condition",
    "null_dims",
    "n_train",
    "n_test",
]
ch.show(table[SHOWN])

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every FFN block of the randomly initialised tiny GPT-2, read on random token ids ($k$-fold mean ± std).", "name": "fig-method-random-init"}}
fig = method_plots.untrained_figure(
    table,
    f"random-init GPT-2, {TINY_WIDTH} wide",
    title="Every block of an untrained GPT-2 is close to linear",
)
ch.figure(fig, table, "fig-method-random-init")

# %% [markdown]
# The call asks for one extra: `effective_rank_out` needs the whole output covariance, which a
# measurement sums only when asked (`extras="output-covariance"`); by default it sums what the fit
# and its held-out $R^2$ read, the diagonal of $Y^\top Y$ alone.
#
# Each LayerNorm-fed block shows one null input direction (`null_dims`), the exact constraint the
# pseudo-inverse exists for. The blocks of the *untrained* model are nearly linear
# ({numref}`fig-method-random-init`), as the GELU map of {numref}`fig-method-gelu-map` predicts:
# GPT-2 initialises weights with standard deviation 0.02, so pre-activations are small and every
# unit sits in the near-linear corner of the map. Whatever nonlinearity a trained
# model shows, training put it there.
#
# ## The same instrument on a trained model
#
# The same call measures a trained model. The profile decides which one: under `paper` it is GPT-2
# (124M) on WikiText-2, the paper's own setting; under `offline` and `smoke` it is the GPT-2-style
# model of the zoo, trained on this machine on standard-library text (trained on first use, then
# cached for every chapter). Later chapters measure every model of the profile on several corpora;
# here the point is only to see the instrument on weights that training has shaped.

# %%
trained_name = ch.profile.models[0]
# cached: later chapters reuse this capture
trained_run = measurement.measurement(ch.profile, trained_name, progress=ch.progress)
trained_table = trained_run.table()
ch.show(trained_table[SHOWN], fold="every block of the trained model")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every FFN block of the profile's first trained model on the profile's main corpus ($k$-fold mean ± std), with the paper's reported range for trained blocks (above 0.99 to below 0.3) dashed.", "name": "fig-method-trained"}}
fig = depth_plots.heterogeneity_reference_figure(trained_table)
ch.figure(fig, trained_table, "fig-method-trained")

# %% [markdown]
# Under the `paper` profile the dashed lines of {numref}`fig-method-trained` bracket what the paper
# reports for its trained models, so the two can be compared directly. Under `offline` and `smoke` the model is much smaller and
# was trained on different text, so the lines are a reference, not a target: what carries over is
# the *shape* of the question (are the blocks alike, or not), which later chapters test properly.
#
# ## And on real models
#
# The `offline` profile also carries two real language models that install from the package index,
# SmolLM2-135M and Gemma 3 270M (chapter 2 introduces them). Measured trained and at a seeded random
# initialisation of the same architecture, beside the models trained here at their first checkpoint,
# they answer the question the tiny GPT-2 above raised: is "nearly linear at initialisation" a law?
# It is not. SmolLM2 is a Llama: its FFN multiplies a SiLU-gated branch by a linear one, and near zero
# $\operatorname{SiLU}(g)\,u \approx gu/2$ is a *product* of two linear functions of the input, a
# quadratic, where $\operatorname{GELU}(z) \approx z/2$ is linear; Gemma's gate is a GELU, and the
# same holds for it. So a randomly initialised gated block has little for an affine map to recover,
# and any linearity the trained blocks show was learned. {numref}`fig-method-real` draws every model
# of the profile both ways.

# %%
runs = {}
# the trained capture is the one chapters 2 to 7 share (with its row sample)
for m in ch.profile.models:
    runs[m, "init"] = measurement.measurement(
        ch.profile, m, checkpoint="init", keep="table", progress=ch.progress
    ).table()
    runs[m, "final"] = measurement.measurement(
        ch.profile, m, progress=ch.progress
    ).table()
init_profiles = pd.concat(runs.values(), ignore_index=True)
ch.show(
    init_profiles.groupby(["model", "checkpoint"], sort=False)["r2_lin"]
    .describe()[["min", "50%", "max"]]
    .rename(columns=lambda c: f"R²_lin {'median' if c == '50%' else c}")
)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every FFN block of every model of the profile, trained (solid) and at initialisation (dashed: a zoo model's first checkpoint, a real model's seeded random initialisation of its architecture), each on its own main corpus ($k$-fold mean ± std).", "name": "fig-method-real"}}
fig = depth_plots.curves_figure(
    init_profiles, style="checkpoint", title="Every model against its own initialisation"
)
ch.figure(fig, init_profiles, "fig-method-real")

# %% [markdown]
# ## This run beside the paper's setup
#
# Chapter 1 reproduces no figure of the paper; it builds and validates the instrument. The table
# sets the paper's reported measurement setup next to what ran here, so that the difference in
# scale is explicit.

# %% tags=["hide-input"]
ch.show(
    method.setup_table(
        ch.profile,
        trained_run,
        runs,
        layers=TINY_LAYERS,
        width=TINY_WIDTH,
        rows=batches.n_rows,
        seq_len=SEQ_LEN,
        folds=FOLDS,
    )
)

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** The closed-form recoverability computed from streamed float64 moments equals the
# row-by-row computation; it returns 1 for affine blocks, about 0 for even functions of symmetric
# inputs and the exact value for every mixture and GELU block with a known answer; and the hooks
# capture precisely the FFN's input and output in a real transformer. The same GELU can score
# anywhere between 0 and 1 depending on the scale and offset of its pre-activations.
#
# **Cannot show.** The planted blocks have Gaussian inputs and the random-init GPT-2 reads random
# tokens, so neither says anything about trained language models. The one trained model measured
# here is a single model on a single corpus with a single fold assignment: it shows that the
# instrument works on trained weights, not whether profiles are uneven in general, whether they
# differ between models of the same architecture, or how stable they are across corpora and seeds.
# Those are the claims of the following chapters, which also report input conditioning per block,
# since real activations (heavy tails, outlier dimensions) are far from the Gaussian case.
#
# ## Exercises
#
# :::{exercise} Reparametrising the input
# :label: ex-method-reparametrising-the-input
# Predict what happens to $R^2_\text{lin}$ of the "affine + noise"
# block when every input row is transformed as $x \mapsto xM + t$ for an invertible $M$. Then check.
# :::
#
# :::{solution-start} ex-method-reparametrising-the-input
# :class: dropdown
# :::
# Nothing changes (up to rounding): any affine map of $xM + t$ is an affine map of $x$ and vice
# versa, so the best achievable fit, and hence $R^2_\text{lin}$, is the same. The measurement
# depends on the information in $X$, not on its coordinates. The code below verifies it.

# %% tags=["solution"]
M = randn(WIDTH, WIDTH) + 3 * torch.eye(
    WIDTH, dtype=torch.float64
)  # invertible in practice
t = 10 * randn(WIDTH)
noisy = planted["affine + noise"][0]
before, after = (
    linrec.core.planted.recover_rows(x, noisy, FOLDS).r2_lin,
    linrec.core.planted.recover_rows(x @ M + t, noisy, FOLDS).r2_lin,
)
print(f"R²_lin before {before:.6f}, after x -> xM + t {after:.6f}")
assert abs(before - after) < 1e-8

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Shifted squares
# :label: ex-method-shifted-squares
# $y = x^2$ (elementwise, $x \sim \mathcal N(0, I)$) gives $R^2_\text{lin}
# \approx 0$. What does $y = (x + 1)^2$ give, and why?
# :::

# %% tags=["remove-cell"]
# Exercise "Shifted squares": put your R²_lin of y = (x + 1)² in `answer` and run this cell.
answer = None
# this run's measurement: what the answer is checked against
shifted = linrec.core.planted.recover_rows(x, (x + 1) ** 2, FOLDS)
# tol 0.03: the exact value, 2/3, passes at this run's row count (the solution asserts the same bound)
exercises.check(
    answer,
    shifted.r2_lin,
    tol=0.03,
    hint="split (x + 1)² into its linear and its even part; compare their variances",
)

# %% [markdown]
# :::{solution-start} ex-method-shifted-squares
# :class: dropdown
# :::
# $(x+1)^2 = x^2 + 2x + 1$: the linear part $2x$ has variance 4 per coordinate and the even part
# $x^2$ has variance 2, and they are uncorrelated, so $R^2_\text{lin} = 4 / (4 + 2) = 2/3$. An offset
# moves a symmetric input off the centre of the nonlinearity, which is exactly what the GELU map
# shows for $\beta \neq 0$.

# %% tags=["solution"]
print(f"measured {shifted.r2_lin:.4f} ± {shifted.r2_lin_std:.4f}; predicted {2 / 3:.4f}")
assert abs(shifted.r2_lin - 2 / 3) < 0.03

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} What it costs
# :label: ex-method-what-it-costs
# How much memory do the moments of one GPT-2 block (width 768, FFN output 768)
# take for 5 folds, with 20 thousand rows and with 20 million rows?
# :::

# %% tags=["remove-cell"]
# Exercise "What it costs": put your answer for 20 million rows, in MB (10⁶ bytes), in `answer` and run this cell.
answer = None
empty = linrec.Moments.zeros(768, 768)  # the moments this block would hold: the check
per_fold = (
    sum(getattr(empty, f).numel() for f in ("mean_x", "mean_y", "cxx", "cxy", "cyy")) * 8
)
# tol 4 MB: an answer in MiB (2^20 bytes, 5 % less, about 3.4 MB here) passes too
exercises.check(
    answer,
    5 * per_fold / 1e6,
    tol=4,
    hint="count the float64 numbers one fold keeps; do they grow with the rows?",
)

# %% [markdown]
# :::{solution-start} ex-method-what-it-costs
# :class: dropdown
# :::
# The same in both cases: per fold, $C_{xx}$, $C_{xy}$ and $C_{yy}$ are $3 \times 768^2$ float64
# numbers (plus two means), about 14 MB, so 5 folds take about 71 MB whatever the number of rows.
# Rows only cost forward-pass time. The code below prints it for a real `Moments` object.

# %% tags=["solution"]
print(
    f"{per_fold / 1e6:.1f} MB per fold, {5 * per_fold / 1e6:.1f} MB for 5 folds, any row count"
)

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Initialisation scale
# :label: ex-method-initialisation-scale
# Rebuild the tiny GPT-2 with `initializer_range=0.2` instead of the
# default 0.02 and measure it again. Which way does $R^2_\text{lin}$ move, and which region of the
# GELU map explains it?
# :::
#
# :::{solution-start} ex-method-initialisation-scale
# :class: dropdown
# :::
# Larger weights give larger pre-activations, moving the units out of the near-linear corner of the
# map toward the ReLU-like regime, so $R^2_\text{lin}$ drops. The code below runs it.

# %% tags=["solution"]
torch.manual_seed(SEED)
wide = GPT2LMHeadModel(GPT2Config(**{**config.to_dict(), "initializer_range": 0.2}))
wide = wide.to(DEVICE).eval().requires_grad_(False)
ch.show(
    pd.DataFrame(
        {
            "block": table["block"],
            "R²_lin, init std 0.02": table["r2_lin"],
            "R²_lin, init std 0.2": linrec.measure(
                wide, batches, folds=FOLDS, seed=SEED, progress=ch.progress
            )["r2_lin"],
        }
    )
)

# %% [markdown]
# :::{solution-end}
# :::
#
# ## Provenance

# %%
ch.provenance()
