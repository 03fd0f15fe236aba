"""linrec.experiment.resolve: A profile's models, corpora and token batches: what :mod:`linrec.experiment.profiles`
names, loaded."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM

import linrec
from linrec import LinrecError
from linrec.data.bpe import train_bpe
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.hub import OFFLINE_HINT
from linrec.models.zoo import ZOOS

LOCAL_TEXT = "\n".join(
    f"The {i}th line of a local text about rivers, towns and {i % 7} bridges, written for tests." for i in range(600)
)


def tiny_same_class(name: str, tokenizer) -> torch.nn.Module:
    """A small model of the class the hub id would load."""
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    if "gpt2" in name:
        return GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=128))
    if "pythia" in name:
        return GPTNeoXForCausalLM(GPTNeoXConfig(**common))
    return LlamaForCausalLM(LlamaConfig(**common))


def test_paper_loaders_run_end_to_end_through_injected_tiny_models(tmp_path):
    tokenizer = train_bpe([LOCAL_TEXT], 300, tmp_path / "tok")
    calls = []

    def model_loader(name, revision=None, dtype=None, device=None):
        calls.append((name, revision))
        return tiny_same_class(name, tokenizer).eval(), tokenizer

    def dataset_loader(path, config, split, streaming=True):
        lines = LOCAL_TEXT.splitlines(keepends=True)
        return [{"text": line} for line in (lines[:500] if split == "train" else lines[500:])]

    paper = get_profile("paper", rows_per_block=2048, seq_len=32, batch_size=8)
    corpus = profile_corpus(paper, loader=dataset_loader)
    assert corpus.name == "wikitext-2" and corpus.fit_text.startswith("The 0th line")
    for name in paper.models:
        model, tok = load_profile_model(paper, name, loader=model_loader)
        batches = profile_batches(paper, tok, corpus, model=model)
        assert batches.n_rows == 2048 and batches.seq_len == 32
        table = linrec.measure(model, batches, folds=paper.folds, progress=False)
        assert list(table["block"]) == [0, 1] and table["r2_lin"].between(-1, 1).all()
    load_profile_model(paper, "EleutherAI/pythia-160m", "step1000", loader=model_loader)
    load_profile_model(paper, "EleutherAI/pythia-160m", "init", loader=model_loader)
    pinned = get_profile(paper, revisions={"JackFram/llama-160m": "abc123"})
    load_profile_model(pinned, "JackFram/llama-160m", loader=model_loader)
    assert calls == [
        ("openai-community/gpt2", None),
        ("EleutherAI/pythia-160m", None),
        ("JackFram/llama-160m", None),
        ("EleutherAI/pythia-160m", "step1000"),
        ("EleutherAI/pythia-160m", "step0"),
        ("JackFram/llama-160m", "abc123"),
    ]
    with pytest.raises(LinrecError, match="no checkpoint 'step999'"):
        load_profile_model(paper, "EleutherAI/pythia-160m", "step999", loader=model_loader)
    with pytest.raises(LinrecError, match="choose final$"):
        load_profile_model(paper, "openai-community/gpt2", "step1000", loader=model_loader)
    with pytest.raises(LinrecError, match="openai-community/gpt2, EleutherAI/pythia-160m"):
        load_profile_model(paper, "gpt2-xl", loader=model_loader)
    with pytest.raises(LinrecError, match="no corpus 'stdlib-code'"):
        profile_corpus(paper, "stdlib-code")


def test_paper_model_fails_fast_without_the_hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty local cache
    start = time.monotonic()
    with pytest.raises(LinrecError) as err:
        load_profile_model(get_profile("paper"), "openai-community/gpt2")
    assert OFFLINE_HINT in str(err.value) and time.monotonic() - start < 10


@pytest.mark.slow
def test_zoo_profile_trains_a_missing_model_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    smoke = ZOOS["smoke"]
    entry = dataclasses.replace(smoke.entries[2], steps=4, warmup_steps=1, checkpoints=(0, 2, 4))
    tiny = dataclasses.replace(smoke, name="tiny", entries=(entry,))
    profile = get_profile("smoke", zoo=tiny, models=[entry.name])
    model, tok = load_profile_model(profile, entry.name, progress=False)
    assert model.config.model_type == "llama" and not model.training
    init, _ = load_profile_model(profile, entry.name, "init", progress=False)
    assert not torch.equal(init.lm_head.weight, model.lm_head.weight)
    corpus = profile_corpus(profile, "stdlib-code")
    batches = profile_batches(profile, tok, corpus, split="eval", model=model)
    assert batches.n_rows == profile.eval_tokens and batches.seq_len == profile.seq_len
    with pytest.raises(LinrecError, match="step0, step2, step4"):
        load_profile_model(profile, entry.name, "step3", progress=False)
