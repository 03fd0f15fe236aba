"""linrec.experiment.profiles: Named experiment profiles: which models, corpora and sizes an experiment runs with."""

from __future__ import annotations

import dataclasses

import pytest

from linrec import LinrecError
from linrec.experiment.budgets import Budget
from linrec.experiment.profiles import (
    PROFILES,
    PYTHIA_LARGE,
    PYTHIA_SUITE,
    get_profile,
)
from linrec.models.shapes import SHAPES
from linrec.models.zoo import ZOOS


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


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(LinrecError, match="paper, offline, smoke"):
        get_profile("colab")


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


def test_the_scale_profile_runs_its_chapters_on_four_real_models_at_64_rows_per_dimension():
    profile = PROFILES["scale"]
    assert profile.chapters == ("02_heterogeneity", "10_scale") and profile.zoo is None
    assert profile.models[-1] == "qwen2.5-coder-1.5b" and profile.budget("qwen2.5-coder-1.5b").rows_per_block == 98_304
    assert all(profile.budget(m).rows_per_block == 64 * profile.width(m) for m in profile.models)
    assert profile.budget("qwen2.5-coder-1.5b").sampled(28) == [0, 27]
    assert profile.swap_blocks(28) == [0, 7, 14, 20, 27] and PROFILES["offline"].swap_blocks(28) is None
    assert profile.series_profile() is profile


def test_chapter_fields_stay_out_of_the_cache_key():
    offline = PROFILES["offline"]
    changed = get_profile("offline", chapters=["02_heterogeneity"], swap_depths=[0.5], series=["zoo-gpt2"])
    assert repr(changed) == repr(offline) and changed.swap_blocks(9) == [4]
    with pytest.raises(LinrecError, match="relative depths"):
        get_profile("offline", swap_depths=[1.5])


def test_the_paper_series_is_the_pythia_suite_and_the_shapes_profile_knows_their_shapes():
    paper = PROFILES["paper"]
    assert paper.series_profile(gpu=False).models == PYTHIA_SUITE
    assert paper.series_profile(gpu=True).models == PYTHIA_SUITE + PYTHIA_LARGE
    assert paper.series_profile(gpu=False).budget("EleutherAI/pythia-1.4b").rows_per_block == 64 * 2048
    for model in PYTHIA_SUITE + PYTHIA_LARGE:  # no probes in the chapter: a sample of the first and last block only
        budget = paper.series_profile(gpu=True).budget(model)
        assert budget.sample_rows == 1024 and budget.sampled(24) == [0, 23]
    assert paper.budget("EleutherAI/pythia-160m").sampled(12) == list(range(12))  # the paper's chapters: every block
    shapes = PROFILES["shapes"].series_profile(gpu=True)
    assert shapes.shaped and all(m in SHAPES for m in shapes.models)


def test_on_a_gpu_the_paper_series_spreads_its_largest_models_and_keys_them_apart():
    from linrec.data.corpora import load_corpus
    from linrec.experiment.measurement import entry_path

    big = PROFILES["paper"].series_profile(gpu=True)
    assert (big.device_map, big.device) == ("auto", None) and PROFILES["paper"].series_profile(
        gpu=False
    ).device_map is None
    text = load_corpus("stdlib-prose")
    small = PROFILES["paper"].series_profile(gpu=False)
    assert entry_path(big, "EleutherAI/pythia-70m", "final", text) != entry_path(
        small, "EleutherAI/pythia-70m", "final", text
    )
    with pytest.raises(LinrecError, match="device or device_map"):
        get_profile("paper", device="cpu", device_map="auto")


def test_the_offline_profile_leaves_gemmas_perplexity_passes_out_by_default_and_says_why():
    offline = PROFILES["offline"]
    models = offline.scored()
    assert "gemma3-270m" not in models and {"smollm2-135m", "zoo-gpt2"} <= set(models)
    note = offline.left_out(models, parameter="BUDGET_MODELS")
    assert note.startswith("Left out here: gemma3-270m (its output layer") and "BUDGET_MODELS" in note
    assert offline.scored(among=offline.packaged) == ["smollm2-135m"]
    assert offline.scored(["gemma3-270m"], among=offline.packaged) == ["gemma3-270m"]  # named: included
    assert offline.left_out(list(offline.models)).startswith("Every model of the profile")
    with pytest.raises(LinrecError, match="choose from smollm2-135m, gemma3-270m"):
        offline.scored(["zoo-gpt2"], among=offline.packaged)  # not a packaged model: chapter 9 could not load it
    paper = PROFILES["paper"]
    assert paper.scored() == list(paper.models)
    assert repr(dataclasses.replace(offline, slow_passes=())) == repr(offline)  # what runs, not what is measured


def test_the_offline_profile_measures_gemma_on_its_main_text_only_and_says_why_where_a_chapter_leaves_it_out():
    offline = PROFILES["offline"]
    again = offline.measured_again()
    assert "gemma3-270m" not in again and {"smollm2-135m", "zoo-gpt2", "zoo-llama"} <= set(again)
    assert offline.measured_again(among=["gemma3-270m", "zoo-gpt2"]) == ["zoo-gpt2"]
    assert offline.measured_again(["gemma3-270m"]) == ["gemma3-270m"]  # named: included
    note = offline.left_out(again, parameter="CONTROL_MODELS", why=offline.main_text_only)
    assert note.startswith("Left out here: gemma3-270m (each of its measurements") and "CONTROL_MODELS" in note
    assert "output layer" not in note  # the reason of this catalogue, not of the perplexity passes'
    with pytest.raises(LinrecError, match="has no \\['pythia'\\] here"):
        offline.measured_again(["pythia"])
    assert PROFILES["paper"].measured_again() == list(PROFILES["paper"].models)
    assert repr(dataclasses.replace(offline, main_text_only=())) == repr(offline)  # what runs, not what is measured
