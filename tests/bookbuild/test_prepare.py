"""bookbuild.prepare: The measurements the chapters will ask for, captured before they start, on every core."""

from __future__ import annotations

import time

import torch


def test_the_planned_measurements_are_what_the_chapters_ask_for_real_models_first():
    from bookbuild.prepare import planned
    from linrec.experiment.profiles import get_profile

    profile = get_profile("offline")
    plans = planned(profile, (0, 1))
    assert [p.model for p in plans[:2]] == ["smollm2-135m"] * 2  # the costliest first
    smol = [(p.checkpoint, p.corpus, p.keep) for p in plans if p.model == "smollm2-135m"]
    assert smol == [("final", "kjv-bible", "samples"), ("init", "kjv-bible", "table"),
                    ("permuted@0", "kjv-bible", "table"), ("permuted@1", "kjv-bible", "table"),
                    ("final", "stdlib-prose", "table"), ("final", "stdlib-code", "table"),
                    ("final", "unicode-records", "table")]  # fmt: skip
    gemma = [(p.checkpoint, p.corpus) for p in plans if p.model == "gemma3-270m"]
    assert gemma == [("final", "kjv-bible"), ("init", "kjv-bible")]  # its main text only (Profile.main_text_only)
    steps = [p for p in plans if p.model == "zoo-gpt2" and p.checkpoint.startswith("step")]
    assert steps and all(p.chapters == ("08_training",) and p.keep == "table" for p in steps)
    only_corpora = [p for p in plans if p.wanted_by(["07_corpora"])]
    assert {p.checkpoint for p in only_corpora} == {"final"} and len(
        {(p.model, p.checkpoint, p.corpus) for p in plans}
    ) == len(plans)


def test_the_scale_chapter_plans_the_series_of_a_profile_that_has_one_not_its_models(monkeypatch):
    from bookbuild import prepare
    from linrec.experiment import measurement as measured
    from linrec.experiment.profiles import PYTHIA_SUITE, get_profile

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    plans = prepare.planned(get_profile("shapes"), ())
    scale = [p for p in plans if p.wanted_by(["10_scale"])]
    assert [p.model for p in scale] == list(reversed(PYTHIA_SUITE)) and all(p.series for p in scale)
    assert not any(p.series for p in plans if p.wanted_by(["02_heterogeneity"]))
    assert {p.model for p in plans if p.wanted_by(["02_heterogeneity"])} >= {"openai-community/gpt2"}
    # the worker measures a series plan under the series profile, whose models are the series
    seen = []
    monkeypatch.setattr(measured, "measurement", lambda profile, model, **k: seen.append((profile.models, model)))
    prepare._measure((get_profile("shapes"), scale[0]))
    assert seen == [(PYTHIA_SUITE, "EleutherAI/pythia-1.4b")]
    # a profile without a series plans its own models for the scale chapter
    assert {p.model for p in prepare.planned(get_profile("smoke"), ()) if p.wanted_by(["10_scale"])} == set(
        get_profile("smoke").models
    )


def test_a_measurement_made_up_front_says_it_is_running_while_it_runs(monkeypatch, capsys):
    from bookbuild import prepare
    from linrec import progress
    from linrec.experiment import measurement as measured
    from linrec.experiment.profiles import get_profile

    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the worker's setting, not this process's
    asked = []
    monkeypatch.setattr(measured, "measurement", lambda *a, **k: (asked.append((a[1], k)), time.sleep(0.3)))
    plan = prepare.Planned("zoo-gpt2", "permuted@1", "stdlib-prose", "table")
    done, seconds = prepare._measure((get_profile("smoke"), plan))
    assert done == plan and seconds >= 0.3
    assert asked == [
        ("zoo-gpt2", {"checkpoint": "permuted@1", "corpus": "stdlib-prose", "keep": "table", "progress": False})
    ]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 3 and all(
        line.startswith("[book] measuring zoo-gpt2 (permuted@1) on stdlib-prose: ") for line in lines
    )


def test_each_models_affine_swaps_are_planned_as_chapters_2_5_and_11_ask_for_them_after_the_measurements(
    monkeypatch, capsys
):
    from bookbuild import prepare
    from linrec.experiment import measurement as measured
    from linrec.experiment import swaps
    from linrec.experiment.profiles import get_profile

    profile = get_profile("offline")
    plans = prepare.planned_swaps(profile)
    assert [p.model for p in plans] == ["smollm2-135m", "gemma3-270m", "zoo-gpt2", "zoo-neox", "zoo-llama",
                                        "zoo-gpt2-seed1"]  # fmt: skip
    assert all(p.keep == prepare.SWAPS and p.checkpoint == "final" for p in plans)
    assert [p.corpus for p in plans[:2]] == ["kjv-bible"] * 2
    assert all(p.wanted_by([s]) for p in plans for s in prepare.SWAP_CHAPTERS)
    assert not plans[0].wanted_by(["04_bilinear"])
    # the worker scores them as the chapters call affine_swaps (so the same cache entry): from the measurement, on a
    # quarter of the budget's evaluation tokens, every block
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    monkeypatch.setattr(measured, "measurement", lambda profile, model, **k: (model, k))
    asked = []
    monkeypatch.setattr(swaps, "affine_swaps", lambda *a, **k: asked.append((a[1], k)))
    done, _ = prepare._measure((profile, plans[0]))
    assert done == plans[0] and asked == [
        ([("smollm2-135m", {"progress": False})], {"max_tokens": 2048, "progress": False, "cache": True})
    ]
    assert capsys.readouterr().out == "" and str(plans[0]) == "the affine swaps of smollm2-135m (final) on kjv-bible"


def test_chapter_11s_studies_are_planned_as_it_calls_them_and_replace_the_models_swaps(monkeypatch):
    from bookbuild import prepare
    from linrec.experiment import gating
    from linrec.experiment.profiles import get_profile

    profile = get_profile("offline")
    plans = prepare.planned_gating(profile, [0.25, 0.5], "5%")
    assert [p.model for p in plans] == ["smollm2-135m", "zoo-gpt2", "zoo-neox", "zoo-llama", "zoo-gpt2-seed1"]
    assert all(p.keep == prepare.GATING and p.wanted_by(["11_pruning"]) for p in plans)  # not Gemma's passes
    assert not plans[0].wanted_by(["05_compression"])
    assert str(plans[0]) == "chapter 11's pruning costs and gated blocks of smollm2-135m (final) on kjv-bible"
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    asked = []
    monkeypatch.setattr(gating, "gating_study", lambda *a, **k: asked.append((a[1], k)))
    prepare._measure((profile, plans[0]))
    assert asked == [("smollm2-135m", {"shares": (0.25, 0.5), "eval_tokens": 2048, "budget": "5%", "progress": False})]


def test_the_build_plans_chapter_11s_studies_only_at_its_default_models_blocks_and_tokens():
    from bookbuild.execute import _gating_plans
    from linrec.experiment.profiles import get_profile

    profile = get_profile("smoke")
    declared = {"11_pruning": {name: {"default": default} for name, default in (
        ("MODELS", "None"), ("GATE_MODELS", "None"), ("GATE_BLOCKS", "None"), ("EVAL_TOKENS", "None"),
        ("GATE_SHARES", "[0.25, 0.5, 0.9, 0.99]"), ("BUDGET", "'5%'"))}}  # fmt: skip
    plans = _gating_plans(profile, declared, None)
    assert [p.model for p in plans] == list(profile.scored())
    assert (plans[0].shares, plans[0].budget) == ((0.25, 0.5, 0.9, 0.99), "5%")
    assert _gating_plans(profile, declared, {"BUDGET": "10%"})[0].budget == "10%"
    for name in ("MODELS", "GATE_MODELS", "GATE_BLOCKS", "EVAL_TOKENS"):  # the chapter computes what it asks for
        assert _gating_plans(profile, declared, {name: [1]}) == []
    assert _gating_plans(profile, {}, None) == []  # chapter 11 not in this build


def test_each_models_follow_up_is_handed_out_a_worker_after_its_main_measurement(monkeypatch, capsys):
    from bookbuild import prepare
    from linrec.experiment.profiles import get_profile

    profile = get_profile("offline")
    measures, swaps = prepare.planned(profile, (0,)), prepare.planned_swaps(profile)
    studies = prepare.planned_gating(profile, [0.5], "5%")
    plans = prepare.in_order([*measures, *swaps, *studies], 2)
    follow = [p for p in plans if p.keep in (prepare.SWAPS, prepare.GATING)]
    assert {p.model: p.keep for p in follow} == {**{p.model: prepare.SWAPS for p in swaps},
                                                 **{p.model: prepare.GATING for p in studies}}  # fmt: skip
    assert sorted(map(str, plans)) == sorted(map(str, [*measures, *follow]))  # every measurement once, then these
    for p in follow:  # two places after its main measurement: a worker is free by then and the main one done
        main = next(
            i for i, q in enumerate(plans) if q.model == p.model and q.keep not in (prepare.SWAPS, prepare.GATING)
        )
        assert plans.index(p) == main + 2
    assert plans[2] == studies[0]  # SmolLM2's long study third, where the other measurements fill the other core
    one = prepare.in_order([*measures, *swaps], 1)
    assert one[1].keep == prepare.SWAPS and one[1].model == measures[0].model  # alone: right after it

    class Pool:  # in this process, in the order handed to it
        def __init__(self, n):
            self.n = n

        def imap_unordered(self, f, work):
            return [(p, 0.0) for _, p in work]

        def close(self):
            pass

        def join(self):
            pass

    monkeypatch.setattr(prepare.mp, "get_context", lambda kind: type("C", (), {"Pool": staticmethod(Pool)}))
    swap = prepare.Planned("zoo-gpt2", "final", "stdlib-prose", prepare.SWAPS, prepare.SWAP_CHAPTERS)
    first = prepare.Planned("zoo-gpt2", "final", "stdlib-prose", "samples")
    prepare.prepare_measurements(get_profile("smoke"), [swap, first], 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["[book] measured zoo-gpt2 (final) on stdlib-prose in 0.0 s",
                         "[book] scored the affine swaps of zoo-gpt2 (final) on stdlib-prose in 0.0 s"]  # fmt: skip
