# %% [markdown]
# # Your model: measuring, reading the table, choosing blocks
#
# **Claim under test.** For any Hugging Face model of a supported family, one command (or three
# Python calls) gives a per-block table from which a practitioner can pick the FFN blocks worth
# replacing by a linear map, and the measurement costs one forward pass plus O(d²) memory per block.
#
# This chapter treats one model of the profile as if it were yours: a local directory (the zoo's
# GPT-2-style model offline, GPT-2 from the hub on the `paper` profile) and a plain UTF-8 text file.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the book build injects its own
SEED = 0
MODEL = None  # a hub id or a local directory; None: the profile's first model
MAX_ROWS = None  # rows per block; None: the profile's
MIN_R2 = 0.95  # candidate threshold on held-out R²_lin
MAX_STD = 0.02  # ... and on its spread over folds
TRY_BLOCKS = 3  # how many top candidates to verify by perplexity
GGUF_BLOCKS = "0,1,2,3"  # blocks of the GGUF example (the forward pass stops after the deepest one); None: all

# %%
import tempfile
from pathlib import Path

import pandas as pd

import linrec
from linrec.analysis.your_model import cost_table, replacement_candidates, your_model_claims
from linrec.bench import capture_overhead
from linrec.book import chapter
from linrec.book.params import check_params
from linrec.cli import main as linrec_cli
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.interventions.perplexity import swap_deltas
from linrec.interventions.surgery import fit_replacements
from linrec.models.loading import max_context
from linrec.models.packaged import PACKAGED, packaged_file
from linrec.models.shapes import save_shaped
from linrec.models.zoo import ensure_zoo_model
from linrec.plots.your_model import candidates_figure
from linrec.report.tables import show, with_interval

check_params(globals(), integer=["SEED"], name_or_none=["MODEL", "GGUF_BLOCKS"], positive_int_or_none=["MAX_ROWS"],
             fraction=["MIN_R2", "MAX_STD"], positive_int=["TRY_BLOCKS"])
ch = chapter.start("09_your_model", PROFILE, seed=SEED)
profile = ch.profile
PROFILE = profile.name
name = MODEL or profile.models[0]
# a zoo model is a local directory like any model you trained yourself; a hub id stays an id
where = str(ensure_zoo_model(profile.zoo, name, progress=ch.progress)) if profile.zoo is not None and MODEL is None else name
rows = MAX_ROWS or profile.rows_per_block
corpus = profile_corpus(profile)
print(f"model: {where}\ntext:  {len(corpus.fit_text):,} characters of {corpus.name}, saved as a plain text file below")

# %% [markdown]
# ## One command
#
# `linrec profile` loads the model (remote code stays off unless you pass `--trust-remote-code`),
# cuts the text into sequences, runs the model once with hooks on every FFN block, and prints one
# row per block. The same call with `torchrun --nproc-per-node K -m linrec profile ...` shards the
# sequences over K processes and gives the same table. Here it is run from Python so that the
# notebook is self-contained; in a terminal it is the line printed first.

# %%
with tempfile.TemporaryDirectory(prefix="linrec-ch9-") as workdir:  # removed, files and all, when the cell ends
    if profile.shaped and MODEL is None:  # a shaped model has no hub copy: saved here, it is a local model too
        where = str(save_shaped(name, Path(workdir) / "model", revision=profile.revision(name)))
    text_file = Path(workdir) / "my_text.txt"
    text_file.write_text(corpus.fit_text, encoding="utf-8")
    args = ["profile", "--model", where, "--text-file", str(text_file), "--max-rows", str(rows),
            "--seq-len", str(profile.seq_len), "--folds", str(profile.folds), "--seed", str(SEED),
            "--batch-size", str(profile.batch_size), "--out", str(Path(workdir) / "table.csv")]
    if profile.device:
        args += ["--device", profile.device]
    if not ch.progress:
        args.append("--no-progress")
    print("$ linrec " + " ".join(Path(a).name if Path(a).is_absolute() else a for a in args))  # paths: last part
    if linrec_cli(args) != 0:
        raise linrec.LinrecError("linrec profile failed; its message is printed above")
    table = pd.read_csv(Path(workdir) / "table.csv")

# %% [markdown]
# ## Reading the table
#
# - `r2_lin` is the share of held-out output variance the best affine map explains (mean over
#   folds), `r2_lin_std` its spread across folds: a block is only as certain as its folds agree.
# - `r2_feature_median` is the same score per output coordinate, then the median. When it sits far
#   below `r2_lin`, a few high-variance coordinates carry the global score (chapter 4).
# - `effective_rank_out` and `effective_rank_map` are participation ratios: how many directions the
#   block's output, and the linear map's prediction, spread their variance over.
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
#   `r2_lin_after_first`; `--skip-first 1` measures without it.
#
# A block is a *candidate* for replacement when its R²_lin is high and the folds agree; the
# thresholds are parameters of this chapter, and {numref}`fig-your-model-candidates` shows which blocks
# pass them.

# %%
candidates = replacement_candidates(table, MIN_R2, MAX_STD)
show(candidates[["block", "r2_lin", "r2_lin_std", "r2_feature_median", "input_condition", "candidate", "reason"]],
     fold="every block: candidate or not, and why")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ of every FFN block of the model, green where the block is a replacement candidate ($R^2_\\text{lin}$ at least `MIN_R2`, dashed, and fold spread at most `MAX_STD`), red where it is not.", "name": "fig-your-model-candidates"}}
fig = candidates_figure(candidates, MIN_R2, MAX_STD, name)
ch.figure(fig, candidates, "fig-your-model-candidates")

# %% [markdown]
# ## Checking the choice: swap and score
#
# R²_lin is measured on the block's own outputs; what a user cares about is the model. The test is
# to swap the block's FFN for its affine map and compute perplexity on held-out text (the corpus's
# evaluation split, never the rows used for fitting). The top candidates are checked below, with
# the worst block for contrast, and with the parameters each replacement stores.

# %%
model, tokenizer = load_profile_model(profile, name, progress=ch.progress) if MODEL is None else \
    linrec.load_model(MODEL, dtype=profile.dtype, device=profile.device)
batches = linrec.make_batches(tokenizer, corpus.fit_text, seq_len=profile.seq_len, max_rows=rows,
                              batch_size=profile.batch_size, max_context=max_context(model))
moments = linrec.capture_moments(model, batches, folds=profile.folds, seed=SEED, progress=ch.progress)
eval_batches = profile_batches(profile, tokenizer, corpus, split="eval", model=model)
ranked = candidates.block.tolist()
chosen = list(dict.fromkeys(ranked[:TRY_BLOCKS] + ranked[-1:]))
affine = fit_replacements(moments, "affine", blocks=chosen)
check = swap_deltas(model, eval_batches, affine, progress=ch.progress).merge(table[["block", "r2_lin"]], on="block")
show(check[["block", "r2_lin", "base_ppl", "ppl", "params", "ratio"]]
     .assign(**{"ΔPPL [95% interval]": with_interval(check, "delta_ppl")}))

# %% [markdown]
# ## What the measurement costs
#
# **Time.** The capture is one forward pass that stops after the deepest block measured (no LM
# head), plus three float64 matrix products per block and batch. The two timings below are on
# this model and machine.
#
# **Memory.** Rows are never stored. Each block keeps, per fold, $C_{xx}$, $C_{xy}$, $C_{yy}$ and
# two means in float64, so memory depends on width, blocks and folds but not on the number of
# tokens. For a large model, measure a few blocks per pass (`--blocks`) or use fewer folds.

# %%
timing = capture_overhead(model, batches)
cost = pd.DataFrame({
    "tokens": [timing["tokens"]],
    "bare forward (tokens/s)": [timing["tokens"] / timing["bare_s"]],
    "forward + capture + moments (tokens/s)": [timing["tokens"] / timing["capture_s"]],
    "time ratio": [timing["capture_s"] / timing["bare_s"]],
    "device": [str(next(model.parameters()).device)],
})
ch.report(your_model_claims(check, timing, name))
show(cost, {"bare forward (tokens/s)": ",.0f", "forward + capture + moments (tokens/s)": ",.0f"})

# %%
width = int(table.d_in.iloc[0])
show(cost_table({f"this model ({name})": (width, len(table)), "GPT-2 / Pythia-160m / llama-160m": (768, 12),
            "a 1B model (width 2048, 24 blocks)": (2048, 24), "a 7B model (width 4096, 32 blocks)": (4096, 32)},
           folds=profile.folds))

# %% [markdown]
# ## A GGUF file
#
# Many models that people run on their own machines come as a single GGUF file (llama.cpp's format),
# usually with weights rounded to 4 to 8 bits. `--model` takes such a file as it is: linrec reads
# the architecture from the file's metadata (and refuses one it cannot measure before reading any
# weights), dequantises the weights to float32 once, caches the result under the file's sha256, and
# measures it like any other model. The table's `revision` column then names the file's sha256 and
# its quantisation, so a result always says which file it came from. The example below is the GGUF
# file inside each of the profile's packaged models (installed from the package index; none under
# `smoke`), with
# `GGUF_BLOCKS` only: the forward pass stops after the deepest block asked for, so the first few
# blocks of a 30-block model cost a fraction of a full pass.

# %%
with tempfile.TemporaryDirectory(prefix="linrec-ch9-gguf-") as workdir:
    text_file = Path(workdir) / "my_text.txt"
    text_file.write_text(corpus.fit_text, encoding="utf-8")
    for m in profile.packaged:
        gguf_args = ["profile", "--model", str(packaged_file(m)), "--text-file", str(text_file),
                     "--max-rows", str(rows), "--seq-len", str(profile.seq_len), "--folds", str(profile.folds),
                     *(["--blocks", GGUF_BLOCKS] if GGUF_BLOCKS else []), "--out", str(Path(workdir) / "gguf.csv"),
                     *(["--device", profile.device] if profile.device else []),
                     *([] if ch.progress else ["--no-progress"])]
        print(f"$ linrec {' '.join(gguf_args)}   # {PACKAGED[m].description}")
        if linrec_cli(gguf_args) != 0:
            raise linrec.LinrecError("linrec profile failed; its message is printed above")
        print("weights:", pd.read_csv(Path(workdir) / "gguf.csv")["revision"].iloc[0])

# %% [markdown]
# ## What this shows, and what it cannot show
#
# **Shows.** The command-line and Python routes give the same per-block table for a local model
# and a local text file; the table ranks blocks for replacement, and a swap-and-score check turns
# a candidate into a measured perplexity cost and a measured parameter saving. The cost of the
# measurement is a forward pass and a fixed amount of memory per block.
#
# **Cannot show.** A high R²_lin on one corpus does not promise a small perplexity cost on another
# (chapter 7), and swapping several blocks compounds errors (chapter 5's frontier). The thresholds
# used here are conventions, not derived quantities.
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
# The cost table above gives it (about 60 GiB for all blocks at once). One block per pass needs under
# 2 GiB; eight passes of four blocks each, or two folds instead of five, also fit.
# :::

# %%
ch.provenance()
