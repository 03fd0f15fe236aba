"""The walk of a (tiny) profile model: its blocks dropped cheapest first, each step scored by perplexity and by the
offline tasks, beside chapter 11's costs, cached."""

from __future__ import annotations

import dataclasses

import pytest

import linrec.experiment.measurement as measurements
import linrec.experiment.pruning as pruning
import linrec.experiment.swaps as swaps
import linrec.experiment.tasks as tasks
from linrec.core.replacements import fit_replacements
from linrec.core.resume import decoder_layers, passing
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.experiment.profiles import PROFILES, Profile
from linrec.experiment.tasks import (
    fitting,
    study_models,
    task_corpora,
    task_items,
    task_study,
    task_table,
    walk_steps,
)
from linrec.interventions.perplexity import window_nll
from linrec.interventions.surgery import swapped
from linrec.interventions.tasks.continuation import write_choice_task
from linrec.interventions.tasks.evaluate import evaluate
from linrec.models.arch import ffn_blocks
from support.planted_models import planted_model, widened
from support.study_profile import load_instead, tiny_profile
from support.tasks import datasets_cache  # noqa: F401  (autouse)

PROFILE = tiny_profile(models=("planted",), corpora=("stdlib-prose", "stdlib-code"))


@pytest.fixture(scope="module")
def planted(tokenizer, text):
    """The 4-block GPT-2 of :func:`support.planted_models.planted_model`, block 1 exactly affine, trained a little
    so that its other blocks matter, its position table widened from 64 to 1,024 rows (the first 64 kept), as
    HumanEval's first prompt (294 of the tiny tokenizer's tokens) and its 512 new tokens need."""
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=4096, batch_size=16)
    return widened(planted_model(batches, steps=60))


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """One cache for this module's tests: chapter 11's costs, which every study reads, computed once."""
    return tmp_path_factory.mktemp("tasks-cache")


@pytest.fixture
def loads(planted, tokenizer, monkeypatch, module_cache) -> list[str]:
    """The models the study itself loads (recorded); chapter 11's costs, the shared measurement and chapter 5's swaps
    load the same planted model (no hub, no zoo), into this module's cache."""
    return load_instead(tasks, planted, tokenizer, monkeypatch, module_cache)


def test_the_real_models_less_the_slow_ones_else_the_zoos():
    offline, smoke = PROFILES["offline"], PROFILES["smoke"]
    assert study_models(offline) == ["smollm2-135m"]  # Gemma 3's passes are slow; the zoo's are not real models
    assert study_models(smoke) == list(smoke.models)  # no real model: the zoo's
    assert study_models(offline, ["zoo-gpt2", "gemma3-270m"]) == ["zoo-gpt2", "gemma3-270m"]
    with pytest.raises(LinrecError, match="has no \\['gpt-5'\\]"):
        study_models(offline, ["gpt-5"])


def test_a_step_drops_fewer_blocks_than_the_model_has():
    assert walk_steps([8, 1, 2, 4, 2], 30) == [1, 2, 4, 8]
    assert walk_steps([1, 2, 4, 8], 3) == [1, 2]
    with pytest.raises(LinrecError, match="at most 2"):
        walk_steps([4, 8], 3)
    for bad in ([], [0, 1], [1.5], [True]):
        with pytest.raises(LinrecError, match="positive integers"):
            walk_steps(bad, 30)


def test_the_tasks_are_cut_from_the_first_prose_and_code_corpus_eval_text_only():
    assert task_corpora(PROFILES["offline"]) == {"linrec_prose": "stdlib-prose", "linrec_code": "stdlib-code"}
    bible = Profile(**{**PROFILE.__dict__, "corpora": ("unicode-records", "kjv-bible")})
    assert task_corpora(bible) == {"linrec_prose": "kjv-bible"}  # records are neither; no code corpus, no code task
    with pytest.raises(LinrecError, match="no corpus of prose or code"):
        task_corpora(Profile(**{**PROFILE.__dict__, "corpora": ("unicode-records",)}))
    drawn = task_items(PROFILE, 30, seed=0)
    assert drawn == task_items(PROFILE, 30, seed=0) and drawn != task_items(PROFILE, 30, seed=1)
    prose, code = (tasks.profile_corpus(PROFILE, c) for c in ("stdlib-prose", "stdlib-code"))
    for task, corpus in (("linrec_prose", prose), ("linrec_code", code)):
        assert len(drawn[task]) == 30
        held_out = " ".join(corpus.eval_text.split())  # (a sentence's line breaks are read as spaces)
        for item in drawn[task]:
            answer = " ".join(f"{item['context']} {item['choices'][item['label']]}".split())
            assert answer in held_out  # the context and its true continuation, from text no fit reads
    table = task_table(PROFILE, drawn).set_index("task")
    assert table.corpus.to_dict() == {"linrec_prose": "stdlib-prose", "linrec_code": "stdlib-code"}
    assert (table["items"] == 30).all() and (table.chance == 0.25).all() and table.sha256.iloc[0] == prose.sha256


def test_items_whose_answers_outrun_the_context_are_left_out(tokenizer):
    drawn = {"linrec_prose": [{"context": "a", "choices": ["the model", "the " * 40], "label": 0},
                              {"context": "b", "choices": ["the model", "a norm"], "label": 1}],
             "linrec_code": [{"context": "c", "choices": ["x = 1"], "label": 0}]}  # fmt: skip
    kept = fitting(drawn, tokenizer, 20)
    assert kept["linrec_prose"] == drawn["linrec_prose"][1:] and kept["linrec_code"] == drawn["linrec_code"]
    assert fitting(drawn, tokenizer, None) == drawn


@pytest.mark.slow
def test_each_step_is_the_cheapest_blocks_dropped_together_scored_as_a_full_pass(loads, planted, tokenizer, tmp_path):
    out = task_study(PROFILE, "planted", items=12, humaneval_limit=0, progress=False)
    assert loads == ["planted"]
    pruned = pruning.pruning_costs(PROFILE, "planted", progress=False)  # chapter 11's costs, read from the cache
    walk = out["walk"].set_index(["mechanism", "step"])
    assert sorted(set(out["walk"].step)) == [0, 1, 2] and (out["walk"].model == "planted").all()  # 4 blocks: 1, 2
    assert set(out["walk"].kind) == {"swapped", "removed"}
    costs = pruned["costs"]
    for mechanism in ("affine", "layer"):
        own = costs[costs.kind == mechanism].sort_values(["delta_ppl", "block"])
        cheapest = [int(b) for b in own.block[:2]]
        assert walk.blocks[mechanism, 2] == ", ".join(map(str, cheapest))
        assert walk.delta_ppl[mechanism, 1] == own.delta_ppl.iloc[0]  # step 1: the block's own cost, the same pass
        saved = (own.original_params - own.params).iloc[:2].sum()
        assert walk.numbers_saved[mechanism, 2] == saved and walk.delta_ppl[mechanism, 0] == 0
    # Step 2 agrees with a full pass of the model so changed, built here from the shared measurement's maps
    shared = measurements.measurement(PROFILE, "planted", progress=False)
    evals = swaps.eval_batches(PROFILE, tokenizer, planted, None, name="planted")
    layers = decoder_layers(planted, ffn_blocks(planted))
    for mechanism in ("affine", "layer"):
        blocks = [int(b) for b in walk.blocks[mechanism, 2].split(", ")]
        maps = fit_replacements({b: shared.moments[b] for b in blocks}, "affine", rcond=shared.rcond)
        with swapped(planted, maps) if mechanism == "affine" else passing([layers[b] for b in blocks]):
            assert window_nll(planted, evals).ppl == pytest.approx(walk.ppl[mechanism, 2], rel=1e-12)
    changes = out["changes"].set_index(["mechanism", "step", "task"])
    assert len(changes) == 2 * 2 * 2 and set(out["changes"].metric) == {"acc"}
    assert (changes.change == changes.after - changes.before).all()
    # A step's scores are the harness's own on the model so changed, its items written anew here
    items = out["items"]
    drawn = {t: part[["context", "choices", "label"]].to_dict("records") for t, part in items.groupby("task")}
    for task, found in drawn.items():
        write_choice_task(tmp_path, task, found, tasks.TASKS[task][1])
    blocks = [int(b) for b in walk.blocks["layer", 2].split(", ")]
    with passing([layers[b] for b in blocks]):
        after = evaluate(planted, tokenizer, list(drawn), task_dir=tmp_path).headline()
    for task, row in after.items():
        assert row["value"] == changes.after["layer", 2, task]
    scores = out["scores"].set_index("task")
    assert set(scores.index) == {"linrec_prose", "linrec_code"} and scores.value.between(0, 1).all()
    assert (changes.before.xs("linrec_code", level="task") == scores.value["linrec_code"]).all()
    assert (scores.n == out["tasks"].set_index("task")["items"]).all() and (scores.n <= 12).all()
    run = out["run"].iloc[0]
    assert run.walk and run["items"] == 12 and run.tasks_seconds > 0 and run.seconds >= run.tasks_seconds
    assert len(out["items"]) == scores.n.sum()


@pytest.mark.slow
def test_without_the_walk_only_the_model_itself_is_scored_and_humaneval_where_asked(loads, monkeypatch):
    out = task_study(PROFILE, "planted", items=8, humaneval_limit=1, walk=False, progress=False)
    assert out["changes"].empty and list(out["changes"].columns) == tasks.CHANGE_COLUMNS
    scores = out["scores"].set_index("task")
    assert scores.metric["humaneval"] == "pass@1" and scores.n["humaneval"] == 1
    assert out["run"].humaneval_seconds.iloc[0] > 0 and set(out["walk"].step) == {0, 1, 2}
    monkeypatch.setattr(tasks, "CODE_MODELS", ("planted",))  # a code model reads HumanEval at every step
    coder = task_study(PROFILE, "planted", items=8, humaneval_limit=1, steps=[1], progress=False)
    assert set(coder["changes"].task) == {"linrec_prose", "linrec_code", "humaneval"}
    assert len(coder["changes"]) == 2 * 3


def test_cached_by_settings_and_bad_settings_refused_before_any_model(loads):
    one = task_study(PROFILE, "planted", items=8, humaneval_limit=0, steps=[2], progress=False)
    again = task_study(PROFILE, "planted", items=8, humaneval_limit=0, steps=[2], progress=False)
    assert loads == ["planted"] and one["walk"].equals(again["walk"]) and one["changes"].equals(again["changes"])
    assert set(one["walk"].step) == {0, 2}
    for options, message in (({"steps": [0]}, "positive integers"), ({"items": 0}, "items must be"),
                             ({"humaneval_limit": -1}, "humaneval_limit must be"),
                             ({"items": 10**6}, "fewer than the 1000000 asked for")):  # fmt: skip
        with pytest.raises(LinrecError, match=message):
            task_study(PROFILE, "planted", progress=False, **options)
    with pytest.raises(LinrecError, match="no model 'other'"):
        task_study(PROFILE, "other", progress=False)
    assert loads == ["planted"]


def test_a_real_model_gets_the_items_and_humaneval_a_zoo_model_fewer_items_and_none(loads, monkeypatch):
    monkeypatch.setattr(tasks, "ITEMS", 6)
    monkeypatch.setattr(tasks, "ZOO_ITEMS", 4)
    monkeypatch.setattr(tasks, "HUMANEVAL_LIMIT", 1)
    real = task_study(PROFILE, "planted", walk=False, progress=False)
    assert real["run"]["items"].iloc[0] == 6 and "humaneval" in set(real["scores"].task)
    assert tasks.in_zoo(PROFILES["smoke"], "zoo-gpt2") and not tasks.in_zoo(PROFILES["offline"], "smollm2-135m")
    monkeypatch.setattr(tasks, "in_zoo", lambda profile, model: True)
    zoo = task_study(PROFILE, "planted", walk=False, progress=False)
    assert zoo["run"]["items"].iloc[0] == 4 and "humaneval" not in set(zoo["scores"].task)


def test_the_profile_s_own_scores_join_the_offline_tasks_the_harness_ones_on_their_first_items(loads, monkeypatch):
    """A profile's evaluations (the pruning papers' perplexity and zero-shot suite under ``paper``) join the offline
    tasks' request, the harness tasks limited to the items per task, and key the cache: the same study with them is
    computed, not read back."""
    asked = []

    def prepare(request):
        asked.append(request)
        raise LinrecError("stopped here")

    task_study(PROFILE, "planted", items=8, humaneval_limit=0, steps=[1], walk=False, progress=False)
    monkeypatch.setattr(tasks, "prepare", prepare)
    scored = dataclasses.replace(PROFILE, evaluations=("wikitext2-ppl", "zero-shot"))
    with pytest.raises(LinrecError, match="stopped here"):
        task_study(scored, "planted", items=8, humaneval_limit=0, steps=[1], walk=False, progress=False)
    assert asked[0].tasks == ("linrec_prose", "linrec_code", "wikitext2-ppl", "piqa", "winogrande", "hellaswag",
                              "arc_easy", "arc_challenge") and asked[0].limit == 8  # fmt: skip
