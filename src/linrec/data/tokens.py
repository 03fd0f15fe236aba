"""Token batches from text: fixed-length sequences, each with a global index that decides its fold.

Rows go to folds by sequence, never by token, so neighbouring (and so correlated) tokens of one
sequence are never split between fitting and scoring. The fold of a sequence depends only on its
index, the number of folds and the seed, so results do not depend on the batch size or on how
sequences are sharded across processes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from linrec.data.textfile import TextFile, text_chunks
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


SEED_MAX = 2**64 - 1
"""The largest seed torch's generators take (they take 0 .. 2**64 - 1)."""


def check_seed(seed: int) -> int:
    """``seed`` when a torch generator takes it, else a :class:`LinrecError` (not torch's overflow error)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise LinrecError(f"a seed must be an integer from 0 to 2**64 - 1 = {SEED_MAX}; got {seed!r}")
    return seed


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T) long
    attention_mask: torch.Tensor  # (B, T) long, 0 at padding
    seq_index: torch.Tensor  # (B,) global sequence indices


@dataclass(init=False)
class TokenBatches:
    """A list of token sequences served in batches; iterate it for :class:`Batch` objects."""

    input_ids: torch.Tensor  # (N, T)
    attention_mask: torch.Tensor  # (N, T)
    batch_size: int
    seq_index: torch.Tensor  # global index of each sequence; default 0..N-1
    n_sequences_total: int  # size of the whole set when this is a shard; default N

    # Written out rather than generated so that the two defaults filled in here are never None afterwards.
    def __init__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        batch_size: int = 8,
        seq_index: torch.Tensor | None = None,
        n_sequences_total: int | None = None,
    ) -> None:
        self.input_ids, self.attention_mask, self.batch_size = input_ids, attention_mask, batch_size
        if self.batch_size < 1:
            raise LinrecError(f"batch_size must be at least 1; got {self.batch_size}")
        self.seq_index = torch.arange(self.input_ids.shape[0]) if seq_index is None else seq_index
        self.n_sequences_total = self.input_ids.shape[0] if n_sequences_total is None else n_sequences_total

    @property
    def seq_len(self) -> int:
        return self.input_ids.shape[1]

    @property
    def n_rows(self) -> int:
        """Token rows each block will see (padding excluded)."""
        return int(self.attention_mask.sum())

    @property
    def sha256(self) -> str:
        """The sha256 of the token ids and attention mask (int64, row-major): which tokens these are, for provenance."""
        digest = hashlib.sha256()
        for t in (self.input_ids, self.attention_mask):
            digest.update(t.to(torch.int64).contiguous().numpy().tobytes())
        return digest.hexdigest()

    def first(self, max_rows: int) -> TokenBatches:
        """The first sequences, as many as hold ``max_rows`` token rows (rounded up to whole sequences), or all."""
        n = min(self.input_ids.shape[0], math.ceil(max_rows / self.seq_len))
        return TokenBatches(self.input_ids[:n], self.attention_mask[:n], self.batch_size)

    def __len__(self) -> int:
        return math.ceil(self.input_ids.shape[0] / self.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        for start in range(0, self.input_ids.shape[0], self.batch_size):
            sl = slice(start, start + self.batch_size)
            yield Batch(self.input_ids[sl], self.attention_mask[sl], self.seq_index[sl])

    def folds(self, k: int, seed: int) -> torch.Tensor:
        """Fold id of every global sequence index: a seeded permutation dealt round-robin (balanced)."""
        if k < 2:
            raise LinrecError(f"folds must be at least 2; got {k}")
        if self.n_sequences_total < k:
            raise LinrecError(
                f"{self.n_sequences_total} sequences cannot fill {k} folds; give more text or fewer folds"
            )
        generator = torch.Generator().manual_seed(check_seed(seed))
        perm = torch.randperm(self.n_sequences_total, generator=generator)
        fold = torch.empty(self.n_sequences_total, dtype=torch.long)
        fold[perm] = torch.arange(self.n_sequences_total) % k
        return fold

    def check_vocabulary(self, vocab_size: int) -> None:
        """Refuse token ids the model has no embedding for (``vocab_size`` rows): a tokenizer from another model
        would otherwise stop the forward pass with an IndexError."""
        top = int(self.input_ids.max()) if self.input_ids.numel() else -1
        if top >= vocab_size:
            raise LinrecError(
                f"the tokenizer gives token id {top}, but the model's vocabulary has {vocab_size} ids "
                f"(0..{vocab_size - 1}): the tokenizer belongs to another model. Save the model's own tokenizer "
                "beside it (tokenizer.save_pretrained(directory))."
            )

    def grouped(self, fold_of_sequence: torch.Tensor) -> TokenBatches:
        """The same sequences ordered by fold (stable), so most batches hold a single fold.

        Moments do not depend on row order; grouping lets each block update one fold's sums with
        one large matrix product per batch instead of several small ones.
        """
        order = torch.sort(fold_of_sequence[self.seq_index], stable=True).indices
        return TokenBatches(
            self.input_ids[order],
            self.attention_mask[order],
            self.batch_size,
            self.seq_index[order],
            self.n_sequences_total,
        )

    def shard(self, rank: int, world: int) -> TokenBatches:
        """Every ``world``-th sequence starting at ``rank``, keeping global indices (and so folds)."""
        sel = slice(rank, None, world)
        return TokenBatches(
            self.input_ids[sel], self.attention_mask[sel], self.batch_size, self.seq_index[sel], self.n_sequences_total
        )


def tokenize(
    tokenizer: PreTrainedTokenizerBase,
    text: str | TextFile,
    chunk_chars: int = 200_000,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """Token ids of ``text`` (no special tokens), tokenised in newline-aligned chunks
    (:func:`linrec.data.textfile.text_chunks`), stopping once ``max_tokens`` are reached (all of the text
    when None); a :class:`~linrec.data.textfile.TextFile` is read no further than that."""
    ids: list[int] = []
    chunks = text_chunks(text, chunk_chars)
    with closing(chunks):
        for chunk in chunks:
            ids.extend(tokenizer(chunk, add_special_tokens=False, verbose=False)["input_ids"])
            if max_tokens is not None and len(ids) >= max_tokens:
                break
    return torch.tensor(ids, dtype=torch.long)


_PROBE = "The quick brown fox jumps over the lazy dog."


def bos_id(tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The token id the tokenizer puts before a text (Llama's ``<s>`` when ``add_bos_token``), or None when it adds
    nothing there (GPT-2, Pythia and the zoo's tokenizers, whose ``<|endoftext|>`` is never added)."""
    bare = tokenizer(_PROBE, add_special_tokens=False)["input_ids"]
    full = tokenizer(_PROBE)["input_ids"]
    if len(full) > len(bare) and full[1 : len(bare) + 1] == bare:
        return full[0]
    return None


def bos_policy(tokenizer: PreTrainedTokenizerBase) -> str:
    """What :func:`make_batches` puts at the start of every window, for a provenance line."""
    bos = bos_id(tokenizer)
    if bos is None:
        return "no BOS"
    return f"{tokenizer.convert_ids_to_tokens(bos)} (id {bos}) at position 0 of every window"


def check_context(seq_len: int, max_context: int | None) -> None:
    """Refuse sequences longer than a model's context (``max_context``, None when unbounded), which its position
    embeddings could not index."""
    if max_context is not None and seq_len > max_context:
        raise LinrecError(
            f"seq_len {seq_len} exceeds the model's context of {max_context} tokens; "
            f"use --seq-len {max_context} or less"
        )


def make_batches(
    tokenizer: PreTrainedTokenizerBase,
    text: str | TextFile,
    seq_len: int = 128,
    max_rows: int | None = None,
    batch_size: int = 8,
    max_context: int | None = None,
) -> TokenBatches:
    """Cut ``text`` into consecutive non-overlapping windows of ``seq_len`` tokens.

    A tokenizer that starts every text with a BOS token (:func:`bos_id`) gets it at position 0 of
    every window, followed by ``seq_len - 1`` text tokens, as the model saw its training texts;
    otherwise the windows are text tokens only (:func:`bos_policy` says which).
    ``max_rows`` is the number of token rows per block wanted (rounded up to whole sequences;
    None takes all full sequences). ``max_context``, when given (the model's), bounds seq_len.
    ``text`` may be a :class:`~linrec.data.textfile.TextFile`: it is read only as far as ``max_rows`` needs.
    """
    bos = bos_id(tokenizer)
    if seq_len < 1 + (bos is not None):
        raise LinrecError(f"seq_len must be at least {1 + (bos is not None)}; got {seq_len}")
    if max_rows is not None and max_rows < 1:
        raise LinrecError(
            f"max_rows (token rows per block) must be positive, or None for all of the text; got {max_rows}"
        )
    check_context(seq_len, max_context)
    body = seq_len - (bos is not None)  # text tokens per window
    wanted = None if max_rows is None else math.ceil(max_rows / seq_len)
    ids = tokenize(tokenizer, text, max_tokens=None if wanted is None else wanted * body)
    if ids.numel() == 0 and not (text.blank() if isinstance(text, TextFile) else not text.strip()):
        raise LinrecError(
            "the tokenizer turned the text's characters into no tokens: it is empty (a model saved "
            "without its tokenizer?). Save one with tokenizer.save_pretrained(directory)."
        )
    available = ids.numel() // body
    wanted = available if wanted is None else wanted
    if wanted == 0 or available < wanted:
        raise LinrecError(
            f"the text has {ids.numel()} tokens, {available} full sequences of {seq_len}; "
            f"{max(wanted, 1)} sequences ({max(wanted, 1) * body} text tokens) are needed"
            + (f" for max_rows={max_rows}" if max_rows is not None else "")
            + ". Give a longer text, or lower max_rows or seq_len."
        )
    input_ids = ids[: wanted * body].reshape(wanted, body)
    if bos is not None:
        input_ids = torch.cat([torch.full((wanted, 1), bos, dtype=input_ids.dtype), input_ids], dim=1)
    return TokenBatches(input_ids, torch.ones_like(input_ids), batch_size)
