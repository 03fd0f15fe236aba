"""What every chapter of the book calls first and last: which profile runs, and what ran where.

``begin`` is a chapter's one set-up call: it checks the chapter's parameters
(:func:`linrec.notebook.params.check_params`) and calls ``start`` with its ``PROFILE`` and ``SEED``. ``start`` runs
:func:`setup`, clears the chapter's ledger and returns a :class:`Chapter`, through which the chapter reports its
claims (recorded in the ledger, the verdict stated the same way in every chapter) and prints its provenance,
without repeating its name and profile at every call.

``setup`` resolves the profile (an explicit name wins, e.g. the ``PROFILE`` papermill injects;
otherwise ``paper`` on Google Colab, where a GPU and the model hubs are at hand, and ``offline``
everywhere else), seeds torch and numpy, applies the book's plot style, restarts the chapter's wall
clock and prints a header; a profile sized for a GPU that is about to run on the CPU is warned about
there, with the way to switch, and so is a zoo that is not cached yet (the chapter will train it first).
``Chapter.progress`` says whether long cells show progress bars: yes, unless ``$LINREC_PROGRESS`` is ``0``
(the book's build sets it, so the built pages stay free of bars). ``Chapter.figure`` shows a figure with its
data as CSV (:mod:`linrec.notebook.figures`).
``Chapter.provenance`` is the line a chapter ends with (:mod:`linrec.notebook.provenance`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from linrec.cache import cache_dir
from linrec.errors import LinrecError, LinrecWarning
from linrec.experiment.measurement import forget_used
from linrec.experiment.profiles import Profile, get_profile, profile_names
from linrec.models.loading import pick_device
from linrec.notebook import ledger
from linrec.notebook.figures import show_figure
from linrec.notebook.params import check_params
from linrec.notebook.provenance import ChapterProvenance, on_colab, provenance, restart_clock
from linrec.report.claims import PLAIN, Claim, Verdicts, claims_table
from linrec.report.tables import Table, show

if TYPE_CHECKING:
    from IPython.display import Markdown
    from matplotlib.figure import Figure

_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
PROFILE_CAVEAT = (
    "**Reading a verdict by profile.** Under `paper` a chapter runs the paper's own models and corpus, so its "
    "verdicts test the paper directly. Under `offline` the models are small ones trained on this machine on "
    "Python's own text: a claim reproduced there shows that the effect does not need a large model, and a claim "
    "not reproduced is a finding about these models, not evidence against the paper. Under `smoke` the models are "
    "tinier still, and every number only exercises the code."
)
"""The one note on how far a profile's verdicts reach, shown by every chapter that states verdicts."""


def resolve_profile(profile: str | None) -> str:
    """``profile`` when given, else ``paper`` on Colab and ``offline`` elsewhere; unknown names are an error."""
    if profile is None:
        return "paper" if on_colab() else "offline"
    if profile not in profile_names():
        raise LinrecError(f"unknown profile '{profile}'; choose one of {', '.join(profile_names())}")
    return profile


def progress_bars() -> bool:
    """Whether chapters show progress bars: ``$LINREC_PROGRESS`` as a yes/no, yes when it is unset."""
    value = os.environ.get("LINREC_PROGRESS", "1").strip().lower()
    if value not in _YES + _NO:
        raise LinrecError(f"LINREC_PROGRESS must be one of {', '.join(_YES + _NO)}; got {value!r}")
    return value in _YES


def warn_if_cpu(profile: Profile) -> bool:
    """Warn (a :class:`LinrecWarning` and a printed banner) when ``profile`` wants a GPU but will run on the
    CPU; return whether it did."""
    if not profile.wants_gpu or pick_device(profile.device).type != "cpu":
        return False
    message = (
        f"profile '{profile.name}' is sized for a GPU but will run on the CPU: this chapter will take hours. "
        "Switch to a GPU (on Colab: Runtime → Change runtime type → a GPU, then run again), "
        "or set PROFILE = 'offline' in the parameters cell: small models trained here, sized for a CPU."
    )
    print(f"{'!' * 80}\n!! WARNING: {message}\n{'!' * 80}")
    warnings.warn(message, LinrecWarning, stacklevel=3)
    return True


def warn_if_zoo_missing(profile: Profile) -> bool:
    """Warn (a printed banner) when ``profile``'s zoo is not all in the cache, so that the chapter's first use
    of it will train it; return whether it did. The run-time note at the chapter's top says how long that took
    where it was measured (:mod:`bookbuild.timing`)."""
    from linrec.models.zoo import zoo_missing

    if profile.zoo is None or not (missing := zoo_missing(profile.zoo)):
        return False
    print(
        f"{'!' * 80}\n!! The model zoo '{profile.zoo.name}' is not in the cache ({cache_dir()}): this chapter trains "
        f"{len(missing)} model(s) ({', '.join(missing)}) before it measures anything. On a CPU that "
        "can take many minutes (the run-time note at the top gives the time measured for the `offline` zoo); "
        f"later chapters and runs reuse the trained zoo.\n{'!' * 80}"
    )
    return True


def setup(profile: str | None = None, seed: int = 0, style: bool = True, **overrides: object) -> str:
    """Resolve the profile, seed torch and numpy, set the plot style, print a header; return the profile.

    ``overrides`` change profile fields as :func:`start` does; setup reads them for the thread count and
    the CPU warning (:func:`warn_if_cpu`).
    """
    resolved = resolve_profile(profile)
    chosen = get_profile(resolved, **overrides)
    if chosen.zoo is not None:
        torch.set_num_threads(1)  # the zoo's small matrices run faster on one thread, and far faster on a busy CPU
    torch.manual_seed(seed)
    np.random.seed(seed)
    pd.set_option("display.max_colwidth", None)  # tables show their text in full, never cut to "..."
    if style:
        from linrec.plots import use_book_style

        use_book_style()
    restart_clock()
    chosen_by = "given" if profile is not None else ("default on Colab" if on_colab() else "default off Colab")
    print(f"{provenance(resolved, wall=False)} | profile {chosen_by}, seed {seed}")
    warn_if_cpu(chosen)
    warn_if_zoo_missing(chosen)
    return resolved


@dataclass(frozen=True)
class Chapter:
    """One chapter's run: its name (``NN_topic``), the resolved and validated profile, the seed, and whether
    long cells show progress bars (pass ``progress=ch.progress`` on; see :func:`progress_bars`)."""

    name: str
    profile: Profile
    seed: int
    progress: bool = True

    def report(self, claims: Sequence[Claim], figure: str | None = None, plain: str = PLAIN) -> Table | None:
        """Record ``claims`` in the ledger the appendix, the intro and the chapter's summary read (``figure``: the
        label of the chapter's figure they are read from; ``plain``: what the claims made without a subject are
        about, by default the chapter's models pooled); where some test a statement, show the verdict over them
        (:class:`~linrec.report.claims.Verdicts`: the conclusion in one sentence, then each statement's verdicts
        with its rule) and return their table (:func:`~linrec.report.claims.claims_table`, formatted for reading
        by :func:`~linrec.report.tables.show`) for the chapter to show.
        Headline numbers alone show nothing."""
        ledger.record(self.profile.name, self.name, claims, figure, plain)
        if not any(claim.tested for claim in claims):
            return None
        from IPython.display import display

        display(Verdicts(self.profile.name, tuple(claims), plain, self.name))
        return show(claims_table(claims))

    def show(self, table: pd.DataFrame, formats: Mapping[str, str] | None = None, fold: str | None = None) -> None:
        """Show ``table`` formatted for reading (:func:`linrec.report.tables.show`): the one way a chapter shows a
        table, wherever the call stands (in a loop, under an ``if``, at a cell's end)."""
        from IPython.display import display

        display(show(table, formats, fold))

    def markdown(self, text: str) -> Markdown:
        """``text`` as Markdown, for a cell to end with (so that it shows as the cell's result)."""
        from IPython.display import Markdown

        return Markdown(text)

    def caveat(self) -> None:
        """Show :data:`PROFILE_CAVEAT`, the note every chapter with verdicts shares, beside its own specifics."""
        from IPython.display import Markdown, display

        display(Markdown(PROFILE_CAVEAT))

    def glue(self, **values: object) -> None:
        """Paste ``values`` into the chapter's written text, where a markdown cell says {glue:text}`name` (a
        format spec may follow: {glue:text}`name:.3f`). Numpy and torch scalars are pasted as plain numbers, so
        format specs apply. Where myst-nb is missing (a notebook run outside the book, e.g. on Colab) the values
        are printed instead, so the reader still sees them."""
        plain = {name: value.item() if hasattr(value, "item") else value for name, value in values.items()}
        try:
            from myst_nb import glue
        except ImportError:
            print("\n".join(f"{name}: {value}" for name, value in plain.items()))
            return
        for name, value in plain.items():
            glue(name, value, display=False)

    def figure(self, fig: Figure, data: pd.DataFrame | Mapping[str, pd.DataFrame] | None, name: str) -> None:
        """Show ``fig`` with the tables it plots (``data``: one, or several by name; None for a diagram) saved as
        CSV and linked beneath it (:func:`linrec.notebook.figures.show_figure`); ``name`` is the figure's ``fig-``
        name. Returns nothing: a value would be a second output of the cell, which myst-nb would wrap in a second
        figure of the same name."""
        show_figure(fig, data, self.name, name)

    def provenance(self) -> ChapterProvenance:
        """The chapter's provenance line so far, from what it measured
        (:func:`linrec.notebook.provenance.provenance`)."""
        return provenance(self.profile.name)


def start(
    name: str, profile: str | Mapping[str, object] | None = None, seed: int = 0, style: bool = True, **overrides: object
) -> Chapter:
    """Begin chapter ``name``: :func:`setup`, forget its earlier ledger entries, and return its :class:`Chapter`.

    ``profile`` is a profile's name, or a dict ``{"name": <profile>, <field>: <value>, ...}`` that changes some
    of its fields (how a notebook parameter carries a reduced profile, e.g. fewer eval tokens);
    ``overrides`` change fields too (:func:`linrec.experiment.profiles.get_profile`).
    """
    if isinstance(profile, Mapping):
        fields = dict(profile)
        if not isinstance(fields.get("name"), str):
            raise LinrecError(
                "a PROFILE given as a dict needs its profile's name under 'name' "
                f"(one of {', '.join(profile_names())}); got {profile!r}"
            )
        profile = str(fields.pop("name"))
        overrides = {**fields, **overrides}
        get_profile(profile, **overrides)  # a bad field fails here, before anything runs
    resolved = setup(profile, seed=seed, style=style, **overrides)
    if overrides:
        print(f"profile fields changed: {', '.join(f'{k}={v!r}' for k, v in overrides.items())}")
    ledger.start(resolved, name)
    forget_used()
    progress = progress_bars()
    if not progress:  # transformers draws its own bar while loading weights: none in a built page either
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    return Chapter(name, get_profile(resolved, **overrides), seed, progress)


def check(
    params: Mapping[str, object],
    *,
    multiple_of: Iterable[tuple[str, str]] = (),
    at_least: Iterable[tuple[str, str]] = (),
    **rules: Iterable[str],
) -> None:
    """Check a chapter's parameters (``params``: its ``globals()``) as :func:`~linrec.notebook.params.check_params`
    does, ``SEED`` (when the chapter has one) always as an integer: the checking half of :func:`begin`."""
    rules = dict(rules)
    if "SEED" in params and "SEED" not in {n for names in rules.values() for n in names}:
        rules["integer"] = ["SEED", *rules.get("integer", ())]
    check_params(params, multiple_of=multiple_of, at_least=at_least, **rules)


def begin(
    name: str,
    params: MutableMapping[str, object],
    *,
    multiple_of: Iterable[tuple[str, str]] = (),
    at_least: Iterable[tuple[str, str]] = (),
    style: bool = True,
    **rules: Iterable[str],
) -> Chapter:
    """A chapter's set-up in one call: check its parameters, start it, and return its :class:`Chapter`.

    ``params`` is the chapter's ``globals()``; ``rules``, ``multiple_of`` and ``at_least`` are
    :func:`~linrec.notebook.params.check_params`'s (:func:`check`: ``SEED``, when the chapter has one, is always
    checked as an integer). Then :func:`start` with the chapter's ``PROFILE`` and ``SEED`` (0 without one), and
    ``PROFILE`` in ``params`` becomes the resolved profile's name, so that the chapter reads which profile ran
    (also ``ch.profile.name``) and never resolves it again.
    """
    check(params, multiple_of=multiple_of, at_least=at_least, **rules)
    ch = start(name, params.get("PROFILE"), seed=params.get("SEED", 0), style=style)  # type: ignore[arg-type]
    params["PROFILE"] = ch.profile.name
    return ch
