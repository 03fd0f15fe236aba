"""Tokenizers in the layouts of the paper models' own, trained here on given texts (:mod:`linrec.models.shapes` pairs
each real-shaped model with one of its real vocabulary size):

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

The byte-level ones are :func:`linrec.data.bpe.byte_level_bpe`'s tokens in each model's layout. When the texts cannot
yield every merge (another Python's standard library might be smaller), the missing tokens are filled with
placeholders (``<|reserved_N|>``, or unused ``<reserved_N>`` pieces) so the size is still exact; each trainer
returns how many.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from linrec.data.bpe import EOS, byte_level_bpe

if TYPE_CHECKING:
    from tokenizers import Tokenizer

PAD = "<|padding|>"


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
