# %% [markdown]
# # Compression: swapping a feed-forward block for a cheaper map
#
# **Claim under test.** A block with high linear recoverability can be replaced by a single affine
# layer at a fraction of its parameters for a small cost in perplexity (the paper: an early GPT-2
# block at 8× fewer parameters for +0.77 perplexity), and blocks with low recoverability are the
# ones where such a replacement is unsafe {cite}`whipp2026linear`.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODEL = None  # the model for the full comparison; None: the profile's first (the GPT-2-shaped one)
SIGNAL_MODELS = None  # models whose affine swaps (every block) test R²_lin as a safety signal; None: every model
# models walked under the budget; None: SIGNAL_MODELS but those whose perplexity passes the profile leaves out (the
# line under the set-up cell names them, and why)
BUDGET_MODELS = None
KINDS = ["affine", "lowrank", "poly", "mean", "zero"]  # replacements to compare
LOW_RANK = None  # rank k of the low-rank replacement; None: an eighth of the width
EVAL_TOKENS = None  # held-out tokens per perplexity pass of MODEL; None: an eighth of its evaluation tokens
EARLY = 0.5  # the early blocks: this fraction of the model's blocks, from the bottom
MIN_RATIO = 7.5  # the replacement claim: at least this many times fewer numbers ...
MAX_RELATIVE = 0.05  # ... for at most this relative rise in perplexity

# %%
import pandas as pd

import linrec
from linrec.analysis import compression
from linrec.experiment import measurement, resolve
from linrec.interventions import perplexity, surgery
from linrec.notebook import chapter
from linrec.plots import compression as compression_plots
from linrec.report import tables

ch = chapter.begin(
    "05_compression",
    globals(),
    name_or_none=["MODEL"],
    names_or_none=["SIGNAL_MODELS", "BUDGET_MODELS", "KINDS"],
    positive_int_or_none=["LOW_RANK", "EVAL_TOKENS"],
    fraction=["EARLY", "MAX_RELATIVE"],
    positive_number=["MIN_RATIO"],
)
MODEL, SIGNAL_MODELS, EVAL_TOKENS = compression.defaults(
    ch.profile, MODEL, SIGNAL_MODELS, EVAL_TOKENS
)
BUDGET_MODELS = ch.profile.scored(BUDGET_MODELS, among=SIGNAL_MODELS)
print(ch.profile.left_out(BUDGET_MODELS, among=SIGNAL_MODELS, parameter="BUDGET_MODELS"))

# %% [markdown]
# ## Five replacements
#
# Each block's FFN is replaced, alone, by one of five modules that map the block's input to its
# output, all fitted on the rows the measurement captured (the profile's main corpus, fit split):
#
# | kind | the replacement | numbers it stores ($d$ in and out, $k$ the rank, $r$ the probe rank) |
# | --- | --- | --- |
# | `affine` | the closed-form map $xW + b$ | $d^2 + d$ |
# | `lowrank` | the best rank-$k$ affine map on the training inputs (reduced-rank regression {cite}`izenman1975reduced`) | $2dk + d$ |
# | `poly` | seeded-poly of chapter 4: the affine map plus a gated rank-$r$ quadratic term | $d^2 + d + 3dr + 1 + 3d + 1$ |
# | `mean` | the block's mean output, whatever the input (mean ablation) | $d$ |
# | `zero` | nothing: the block removed | 0 |
#
# "Numbers stored" counts parameters and buffers alike, for the original FFN too: a GPT-2 FFN of
# width 768 with a 3072-wide hidden layer stores $2 \cdot 768 \cdot 3072 + 3072 + 768$ numbers, and
# the affine map $768^2 + 768$, which is the paper's "8×" (7.996). The zoo's models keep GPT-2's
# proportion (hidden layer four times the width), so nearly the same ratio comes out at their
# width (biases weigh slightly more in a narrow layer).
#
# Perplexity is measured on the evaluation split of the profile's evaluation corpus, text from
# which no fitted row came. Every swap is scored on the same tokens, so differences between
# swaps are paired. The chapter runs some sixty perplexity passes, so by default each uses an
# eighth of the profile's `eval_tokens`; set `EVAL_TOKENS` to the full number for tighter values.

# %%
m = measurement.measurement(ch.profile, MODEL, progress=ch.progress)
table = m.table()
r2_lin = dict(zip(table.block, table.r2_lin))
net, tokenizer = resolve.load_profile_model(ch.profile, MODEL, progress=ch.progress)
evals = linrec.experiment.swaps.eval_batches(
    ch.profile, tokenizer, net, EVAL_TOKENS, name=MODEL
)
config = resolve.probe_config(ch.profile.probe, seed=SEED, device=ch.profile.device)
sets = compression.replacement_sets(m, KINDS, LOW_RANK, config)
swaps = compression.swap_kinds(net, evals, sets, r2_lin, progress=ch.progress)
print(
    f"{MODEL}: {len(m.blocks)} FFN blocks, fitted on {m.info.rows:,} rows of {m.info.corpus}; "
    f"perplexity on {evals.n_rows:,} held-out tokens of {ch.profile.eval_corpus_of(MODEL)}: "
    f"{swaps.base_ppl.iloc[0]:.3f} unmodified"
)
ch.show(swaps.groupby("kind", sort=False)[["params", "original_params", "ratio"]].first())

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Change in perplexity (symmetric-log axis) when one block at a time is replaced by each kind of module, with its 95% bootstrap interval over evaluation windows; the legend gives each kind's parameter ratio to the original FFN.", "name": "fig-compression-swaps"}}
fig = compression_plots.swap_figure(swaps)
ch.figure(fig, swaps, "fig-compression-swaps")

# %% [markdown]
# The numbers behind {numref}`fig-compression-swaps`, ΔPPL per block and kind (rows: blocks, with
# their R²_lin):

# %% tags=["hide-input"]
grid = swaps.pivot(index="block", columns="kind", values="delta_ppl")[list(sets)]
cells = swaps.assign(cell=tables.with_interval(swaps, "delta_ppl")).pivot(
    index="block", columns="kind", values="cell"
)
ch.show(
    cells[list(sets)]
    .rename(columns=lambda kind: f"{kind}: ΔPPL [95% interval]")
    .assign(**{"R²_lin": grid.index.map(r2_lin)})[
        ["R²_lin", *[f"{kind}: ΔPPL [95% interval]" for kind in sets]]
    ],
    fold="ΔPPL of every block and kind",
)

# %% [markdown]
# ## The single-layer replacement
#
# The paper's example is an early GPT-2 block swapped for its affine map. Here the early blocks are
# the first `EARLY` fraction of the model's blocks, and the one with the highest R²_lin is reported
# next to the paper's figure. The choice uses only the captured rows: picking the early block whose
# swap costs least on the evaluation text and then reporting its cost on that same text would
# favour whichever block happened to do well on it, a small optimistic bias. (The cheapest block on
# the evaluation text is shown in the last column for comparison.) Perplexities of different models
# on different text are not comparable, so the relative rise is the number to compare across the
# columns.

# %%
best = compression.best_block(swaps, "affine", EARLY)
cheapest = compression.best_block(swaps, "affine", EARLY, by="delta_ppl")
early = compression.early_blocks(m.blocks, EARLY)
ch.show(
    compression.early_swap_table(
        best, cheapest, MODEL, ch.profile.eval_corpus_of(MODEL), early
    )
)

# %% [markdown]
# ## The frontier: swapping several blocks
#
# One block at a time says little about how far compression can go. Here blocks are swapped for
# their affine maps cumulatively, greedily in order of R²_lin (most recoverable first), and after
# each step the model's perplexity is measured with all swaps so far in place. The x axis of
# {numref}`fig-compression-frontier` counts the numbers saved across all FFN blocks.

# %% mystnb={"figure": {"caption": "Greedy compression frontier: change in perplexity (symmetric-log axis, with its 95% bootstrap interval over evaluation windows) against the cumulative share of FFN numbers saved, as blocks are swapped for their affine maps in order of decreasing $R^2_\\text{lin}$ (each point labelled with the block it adds).", "name": "fig-compression-frontier"}}
frontier = perplexity.compression_frontier(
    net, evals, sets["affine"], r2_lin, progress=ch.progress
)
fig = compression_plots.frontier_figure(frontier)
ch.figure(fig, frontier, "fig-compression-frontier")

# %% tags=["hide-input"]
ch.show(
    frontier[
        [
            "step",
            "block",
            "r2_lin",
            "params_saved",
            "ffn_saved_fraction",
            "model_saved_fraction",
            "ppl",
        ]
    ].assign(**{"ΔPPL [95% interval]": tables.with_interval(frontier, "delta_ppl")}),
    fold="every step of the frontier",
)

# %% [markdown]
# ## Does R²_lin flag the unsafe blocks?
#
# If R²_lin is a useful safety signal, blocks with low R²_lin should be the ones whose affine swap
# hurts most: a negative rank correlation between R²_lin and ΔPPL. The affine swap of every block of
# `SIGNAL_MODELS` is scored, and the ranks are compared **within each model**: Spearman's ρ over one
# model's blocks, then the models' ρ combined as the inverse-variance weighted mean of their Fisher
# $z = \operatorname{atanh}\rho$ (weights $n - 3$ for a model with $n$ blocks), with its 95% interval
# (`linrec.stats.stratified_correlation`). One ρ over the blocks of all models pooled would also rank
# one model's blocks against another's, and models differ in their level of R²_lin and of perplexity
# for reasons of their own: a model whose blocks are all more linear and all cheaper to swap pulls a
# pooled ρ negative even when, inside every model, the more linear blocks are the costlier ones
# (Simpson's paradox). The verdict reads the combined within-model ρ; the table under the figure gives
# every model's own ρ, and the pooled one for contrast only. A model with fewer than four blocks has
# no interval and is left out. The swaps are drawn in {numref}`fig-compression-signal`. Every model but
# `MODEL` is scored on a quarter of its evaluation tokens per pass, as in chapter 2, whose swaps these are.

# %% mystnb={"figure": {"caption": "Change in perplexity when each block alone is swapped for its affine map (symmetric-log axis, with its 95% bootstrap interval over evaluation windows) against the block's $R^2_\\text{lin}$, one point per block of every model (colour: model); the within-model Spearman correlation, combined over models, with its 95% interval is in the title.", "name": "fig-compression-signal"}}
others = {
    name: measurement.measurement(ch.profile, name, progress=ch.progress)
    for name in SIGNAL_MODELS
    if name != MODEL
}
signal = pd.concat(
    [
        swaps[swaps.kind == "affine"].assign(
            model=MODEL,
            eval_corpus=ch.profile.eval_corpus_of(MODEL),
            eval_tokens=evals.n_rows,
        ),
        *[
            compression.affine_signal(
                ch.profile,
                [r],
                (ch.profile.budget(name).eval_tokens or 0) // 4,
                progress=ch.progress,
                cache=True,
            )
            for name, r in others.items()
        ],
    ],
    ignore_index=True,
)
signal = signal[signal.model.isin(SIGNAL_MODELS)]
rho = compression.signal_correlation(signal)
fig = compression_plots.signal_figure(signal, rho.combined if rho else None)
ch.figure(fig, signal, "fig-compression-signal")

# %% tags=["hide-input"]
ch.show(compression.signal_table(signal, rho)) if rho else None

# %% tags=["hide-input"]
ch.show(compression.flags(signal))

# %% tags=["remove-cell"]
agree = compression.flags(signal).agree
ch.glue(
    signal_reading=compression.signal_reading(rho),
    agree=int(agree.sum()),
    agree_models=len(agree),
)

# %% [markdown]
# {glue:text}`signal_reading` In {glue:text}`agree` of {glue:text}`agree_models` models the block with the lowest
# R²_lin is also the costliest to swap.

# %% [markdown]
# ## Choosing by measured cost, under a budget
#
# Since R²_lin need not order the swaps by cost, a practitioner who wants a smaller model should not
# pick blocks by it. What `linrec replace --max-ppl-increase` does instead (chapter 9 runs the command)
# is applied here to every model of `BUDGET_MODELS`: the blocks are ordered by their own measured
# affine-swap ΔPPL (the swaps above, cheapest first), added one at a time, and each step is scored
# with every chosen map in place, since replaced blocks interact and their joint cost is not the sum
# of their single costs. A block that would take the joint ΔPPL over `MAX_RELATIVE` of the model's
# perplexity is left out, and the next is tried with the blocks kept so far. Each model is scored on
# the same evaluation tokens as its single swaps. {numref}`fig-compression-budget` draws every step.

# %% mystnb={"figure": {"caption": "Greedy choice under the budget: joint change in perplexity as a share of each model's own perplexity (with its 95% bootstrap interval over evaluation windows) against the share of the model's numbers saved, blocks added in order of their own measured swap cost; the line joins the blocks kept, and a hollow marker is a step that broke the budget (dashed): that block was left out and the next one tried.", "name": "fig-compression-budget"}}
budget = linrec.experiment.swaps.greedy_frontiers(
    ch.profile,
    [r for r in (m, *others.values()) if r.info.model in BUDGET_MODELS],
    signal,
    f"{100 * MAX_RELATIVE:g}%",
    progress=ch.progress,
    cache=True,
)
fig = compression_plots.budget_figure(budget, MAX_RELATIVE)
ch.figure(fig, budget, "fig-compression-budget")

# %% tags=["hide-input"]
ch.show(
    compression.budget_summary(budget, frontier, MODEL),
    fold="what each model gives up to the budget",
)

# %% [markdown]
# The last column compares the two orders on `MODEL` at equal size: the R²_lin order of
# {numref}`fig-compression-frontier` with as many blocks as the budget kept. Ordering by measured cost
# spends evaluation passes (one per block, then one per step) that ordering by R²_lin does not, and
# the table says whether they bought anything on this run. The choice is still greedy: each block is
# tried once, against the blocks kept before it, so a set that keeps a costlier block early can shut
# out two cheaper ones later, which a wider search (or `linrec replace --blocks` with a hand-picked
# set) would find.

# %% [markdown]
# ## Paper against this run

# %%
ch.report(
    compression.compression_claims(best, rho, MIN_RATIO, MAX_RELATIVE, frontier=frontier),
    figure="fig-compression-signal",
    plain=MODEL,
)

# %% tags=["remove-input"]
ch.caveat()

# %% [markdown]
# The replacement row is read by the rule its verdict states (written in
# `linrec.analysis.compression.compression_claims`): at least `MIN_RATIO` times fewer
# numbers, and a rise in perplexity of at most `MAX_RELATIVE` of the original model's. The bound is
# relative because the paper gives +0.77 as an absolute change at a base perplexity its public
# sources do not state, and the same absolute change means much more on a model of perplexity 20
# than on one of perplexity 200; a swap whose ΔPPL is several times +0.77 on a model of high
# perplexity can therefore meet it. Under `paper` the same row is a direct check of the +0.77
# figure on the paper's model (with our choice of early blocks and of evaluation text length). Under
# `offline` the parameter ratio is nearly the same by construction, but the models are tiny and
# their perplexities large, so only the relative cost is comparable, and the safety signal is
# tested on a few dozen blocks.

# %% [markdown]
# ## Every model's early block, and the first position
#
# The replacement claim is tested above on `MODEL` with every kind of replacement. The same rule is
# applied below to each other model's affine swaps: its early block of highest R²_lin (chosen from
# the captured rows alone), what that swap costs, and the verdict named after the model it was
# tested on. A real model's FFN is gated: SmolLM2's stores $3 \cdot 576 \cdot 1536 =$ 2,654,208 numbers
# and its affine map $576^2 + 576 =$ 332,352, 8× fewer again; Gemma 3's $3 \cdot 640 \cdot 2048$ against
# $640^2 + 640$, 9.6× fewer. Beside each swap the table sets the block's R²_lin without the first
# position of each window and that position's share of the block's output variance (chapter 2): a
# block whose R²_lin rests on the first position can be near-perfect by the number and costly to swap.

# %%
claims = []
for name in SIGNAL_MODELS:
    rows = signal[signal.model == name]
    if name != MODEL and len(rows):
        claims += [
            c.of(name)
            for c in compression.compression_claims(
                compression.best_block(rows, early=EARLY),
                compression.signal_correlation(rows),
                MIN_RATIO,
                MAX_RELATIVE,
            )
        ]
ch.report(claims, figure="fig-compression-signal")
sink = pd.concat(
    [
        r.table()[["model", "block", "r2_lin_after_first", "first_position_share"]]
        for r in (m, *others.values())
    ]
)
ch.show(
    signal.merge(sink, on=["model", "block"]).assign(
        **{"ΔPPL [95% interval]": lambda t: tables.with_interval(t, "delta_ppl")}
    )[
        [
            "model",
            "block",
            "r2_lin",
            "r2_lin_after_first",
            "first_position_share",
            "ΔPPL [95% interval]",
            "relative",
        ]
    ],
    fold="every block's affine swap beside its R²_lin with and without the first position",
)

# %% [markdown]
# Read each model's row as that model's, not as the paper's GPT-2: the early block is the model's
# own, and its base perplexity is that of the model on its own evaluation text. The real models add
# the sign question on well-trained blocks: in them the blocks with the highest R²_lin can be the
# ones whose small unrecovered part the rest of the network needs most (chapter 2 finds their most
# linear blocks dominated by the first position of each window), so a high R²_lin is no licence to swap.

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** What each replacement costs in held-out perplexity, block by block and cumulatively,
# with the exact number of stored values each one saves; how close the affine swap of the early block
# that R²_lin picks comes to the paper's figure; whether the blocks R²_lin ranks lowest are the ones whose swap hurts
# most; and how much of each model a perplexity budget lets one replace when blocks are chosen by their
# measured cost.
#
# **Cannot show.** Swaps are zero-shot: nothing is fine-tuned after the swap, which is what a
# practical compression would do, so these are upper bounds on the damage of each replacement.
# Stored numbers are not speed: a 128-wide affine layer is not 8× faster than the FFN on every
# device. The safety signal is a rank correlation within each of a few models; it says that
# R²_lin orders blocks, not where to put a threshold. And a variance-based score cannot see that a
# block with tiny outputs can be removed outright (compare `zero` with `affine`): R²_lin measures
# how well a block is *imitated*, not how much the model *needs* it.
#
# ## Exercises
#
# :::{exercise} Mean or zero?
# :label: ex-compression-mean-or-zero
# For which blocks is the mean-ablation replacement much better than removal,
# and what does that say about those blocks?
# :::
#
# :::{solution-start} ex-compression-mean-or-zero
# :class: dropdown
# :::
# Mean ablation keeps the block's average output, a constant vector added to the residual stream;
# removal drops it. Where `mean` is far better than `zero`, the block's contribution is largely a
# fixed offset (a bias the later layers rely on), and a replacement with only $d$ numbers already
# keeps most of it. The code below lists the ΔPPL difference per block.

# %% tags=["solution"]
ch.show(
    grid[["mean", "zero"]].assign(**{"zero − mean": grid["zero"] - grid["mean"]})
) if {"mean", "zero"} <= set(grid) else None

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} How low can the rank go?
# :label: ex-compression-how-low-can-the
# For the best early block, swap in low-rank maps of rank 1, 2, 4,
# ... up to the full width. At which rank does the swap cost about as much as the full affine map?
# :::
#
# :::{solution-start} ex-compression-how-low-can-the
# :class: dropdown
# :::
# The cost falls quickly at first and then flattens: the prediction covariance of a trained block
# is dominated by a few directions (its effective rank, `effective_rank_map` in the table), so a
# rank of a few times that keeps nearly all of what the affine map achieves, at a fraction of its
# numbers. The code below runs the sweep.

# %% tags=["solution"]
width = int(table.d_in.iloc[0])
ranks = sorted({min(width, 2**i) for i in range(width.bit_length() + 1)})
block = int(best.block)
base = perplexity.window_nll(net, evals)
sweep = pd.concat(
    [
        perplexity.swap_deltas(
            net,
            evals,
            linrec.fit_replacements(m.moments, "lowrank", k, [block]),
            progress=ch.progress,
            base=base,
        ).assign(rank=k)
        for k in ranks
    ],
    ignore_index=True,
)
print(
    f"block {block}: effective rank of the map's predictions "
    f"{float(table.effective_rank_map[table.block == block].iloc[0]):.2f}; "
    f"full affine ΔPPL {best.delta_ppl:+.3f}"
)
ch.show(sweep[["rank", "params", "ratio", "delta_ppl"]])

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} The ratio for other FFNs
# :label: ex-compression-the-ratio-for-other
# What is the affine map's parameter ratio for a Llama-style
# gated FFN (SwiGLU: three bias-free matrices, hidden width $h$) of width 768 and $h = 3072$, and
# for GPT-2's FFN? Check by building both modules from their config classes.
# :::
#
# :::{solution-start} ex-compression-the-ratio-for-other
# :class: dropdown
# :::
# GPT-2: $(2 \cdot 768 \cdot 3072 + 3072 + 768) / (768^2 + 768) = 7.996$. SwiGLU stores
# $3 \cdot 768 \cdot 3072$ numbers and no biases, so the same affine map is $11.98\times$ smaller:
# the gate's extra matrix makes a gated block a more attractive target for the same R²_lin.
# (llama-160m itself uses a narrower hidden layer, so check its config before quoting a ratio.)

# %% tags=["solution"]
import transformers

affine_numbers = 768 * 768 + 768
gpt2_mlp = transformers.models.gpt2.modeling_gpt2.GPT2MLP(
    3072, transformers.GPT2Config(n_embd=768)
)
llama_mlp = transformers.models.llama.modeling_llama.LlamaMLP(
    transformers.LlamaConfig(hidden_size=768, intermediate_size=3072)
)
pd.DataFrame(
    {
        "FFN numbers": [surgery.n_stored(gpt2_mlp), surgery.n_stored(llama_mlp)],
        "ratio to the affine map": [
            surgery.n_stored(gpt2_mlp) / affine_numbers,
            surgery.n_stored(llama_mlp) / affine_numbers,
        ],
    },
    index=["GPT-2 (GELU)", "Llama (SwiGLU)"],
)

# %% [markdown]
# :::{solution-end}
# :::
#
# ## Provenance

# %%
ch.provenance()
