"""linrec.models.weights_identity: one string per weights, by content, whatever name they were asked for by."""

from __future__ import annotations

import hashlib

from linrec.models import weights_identity


def test_a_local_directory_is_named_by_its_files_contents_and_changes_with_a_byte(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"n_embd": 8}')
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    (model / ".cache").mkdir()
    (model / ".cache" / "download.lock").write_text("left by a download")
    files = "".join(
        f"{name}\0{hashlib.sha256((model / name).read_bytes()).hexdigest()}\n"
        for name in ("config.json", "model.safetensors")
    )
    first = weights_identity.weights_id(str(model))
    assert first == f"local sha256:{hashlib.sha256(files.encode()).hexdigest()}"  # hidden files left out
    (model / "model.safetensors").write_bytes(b"\0" * 63 + b"\1")
    assert weights_identity.weights_id(str(model)) not in (first, None)


def test_a_hub_id_is_named_by_the_commit_its_revision_resolves_to_else_none(monkeypatch):
    asked = []

    def resolve(name, revision, local_files_only):
        asked.append((name, revision))
        return "c0ffee" if revision == "main" else None

    monkeypatch.setattr(weights_identity, "resolve_revision", resolve)
    assert weights_identity.weights_id("org/model-that-is-no-path", "main") == "hub org/model-that-is-no-path@c0ffee"
    assert weights_identity.weights_id("org/model-that-is-no-path", "unknown") is None  # offline with nothing recorded
    assert asked == [("org/model-that-is-no-path", "main"), ("org/model-that-is-no-path", "unknown")]
