"""The scale chapter's pieces: the profile statistics and their claims on planted profiles, the fixed swap depths,
the scale and paper profiles' series, parameter counts, the figures, and a book of some chapters only."""

import math

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from bookbuild import publish
from bookbuild.layout import Book
from conftest import tiny_model
from linrec import LinrecError
from linrec.analysis import scale
from linrec.experiment import sizes
from linrec.experiment.profiles import PROFILES, PYTHIA_LARGE, PYTHIA_SUITE, SCALE_DEPTHS, depth_blocks, get_profile
from linrec.models.shapes import SHAPES
from linrec.report.claims import Verdict

PARAMS = {"small": 10**6, "mid": 10**8, "large": 10**9}


def planted(spread: dict[str, float], share: dict[str, float], blocks: int = 24, seed: int = 0) -> pd.DataFrame:
    """Profiles of ``blocks`` blocks per model: R²_lin evenly spread over ``spread[model]`` below 0.99 (shuffled),
    first-position share ``share[model]`` with a little noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in spread:
        r2 = rng.permutation(0.99 - np.linspace(0, spread[model], blocks))
        for block in range(blocks):
            rows.append({"model": model, "block": block, "r2_lin": r2[block], "r2_lin_std": 0.01,
                         "r2_lin_after_first": r2[block] - 0.01, "r2_lin_half_rows": r2[block] - 0.02,
                         "first_position_share": share[model] + rng.normal(0, 1e-3),
                         "d_in": 64, "n_train": 4096, "n_test": 1024})  # fmt: skip
    return scale.with_depth(pd.DataFrame(rows))


def test_the_summary_reads_each_profile_against_numpy():
    table = planted({"large": 0.6, "small": 0.5}, {"small": 0.1, "large": 0.1})
    summary = scale.scale_summary(table, PARAMS)
    assert list(summary.model) == ["small", "large"]  # smallest first, whatever the table's order
    large = table[table.model == "large"].sort_values("block")
    row = summary.iloc[1]
    q1, q3 = np.percentile(large.r2_lin, [25, 75])
    assert row.r2_sd == pytest.approx(np.std(large.r2_lin))
    assert row.r2_iqr == pytest.approx(q3 - q1) and row.r2_range == pytest.approx(0.6)
    assert row.max_jump == pytest.approx(np.abs(np.diff(large.r2_lin)).max())
    assert row.rows_per_dim == 80 and row.r2_half_rows_gap == pytest.approx(0.02)
    assert table[table.model == "small"].depth.tolist() == pytest.approx([b / 23 for b in range(24)])
    with pytest.raises(LinrecError, match="no parameter count"):
        scale.scale_summary(table, {"small": 1})


def test_heterogeneity_persists_when_the_largest_keeps_the_spread_and_fails_when_it_goes_uniform():
    kept = scale.scale_claims(planted({"small": 0.5, "mid": 0.5, "large": 0.5}, dict.fromkeys(PARAMS, 0.1)), PARAMS)
    flat = scale.scale_claims(planted({"small": 0.5, "mid": 0.3, "large": 0.02}, dict.fromkeys(PARAMS, 0.1)), PARAMS)
    assert kept[0].verdict is Verdict.YES and kept[0].interval[0] >= scale.KEEPS and "large" in kept[0].measured
    assert flat[0].verdict is Verdict.NO and flat[0].interval[1] < scale.KEEPS
    assert kept[0].value == pytest.approx(1.0)
    assert "0.5" in kept[0].rule


@pytest.mark.parametrize(("shares", "verdict", "word"), [
    ({"small": 0.05, "mid": 0.15, "large": 0.25}, Verdict.YES, "grows"),
    ({"small": 0.25, "mid": 0.15, "large": 0.05}, Verdict.YES, "shrinks"),
    ({"small": 0.1, "mid": 0.1, "large": 0.1}, Verdict.NO, "no resolved trend"),
])  # fmt: skip
def test_the_sink_claim_finds_a_planted_trend_and_none_where_there_is_none(shares, verdict, word):
    claim = scale.scale_claims(planted(dict.fromkeys(PARAMS, 0.5), shares), PARAMS)[1]
    assert claim.verdict is verdict and word in claim.measured
    if word != "no resolved trend":
        assert claim.value == pytest.approx(0.1 / 1.5 * (1 if word == "grows" else -1), rel=0.1)  # per decade


def test_one_size_is_untestable_and_a_slope_needs_two_sizes():
    table = planted({"small": 0.5, "mid": 0.4}, {"small": 0.1, "mid": 0.2})
    same = {"small": 10**6, "mid": 10**6}
    assert [c.verdict for c in scale.scale_claims(table, same)] == [Verdict.UNTESTABLE] * 2
    with pytest.raises(LinrecError, match="two sizes"):
        scale.size_slope(table, same, "first_position_share")
    without = table.assign(first_position_share=np.nan)  # the first position not kept apart
    assert scale.scale_claims(without, PARAMS)[1].verdict is Verdict.UNTESTABLE


def test_the_slope_is_least_squares_on_log_parameters_and_its_interval_is_seeded():
    table = planted(dict.fromkeys(PARAMS, 0.5), {"small": 0.0, "mid": 0.2, "large": 0.3})
    slope, interval = scale.size_slope(table, PARAMS, "first_position_share", seed=3)
    medians = [table[table.model == m].first_position_share.median() for m in PARAMS]
    assert slope == pytest.approx(np.polyfit([6, 8, 9], medians, 1)[0])
    assert interval == scale.size_slope(table, PARAMS, "first_position_share", seed=3)[1]
    assert interval[0] <= slope <= interval[1]


def test_fixed_depths_pick_the_same_places_in_models_of_any_depth():
    assert depth_blocks(28, SCALE_DEPTHS) == [0, 7, 14, 20, 27]
    assert depth_blocks(3, SCALE_DEPTHS) == [0, 1, 2] and depth_blocks(1, SCALE_DEPTHS) == [0]
    swaps = pd.DataFrame({"model": ["a"] * 28 + ["b"] * 3, "block": [*range(28), *range(3)], "relative": 0.0})
    kept = scale.at_fixed_depths(swaps, {"a": 28, "b": 3}, SCALE_DEPTHS)
    assert kept[kept.model == "a"].block.tolist() == [0, 7, 14, 20, 27]
    assert kept[kept.model == "a"].depth.tolist() == list(SCALE_DEPTHS)
    assert kept[kept.model == "b"].depth.tolist() == [0.0, 0.5, 0.75]  # two depths on one block: the first named


def test_the_scale_profile_runs_its_chapters_on_four_real_models_at_64_rows_per_dimension():
    profile = PROFILES["scale"]
    assert profile.chapters == ("02_heterogeneity", "11_scale") and profile.zoo is None
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


@pytest.mark.parametrize(("name", "parameters"), [
    ("70m", 70_426_624), ("160m", 162_322_944), ("410m", 405_334_016), ("1b", 1_011_781_632),
    ("1.4b", 1_414_647_808), ("2.8b", 2_775_208_960), ("6.9b", 6_857_302_016), ("12b", 11_846_072_320),
])  # fmt: skip
def test_each_pythia_shape_has_the_published_parameter_count(name, parameters):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = SHAPES[f"EleutherAI/pythia-{name}"].config
    with torch.device("meta"):  # shapes only, no memory
        model = GPTNeoXForCausalLM(GPTNeoXConfig(**{k: v for k, v in config.items() if k != "model_type"}))
    assert sum(p.numel() for p in model.parameters()) == parameters


def test_a_parameter_count_loads_the_model_once_and_counts_tied_weights_once(monkeypatch):
    loads = []

    def load(profile, model, checkpoint="final", progress=False):
        loads.append(model)
        return tiny_model("gpt2"), None  # GPT-2 ties its embedding and its head

    monkeypatch.setattr(sizes, "load_profile_model", load)
    net = tiny_model("gpt2")
    expected = sum(p.numel() for p in net.parameters())
    assert net.lm_head.weight is net.transformer.wte.weight
    profile = PROFILES["paper"]
    assert sizes.parameter_count(profile, "openai-community/gpt2") == expected
    assert sizes.parameter_count(profile, "openai-community/gpt2") == expected and len(loads) == 1  # cached


def test_capture_needs_are_three_width_squared_float64_per_block_and_fold():
    needs = scale.capture_needs({"m": (1536, 28, 1.5e9)}, folds=5).iloc[0]
    assert needs.moments_in_memory_gb == pytest.approx(28 * 5 * 3 * 1536**2 * 8 / 1e9)
    assert needs.moments_spilled_gb == pytest.approx(needs.moments_in_memory_gb / 5)
    assert needs.rows == 98_304 and needs.forward_tflop == pytest.approx(2 * 1.5e9 * 98_304 / 1e12)


def test_the_figures_draw_one_panel_per_model_and_three_trends():
    from linrec.plots import scale as plots

    table = planted({"small": 0.5, "mid": 0.4, "large": 0.3}, {"small": 0.1, "mid": 0.2, "large": 0.3})
    summary = scale.scale_summary(table, PARAMS)
    fig = plots.profiles_figure(table, summary)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["small (1M, 24 blocks)", "mid (100M, 24 blocks)", "large (1.0B, 24 blocks)"]
    swaps = scale.at_fixed_depths(table.assign(relative=0.01), {m: 24 for m in PARAMS}, SCALE_DEPTHS)
    fig = plots.trends_figure(summary, swaps)
    assert [ax.get_xscale() for ax in fig.axes] == ["log"] * 3
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)
    assert len(fig.axes[2].get_lines()) >= len(SCALE_DEPTHS)


def test_a_partial_book_keeps_the_front_and_back_matter_and_only_the_chapters_asked_for(tmp_path):
    root = publish.Path(__file__).resolve().parents[1]
    (tmp_path / "_toc.yml").write_text((root / "_toc.yml").read_text())
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    toc = yaml.safe_load(publish.partial_toc(Book(tmp_path), ["02_heterogeneity", "11_scale"]).read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert toc["root"] == "book/intro"
    assert files == ["book/chapters/02_heterogeneity", "book/chapters/11_scale", "book/resources", "book/references",
                     "book/cite"]  # fmt: skip
    config = yaml.safe_load(publish.render_config(Book(tmp_path), "x", partial=True).read_text())
    assert config["sphinx"]["config"]["suppress_warnings"] == ["ref.doc"]
    assert "suppress_warnings" not in str(yaml.safe_load(publish.render_config(Book(tmp_path), "x").read_text()))


def test_the_spill_threshold_is_passed_by_the_largest_models_only():
    from linrec.experiment.spill import SPILL_ABOVE, moment_bytes

    small = tiny_model("llama")
    assert moment_bytes(small, 5) == len(small.model.layers) * 5 * 3 * small.config.hidden_size**2 * 8 < SPILL_ABOVE
    assert 28 * 5 * 3 * 1536**2 * 8 > SPILL_ABOVE > 30 * 5 * 3 * 576**2 * 8  # the 1.5B spills, SmolLM2 does not
    assert math.isfinite(SPILL_ABOVE)


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


def test_the_series_takes_the_larger_models_by_default_only_where_cuda_is_present(monkeypatch):
    import torch

    for cuda, models in ((False, PYTHIA_SUITE), (True, PYTHIA_SUITE + PYTHIA_LARGE)):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        assert PROFILES["paper"].series_profile().models == models
