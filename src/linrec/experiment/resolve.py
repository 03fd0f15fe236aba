"""A profile's models, corpora and token batches: what :mod:`linrec.experiment.profiles` names, loaded.

:func:`load_profile_model` trains a zoo model on first use, or loads a hub model through
:func:`linrec.load_model` with its pinned or training-checkpoint revision; :func:`profile_corpus`
and :func:`profile_batches` give the text and its windows at the profile's sizes.
"""

from __future__ import annotations

from collections.abc import Callable

from linrec.data.corpora import Corpus, Loader, load_corpus
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from linrec.experiment.profiles import Profile, get_profile
from linrec.models.loading import load_model, max_context
from linrec.models.zoo import ensure_zoo_model

ModelLoader = Callable[..., tuple]
"""``loader(name_or_path, revision=..., dtype=..., device=...)`` -> (model, tokenizer); :func:`linrec.load_model` by default."""


def load_profile_model(profile: str | Profile, model: str, checkpoint: str = "final", *,
                       loader: ModelLoader | None = None, progress: bool = True) -> tuple:
    """(model, tokenizer) of one of the profile's models at ``checkpoint``, frozen in eval mode.

    Zoo models: ``checkpoint`` is ``"init"``, ``"final"`` or ``"step<N>"`` (see
    :meth:`Profile.checkpoints`); a model not cached yet is trained first. Hub models:
    ``"final"`` is the pinned revision (or the default branch); any other checkpoint is a hub
    revision from :meth:`Profile.checkpoints` (Pythia's ``"step<N>"``), ``"init"`` meaning the
    first of them. ``loader`` replaces :func:`linrec.load_model` (tests inject tiny models).
    """
    profile = get_profile(profile)
    profile.check_model(model)
    loader = loader or load_model
    if profile.zoo is not None:
        path = ensure_zoo_model(profile.zoo, model, checkpoint, progress)
        return loader(str(path), revision=None, dtype=profile.dtype, device=profile.device)
    revision = profile.revision(model)
    if checkpoint != "final":
        available = profile.checkpoints(model)
        name = available[0] if checkpoint == "init" else checkpoint
        if name not in available or name == "final":
            raise LinrecError(f"profile '{profile.name}' lists no checkpoint '{checkpoint}' of '{model}'; choose final"
                              + (f", init or one of {', '.join(available)}" if available != ("final",) else ""))
        revision = name
    return loader(model, revision=revision, dtype=profile.dtype, device=profile.device)


def profile_corpus(profile: str | Profile, name: str | None = None, *, loader: Loader | None = None) -> Corpus:
    """One of the profile's corpora (its main one by default); ``loader`` as in :func:`linrec.data.corpora.load_corpus`."""
    profile = get_profile(profile)
    name = name or profile.corpora[0]
    allowed = dict.fromkeys([*profile.corpora, profile.eval_corpus])
    if name not in allowed:
        raise LinrecError(f"profile '{profile.name}' has no corpus '{name}'; choose one of {', '.join(allowed)}")
    return load_corpus(name, loader=loader)


def profile_batches(profile: str | Profile, tokenizer, corpus: Corpus, *, split: str = "fit",
                    max_rows: int | None = None, model=None) -> TokenBatches:
    """Token batches of ``corpus`` at the profile's sizes: ``rows_per_block`` rows of the fit text, or
    ``eval_tokens`` of the eval text (``max_rows`` overrides); ``model`` bounds seq_len by its context."""
    profile = get_profile(profile)
    rows = max_rows or (profile.rows_per_block if split == "fit" else profile.eval_tokens)
    return make_batches(tokenizer, corpus.text(split), seq_len=profile.seq_len, max_rows=rows,
                        batch_size=profile.batch_size, max_context=None if model is None else max_context(model))
