"""What ``linrec measure`` measures on: the text (a file, a corpus, or a profile model's own) and its token
batches, checked against each model's blocks, context and width before its weights load.

Its windows are spread evenly over the whole text (``--layout spread``; ``--layout head`` takes the first
ones), and the folds of a corpus with documents (the offline and packaged corpora: modules, books, blocks of
records) are whole documents, so every held-out score is on documents the fit never saw; a ``--text-file``
(and a hub corpus) says nothing of where its documents end, so each of its windows is a unit of its own
(:mod:`linrec.data.tokens`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from linrec.commands.args import warn_if_short
from linrec.data.textfile import TextFile
from linrec.errors import LinrecError
from linrec.experiment.budgets import rows_to_ask

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

    from linrec.data.tokens import TokenBatches
    from linrec.experiment.profiles import Profile


def measured_text(
    args: argparse.Namespace, profile: Profile | None, model: str | None = None
) -> tuple[str | TextFile, str, str, tuple[int, ...] | None]:
    """(text to measure on, its name, its sha256, where its documents start) from --text-file (streamed: read
    only as far as the rows need, :mod:`linrec.data.textfile`; no documents), --corpus, or the main corpus of the
    profile's ``model`` (its budget's; the profile's first without one) with its fit text's documents."""
    if args.text_file is not None:
        text = TextFile(args.text_file)
        try:
            digest = text.sha256
        except LinrecError as err:
            raise LinrecError(f"cannot read --text-file {args.text_file}: {err.__cause__}") from err
        if text.blank():
            raise LinrecError(f"the text {args.text_file} is empty; give a text to measure on")
        return text, str(args.text_file), digest, None
    from linrec.data.corpora import load_corpus

    name = args.corpus or (None if profile is None else profile.budget(model).corpus if model else profile.corpora[0])
    if name is None:
        raise LinrecError("give a text to measure on: --text-file FILE, --corpus NAME or --profile NAME")
    corpus = load_corpus(name)
    if not corpus.fit_text.strip():
        raise LinrecError(f"the text {corpus.name} is empty; give a text to measure on")
    return corpus.fit_text, corpus.name, corpus.sha256, corpus.fit_documents or None


def seq_len(args: argparse.Namespace, profile: Profile | None) -> int:
    """Tokens per sequence: ``--seq-len``, else the profile's, else 128."""
    return args.seq_len or (profile.seq_len if profile else 128)


def check_before_loading(args: argparse.Namespace, profile: Profile | None) -> None:
    """``--blocks`` and the sequence length against each zoo model's spec (its depth and context), before any of
    them is trained or loaded; other models are checked from their config, before their weights load."""
    from linrec.data.tokens import check_context
    from linrec.models.arch import check_blocks

    if args.model or profile is None or profile.zoo is None:
        return
    for name in profile.models:
        if name in profile.packaged:
            continue  # checked from its config, before its weights load
        entry = profile.zoo.entry(name)
        if args.blocks is not None:
            check_blocks(args.blocks, entry.depth)
        check_context(seq_len(args, profile), entry.seq_len)


def token_batches(
    args: argparse.Namespace,
    profile: Profile | None,
    text: tuple[str | TextFile, tuple[int, ...] | None],
    folds: int,
    config: PretrainedConfig,
    tokenizer: PreTrainedTokenizerBase,
    model: str | None = None,
) -> TokenBatches:
    """The batches to measure on, from the model's config and tokenizer alone (so before its weights load): the
    blocks asked for exist, the sequence length fits the context, the tokenizer's ids the vocabulary, and the text
    (with where its documents start, or None) fills every training split with more rows than the model is wide.
    Rows: --max-rows, else those of the profile's ``model``'s budget (the profile's own without one), else 64 per
    input dimension."""
    from linrec.core.capture import check_training_rows
    from linrec.data.tokens import make_batches
    from linrec.models.arch import check_blocks
    from linrec.models.loading import max_context

    if args.blocks is not None:
        check_blocks(args.blocks, config.num_hidden_layers)
    rows = args.max_rows or (None if profile is None else profile.budget(model).rows_per_block if model else
                             profile.rows_per_block)  # fmt: skip
    wanted, at_most = rows_to_ask(config.hidden_size, rows)
    batches = make_batches(
        tokenizer,
        text[0],
        seq_len=seq_len(args, profile),
        max_rows=wanted,
        batch_size=args.batch_size or (profile.batch_size if profile else 8),
        max_context=max_context(config),
        layout=args.layout,
        documents=text[1],
        at_most=at_most,
    )
    warn_if_short(batches.n_rows, wanted, config.hidden_size)
    batches.check_vocabulary(config.vocab_size)
    check_training_rows(batches, config.hidden_size, folds, args.seed)
    return batches
