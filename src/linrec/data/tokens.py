"""Token batches from text: fixed-length windows, each with a global index and a document that decide its fold.

:func:`make_batches` cuts a text into non-overlapping windows of ``seq_len`` tokens. By default
(``layout="spread"``) the windows a measurement asks for are drawn evenly over all full windows of the
whole text, the first at its start and the last at its end, so a measurement sees every part of a corpus
whatever its order (a corpus sorted by module name would otherwise be measured on its first modules
only); ``layout="head"`` takes the first windows, as linrec did before and the book's profiles still do
(:func:`linrec.experiment.resolve.profile_batches`).

Rows go to folds by window, never by token, so neighbouring (and so correlated) tokens of one
window are never split between fitting and scoring; and when the text has documents (a corpus's
modules, books or blocks of records), by whole document: windows never cross a document's end, every
window carries its document, and :meth:`TokenBatches.folds` deals whole documents to folds, so every
held-out score is on documents the fit never saw. The fold of a window depends only on the documents
of all windows, the number of folds and the seed, so results do not depend on the batch size or on how
windows are sharded across processes.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from linrec.data.corpus import document_starts
from linrec.data.textfile import WHOLE_FILE_BYTES, TextFile, file_stretches, text_chunks
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


LAYOUTS = ("spread", "head")
"""Where :func:`make_batches` takes its windows from: evenly spread over the whole text, or its first ones."""

STRETCHES = 64
"""The most places a large file is sampled at for windows spread over it (see :func:`make_batches`)."""

SEED_MAX = 2**64 - 1
"""The largest seed torch's generators take (they take 0 .. 2**64 - 1)."""


def check_seed(seed: int) -> int:
    """``seed`` when a torch generator takes it, else a :class:`LinrecError` (not torch's overflow error)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise LinrecError(f"a seed must be an integer from 0 to 2**64 - 1 = {SEED_MAX}; got {seed!r}")
    return seed


def deal(order: Sequence[int], sizes: Sequence[int], k: int) -> list[int]:
    """The fold of each item (of ``sizes``): taken in ``order``, each goes to the fold with the smallest total so far,
    the lowest such fold on a tie, so items of one size are dealt round-robin and no fold ends more than the largest
    item above another."""
    fold = [0] * len(sizes)
    filled = [(0, f) for f in range(k)]  # (total, fold): a heap pops the smallest total, then the lowest fold
    for item in order:
        total, chosen = heapq.heappop(filled)
        fold[item] = chosen
        heapq.heappush(filled, (total + sizes[item], chosen))
    return fold


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
    document: torch.Tensor | None  # the document of every global sequence index (all N of the whole set); None: unknown

    # Written out rather than generated so that the two defaults filled in here are never None afterwards.
    def __init__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        batch_size: int = 8,
        seq_index: torch.Tensor | None = None,
        n_sequences_total: int | None = None,
        document: torch.Tensor | None = None,
    ) -> None:
        self.input_ids, self.attention_mask, self.batch_size = input_ids, attention_mask, batch_size
        if self.batch_size < 1:
            raise LinrecError(f"batch_size must be at least 1; got {self.batch_size}")
        self.seq_index = torch.arange(self.input_ids.shape[0]) if seq_index is None else seq_index
        self.n_sequences_total = self.input_ids.shape[0] if n_sequences_total is None else n_sequences_total
        if document is not None and document.shape != (self.n_sequences_total,):
            raise LinrecError(
                f"document must give the document of each of the {self.n_sequences_total} sequences; "
                f"got shape {tuple(document.shape)}"
            )
        self.document = document

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
        """Fold id of every global sequence index: whole documents, in a seeded order, each dealt to the fold with
        the fewest sequences so far (the lowest such fold).

        Without documents each sequence is its own, and this is a seeded permutation dealt round-robin.
        Folds differ by at most the largest document's sequences (each is dealt to a smallest fold); the
        windows of :func:`make_batches` are full, so that is by rows too.
        """
        if k < 2:
            raise LinrecError(f"folds must be at least 2; got {k}")
        if self.n_sequences_total < k:
            raise LinrecError(
                f"{self.n_sequences_total} sequences cannot fill {k} folds; give more text or fewer folds"
            )
        # numpy, not torch.unique: these host-side tensors never make a GPU wait, and SyncCounter need not see them
        document = np.arange(self.n_sequences_total) if self.document is None else self.document.numpy()
        _, of_sequence, sizes = np.unique(document, return_inverse=True, return_counts=True)
        if len(sizes) < k:
            raise LinrecError(
                f"the {self.n_sequences_total} sequences come from {len(sizes)} documents, which cannot fill {k} "
                "folds (folds are whole documents): give more rows, so that the windows reach more documents, "
                "or fewer folds"
            )
        generator = torch.Generator().manual_seed(check_seed(seed))
        order = torch.randperm(len(sizes), generator=generator).tolist()
        return torch.tensor(deal(order, sizes.tolist(), k), dtype=torch.long)[torch.from_numpy(of_sequence)]

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
            self.document,
        )

    def shard(self, rank: int, world: int) -> TokenBatches:
        """Every ``world``-th sequence starting at ``rank``, keeping global indices (and so folds)."""
        sel = slice(rank, None, world)
        return TokenBatches(
            self.input_ids[sel],
            self.attention_mask[sel],
            self.batch_size,
            self.seq_index[sel],
            self.n_sequences_total,
            self.document,
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


def spread(available: int, wanted: int) -> torch.Tensor:
    """``wanted`` indices evenly spaced over ``range(available)``, the first 0 and the last ``available - 1``."""
    if not 0 < wanted <= available:
        raise LinrecError(f"cannot spread {wanted} windows over {available}")
    if wanted == 1:
        return torch.zeros(1, dtype=torch.long)
    return torch.arange(wanted) * (available - 1) // (wanted - 1)


def _full_windows(ids: torch.Tensor, body: int) -> torch.Tensor:
    """The consecutive full windows of ``body`` tokens in ``ids`` (a shorter tail is dropped)."""
    return ids[: ids.numel() // body * body].reshape(-1, body)


def _unit_windows(
    tokenizer: PreTrainedTokenizerBase, units: Iterable[str], body: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(full windows of every unit, each tokenised on its own so that no window crosses two; the unit of each
    window; the number of tokens)."""
    windows, unit_of, tokens = [torch.empty(0, body, dtype=torch.long)], [torch.empty(0, dtype=torch.long)], 0
    for index, unit in enumerate(units):
        ids = tokenize(tokenizer, unit)
        tokens += ids.numel()
        windows.append(_full_windows(ids, body))
        unit_of.append(torch.full((len(windows[-1]),), index, dtype=torch.long))
    return torch.cat(windows), torch.cat(unit_of), tokens


def _windows(
    tokenizer: PreTrainedTokenizerBase,
    text: str | TextFile,
    body: int,
    wanted: int | None,
    layout: str,
    documents: Sequence[int] | None,
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """(the full windows to choose from, the document of each or None, the tokens they were cut from).

    Documents are tokenised one by one; otherwise the text is one stream, read no further than the first
    ``wanted`` windows need for ``"head"``, and whole for ``"spread"``, except a file larger than
    :data:`~linrec.data.textfile.WHOLE_FILE_BYTES`: from it up to :data:`STRETCHES` evenly spaced stretches
    are read (:func:`~linrec.data.textfile.file_stretches`), each at first long enough for about four times
    its share of the windows at 4 bytes a token, four times longer while they hold fewer than ``wanted``,
    and the whole file once they would span it.
    """
    if documents is not None:
        if not isinstance(text, str):
            raise LinrecError("documents are character offsets into a text given as a string, not a TextFile")
        starts = document_starts(documents, len(text))
        ends = [*starts[1:], len(text)]
        return _unit_windows(tokenizer, (text[a:b] for a, b in zip(starts, ends)), body)
    if layout == "spread" and isinstance(text, TextFile) and wanted is not None and text.size > WHOLE_FILE_BYTES:
        count = max(2, min(STRETCHES, wanted))
        length = 16 * body * math.ceil(wanted / count)
        while count * length < text.size:
            windows, _, tokens = _unit_windows(tokenizer, file_stretches(text, count, length), body)
            if len(windows) >= wanted:
                return windows, None, tokens
            length *= 4
    ids = tokenize(tokenizer, text, max_tokens=wanted * body if layout == "head" and wanted is not None else None)
    return _full_windows(ids, body), None, ids.numel()


def make_batches(
    tokenizer: PreTrainedTokenizerBase,
    text: str | TextFile,
    seq_len: int = 128,
    max_rows: int | None = None,
    batch_size: int = 8,
    max_context: int | None = None,
    *,
    layout: str = "spread",
    documents: Sequence[int] | None = None,
    at_most: bool = False,
) -> TokenBatches:
    """Cut ``text`` into non-overlapping windows of ``seq_len`` tokens and take as many as ``max_rows`` needs.

    A tokenizer that starts every text with a BOS token (:func:`bos_id`) gets it at position 0 of
    every window, followed by ``seq_len - 1`` text tokens, as the model saw its training texts;
    otherwise the windows are text tokens only (:func:`bos_policy` says which).
    ``max_rows`` is the number of token rows per block wanted (rounded up to whole sequences;
    None takes all full sequences). ``max_context``, when given (the model's), bounds seq_len.
    ``layout`` (:data:`LAYOUTS`): ``"spread"`` takes windows evenly spaced over all full windows of the text,
    ``"head"`` the first ones (reading a :class:`~linrec.data.textfile.TextFile` only as far as they need).
    ``documents``: the character offset where each document of ``text`` starts (a corpus's
    ``fit_documents``): windows then stay inside one document and carry it, so folds keep documents whole
    (:meth:`TokenBatches.folds`); None: the text is one stream and every window a unit of its own.
    ``at_most``: a text too short for ``max_rows`` gives all its full windows instead of an error (compare
    ``n_rows`` with what was asked).
    """
    if layout not in LAYOUTS:
        raise LinrecError(f"unknown layout '{layout}'; choose one of {', '.join(LAYOUTS)}")
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
    windows, document, tokens = _windows(tokenizer, text, body, wanted, layout, documents)
    if tokens == 0 and not (text.blank() if isinstance(text, TextFile) else not text.strip()):
        raise LinrecError(
            "the tokenizer turned the text's characters into no tokens: it is empty (a model saved "
            "without its tokenizer?). Save one with tokenizer.save_pretrained(directory)."
        )
    available = len(windows)
    if wanted is None or (at_most and 0 < available < wanted):
        wanted = available
    if wanted == 0 or available < wanted:
        within = "" if document is None else f" within its {len(documents or ())} documents (no window crosses two)"
        raise LinrecError(
            f"the text has {tokens} tokens, {available} full sequences of {seq_len}{within}; "
            f"{max(wanted, 1)} sequences ({max(wanted, 1) * body} text tokens) are needed"
            + (f" for max_rows={max_rows}" if max_rows is not None else "")
            + ". Give a longer text, or lower max_rows or seq_len."
        )
    chosen = torch.arange(wanted) if layout == "head" else spread(available, wanted)
    input_ids = windows[chosen]
    if bos is not None:
        input_ids = torch.cat([torch.full((wanted, 1), bos, dtype=input_ids.dtype), input_ids], dim=1)
    return TokenBatches(
        input_ids, torch.ones_like(input_ids), batch_size, document=None if document is None else document[chosen]
    )
