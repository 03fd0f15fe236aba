"""Profiles validate; the paper profile's loaders run end to end on injected tiny models and local text."""

import dataclasses
import time

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM

import linrec
from linrec import LinrecError
from linrec.data.bpe import train_bpe
from linrec.experiment.budgets import Budget, ProbeSettings
from linrec.experiment.profiles import PROFILES, PYTHIA_DYNAMICS, get_profile
from linrec.experiment.pythia import PYTHIA_REVISIONS
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.hub import OFFLINE_HINT
from linrec.models.zoo import ZOOS

LOCAL_TEXT = "\n".join(
    f"The {i}th line of a local text about rivers, towns and {i % 7} bridges, written for tests." for i in range(600)
)


def test_every_profile_validates_and_the_paper_profile_follows_the_notes():
    for name in PROFILES:
        assert get_profile(name) is PROFILES[name]
    paper = PROFILES["paper"]
    assert paper.models == ("openai-community/gpt2", "EleutherAI/pythia-160m", "JackFram/llama-160m")
    assert paper.corpora[0] == "wikitext-2" == paper.eval_corpus
    assert (paper.seq_len, paper.folds, paper.probe.rank) == (128, 5, 16)
    assert 15_000 <= paper.rows_per_block <= 30_000
    offline = PROFILES["offline"]
    assert offline.models == (*ZOOS["offline"].names(), "smollm2-135m", "gemma3-270m")
    assert offline.packaged == ("smollm2-135m", "gemma3-270m") and offline.summary()["zoo"] == "offline"


def test_a_real_model_has_its_own_budget_and_the_others_the_profile_sizes():
    offline = PROFILES["offline"]
    smol, gemma, zoo = (offline.budget(m) for m in ("smollm2-135m", "gemma3-270m", "zoo-gpt2"))
    assert (smol.rows_per_block, gemma.rows_per_block) == (64 * 576, 64 * 640)  # 64 rows per input dimension
    assert smol.corpus == gemma.corpus == "kjv-bible" == offline.eval_corpus_of("gemma3-270m")
    assert smol.eval_tokens == 8192 and (smol.every, gemma.every) == (10, 6)
    assert (zoo.rows_per_block, zoo.corpus, zoo.eval_tokens, zoo.every) == (8192, "stdlib-prose", 32_768, 1)
    assert offline.eval_corpus_of("zoo-gpt2") == offline.eval_corpus
    changed = get_profile("offline", budgets={"gemma3-270m": {"rows_per_block": 2048}})  # a notebook's dict
    assert changed.budget("gemma3-270m").rows_per_block == 2048 and changed.budget("gemma3-270m").every == 6
    assert changed.budget("smollm2-135m") == smol  # the models it does not name keep their budgets
    with pytest.raises(LinrecError, match="too few for gemma3-270m's width 640"):
        get_profile("offline", budgets={"gemma3-270m": {"rows_per_block": 100}})
    with pytest.raises(LinrecError, match="needs a mapping of budget fields"):
        get_profile("offline", budgets={"gemma3-270m": {"rows": 100}})
    assert get_profile("offline", models=["zoo-gpt2"]).packaged == ()  # budgets of models left out are ignored
    with pytest.raises(LinrecError, match="not one of its corpora"):
        get_profile("offline", budgets={"gemma3-270m": {"corpus": "wikitext-2"}})
    with pytest.raises(LinrecError, match="has no model 'zoo-gpt3'"):
        offline.budget("zoo-gpt3")


def test_pythia_revisions_are_the_public_schedule():
    assert len(PYTHIA_REVISIONS) == 154
    assert PYTHIA_REVISIONS[:3] == ("step0", "step1", "step2") and PYTHIA_REVISIONS[-1] == "step143000"
    assert "step512" in PYTHIA_REVISIONS and "step1024" not in PYTHIA_REVISIONS and "step1000" in PYTHIA_REVISIONS
    assert set(PYTHIA_DYNAMICS) <= set(PYTHIA_REVISIONS)
    assert PROFILES["paper"].checkpoints("EleutherAI/pythia-160m") == PYTHIA_DYNAMICS
    assert PROFILES["paper"].checkpoints("openai-community/gpt2") == ("final",)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"folds": 1}, "folds must be an integer of at least 2"),
        ({"seq_len": 0}, "seq_len must be a positive integer"),
        ({"corpora": ["stdlib-prose", "wikipedia"]}, "choose from stdlib-prose, stdlib-code"),
        ({"models": ["zoo-gpt3"]}, "zoo-gpt2, zoo-neox, zoo-llama"),
        ({"device": "tpu"}, "cpu, cuda, cuda:N, mps"),
        ({"dtype": "float8"}, "float32"),
        ({"seeds": []}, "seeds"),
        ({"rows_per_block": 100}, "too few for zoo-gpt2's width 128 .*whole 128-token sequences; use at least"),
        ({"seq_len": 4096}, "context of 128"),
        ({"probe": {"rank": 0}}, "probe.rank"),
        ({"probe": {"rnak": 4}}, "valid: rank, sample_rows, steps, lr"),
        ({"colour": "red"}, "valid fields: name, description, models"),
    ],
)
def test_bad_values_are_rejected_with_the_valid_ones(overrides, message):
    with pytest.raises(LinrecError, match=message):
        get_profile("offline", **overrides)


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(LinrecError, match="paper, offline, smoke"):
        get_profile("colab")


def test_overrides_arrive_as_notebook_parameters():
    p = get_profile(
        "paper",
        models=["openai-community/gpt2"],
        seeds=[3],
        probe={"rank": 8},
        revisions={"openai-community/gpt2": "607a30d"},
    )
    assert p.models == ("openai-community/gpt2",) and p.seeds == (3,)
    paper = get_profile("paper").probe  # a probe dict changes only the settings it names
    assert p.probe == ProbeSettings(8, paper.sample_rows, paper.steps, paper.lr) != paper
    assert p.revision("openai-community/gpt2") == "607a30d"
    with pytest.raises(LinrecError, match="not one of its models"):
        get_profile("paper", revisions={"gpt2-xl": "main"})


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


def test_sampled_blocks_are_fixed_by_depth():
    assert Budget(every=3).sampled(30) == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 29]
    assert Budget().sampled(4) == [0, 1, 2, 3] and Budget(every=5).sampled(1) == [0]
    with pytest.raises(LinrecError, match="positive"):
        Budget(every=0).sampled(30)


@pytest.mark.slow
def test_a_text_too_short_for_the_rows_fails_before_any_weights_load(tmp_path, monkeypatch, no_weights):
    from linrec.experiment.measurement import measurement

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    smoke = ZOOS["smoke"]
    entry = dataclasses.replace(smoke.entries[2], steps=4, warmup_steps=1, checkpoints=(0, 4))
    tiny = dataclasses.replace(smoke, name="tiny", entries=(entry,))
    profile = get_profile("smoke", zoo=tiny, models=[entry.name], rows_per_block=10**8)
    with pytest.raises(LinrecError, match="sequences .* are needed for max_rows=100000000"):
        measurement(profile, entry.name, keep="table", progress=False)
