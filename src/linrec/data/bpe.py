"""A byte-level BPE tokenizer trained here, saved so that ``AutoTokenizer.from_pretrained(path)`` loads it.

The same scheme as GPT-2's (byte-level pre-tokenisation with GPT-2's split pattern, no
normaliser), so every string round-trips exactly through encode and decode, and one special
token, ``<|endoftext|>``, serves as BOS, EOS and padding. Training is deterministic for given
texts and settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from linrec.errors import LinrecError

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

EOS = "<|endoftext|>"
MIN_VOCAB = 257  # the 256 byte symbols and the special token


def _line_batches(texts: Iterable[str], lines_per_batch: int = 2000) -> Iterator[list[str]]:
    """Each text as batches of lines (newlines kept), so the trainer can work in parallel."""
    for text in texts:
        lines = text.splitlines(keepends=True)
        for start in range(0, len(lines), lines_per_batch):
            yield lines[start : start + lines_per_batch]


def byte_level_bpe(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = (EOS,)) -> Tokenizer:
    """A bare ``tokenizers.Tokenizer``: byte-level BPE of ``vocab_size`` tokens (``special_tokens`` first) on ``texts``.

    It may hold fewer tokens when the texts cannot yield that many merges.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_line_batches(texts), trainer=trainer)
    return core


def train_bpe(
    texts: Iterable[str], vocab_size: int, out_dir: str | Path | None = None, max_length: int = 1024
) -> PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast`` trained on ``texts`` (saved to ``out_dir`` when given)."""
    from transformers import PreTrainedTokenizerFast

    if vocab_size < MIN_VOCAB:
        raise LinrecError(f"vocab_size must be at least {MIN_VOCAB} (256 bytes and {EOS}); got {vocab_size}")
    core = byte_level_bpe(texts, vocab_size)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=EOS,
        eos_token=EOS,
        pad_token=EOS,
        model_max_length=max_length,
        clean_up_tokenization_spaces=False,
    )
    if out_dir is not None:
        tokenizer.save_pretrained(str(out_dir))
    return tokenizer
