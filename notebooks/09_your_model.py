# %% [markdown]
# # Your model: from a table to a smaller model
#
# **Claim under test.** For any Hugging Face model of a supported family, one command (or three
# Python calls) gives a per-block table from which a practitioner can pick the FFN blocks worth
# replacing by a linear map, and the measurement costs one forward pass plus O(d²) memory per block.
# A second command turns the choice into a smaller model on disk, chosen under a perplexity budget,
# that loads back exactly.
#
# This chapter treats one model of the profile as if it were yours: a local directory (the zoo's
# GPT-2-style model offline, GPT-2 from the hub on the `paper` profile) and a plain UTF-8 text file.
# The real pretrained models of the profile go through the same two commands at the end.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own
SEED = 0
MODEL = None  # a hub id or a local directory; None: the profile's first model
MAX_ROWS = None  # rows per block; None: the profile's
MIN_R2 = 0.95  # candidate threshold on held-out R²_lin
MAX_STD = 0.02  # ... and on its spread over folds
TRY_BLOCKS = 3  # how many top candidates to verify by perplexity
MAX_PPL_INCREASE = "5%"  # the budget linrec replace chooses blocks under: absolute (2.5) or relative ("5%")
LOW_RANK = None  # rank of the low-rank ablation; None: an eighth of the width
GGUF_BLOCKS = "0,1,2,3"  # blocks of the GGUF example (the forward pass stops after the deepest one); None: all
REAL_EVAL_ROWS = 4096  # held-out tokens each perplexity pass of a real model scores
# the real models replaced at the end; None: the profile's packaged models but those whose perplexity passes it
# leaves out (the section's first line names them, and why)
REAL_MODELS = None

# %%
import json
import tempfile
from pathlib import Path

import pandas as pd
import torch
import transformers

import linrec
from linrec.analysis import your_model
from linrec.data import corpora
from linrec.experiment import measurement, replaced, resolve
from linrec.interventions.replacement import ablations
from linrec.interventions.replacement import report as replacement_report
from linrec.models import loading, packaged, shapes, zoo
from linrec.notebook import chapter
from linrec.plots import your_model as your_model_plots
from linrec.report import tables

ch = chapter.begin(
    "09_your_model",
    globals(),
    name_or_none=["MODEL", "GGUF_BLOCKS"],
    names_or_none=["REAL_MODELS"],
    positive_int_or_none=["MAX_ROWS", "LOW_RANK"],
    fraction=["MIN_R2", "MAX_STD"],
    positive_int=["TRY_BLOCKS", "REAL_EVAL_ROWS"],
    ppl_budget=["MAX_PPL_INCREASE"],
)
name = MODEL or ch.profile.models[0]
# a zoo model is a local directory like any model you trained yourself; a hub id stays an id
where = (
    str(zoo.ensure_zoo_model(ch.profile.zoo, name, progress=ch.progress))
    if ch.profile.zoo is not None and MODEL is None
    else name
)
rows = MAX_ROWS or ch.profile.rows_per_block
corpus = resolve.profile_corpus(ch.profile)
local = (
    " (a local directory, as a model you trained yourself would be)"
    if Path(where).is_dir()
    else ""
)
print(
    f"model: {name}{local}\ntext:  {len(corpus.fit_text):,} characters of {corpus.name}, saved as a plain text file"
    " below"
)

# %% [markdown]
# ## One command
#
# `linrec measure` loads the model (remote code stays off unless you pass `--trust-remote-code`),
# cuts the text into sequences, runs the model once with hooks on every FFN block, and prints a
# short summary, one row per block; `--out` keeps every column of the table, which the next section
# reads. The same call with `torchrun --nproc-per-node K -m linrec measure ...` shards the
# sequences over K processes and gives the same table. Here it is run from Python so that the
# notebook is self-contained; in a terminal it is the line printed first.

# %%
# this chapter's files: removed at its end, or when the kernel exits after an error
scratch = tempfile.TemporaryDirectory(prefix="linrec-ch9-")
workdir = Path(scratch.name)
# a shaped model has no hub copy: saved here, it is a local model too
if ch.profile.shaped and MODEL is None:
    where = str(
        shapes.save_shaped(name, workdir / "model", revision=ch.profile.revision(name))
    )
# a local model is named by its folder, as in a terminal: the zoo's checkpoint linked under the model's name
if Path(where).is_dir():
    link = workdir / name.rsplit("/", 1)[-1]
    link.symlink_to(where, target_is_directory=True)
    where = str(link)
text_file = workdir / "my_text.txt"
text_file.write_text(corpus.fit_text, encoding="utf-8")
common = [
    "--seq-len",
    str(ch.profile.seq_len),
    "--folds",
    str(ch.profile.folds),
    "--seed",
    str(SEED),
    "--batch-size",
    str(ch.profile.batch_size),
    *(["--device", ch.profile.device] if ch.profile.device else []),
    *([] if ch.progress else ["--no-progress"]),
]


def run(args: list[str]) -> None:
    """Run a linrec command as a terminal would, printed first (paths by their last part)."""
    print(
        "$ linrec " + " ".join(Path(a).name if Path(a).is_absolute() else a for a in args)
    )
    if linrec.cli.main(args) != 0:
        raise linrec.LinrecError(f"linrec {args[0]} failed; its message is printed above")


run(
    [
        "measure",
        "--model",
        where,
        "--text-file",
        str(text_file),
        "--max-rows",
        str(rows),
        *common,
        "--out",
        str(workdir / "table.csv"),
    ]
)
table = pd.read_csv(workdir / "table.csv")

# %% [markdown]
# ## Reading the table
#
# - `r2_lin` is the share of held-out output variance the best affine map explains (mean over
#   folds), `r2_lin_std` its spread across folds: a block is only as certain as its folds agree.
# - `r2_feature_median` is the same score per output coordinate, then the median. When it sits far
#   below `r2_lin`, a few high-variance coordinates carry the global score (chapter 4).
# - `effective_rank_out` and `effective_rank_map` are participation ratios: how many directions the
#   block's output, and the linear map's prediction, spread their variance over. The first needs the
#   whole output covariance, which the command sums only with `--extras output-covariance` (NaN
#   without it); `--extras scores` adds the residual-stream scores of chapter 11.
# - `input_condition` and `null_dims` describe the inputs: large condition numbers are what make
#   gradient-trained linear baselines slow (chapter 6); one null direction per LayerNorm is expected.
#   `input_rms`, `effective_rank_in` and `outlier_ratio` give their scale, how many directions they
#   spread over, and how far the largest dimension's variance stands above the median one's.
# - `r2_lin_half_rows` is `r2_lin` again with each map fitted on about half its training rows. Where
#   it sits well below `r2_lin`, more text would still raise R²_lin; where the two agree, the rows
#   were enough for the block's width.
# - `first_position_share` and `r2_lin_after_first` concern the first position of every window,
#   where many models park attention (an "attention sink") and give some blocks very large outputs:
#   its share of the block's output variance, and R²_lin with that position left out of both fit
#   and evaluation. A block that is near-linear only at the sink shows a large share and a much lower
#   `r2_lin_after_first`; `--skip-first 1` measures without it. `top_rows_share` is the share carried
#   by the block's largest 0.1 % of rows: near 1, a handful of tokens decide the score.

# %% [markdown]
# ## The same measurement from Python, kept
#
# The command writes a table and forgets the rest. From Python, `linrec.Measurement.capture` keeps
# what the table was computed from (per-fold float64 moments and where they came from), so the
# maps can be fitted later without running the model again, at the same cutoff the table used:
# the maps one installs are the maps that were scored. Its table is the command's, number for number
# (the largest difference is printed below); it saves and loads with `m.save(dir)` and
# `linrec.Measurement.load(dir)`.
#
# A block is a *candidate* for replacement when its R²_lin is high and the folds agree
# (`m.candidates(MIN_R2, MAX_STD)`); the thresholds are parameters of this chapter, and
# {numref}`fig-your-model-candidates` shows which blocks pass them.

# %%
model, tokenizer = (
    resolve.load_profile_model(ch.profile, name, progress=ch.progress)
    if MODEL is None
    else linrec.load_model(MODEL, dtype=ch.profile.dtype, device=ch.profile.device)
)
batches = linrec.make_batches(
    tokenizer,
    corpus.fit_text,
    seq_len=ch.profile.seq_len,
    max_rows=rows,
    batch_size=ch.profile.batch_size,
    max_context=loading.max_context(model),
)
m = linrec.Measurement.capture(
    model, batches, folds=ch.profile.folds, seed=SEED, progress=ch.progress, name=name
)
print(
    f"largest |R²_lin (Python) - R²_lin (command)| over {len(table)} blocks: "
    f"{(m.table().r2_lin - table.r2_lin).abs().max():.2g}"
)
candidates = m.candidates(MIN_R2, MAX_STD)
ch.show(
    candidates[
        [
            "block",
            "r2_lin",
            "r2_lin_std",
            "r2_feature_median",
            "input_condition",
            "candidate",
            "reason",
        ]
    ],
    fold="every block: candidate or not, and why",
)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every FFN block of the model, green where the block is a replacement candidate ($R^2_\\text{lin}$ at least `MIN_R2`, dashed, and fold spread at most `MAX_STD`), red where it is not.", "name": "fig-your-model-candidates"}}
fig = your_model_plots.candidates_figure(candidates, MIN_R2, MAX_STD, name)
ch.figure(fig, candidates, "fig-your-model-candidates")

# %% [markdown]
# ## Checking the choice: four replacements side by side
#
# R²_lin is measured on the block's own outputs; what a user cares about is the model. The test is
# to swap a block's FFN for a cheaper module and compute perplexity on held-out text (the corpus's
# evaluation split, never the rows used for fitting), one block at a time, and to do it with more
# than one kind of module: removing the FFN (`zero`), its mean output (`mean`), its affine map, and
# a low-rank map. A block that costs nothing removed needs no map; a block whose affine map is
# cheap but whose mean is costly is doing linear work. The top candidates are checked, with the
# worst block for contrast, read by the third of the model's depth they sit in.

# %%
eval_batches = resolve.profile_batches(
    ch.profile, tokenizer, corpus, split="eval", model=model
)
ranked = candidates.block.tolist()
chosen = list(dict.fromkeys(ranked[:TRY_BLOCKS] + ranked[-1:]))
width = int(table.d_in.iloc[0])
kinds = ["zero", "mean", "affine", f"lowrank:{LOW_RANK or max(1, width // 8)}"]
ablated = ablations.ablations(
    model, eval_batches, m, kinds, chosen, progress=ch.progress
).merge(table[["block", "r2_lin"]])
ch.show(
    ablated.groupby("ablation", sort=False)[["params", "original_params", "ratio"]]
    .first()
    .rename_axis("kind")
    .reset_index()
)

# %% tags=["hide-input"]
cells = ablated.assign(cell=tables.with_interval(ablated, "delta_ppl"))
ch.show(
    cells.pivot(index=["depth", "block", "r2_lin"], columns="ablation", values="cell")[
        kinds
    ]
    .rename(columns=lambda k: f"{k}: ΔPPL [95% interval]")
    .reset_index()
    .sort_values("block"),
    fold="ΔPPL of each candidate and kind",
)

# %% [markdown]
# ## From a table to a smaller model
#
# `linrec replace` does the rest in one command: it fits a map of one kind for every candidate block
# on the first four fifths of the text file, scores each block alone on the last fifth (text the
# maps never saw), then adds blocks greedily, cheapest single cost first, scoring every step with
# all chosen maps in place (several replaced blocks interact: their joint cost is not the sum of
# their single costs); a block that would take perplexity over the budget `MAX_PPL_INCREASE` is left
# out and the next one tried. With `--refit`, each block that lies above one already replaced is fitted
# again on what the modified model actually feeds it, and its step is also scored with the map
# fitted on the unmodified model, so the two can be compared. It writes a directory: the maps
# (`replacements.safetensors`), the record (`linrec-replacement.json`: base model and its hash,
# blocks and kinds in order, every step's joint ΔPPL with its interval, numbers stored, decoding
# speed before and after, the texts' hashes, versions) and a report with the figure below.

# %%
out = workdir / "replaced"
run(
    [
        "replace",
        "--model",
        where,
        "--text-file",
        str(text_file),
        "--max-ppl-increase",
        MAX_PPL_INCREASE,
        "--kind",
        "affine",
        "--refit",
        "--max-rows",
        str(rows),
        "--eval-rows",
        str(eval_batches.n_rows),
        *common,
        "--out",
        str(out),
    ]
)
record = json.loads((out / "linrec-replacement.json").read_text())
steps = pd.DataFrame(record["steps"]).astype({"block": "Int64"})

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The greedy choice of `linrec replace` on this chapter's model: joint change in perplexity after each step with its 95% bootstrap interval over evaluation windows (circles: the re-fitted maps that were kept, grey: a step that broke the budget, its block left out and the next one tried; squares: the same step with maps fitted on the unmodified model), and the numbers saved.", "name": "fig-your-model-replace"}}
ch.figure(replacement_report.report_figure(record), steps, "fig-your-model-replace")

# %% [markdown]
# ## Loading it back
#
# `linrec.load_model(DIR)` (or `linrec.load_replaced(DIR)`) checks the directory and the base
# model's hash, loads the base model and installs the maps for good: `generate()` works and
# `linrec measure --model DIR` measures the smaller model. Below, the loaded model's perplexity on
# the held-out fifth is computed again from the model's own loss (not from the record) and set
# beside the report's.

# %%
loaded, loaded_tokenizer = linrec.load_model(str(out))
held_out = text_file.read_text(encoding="utf-8")
held_out = held_out[
    held_out.index("\n", round(0.8 * len(held_out))) + 1 :
]  # the command's rule: from the first line break after 80 %
held = linrec.make_batches(
    loaded_tokenizer,
    held_out,
    seq_len=ch.profile.seq_len,
    batch_size=ch.profile.batch_size,
    max_context=loading.max_context(loaded),
).first(record["eval_text"]["rows"])
assert held.sha256 == record["eval_text"]["tokens_sha256"], (
    "not the tokens the report scored"
)
ppl = your_model.own_loss_perplexity(loaded, held)
ch.report(your_model.replaced_claims(record, ppl, name), plain=name)
# the start of the held-out text
prompt = held.input_ids[:1, :16].to(next(loaded.parameters()).device)
continued = loaded.generate(
    prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, do_sample=False
)
print(
    f"prompt:    {loaded_tokenizer.decode(prompt[0])!r}\ncontinued: {loaded_tokenizer.decode(continued[0, 16:])!r}"
)

# %% [markdown]
# ## Shipping it
#
# A replacement directory holds only the maps and needs linrec and the base model to load.
# `linrec export DIR --out OUT` writes one directory with the weights and the tokenizer instead.
# Where every change has a form in the base model's own transformers class (whole blocks removed, an
# FFN zeroed, or a mean or an affine map written into the FFN's own two layers, which needs an output
# bias), it is a plain checkpoint that `AutoModelForCausalLM.from_pretrained` loads with no linrec
# installed; otherwise it bundles the base model with the maps for `linrec.load_model`, and says why.
# Either is loaded back and its logits compared with linrec's before it is kept. Below, the export
# of this chapter's directory, and, where it is plain, its perplexity on the same held-out tokens
# computed again from the model transformers loads by itself.

# %%
shipped = workdir / "shipped"
run(["export", str(out), "--out", str(shipped)])
plain_ppl = None
if json.loads((shipped / "linrec-export.json").read_text())["form"] == "plain":
    plain = transformers.AutoModelForCausalLM.from_pretrained(shipped).eval()
    plain_ppl = your_model.own_loss_perplexity(plain, held)
ch.show(
    pd.DataFrame([your_model.shipped_summary(shipped, record, plain_ppl)]),
    {"size (MB)": ",.1f"},
)

# %% [markdown]
# ## What the measurement costs
#
# **Time.** The capture is one forward pass that stops after the deepest block measured (no LM
# head), plus three float64 matrix products per block and batch. The two timings below are on
# this model and machine.
#
# **Memory.** Rows are never stored. Each block keeps, per fold, $C_{xx}$, $C_{xy}$, $C_{yy}$ and
# two means in float64, twice (the first position of each window apart from the later rows), so
# memory depends on width, blocks and folds but not on the number of tokens. For a large model,
# measure a few blocks per pass (`--blocks`) or use fewer folds.

# %%
timing = linrec.core.cost.capture_overhead(model, batches)
cost = pd.DataFrame(
    {
        "tokens": [timing["tokens"]],
        "bare forward (tokens/s)": [timing["tokens"] / timing["bare_s"]],
        "forward + capture + moments (tokens/s)": [
            timing["tokens"] / timing["capture_s"]
        ],
        "time ratio": [timing["capture_s"] / timing["bare_s"]],
        "device": [str(next(model.parameters()).device)],
    }
)
ch.report(
    your_model.your_model_claims(ablated[ablated.ablation == "affine"], timing, name),
    plain=name,
)
ch.show(
    cost,
    {"bare forward (tokens/s)": ",.0f", "forward + capture + moments (tokens/s)": ",.0f"},
)

# %%
ch.show(
    your_model.cost_table(
        {
            f"this model ({name})": (width, len(table)),
            "GPT-2 / Pythia-160m / llama-160m": (768, 12),
            "a 1B model (width 2048, 24 blocks)": (2048, 24),
            "a 7B model (width 4096, 32 blocks)": (4096, 32),
        },
        folds=ch.profile.folds,
    )
)

# %% [markdown]
# ## A GGUF file, and the real models made smaller
#
# Many models that people run on their own machines come as a single GGUF file (llama.cpp's format),
# usually with weights rounded to 4 to 8 bits. `--model` takes such a file as it is: linrec reads
# the architecture from the file's metadata (and refuses one it cannot measure before reading any
# weights), dequantises the weights to float32 once, caches the result under the file's sha256, and
# measures it like any other model. The table's `revision` column then names the file's sha256 and
# its quantisation, so a result always says which file it came from. The example below is the GGUF
# file inside each packaged model of `REAL_MODELS` (installed from the package index; none under
# `smoke`), with `GGUF_BLOCKS` only: the forward pass stops after the deepest block asked for, so
# the first few blocks of a 30-block model cost a fraction of a full pass.
#
# Then each of these real models goes through the same replacement from Python (`linrec.replace`, what the
# command calls): the same candidate blocks, its own text (fit split for the maps, evaluation split
# for the budget), the same budget `MAX_PPL_INCREASE`, and a second text of another domain (Python
# source) on which the chosen set is scored too, since a block that looks free on one text can cost
# on another. Each perplexity pass scores `REAL_EVAL_ROWS` held-out tokens, so the intervals are
# wider than chapter 5's. The book keeps each choice in its cache (`cached_replace`, keyed by the
# weights, the tokens and the options), so a rebuild reads it back instead of scoring every step
# again; what follows runs on every build. Where blocks were chosen, the result is saved, loaded
# back and its perplexity recomputed from the model's own loss, as above; where none fits the
# budget, the table says so with the cheapest block's own cost (the command would stop there with
# that message).

# %%
REAL_MODELS = ch.profile.scored(REAL_MODELS, among=ch.profile.packaged)
print(
    ch.profile.left_out(REAL_MODELS, among=ch.profile.packaged, parameter="REAL_MODELS")
)
code = corpora.load_corpus("stdlib-code")  # the second text: another domain
replaced_rows = []


def windows(tokenizer, model, text: str, n: int) -> linrec.TokenBatches:
    """``n`` token rows of ``text`` in the profile's windows."""
    return linrec.make_batches(
        tokenizer,
        text,
        seq_len=ch.profile.seq_len,
        max_rows=n,
        batch_size=ch.profile.batch_size,
        max_context=loading.max_context(model),
    )


for real in REAL_MODELS:
    budget = ch.profile.budget(real)
    run(
        [
            "measure",
            "--model",
            str(packaged.packaged_file(real)),
            "--text-file",
            str(text_file),
            "--max-rows",
            str(rows),
            *(["--blocks", GGUF_BLOCKS] if GGUF_BLOCKS else []),
            *common,
            "--out",
            str(workdir / "gguf.csv"),
        ]
    )
    print(
        f"weights ({packaged.PACKAGED[real].description}):",
        pd.read_csv(workdir / "gguf.csv")["revision"].iloc[0],
    )
    net, real_tokenizer = resolve.load_profile_model(
        ch.profile, real, progress=ch.progress
    )
    real_text = resolve.profile_corpus(ch.profile, budget.corpus)
    held_out = windows(real_tokenizer, net, real_text.eval_text, REAL_EVAL_ROWS)
    result = replaced.cached_replace(
        net,
        windows(real_tokenizer, net, real_text.fit_text, budget.rows_per_block),
        held_out,
        blocks=[int(b) for b in GGUF_BLOCKS.split(",")] if GGUF_BLOCKS else None,
        max_ppl_increase=MAX_PPL_INCREASE,
        folds=ch.profile.folds,
        seed=SEED,
        progress=ch.progress,
        name=real,
        second_batches=windows(real_tokenizer, net, code.eval_text, REAL_EVAL_ROWS),
        weights=measurement.profile_weights_id(ch.profile, real, "final"),
    )
    loaded_ppl = None
    if result.none_fits is None:
        real_model, _ = linrec.load_model(str(result.save(workdir / f"replaced-{real}")))
        loaded_ppl = your_model.own_loss_perplexity(real_model, held_out)
        ch.report(your_model.replaced_claims(result.record, loaded_ppl, real), plain=real)
        del real_model
    replaced_rows.append(your_model.replaced_summary(result.record, loaded_ppl, real))
    del net
ch.show(
    pd.DataFrame(replaced_rows).set_index("model").T,
    fold="what linrec.replace did to each real model",
) if replaced_rows else None

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** The command-line and Python routes give the same per-block table for a local model
# and a local text file; the table ranks blocks for replacement; swapping candidates alone for four
# kinds of module turns a candidate into a measured perplexity cost and a measured saving; and one
# more command chooses a set of blocks under a perplexity budget, writes the smaller model's maps
# with a record of every step, and the directory loads back to the perplexity its report states,
# on this chapter's model and on the real ones of the profile; exported, it loads without linrec
# where its class can hold every change. The cost of the measurement is a
# forward pass and a fixed amount of memory per block.
#
# **Cannot show.** A high R²_lin on one corpus does not promise a small perplexity cost on another
# (chapter 7; the second text above is one check of that, not a guarantee), and on well-trained
# real models R²_lin does not even rank the swap costs (chapter 5), which is why the command orders
# blocks by their measured single cost and scores every step jointly. Perplexity is not every
# downstream task, nothing is fine-tuned after the swap, and a map that stores 8× fewer numbers
# need not decode faster on every device (the record's tokens/s say how it went on this one). The
# thresholds and the budget are conventions, not derived quantities.
#
# ## Exercises
#
# :::{exercise} Before trusting a candidate
# :label: ex-your-model-before-trusting-a-candidate
# Which columns of the table would you check before trusting a candidate on a new corpus?
# :::
#
# :::{solution} ex-your-model-before-trusting-a-candidate
# :class: dropdown
# `r2_lin_std` (fold agreement), `r2_feature_median` against `r2_lin` (is the score carried by a few
# coordinates?), and `n_train` against the width (with barely more rows than width + 1 the fit is
# noisy). Then re-measure on the new corpus: the table is a property of model *and* text.
# :::
#
# :::{exercise} A 7B model
# :label: ex-your-model-a-7b-model
# How much memory would measuring all 32 blocks of a 7B model with 5 folds take, and how would
# you bring it under 16 GiB?
# :::
#
# :::{solution} ex-your-model-a-7b-model
# :class: dropdown
# The cost table above gives it (about 120 GiB for all blocks at once). One block per pass needs under
# 4 GiB; sixteen passes of two blocks each (7.5 GiB), or four blocks per pass with two folds instead
# of five (6 GiB), also fit.
# :::
#
# :::{exercise} One-shot or re-fitted maps
# :label: ex-your-model-one-shot-or-re-fitted
# In the record of the `--refit` run above (`steps`), at which steps do `one_shot_delta_ppl` and
# `delta_ppl` differ, and why only there?
# :::
#
# :::{solution-start} ex-your-model-one-shot-or-re-fitted
# :class: dropdown
# :::
# Only at steps whose block lies above a block already replaced. A block below every replaced one
# receives exactly the inputs it received in the unmodified model, so its map fitted again would be
# the same map; a block above one sees inputs the replacement changed, and its re-fitted map is the
# least-squares map for those. Where the re-fitted step is cheaper, later blocks were compensating
# for the error of earlier maps; the code below lists the steps side by side.

# %% tags=["solution"]
ch.show(steps[["step", "block", "delta_ppl", "one_shot_delta_ppl", "kept"]])

# %% [markdown]
# :::{solution-end}
# :::

# %%
scratch.cleanup()  # the text file, tables and replaced models written above
ch.provenance()
