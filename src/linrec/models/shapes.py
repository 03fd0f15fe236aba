"""Real-shaped models: each paper model's real configuration with random weights, and a tokenizer of its real size.

The paper's models (GPT-2 124M, Pythia-160m, llama-160m) come from the Hugging Face hub. To run the
paper's code path at full size without the hub, :func:`load_shaped` builds each from its published
configuration (``config.json``, as ``from_pretrained`` would) with seeded random weights, and pairs it
with a tokenizer of the same kind and vocabulary size trained here, keyed by the same hub ids.

Tokenizers are trained on the fit texts of the offline corpora (about 13 MB: standard-library prose
and code, and Unicode records), so they have the real vocabulary sizes but not the real merges:

=========================  ==========================================================================
model                      tokenizer
=========================  ==========================================================================
``openai-community/gpt2``  byte-level BPE: 50256 learned tokens, then ``<|endoftext|>`` (id 50256) as
                           BOS, EOS and unknown token; 50257 in all, the embedding's size.
``EleutherAI/pythia-160m`` byte-level BPE as the GPT-NeoX tokenizer: ``<|endoftext|>`` (id 0, BOS, EOS
                           and unknown) and ``<|padding|>`` (id 1), then learned tokens, 50254 in all.
                           The real one adds 23 whitespace-run tokens (50277 in all), left out here;
                           the embedding has 50304 rows, the unused ones padding, as in Pythia.
``JackFram/llama-160m``    sentencepiece BPE as Llama's (byte fallback, split digits, no normalisation):
                           ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, the 256 byte pieces, then learned pieces,
                           32000 in all; saved only as ``tokenizer.model``, so transformers converts it
                           as it does the real checkpoint's (this needs ``sentencepiece`` and ``protobuf``).
=========================  ==========================================================================

When the texts cannot yield every merge (another Python's standard library might be smaller), the
missing tokens are filled with placeholders (``<|reserved_N|>``, or unused ``<reserved_N>`` pieces)
so the size is still exact; the tokenizer's ``shapes.json`` records how many. On this Python the
texts yield all of them. Training is deterministic and takes about 15 s for the three on two cores;
the result is cached under ``cache_dir()/"shapes"``, keyed by the texts' hashes and the library
versions.

Weights are drawn by each architecture's own initialisation under a seed that is a hash of the model
name and revision, so Pythia's ``step1000`` and ``step2000`` differ and each is reproducible; no
revision, ``"main"`` and the final training checkpoint (``step143000``) are the same model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from linrec.cache import build_entry, cache_dir, cache_key
from linrec.data.bpe import EOS, byte_level_bpe
from linrec.data.corpora import load_corpus
from linrec.data.offline_corpora import OFFLINE_CORPORA
from linrec.errors import LinrecError
from linrec.models.loading import load_tokenizer, parse_dtype, pick_device

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

SHAPES_FORMAT = 1
"""Bumped whenever the code changes what a shaped tokenizer contains (it keys the cache)."""

PAD = "<|padding|>"


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
# Tokenizers.


def _reserved(count: int, start: int, fmt: str) -> list[str]:
    return [fmt.format(i) for i in range(start, start + count)]


def _save_byte_level(core: Tokenizer, out_dir: Path, specials: dict[str, str], max_length: int) -> None:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, model_max_length=max_length, clean_up_tokenization_spaces=False, **specials
    )
    tokenizer.save_pretrained(str(out_dir))


def train_gpt2_tokenizer(texts: Sequence[str], size: int, out_dir: Path, max_length: int = 1024) -> int:
    """GPT-2's layout: ``size - 1`` byte-level BPE tokens, then ``<|endoftext|>`` last; placeholders it needed."""
    core = byte_level_bpe(texts, size - 1, special_tokens=())
    missing = size - 1 - core.get_vocab_size()
    core.add_special_tokens([*_reserved(missing, 0, "<|reserved_{}|>"), EOS])
    _save_byte_level(core, out_dir, {"bos_token": EOS, "eos_token": EOS, "unk_token": EOS}, max_length)
    return missing


def train_neox_tokenizer(texts: Sequence[str], size: int, out_dir: Path, max_length: int = 2048) -> int:
    """GPT-NeoX's layout: ``<|endoftext|>`` 0 and ``<|padding|>`` 1, then byte-level BPE tokens.

    Returns how many placeholders it needed."""
    core = byte_level_bpe(texts, size, special_tokens=(EOS, PAD))
    missing = size - core.get_vocab_size()
    core.add_special_tokens(_reserved(missing, 0, "<|reserved_{}|>"))
    _save_byte_level(core, out_dir, {"bos_token": EOS, "eos_token": EOS, "unk_token": EOS}, max_length)
    return missing


LLAMA_TRAINER: dict[str, Any] = {  # SentencePieceTrainer.train's keyword options, of mixed types
    # Llama's own trainer settings (as its tokenizer.model records them), but one thread for determinism.
    "model_type": "bpe",
    "byte_fallback": True,
    "split_digits": True,
    "character_coverage": 0.99995,
    "normalization_rule_name": "identity",
    "add_dummy_prefix": True,
    "remove_extra_whitespaces": False,
    "allow_whitespace_only_pieces": True,
    "max_sentence_length": 4192,
    "unk_id": 0,
    "bos_id": 1,
    "eos_id": 2,
    "pad_id": -1,
    "num_threads": 1,
}


def train_llama_tokenizer(texts: Sequence[str], size: int, out_dir: Path, max_length: int = 2048) -> int:
    """Llama's layout: a sentencepiece BPE ``tokenizer.model`` and a config naming LlamaTokenizer; placeholders it
    needed (unused pieces appended to the model)."""
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    buffer = io.BytesIO()
    lines = (line for text in texts for line in text.splitlines() if line.strip())
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines,
        model_writer=buffer,
        vocab_size=size,
        hard_vocab_limit=False,
        minloglevel=2,
        **LLAMA_TRAINER,
    )
    # protobuf builds the message classes when the module is imported: the checker cannot see them.
    model_proto = sentencepiece_model_pb2.ModelProto  # type: ignore[attr-defined]
    proto = model_proto()
    proto.ParseFromString(buffer.getvalue())
    missing = size - len(proto.pieces)
    floor = min(piece.score for piece in proto.pieces)
    for i, name in enumerate(_reserved(missing, 0, "<reserved_{}>")):
        proto.pieces.add(piece=name, score=floor - 1 - i, type=model_proto.SentencePiece.UNUSED)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.model").write_bytes(proto.SerializeToString())
    config = {
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return missing


TRAINERS = {"gpt2": train_gpt2_tokenizer, "neox": train_neox_tokenizer, "llama": train_llama_tokenizer}


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
    name: str, *, revision: str | None = None, dtype: str | torch.dtype | None = None, device: str | None = None
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer) of the paper model ``name`` with random weights: a :data:`ModelLoader` that needs no hub.

    The model is frozen in eval mode on ``device`` (:func:`pick_device`) in ``dtype`` (float32 by default);
    its weights depend on ``name`` and ``revision`` only (:func:`shaped_seed`).
    """
    from transformers import AutoModelForCausalLM

    target = pick_device(device)
    torch_dtype = parse_dtype(dtype)
    config = shaped_config(name)
    tokenizer = load_tokenizer(str(shaped_tokenizer_dir(name)), name, local_files_only=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(shaped_seed(name, revision))
        model = AutoModelForCausalLM.from_config(config)
    model.to(device=target, dtype=torch_dtype)
    model.eval().requires_grad_(False)
    return model, tokenizer


def save_shaped(name: str, directory: str | Path, *, revision: str | None = None) -> Path:
    """Save the shaped model ``name`` (float32) and its tokenizer to ``directory``, a checkpoint any loader reads.

    A shaped model has no hub copy; saved, it is a local model like one of your own (chapter 9's CLI call).
    """
    model, tokenizer = load_shaped(name, revision=revision, device="cpu")
    path = Path(directory)
    cast("PreTrainedModel", model).save_pretrained(str(path))  # load_shaped builds a transformers model
    tokenizer.save_pretrained(str(path))
    return path
