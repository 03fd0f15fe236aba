# %% [markdown]
# # Appendix: the paper beside this run
#
# Every headline number the chapters measured, next to the figure the paper reports for the same
# quantity {cite}`whipp2026linear`. The left column is the paper's, copied from its public abstract
# and review material; the right column was computed by this build, on this build's profile. They
# are not expected to agree digit for digit outside the `paper` profile: the `offline` and `smoke`
# profiles measure small models trained on this machine on standard-library text, not GPT-2,
# Pythia-160m or llama-160m on WikiText-2.

# %% tags=["parameters"]
PROFILE = None  # None: "paper" on Colab, "offline" elsewhere; the build sets its own

# %%
from linrec.analysis import depth
from linrec.experiment import measurement
from linrec.notebook import chapter, ledger, provenance
from linrec.plots import depth as depth_plots
from linrec.report import paper

ch = chapter.begin("13_paper_vs_run", globals())
print(f"profile {PROFILE}: {ch.profile.description}")

# %% [markdown]
# ## What the paper reports

# %%
ch.show(paper.reported_table())

# %% [markdown]
# ## What this run measured
#
# Each chapter records its claims and headline numbers as it runs (and clears them when it starts
# again, so nothing stale survives). "reproduced" is the chapter's verdict on a claim it tests, empty
# for a number it only reports; a quantity with no reported counterpart is one the paper does not state.
# One table per chapter, numbers to three significant digits.

# %% tags=["hide-input"]
recorded = ledger.ledger(PROFILE)
if recorded.empty:
    display(ch.markdown(ledger.empty_note(PROFILE, provenance.on_colab())))
for name, entries in ledger.by_chapter(recorded).items():
    display(ch.markdown(f"**Chapter {name[:2].lstrip('0')}** (`{name}`)"))
    ch.show(entries, fold=f"{len(entries)} entries of {name}: click to show")

# %% [markdown]
# ## Each model beside the others
#
# Where a chapter judged a claim on each model alone, the same quantity is set side by side: the
# "measured" and "reproduced" columns are the pooled claim's, the last two the named model's.

# %% tags=["hide-input"]
for m in ch.profile.models if not recorded.empty else []:
    paired = ledger.side_by_side(recorded, m)
    if len(paired):
        ch.show(
            paired.assign(chapter=paired.chapter.str[:2]),
            fold=f"{m}: {len(paired)} claims beside the pooled ones",
        )

# %% [markdown]
# ## The headline figure side by side
#
# The paper's central figure is a depth profile of R²_lin per model. {numref}`fig-appendix-profiles`
# shows this run's profiles (the main corpus of the profile, from the same cached measurements the chapters used), with the
# paper's reported range drawn as dashed lines: its trained blocks span from above 0.99 to below 0.3.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out $R^2_\\text{lin}$ per block of every model of this run's profile, real and trained here, each on its own main corpus ($k$-fold mean ± std), with the paper's reported range for trained blocks (above 0.99 to below 0.3) dashed.", "name": "fig-appendix-profiles"}}
runs = [
    measurement.measurement(ch.profile, model, keep="table", progress=ch.progress)
    for model in ch.profile.models
]
fig = depth_plots.heterogeneity_reference_figure(depth.depth_table(runs))
ch.figure(fig, depth.depth_table(runs), "fig-appendix-profiles")

# %% [markdown]
# ## Why the numbers differ
#
# - **Models.** The paper measures 124–160M-parameter models trained on hundreds of billions of
#   tokens. The offline zoo's models are a few million parameters, trained for minutes on about a
#   million tokens; the smoke zoo is smaller still and exists only to exercise the code. The offline
#   profile's two real models, SmolLM2-135M (a Llama, instruction-tuned) and Gemma 3 270M (a base
#   model), are of the paper's size or twice it and were trained on trillions of tokens, but both have
#   gated FFNs, and their weights were rounded to 4 or 5 bits before linrec dequantised them.
# - **Text.** WikiText-2 against the King James Bible for the real models (older English prose than
#   Wikipedia's) and Python's own docstrings, source code and Unicode records for the zoo.
# - **Rows.** The paper captures about 15–30k rows per block; each profile states its own count,
#   printed in every chapter's provenance line.
# - **What is unknown.** The paper's exact held-out fraction, probe parametrisation, optimiser
#   settings and swap protocol are not public; where this book had to choose, the chapter says what
#   it chose, and the choice is a parameter.
#
# On the `paper` profile (a network and preferably a GPU, e.g. Colab) the same notebooks measure the
# paper's models and corpus, and the two columns become directly comparable.
#
# ## Citation

# %% tags=["remove-input"]
ch.markdown(f"Cite the paper as: {paper.CITATION}")

# %%
ch.provenance()
