"""Perplexity as the layer-pruning papers compute it, so that a figure compares with their tables.

SLEB, BlockPruner and the quantisation papers before them (GPTQ's ``eval_utils``) score WikiText-2's raw test
split joined with blank lines, tokenised whole with the tokenizer's special tokens (Llama's BOS once, at the
start), cut into non-overlapping windows of 2,048 tokens (the tail shorter than a window dropped), each window
scored on its own: perplexity is exp of the mean next-token NLL over every scored token. Dense figures published
that way: Llama-2-7B 5.47, Llama-3-8B 6.14.

linrec's own perplexity differs on purpose: the held-out documents of the fit text, windows of the capture's
length, the BOS at the start of every window (:func:`linrec.data.tokens.make_batches`). Both are kept; neither is
the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from linrec.data.hub_corpora import Loader, pruning_wikitext2
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.perplexity import window_nll
from linrec.models.loading import max_context

SEQ_LEN = 2048
"""The papers' window (SLEB's ``seqlen``); a model with a shorter context is scored at its context."""


@dataclass(frozen=True)
class PruningPerplexity:
    """A perplexity in the pruning papers' convention: the number, and what it was computed on."""

    ppl: float
    seq_len: int
    windows: int
    tokens: int
    source: str

    def record(self) -> dict:
        """The figure and its provenance, JSON-able."""
        return {
            "ppl": self.ppl,
            "convention": "pruning papers (GPTQ/SLEB): text joined with blank lines, tokenised whole, "
            "non-overlapping windows",
            "seq_len": self.seq_len,
            "windows": self.windows,
            "tokens": self.tokens,
            "source": self.source,
        }


def pruning_windows(
    tokenizer: PreTrainedTokenizerBase, text: str, seq_len: int = SEQ_LEN, max_windows: int | None = None
) -> TokenBatches:
    """The text's non-overlapping ``seq_len``-token windows, the text tokenised whole with the tokenizer's special
    tokens (the papers' ``tokenizer(text)``), the first ``max_windows`` of them (all when None), one a batch."""
    if seq_len < 2:
        raise LinrecError(f"a perplexity window needs at least 2 tokens; got seq_len {seq_len}")
    ids = torch.tensor(tokenizer(text, verbose=False)["input_ids"], dtype=torch.long)
    count = ids.numel() // seq_len if max_windows is None else min(max_windows, ids.numel() // seq_len)
    if count < 1:
        raise LinrecError(
            f"the text has {ids.numel()} tokens, fewer than one window of {seq_len}; give a longer text or a "
            "shorter --ppl-seq-len"
        )
    windows = ids[: count * seq_len].view(count, seq_len)
    return TokenBatches(windows, torch.ones_like(windows), batch_size=1)


def window_length(model: nn.Module, seq_len: int | None) -> int:
    """The window asked for, else :data:`SEQ_LEN` or the model's context where that is shorter."""
    context = max_context(model)
    if seq_len is None:
        return SEQ_LEN if context is None else min(SEQ_LEN, context)
    if context is not None and seq_len > context:
        raise LinrecError(f"--ppl-seq-len {seq_len} exceeds the model's context of {context} tokens")
    return seq_len


def pruning_perplexity(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    text: str | None = None,
    *,
    seq_len: int | None = None,
    max_windows: int | None = None,
    source: str | None = None,
    loader: Loader | None = None,
    progress: bool = False,
) -> PruningPerplexity:
    """The model's perplexity in the pruning papers' convention on ``text`` (default WikiText-2's test split,
    :func:`~linrec.data.hub_corpora.pruning_wikitext2`, from the hub or its cached slice)."""
    length = window_length(model, seq_len)
    if text is None:
        text, source = pruning_wikitext2(loader)
    batches = pruning_windows(tokenizer, text, length, max_windows)
    scored = window_nll(model, batches, progress)
    return PruningPerplexity(scored.ppl, length, len(batches.input_ids), int(batches.n_rows), source or "a given text")
