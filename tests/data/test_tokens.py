"""linrec.data.tokens: Token batches from text: fixed-length windows, each with a global index and a document that
decide its fold."""

from __future__ import annotations

import pytest
import torch

from conftest import local_text, tiny_model
from linrec.core.capture import capture_moments, check_training_rows
from linrec.data.corpus import Corpus
from linrec.data.textfile import TextFile
from linrec.data.tokens import TokenBatches, make_batches, spread, tokenize
from linrec.errors import LinrecError
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import profile_batches


def documents_text(n_docs: int = 12, seed: int = 0) -> tuple[str, list[int]]:
    """A text of ``n_docs`` documents of unequal lengths (200 to 1,300 words), and where each starts."""
    docs = [local_text(200 + 100 * ((7 * i) % 12), seed=seed + i) for i in range(n_docs)]
    starts = [sum(map(len, docs[:i])) for i in range(n_docs)]
    return "".join(docs), starts


def old_folds(n: int, k: int, seed: int) -> torch.Tensor:
    """The fold assignment before documents: a seeded permutation dealt round-robin."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    fold = torch.empty(n, dtype=torch.long)
    fold[perm] = torch.arange(n) % k
    return fold


@pytest.mark.parametrize("max_rows", [-100, 0])
def test_make_batches_refuses_non_positive_max_rows(tokenizer, text, max_rows):
    with pytest.raises(LinrecError, match=f"max_rows \\(token rows per block\\) must be positive.*got {max_rows}"):
        make_batches(tokenizer, text, seq_len=16, max_rows=max_rows)


def test_an_empty_tokenizer_is_named_not_a_short_text(tmp_path, text):
    from transformers import AutoTokenizer

    tiny_model("gpt2").save_pretrained(tmp_path)  # no tokenizer files: transformers builds an empty one
    empty = AutoTokenizer.from_pretrained(tmp_path)
    with pytest.raises(LinrecError, match="turned .* characters into no tokens: it is empty"):
        make_batches(empty, text, seq_len=16, max_rows=256)


def test_text_too_short_and_context_too_long(tokenizer):
    with pytest.raises(LinrecError, match="sequences .* are needed"):
        make_batches(tokenizer, "a short text", seq_len=16, max_rows=1000)
    with pytest.raises(LinrecError, match="exceeds the model's context of 64"):
        make_batches(tokenizer, "a short text", seq_len=128, max_context=64)


def test_spread_indices_are_evenly_spaced_from_first_to_last():
    for available, wanted in [(10, 10), (1000, 7), (7, 2), (5, 1), (1001, 1000)]:
        idx = spread(available, wanted).tolist()
        assert len(idx) == wanted and len(set(idx)) == wanted and idx[0] == 0
        assert idx[-1] == (available - 1 if wanted > 1 else 0)
        steps = {b - a for a, b in zip(idx, idx[1:])}
        assert max(steps, default=0) - min(steps, default=0) <= 1
    with pytest.raises(LinrecError, match="cannot spread 5 windows over 4"):
        spread(4, 5)


def test_windows_are_spread_over_the_whole_text(tokenizer, text):
    seq_len, wanted = 16, 20
    ids = tokenize(tokenizer, text)
    all_windows = ids[: ids.numel() // seq_len * seq_len].reshape(-1, seq_len)
    batches = make_batches(tokenizer, text, seq_len=seq_len, max_rows=wanted * seq_len)
    assert batches.input_ids.shape == (wanted, seq_len) and batches.document is None
    assert torch.equal(batches.input_ids[0], all_windows[0])  # the text's start
    assert torch.equal(batches.input_ids[-1], all_windows[-1])  # and its last full window
    assert torch.equal(batches.input_ids, all_windows[spread(len(all_windows), wanted)])
    again = make_batches(tokenizer, text, seq_len=seq_len, max_rows=wanted * seq_len)
    assert torch.equal(again.input_ids, batches.input_ids)  # deterministic, no seed
    head = make_batches(tokenizer, text, seq_len=seq_len, max_rows=wanted * seq_len, layout="head")
    assert torch.equal(head.input_ids, all_windows[:wanted])
    with pytest.raises(LinrecError, match="unknown layout 'tail'; choose one of spread, head"):
        make_batches(tokenizer, text, seq_len=seq_len, max_rows=64, layout="tail")


def test_windows_never_cross_documents_and_carry_theirs(tokenizer):
    text, starts = documents_text()
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=60 * 32, documents=starts)
    assert batches.input_ids.shape == (60, 32) and batches.document is not None
    ends = [*starts[1:], len(text)]
    for window, document in zip(batches.input_ids, batches.document.tolist()):
        assert tokenizer.decode(window) in text[starts[document] : ends[document]]
    assert batches.document[0] == 0 and batches.document[-1] == len(starts) - 1  # spread over all documents
    assert batches.document.tolist() == sorted(batches.document.tolist())
    with pytest.raises(LinrecError, match="documents are character offsets into a text given as a string"):
        make_batches(tokenizer, TextFile("x.txt"), seq_len=32, max_rows=64, documents=starts)
    with pytest.raises(LinrecError, match="document starts must begin at 0, increase strictly"):
        make_batches(tokenizer, text, seq_len=32, max_rows=64, documents=[0, 50, 50])
    with pytest.raises(LinrecError, match=r"full sequences of 32 within its 12 documents \(no window crosses two\)"):
        make_batches(tokenizer, text, seq_len=32, max_rows=10**6, documents=starts)


@pytest.mark.parametrize("k, seed", [(2, 0), (5, 0), (5, 7), (10, 3)])
def test_folds_keep_documents_whole_and_balanced(tokenizer, k, seed):
    text, starts = documents_text(30, seed=seed)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=300 * 16, documents=starts, batch_size=7)
    assert batches.document is not None
    fold = batches.folds(k, seed)
    sizes = torch.bincount(batches.document)
    for document in batches.document.unique():
        assert fold[batches.document == document].unique().numel() == 1  # never split between folds
    per_fold = torch.bincount(fold, minlength=k)
    assert (per_fold > 0).all() and per_fold.max() - per_fold.min() <= sizes.max()  # the stated tolerance
    assert per_fold.max() - per_fold.min() < per_fold.sum() / k  # and well within a fold's share here
    # a window's fold depends neither on sharding nor on the order the windows are served in
    for world in (2, 3):
        for rank in range(world):
            shard = batches.shard(rank, world).grouped(fold)
            assert torch.equal(shard.folds(k, seed), fold)
    assert not torch.equal(fold, batches.folds(k, seed + 1))


def test_without_documents_folds_are_the_old_round_robin_exactly():
    for n, k, seed in [(5, 5, 0), (64, 5, 0), (1000, 5, 1), (17, 3, 2**64 - 1), (128, 10, 42)]:
        batches = TokenBatches(torch.zeros(n, 4, dtype=torch.long), torch.ones(n, 4, dtype=torch.long))
        assert torch.equal(batches.folds(k, seed), old_folds(n, k, seed))
    ids = torch.zeros(64, 4, dtype=torch.long)
    own = TokenBatches(ids, torch.ones_like(ids), document=torch.arange(64) * 3)  # each window its own document
    assert torch.equal(own.folds(5, 0), old_folds(64, 5, 0))


def test_fewer_documents_than_folds_is_an_error_that_says_so(tokenizer):
    text, starts = documents_text(3)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=40 * 16, documents=starts)
    with pytest.raises(LinrecError, match="40 sequences come from 3 documents, which cannot fill 5 folds"):
        batches.folds(5, 0)
    with pytest.raises(LinrecError, match="cannot fill 5 folds"):
        capture_moments(tiny_model("gpt2"), batches, folds=5, progress=False)
    with pytest.raises(LinrecError, match=r"shape \(3,\)"):
        TokenBatches(batches.input_ids, batches.attention_mask, document=torch.zeros(3, dtype=torch.long))


def test_too_few_rows_with_documents_names_whole_documents(tokenizer):
    text, starts = documents_text(6)
    batches = make_batches(tokenizer, text, seq_len=8, max_rows=6 * 8, documents=starts)
    with pytest.raises(LinrecError, match="folds are whole documents, each dealt whole to one fold.*max_rows=64"):
        check_training_rows(batches, width=32, folds=3, seed=0)
    check_training_rows(make_batches(tokenizer, text, seq_len=8, max_rows=60 * 8, documents=starts), 32, 3, 0)


@pytest.mark.parametrize("profile_name", ["offline", "smoke"])
def test_profile_batches_spread_over_the_text_and_keep_documents_whole(tokenizer, profile_name):
    """The book's batches: fit windows spread over the whole fit text, inside documents, folds dealing documents;
    evaluation windows spread over the eval text; the sizes of the model's budget."""
    profile = get_profile(profile_name)
    text, starts = documents_text(40)
    corpus = Corpus("local", "prose", text, local_text(30_000, seed=99), "test", tuple(starts))
    for split, rows in (("fit", profile.rows_per_block), ("eval", profile.eval_tokens)):
        batches = profile_batches(profile, tokenizer, corpus, split=split)
        documents = tuple(starts) if split == "fit" else None
        wanted = make_batches(tokenizer, corpus.text(split), seq_len=profile.seq_len, max_rows=rows,
                              batch_size=profile.batch_size, documents=documents)  # fmt: skip
        assert torch.equal(batches.input_ids, wanted.input_ids) and batches.n_rows >= rows
        assert (batches.document is not None) == (split == "fit")
    fit = profile_batches(profile, tokenizer, corpus)
    assert fit.document is not None and len(set(fit.document.tolist())) > 1  # windows from many documents
    folds = fit.folds(profile.folds, 0)
    for doc in set(fit.document.tolist()):
        assert len(set(folds[fit.document == doc].tolist())) == 1  # a document is held out whole
    if profile.packaged:
        small = get_profile(profile_name, budgets={profile.packaged[0]: {"rows_per_block": 1024}})
        assert profile_batches(small, tokenizer, corpus, name=profile.packaged[0]).n_rows == 1024
