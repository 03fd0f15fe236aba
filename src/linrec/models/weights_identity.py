"""Which weights a model name stands for, by content: what provenance records and what a replaced model is checked
against before its base loads.

One string per kind of name, the same whether it is worked out from the name before loading or from the directory a
loaded model came from (``config._name_or_path``):

* a packaged model (``smollm2-135m``) and a ``.gguf`` file, and the directory it was dequantised into:
  ``gguf sha256:<file's sha256> (<quantisation>, dequantised to float32)``;
* any other local directory or file: ``local sha256:<hex>`` (:func:`linrec.models.loading.local_weights_id`);
* a hub id: ``hub <id>@<commit>``, the commit its revision resolves to (None when that cannot be known offline).
"""

from __future__ import annotations

from pathlib import Path

from linrec.hub import hub_offline, resolve_revision
from linrec.models.gguf import gguf_origin, read_gguf_info
from linrec.models.loading import local_weights_id
from linrec.models.packaged import PACKAGED, packaged_file


def weights_id(name_or_path: str, revision: str | None = None) -> str | None:
    """The weights ``name_or_path`` (at ``revision``, for a hub id) names, by content (module docstring)."""
    if name_or_path in PACKAGED:
        name_or_path = str(packaged_file(name_or_path))
    path = Path(name_or_path).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return read_gguf_info(path).weights
    origin = gguf_origin(path) if path.is_dir() else None
    if origin is not None:
        return origin.weights
    local = local_weights_id(name_or_path)
    if local is not None:
        return local
    commit = resolve_revision(name_or_path, revision, local_files_only=hub_offline())
    return None if commit is None else f"hub {name_or_path}@{commit}"
