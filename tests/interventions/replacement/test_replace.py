"""linrec.interventions.replacement.replace: choose FFN blocks to replace, fit their maps and record what they cost,
the Python side of ``linrec replace``."""

from __future__ import annotations

import re

import pytest
import torch

import linrec
from linrec.errors import LinrecError
from linrec.interventions.replacement.replace import replace
from linrec.interventions.replacement.report import report_figure
from linrec.interventions.surgery import swapped
from linrec.models.loading import load_pretrained
from support.planted_models import planted_model
from support.replace import independent_ppl
from support.tasks import datasets_cache  # noqa: F401  (autouse)


def _equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.slow
def test_greedy_replace_records_every_candidate_and_step(base_dir, texts, tmp_path):
    model, _ = load_pretrained(str(base_dir))
    result = replace(model, *texts, kind="affine", max_ppl_increase="1000%", folds=4, progress=False)
    record = result.record
    assert record["selection"]["candidates"] == [0, 1]
    assert sorted(c["block"] for c in record["selection"]["single"]) == [0, 1]
    assert record["selection"]["max_ppl_increase"] == "1000%" and "greedy" in record["selection"]["rule"]
    assert record["selection"]["skipped"] == []
    assert sorted(result.maps) == [0, 1] and record["fit_text"]["name"] == "(not recorded)"
    assert model.transformer.h[0].mlp.__class__.__name__ == "GPT2MLP"  # the model is left as it was
    trained = planted_model(texts[0], steps=150)  # removing any of its blocks costs perplexity
    none = replace(trained, *texts, kind="zero", max_ppl_increase="0.001", folds=4, progress=False)
    assert none.maps == {} and none.record["blocks"] == [] and not none.record["steps"][1]["kept"]
    assert none.record["ppl"]["replaced"] == none.record["ppl"]["base"] and none.record["selection"]["single"]
    skipped = none.record["selection"]["skipped"]  # every candidate tried, none kept
    assert sorted(s["block"] for s in skipped) == none.record["selection"]["candidates"]
    assert {s["why"] for s in skipped} == {"the joint ΔPPL with it exceeds the budget"}
    message = (
        r"no block fits the budget --max-ppl-increase 0.001 \(ΔPPL at most 0.001 on the model's perplexity [\d.]+\): "
        r"each block alone raises the perplexity by more, the cheapest block \d \+[\d.e-]+, block \d \+"
    )
    assert re.match(message, none.none_fits) and result.none_fits is None
    with pytest.raises(LinrecError, match=message):
        none.save(tmp_path / "none")
    assert not (tmp_path / "none").exists()


@pytest.mark.slow
def test_refit_fits_later_blocks_on_what_the_modified_model_feeds_them(base_dir, texts):
    model, _ = load_pretrained(str(base_dir))
    fit, evals = texts
    options = {"kind": "affine", "blocks": [0, 1], "folds": 4, "progress": False}
    one_shot = replace(model, fit, evals, **options)
    refitted = replace(model, fit, evals, refit=True, **options)
    assert _equal(refitted.maps[0], one_shot.maps[0])  # the first block sees the unmodified model either way
    with linrec.swapped(model, {0: one_shot.maps[0]}):  # written out: block 1 captured with block 0's map in place
        again = linrec.Measurement.capture(model, fit, blocks=[1], folds=4, progress=False)
    assert _equal(refitted.maps[1], again.replacements("affine", [1])[1])
    assert not _equal(refitted.maps[1], one_shot.maps[1])
    assert refitted.record["blocks"][1]["r2_lin_refit"] == float(again.table().r2_lin.iloc[0])
    assert refitted.record["blocks"][0]["r2_lin_refit"] is None and refitted.record["selection"]["refit"]
    steps, plain = refitted.record["steps"], one_shot.record["steps"]
    assert steps[1]["delta_ppl"] == steps[1]["one_shot_delta_ppl"] == plain[1]["delta_ppl"]
    assert steps[2]["one_shot_delta_ppl"] == plain[2]["delta_ppl"]  # the one-shot map, scored at the same step
    with linrec.swapped(model, refitted.maps):
        assert independent_ppl(model, evals) == pytest.approx(steps[2]["ppl"], rel=1e-4)
    assert len(report_figure(refitted.record).axes[0].lines) > len(report_figure(one_shot.record).axes[0].lines)
    downward = replace(model, fit, evals, refit=True, **{**options, "blocks": [1, 0]})  # block 0 sees no change
    assert _equal(downward.maps[0], one_shot.maps[0]) and downward.record["blocks"][1]["r2_lin_refit"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kind": "lowrank:32"}, "below the block's width 32"),
        ({"kind": "cubic"}, "unknown replacement kind 'cubic'"),
        ({"blocks": [0, 0]}, r"each block once; \[0\]"),
        ({"blocks": [2]}, "no FFN block 2; this model has blocks 0..1"),
        ({"blocks": None}, "say which blocks to replace"),
        ({"blocks": None, "max_ppl_increase": "0"}, "finite number above 0"),
        ({"blocks": None, "max_ppl_increase": "nan%"}, "finite number above 0"),
    ],
)
def test_bad_requests_are_refused_before_the_capture(base_dir, texts, options, message, monkeypatch):
    from linrec.interventions.replacement import replace as module

    monkeypatch.setattr(module.Measurement, "capture", lambda *a, **k: pytest.fail("captured"))
    model, _ = load_pretrained(str(base_dir))
    with pytest.raises(LinrecError, match=message):
        replace(model, *texts, **{"blocks": [0], **options})


def test_an_ffn_of_two_modules_and_fit_text_as_eval_text_are_refused(model_dirs, texts):
    opt, _ = load_pretrained(str(model_dirs["opt"]))
    with pytest.raises(LinrecError, match="'opt' model's FFN spans two modules"):
        replace(opt, *texts, blocks=[0])
    gpt2, _ = load_pretrained(str(model_dirs["gpt2"]))
    with pytest.raises(LinrecError, match="same tokens"):
        replace(gpt2, texts[0], texts[0], blocks=[0])


def test_whole_block_removal_is_a_kind_and_its_directory_loads_as_a_model_of_fewer_layers(base_dir, texts, tmp_path):
    from transformers import AutoModelForCausalLM

    from linrec.core.resume import decoder_layers, passing
    from linrec.models.arch import ffn_blocks

    model, _ = load_pretrained(str(base_dir))
    with passing([decoder_layers(model, ffn_blocks(model))[1]]):
        expected = independent_ppl(model, texts[1])
    result = replace(model, *texts, kind="remove", blocks=[1], folds=4, progress=False, name=str(base_dir))
    (block,) = result.record["blocks"]
    layer = sum(p.numel() for p in model.transformer.h[1].parameters())
    assert (block["kind"], block["params"], block["original_params"]) == ("remove", 0, layer)
    assert result.record["ppl"]["replaced"] == pytest.approx(expected, rel=1e-5)
    assert len(model.transformer.h) == 2  # the model is left as it was
    loaded, _ = linrec.load_model(result.save(tmp_path / "removed"))
    assert len(loaded.transformer.h) == 1 and independent_ppl(loaded, texts[1]) == pytest.approx(expected, rel=1e-5)
    loaded.save_pretrained(tmp_path / "plain")  # nothing but whole blocks removed: a plain model of one layer
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "plain")
    assert plain.config.num_hidden_layers == 1 and independent_ppl(plain, texts[1]) == pytest.approx(expected, rel=1e-5)


def test_a_gated_kind_is_chosen_under_a_budget_and_its_directory_loads_the_same_model(base_dir, texts, tmp_path):
    """gated:norm:0.5 as a candidate under the budget: the record's perplexity is the model's with the gated maps in
    place (an independent loss), the blocks keep their FFN (more numbers, counted), and the saved directory loads
    the same model back."""
    from linrec.core.gated import GatedFFN

    model, _ = load_pretrained(str(base_dir))
    result = replace(model, *texts, kind="gated:norm:0.5", max_ppl_increase="1000%", folds=4, progress=False,
                     name=str(base_dir))  # fmt: skip
    assert result.record["kind"] == "gated:norm:0.5" and sorted(result.maps) == [0, 1]
    assert all(isinstance(m, GatedFFN) for m in result.maps.values())
    with swapped(model, result.maps):
        expected = independent_ppl(model, texts[1])
    assert result.record["ppl"]["replaced"] == pytest.approx(expected, rel=1e-5)
    ffn = sum(p.numel() for p in model.transformer.h[0].mlp.parameters())
    assert all(b["params"] == ffn + 32 * 32 + 32 + 1 for b in result.record["blocks"])  # map, threshold, the FFN
    loaded, _ = linrec.load_model(result.save(tmp_path / "gated"))
    assert independent_ppl(loaded, texts[1]) == pytest.approx(expected, rel=1e-6)


@pytest.fixture(scope="module")
def prepared_task(tmp_path_factory, text):
    from linrec.interventions.tasks.continuation import continuation_items, write_choice_task
    from linrec.interventions.tasks.evaluate import prepare
    from linrec.interventions.tasks.request import TaskRequest

    directory = tmp_path_factory.mktemp("tasks")
    write_choice_task(directory, "linrec_lines", continuation_items(text[-60_000:], items=30, context=1))
    return prepare(TaskRequest.of("linrec_lines", task_dir=directory))


@pytest.mark.slow
def test_task_scores_are_recorded_before_and_after_and_a_task_budget_decides_each_step(texts, tokenizer, prepared_task):
    from linrec.interventions.tasks.evaluate import evaluate

    trained = planted_model(texts[0], steps=150)
    given = replace(trained, *texts, kind="zero", blocks=[2], folds=4, progress=False, tasks=prepared_task,
                    tokenizer=tokenizer)  # fmt: skip
    tasks = given.record["tasks"]
    with swapped(trained, given.maps):
        after = evaluate(trained, tokenizer, prepared_task)
    assert tasks["replaced"]["scores"] == after.record()["scores"] and tasks["max_accuracy_drop"] is None
    assert tasks["base"]["scores"] == evaluate(trained, tokenizer, prepared_task).record()["scores"]
    [change] = tasks["changes"]
    assert change["change"] == pytest.approx(change["after"] - change["before"]) and change["metric"] == "acc"

    chosen = replace(trained, *texts, kind="zero", max_accuracy_drop="0.01", folds=4, progress=False,
                     tasks=prepared_task, tokenizer=tokenizer)  # fmt: skip
    lowest = chosen.record["tasks"]["lowest_allowed"]["linrec_lines"]
    assert lowest == pytest.approx(change["before"] - 0.01)
    steps = chosen.record["steps"][1:]
    assert steps and all(s["kept"] == (s["linrec_lines acc"] >= lowest) for s in steps)  # the task budget decides
    assert chosen.record["steps"][0]["linrec_lines acc"] == change["before"]  # step 0: the model's own score
    assert {s["why"] for s in chosen.record["selection"]["skipped"]} <= {
        "a task's score with it falls by more than --max-accuracy-drop"
    }
    assert "--max-accuracy-drop 0.01" in chosen.record["selection"]["rule"]
    with pytest.raises(LinrecError, match="a task budget needs the tasks"):
        replace(trained, *texts, kind="zero", max_accuracy_drop="0.01", progress=False)
