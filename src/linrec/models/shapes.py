"""Real-shaped models: each paper model's real configuration with random weights, and a tokenizer of its real size.

The paper's models (GPT-2 124M, Pythia-160m, llama-160m) come from the Hugging Face hub. To run the
paper's code path at full size without the hub, :func:`load_shaped` builds each from its published
configuration (``config.json``, as ``from_pretrained`` would) with seeded random weights, and pairs it
with a tokenizer of the same kind and vocabulary size trained here, keyed by the same hub ids.

Tokenizers are trained on the fit texts of the offline corpora (about 13 MB: standard-library prose
and code, and Unicode records), so they have the real vocabulary sizes but not the real merges, each
in its model's layout (:mod:`linrec.models.tokenizers`); the tokenizer's ``shapes.json`` records how
many placeholders it needed (none on this Python). Training is deterministic and takes about 15 s
for the three on two cores; the result is cached under ``cache_dir()/"shapes"``, keyed by the texts'
hashes and the library versions.

Weights are drawn by each architecture's own initialisation under a seed that is a hash of the model
name and revision, so Pythia's ``step1000`` and ``step2000`` differ and each is reproducible; no
revision, ``"main"`` and the final training checkpoint (``step143000``) are the same model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from linrec.cache import build_entry, cache_dir, cache_key
from linrec.data.corpora import load_corpus
from linrec.data.offline_corpora import OFFLINE_CORPORA
from linrec.errors import LinrecError
from linrec.models.loading import load_tokenizer, parse_dtype, pick_device
from linrec.models.tokenizers import TRAINERS

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

SHAPES_FORMAT = 1
"""Bumped whenever the code changes what a shaped tokenizer contains (it keys the cache)."""


@dataclass(frozen=True)
class Shape:
    """One paper model's shape: its ``config.json`` fields, its tokenizer's kind and size, its final revision."""

    config: dict
    tokenizer: str  # "gpt2", "neox" or "llama": how the tokenizer is built (see the module docstring)
    tokenizer_size: int  # tokens in the real tokenizer's vocabulary, specials included
    final_revision: str | None = None  # the training checkpoint the default branch holds

    @property
    def context(self) -> int:
        """The longest sequence the position embeddings allow (the tokenizer's model_max_length)."""
        return self.config.get("n_positions") or self.config["max_position_embeddings"]


def _pythia(width: int, layers: int, heads: int, vocab: int) -> Shape:
    """One Pythia model's shape: GPT-NeoX with parallel residuals, a quarter of each head rotary, FFN 4 x width."""
    return Shape(
        {
            "model_type": "gpt_neox",
            "vocab_size": vocab,
            "hidden_size": width,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "intermediate_size": 4 * width,
            "hidden_act": "gelu",
            "rotary_pct": 0.25,
            "rotary_emb_base": 10000,
            "max_position_embeddings": 2048,
            "use_parallel_residual": True,
            "layer_norm_eps": 1e-5,
            "initializer_range": 0.02,
            "bos_token_id": 0,
            "eos_token_id": 0,
            "tie_word_embeddings": False,
        },
        "neox",
        50254,
        final_revision="step143000",
    )


SHAPES: dict[str, Shape] = {
    # https://huggingface.co/openai-community/gpt2/blob/main/config.json (dropouts, which eval mode turns
    # off, and the task-specific settings left out).
    "openai-community/gpt2": Shape(
        {
            "model_type": "gpt2",
            "vocab_size": 50257,
            "n_positions": 1024,
            "n_ctx": 1024,
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5,
            "initializer_range": 0.02,
            "bos_token_id": 50256,
            "eos_token_id": 50256,
            "tie_word_embeddings": True,
        },
        "gpt2",
        50257,
    ),
    # The Pythia suite: https://huggingface.co/EleutherAI/pythia-160m/blob/main/config.json and its siblings'
    # (70m ... 12b differ only in width, depth, heads and the embedding's padded rows); transformers 5 reads
    # rotary_pct and rotary_emb_base into rope_parameters (partial_rotary_factor, rope_theta).
    **{
        f"EleutherAI/pythia-{size}": _pythia(width, layers, heads, vocab)
        for size, width, layers, heads, vocab in (
            ("70m", 512, 6, 8, 50304),
            ("160m", 768, 12, 12, 50304),
            ("410m", 1024, 24, 16, 50304),
            ("1b", 2048, 16, 8, 50304),
            ("1.4b", 2048, 24, 16, 50304),
            ("2.8b", 2560, 32, 32, 50304),
            ("6.9b", 4096, 32, 32, 50432),
            ("12b", 5120, 36, 40, 50688),
        )
    },
    # https://huggingface.co/JackFram/llama-160m/blob/main/config.json
    "JackFram/llama-160m": Shape(
        {
            "model_type": "llama",
            "vocab_size": 32000,
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-6,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "tie_word_embeddings": False,
        },
        "llama",
        32000,
    ),
}
"""Paper model hub id -> its shape (the same names as the ``paper`` profile's models)."""


def get_shape(name: str) -> Shape:
    """The shape of ``name``; an unknown name is an error listing the known ones."""
    if name not in SHAPES:
        raise LinrecError(f"no real-shaped model '{name}'; choose one of {', '.join(SHAPES)}")
    return SHAPES[name]


BENCH_SHAPES: dict[str, dict] = {
    "gpt2-small": SHAPES["openai-community/gpt2"].config,  # 12 blocks, width 768, FFN 3072, 50257 tokens
    # SmolLM2-135M's published configuration (Hugging Face, 2024): narrow and deep.
    "pythia-6.9b": SHAPES["EleutherAI/pythia-6.9b"].config,  # 32 blocks, width 4096: a 7B (13.8 GB in bfloat16)
    "smollm2-135m": {
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0},
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,
    },
}
"""Model shapes ``linrec bench`` builds with random weights (nothing is downloaded), by name: ``config.json`` fields,
as in :data:`SHAPES` (whose GPT-2 is the bench's GPT-2 small). They need no tokenizer: the bench times random ids."""


def _config(fields: dict) -> PretrainedConfig:
    """The transformers config of ``config.json`` fields, as ``from_pretrained`` would build it."""
    from transformers import AutoConfig

    fields = dict(fields)
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def bench_config(name: str) -> PretrainedConfig:
    """The configuration of the bench shape ``name``; an unknown name lists the known ones."""
    if name not in BENCH_SHAPES:
        raise LinrecError(f"unknown shape '{name}'; choose one of {', '.join(BENCH_SHAPES)}")
    return _config(BENCH_SHAPES[name])


# ---------------------------------------------------------------------------------------------
# Shaped tokenizers: trained in their layouts (linrec.models.tokenizers), cached.


def _library_version(kind: str) -> str:
    import tokenizers

    if kind != "llama":
        return f"tokenizers {tokenizers.__version__}"
    import sentencepiece

    return f"sentencepiece {sentencepiece.__version__}"


def shaped_tokenizer_dir(name: str) -> Path:
    """The directory of ``name``'s locally trained tokenizer, trained now unless it is cached."""
    shape = get_shape(name)
    corpora = [load_corpus(corpus) for corpus in OFFLINE_CORPORA]
    texts = [corpus.fit_text for corpus in corpora]
    key = cache_key(
        {
            "format": SHAPES_FORMAT,
            "kind": shape.tokenizer,
            "size": shape.tokenizer_size,
            "corpora": {corpus.name: corpus.sha256 for corpus in corpora},
            "library": _library_version(shape.tokenizer),
        }
    )
    path = cache_dir() / "shapes" / f"{name.replace('/', '--')}-{key}"

    def build(tmp: Path) -> None:
        missing = TRAINERS[shape.tokenizer](texts, shape.tokenizer_size, tmp, shape.context)
        record = {
            "model": name,
            "size": shape.tokenizer_size,
            "placeholders": missing,
            "corpora": list(OFFLINE_CORPORA),
        }
        (tmp / "shapes.json").write_text(json.dumps(record, indent=1))

    build_entry(path, build)
    return path


# ---------------------------------------------------------------------------------------------
# Models.


def shaped_seed(name: str, revision: str | None = None) -> int:
    """The weight seed of ``name`` at ``revision``: a hash of both, the final checkpoint counting as ``main``."""
    shape = get_shape(name)
    revision = revision or "main"
    if revision == shape.final_revision:
        revision = "main"
    return int.from_bytes(hashlib.sha256(f"{name}@{revision}".encode()).digest()[:8], "little") >> 1


def shaped_config(name: str) -> PretrainedConfig:
    """The transformers config of ``name``, built from its ``config.json`` fields as ``from_pretrained`` would."""
    return _config(get_shape(name).config)


def load_shaped(
    name: str,
    *,
    revision: str | None = None,
    dtype: str | torch.dtype | None = None,
    device: str | None = None,
    before_weights: Callable[[PretrainedConfig, PreTrainedTokenizerBase], None] | None = None,
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of the paper model ``name`` with random weights: a :data:`ModelLoader` that needs no hub.

    The model is frozen in eval mode on ``device`` (:func:`pick_device`) in ``dtype`` (float32 by default), its
    weights drawn in that dtype on the CPU (no float32 copy first: a 6.9b shape is 13.8 GB in bfloat16, 27.6 GB in
    float32), so they depend on ``name``, ``revision`` (:func:`shaped_seed`) and the dtype only.
    ``before_weights(config, tokenizer)`` runs before any weight is drawn, as :func:`linrec.load_model`'s does.
    """
    target = pick_device(device)
    torch_dtype = parse_dtype(dtype) or torch.float32
    config = shaped_config(name)
    tokenizer = load_tokenizer(str(shaped_tokenizer_dir(name)), name, local_files_only=True)
    if before_weights is not None:
        before_weights(config, tokenizer)
    return build_shaped(name, revision=revision, dtype=torch_dtype).to(device=target), tokenizer


def build_shaped(
    name: str, *, revision: str | None = None, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
) -> nn.Module:
    """The model of :func:`load_shaped` alone, frozen in eval mode: no tokenizer (a GPU check's random token ids need
    none). Its weights are drawn in ``dtype`` under :func:`shaped_seed` on ``device``: the CPU by default, whose draws
    are the same on every machine; on a GPU they are other numbers, drawn there instead of taking minutes on the
    host for a 7B shape (whose every weight is initialised twice, on the CPU's random generator)."""
    from transformers import AutoModelForCausalLM

    where = torch.device(device)
    with torch.random.fork_rng(devices=[where] if where.type == "cuda" else []), where:
        torch.manual_seed(shaped_seed(name, revision))
        model = AutoModelForCausalLM.from_config(shaped_config(name), dtype=dtype)
    return model.eval().requires_grad_(False)


def save_shaped(name: str, directory: str | Path, *, revision: str | None = None) -> Path:
    """Save the shaped model ``name`` (float32) and its tokenizer to ``directory``, a checkpoint any loader reads.

    A shaped model has no hub copy; saved, it is a local model like one of your own (chapter 9's CLI call).
    """
    model, tokenizer = load_shaped(name, revision=revision, device="cpu")
    path = Path(directory)
    cast("PreTrainedModel", model).save_pretrained(str(path))  # load_shaped builds a transformers model
    tokenizer.save_pretrained(str(path))
    return path
