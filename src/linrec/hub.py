"""The model and dataset hubs: whether they may be used, whether they can be reached, and what a revision is.

Everything that touches the network asks here first, so that a machine without one is told so
within seconds, with the offline profile named as the way to run without it. Every request has a
timeout: :func:`resolve_revision` passes its own, and :func:`use_hub_timeouts` gives
``huggingface_hub``'s file requests (the ``HF_HUB_ETAG_TIMEOUT`` and ``HF_HUB_DOWNLOAD_TIMEOUT``
environment variables) short defaults where the user has set none.
"""

from __future__ import annotations

import os
import re
import sys
import urllib.error
import urllib.request
import warnings
from pathlib import Path

from linrec.errors import LinrecError

OFFLINE_HINT = "The 'offline' profile needs no network: `linrec measure --profile offline` or `make book`."

HUB_TIMEOUT = 5.0
"""Seconds a single hub request may wait for an answer before it fails (metadata requests)."""

HUB_TIMEOUT_DEFAULTS = {"HF_HUB_ETAG_TIMEOUT": 5, "HF_HUB_DOWNLOAD_TIMEOUT": 10}
"""``huggingface_hub``'s timeouts (seconds) that :func:`use_hub_timeouts` sets unless the user has set them:
file metadata requests, and each read of a download (a stalled download fails, a slow one does not)."""

_COMMIT = re.compile(r"[0-9a-f]{40}")
_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids the hub."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def datasets_offline() -> bool:
    """Whether datasets may not be fetched: ``HF_DATASETS_OFFLINE`` when it is set, else :func:`hub_offline`
    (the rule of the ``datasets`` package)."""
    value = os.environ.get("HF_DATASETS_OFFLINE")
    return hub_offline() if value is None else value.strip().lower() in _TRUE


def use_hub_timeouts() -> None:
    """Give ``huggingface_hub`` the timeouts of :data:`HUB_TIMEOUT_DEFAULTS` where the user has set none.

    ``huggingface_hub`` reads these variables when it is imported, so they are set in the
    environment (for an import still to come) and, if it is already imported, in its constants.
    A value the user set is never replaced.
    """
    constants = sys.modules.get("huggingface_hub.constants")
    for name, seconds in HUB_TIMEOUT_DEFAULTS.items():
        if name not in os.environ:
            os.environ[name] = str(seconds)
            if constants is not None:
                setattr(constants, name, seconds)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub endpoint (``HF_ENDPOINT``) answers an HTTP request within ``timeout`` seconds.

    The request goes through the proxies the environment names (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``NO_PROXY``), as the hub client's own do; any HTTP answer counts, and an endpoint that accepts
    the connection but never answers counts as unreachable rather than hanging what follows.
    """
    request = urllib.request.Request(_endpoint(), method="HEAD")
    try:
        urllib.request.build_opener().open(request, timeout=timeout).close()  # reads the proxies now
    except urllib.error.HTTPError:
        return True  # it answered, if not with 200
    except (OSError, ValueError):  # refused, unresolvable, timed out (URLError is an OSError), malformed URL
        return False
    return True


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _ref_path(repo_id: str, revision: str, repo_type: str, cache_dir: str | Path | None) -> Path:
    """Where the local hub cache (``huggingface_hub``'s layout) records the commit of a branch or tag."""
    from huggingface_hub import constants

    folder = f"{repo_type}s--{repo_id.replace('/', '--')}"
    return Path(cache_dir or constants.HF_HUB_CACHE).expanduser() / folder / "refs" / revision


def _cached_commit(repo_id: str, revision: str, repo_type: str, cache_dir: str | Path | None) -> str | None:
    """The commit the local hub cache records for ``revision``, or None."""
    try:
        commit = _ref_path(repo_id, revision, repo_type, cache_dir).read_text().strip()
    except OSError:
        return None
    return commit if _COMMIT.fullmatch(commit) else None


def resolve_revision(
    repo_id: str,
    revision: str | None = None,
    *,
    repo_type: str = "model",
    timeout: float = HUB_TIMEOUT,
    local_files_only: bool = False,
    cache_dir: str | Path | None = None,
    hint: str = OFFLINE_HINT,
) -> str | None:
    """The commit sha that ``revision`` of a hub repo resolves to (None: the default branch).

    A 40-hex sha is returned unchanged, without a request. Offline (:func:`hub_offline`, or
    :func:`datasets_offline` for datasets) or with ``local_files_only``, the commit comes from the
    local hub cache (``cache_dir``, default ``HF_HUB_CACHE``), or is None when it has none.
    Otherwise the hub is asked, within ``timeout`` seconds, and the answer is recorded in the local
    cache as ``huggingface_hub`` does, so that an offline run finds it later. A hub that fails or
    does not answer falls back on that record, and without one raises a :class:`LinrecError`
    ending in ``hint``: what runs without the hub (by default the offline profile).
    """
    if repo_type not in ("model", "dataset"):
        raise LinrecError(f"unknown repo_type '{repo_type}'; choose 'model' or 'dataset'")
    if revision is not None and _COMMIT.fullmatch(revision):
        return revision
    name = revision or "main"
    if local_files_only or (datasets_offline() if repo_type == "dataset" else hub_offline()):
        return _cached_commit(repo_id, name, repo_type, cache_dir)
    use_hub_timeouts()
    from huggingface_hub import HfApi

    api = HfApi(endpoint=_endpoint())
    info = api.dataset_info if repo_type == "dataset" else api.model_info
    try:
        commit = info(repo_id, revision=revision, timeout=timeout).sha
    except Exception as err:  # timeouts, refusals and HTTP errors come as many types; the user needs one message
        cached = _cached_commit(repo_id, name, repo_type, cache_dir)
        if cached is not None:
            warnings.warn(f"the hub could not resolve {repo_id}@{name} ({err}); using the cached commit", stacklevel=2)
            return cached
        raise LinrecError(
            f"could not resolve revision '{name}' of {repo_type} '{repo_id}' on the hub ({_endpoint()}): "
            f"{type(err).__name__}: {err}\n{hint}"
        ) from err
    if not commit:
        raise LinrecError(f"the hub gave no commit for revision '{name}' of {repo_type} '{repo_id}'")
    _record_commit(repo_id, name, repo_type, commit, cache_dir)
    return commit


def _record_commit(repo_id: str, revision: str, repo_type: str, commit: str, cache_dir: str | Path | None) -> None:
    """Record ``revision`` -> ``commit`` in the local hub cache, best effort (a read-only cache is left alone).

    Loading by commit stores no ref, so without this an offline run, which cannot ask the hub what
    the default branch is, would not find the snapshot it loaded online.
    """
    ref = _ref_path(repo_id, revision, repo_type, cache_dir)
    try:
        ref.parent.mkdir(parents=True, exist_ok=True)
        if not ref.is_file() or ref.read_text().strip() != commit:
            ref.write_text(commit)
    except OSError:
        pass
