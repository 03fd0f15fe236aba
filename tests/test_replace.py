"""Replacing blocks for good: the replace API, the replacement directory and its exact round trip, and bad input."""

import json
import math
import re
import shutil

import pytest
import torch

import linrec
from conftest import local_text
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.interventions.ablations import depth_third
from linrec.interventions.replace import TextPart, replace
from linrec.interventions.replaced import MAPS, RECORD, REPORT, load_replaced, read_replaced
from linrec.interventions.replacement_report import FIGURE, report_figure
from linrec.models.identity import weights_id
from linrec.models.loading import load_model
from test_greedy import planted_model


@pytest.fixture(scope="module")
def base_dir(model_dirs, tmp_path_factory):
    """A copy of the tiny GPT-2's directory, so a test may change it."""
    return shutil.copytree(model_dirs["gpt2"], tmp_path_factory.mktemp("base") / "gpt2")


@pytest.fixture(scope="module")
def texts(tokenizer, text):
    fit = make_batches(tokenizer, text, seq_len=32, max_rows=1536, batch_size=16)
    evals = make_batches(tokenizer, local_text(3000, seed=1), seq_len=32, max_rows=768, batch_size=16)
    return fit, evals


@pytest.fixture(scope="module")
def replaced(base_dir, texts, tmp_path_factory):
    """Blocks 1 then 0 replaced by rank-8 maps, saved."""
    model, _ = load_model(str(base_dir))
    fit, evals = texts
    parts = TextPart("local", "all of it", "f" * 64), TextPart("other", "all of it", "e" * 64)
    options = {"kind": "lowrank:8", "blocks": [1, 0], "folds": 4, "progress": False, "name": str(base_dir)}
    result = replace(model, fit, evals, fit_text=parts[0], eval_text=parts[1], **options)
    out = result.save(tmp_path_factory.mktemp("out") / "replaced")
    return result, out


def independent_ppl(model, batches) -> float:
    """Perplexity from the model's own loss, token-weighted (no linrec code)."""
    total, tokens = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            n = batch.input_ids.numel() - batch.input_ids.shape[0]
            total += float(model(batch.input_ids, labels=batch.input_ids).loss) * n
            tokens += n
    return math.exp(total / tokens)


@pytest.mark.slow
def test_the_directory_records_what_was_done(replaced, base_dir, texts):
    result, out = replaced
    assert sorted(p.name for p in out.iterdir()) == sorted([FIGURE, MAPS, RECORD, REPORT])
    record = json.loads((out / RECORD).read_text())
    assert record["base"] == {
        "model": str(base_dir),
        "path": str(base_dir.resolve()),
        "weights": weights_id(str(base_dir)),
        "dtype": "float32",
        "width": 32,
        "n_blocks": 2,
    }
    assert [(b["block"], b["kind"], b["depth"]) for b in record["blocks"]] == [
        (1, "lowrank:8", "middle"),  # thirds of two blocks: 0 lower, 1 middle
        (0, "lowrank:8", "lower"),
    ]
    assert [s["block"] for s in record["steps"]] == [None, 1, 0] and all(s["kept"] for s in record["steps"])
    assert (
        record["ppl"]["replaced"] == record["steps"][-1]["ppl"] and record["ppl"]["base"] == record["steps"][0]["ppl"]
    )
    saved = sum(b["original_params"] - b["params"] for b in record["blocks"])
    assert record["params"]["model_before"] - record["params"]["model_after"] == saved > 0
    assert record["fit_text"]["tokens_sha256"] == texts[0].sha256 != record["eval_text"]["tokens_sha256"]
    assert record["fit_text"]["name"] == "local" and record["eval_text"]["windows"] == len(texts[1].input_ids)
    assert record["versions"]["linrec"] == linrec.__version__ and record["measurement"]["rcond"] == 1e-10
    report = (out / REPORT).read_text()
    assert "1 (lowrank:8), 0 (lowrank:8)" in report and "## Steps" in report and "load_replaced" in report
    assert f"]({FIGURE})" in report and (out / FIGURE).read_bytes().startswith(b"\x89PNG")


def test_without_matplotlib_the_directory_says_how_to_get_the_figure(replaced, tmp_path, monkeypatch):
    result, _ = replaced
    monkeypatch.setattr("linrec.interventions.replaced.can_draw", lambda: False)
    out = result.save(tmp_path / "plain")
    assert not (out / FIGURE).exists() and "pip install 'linrec[notebook]'" in (out / REPORT).read_text()
    assert read_replaced(out)[0] == json.loads((out / RECORD).read_text())


def test_the_report_figure_shows_each_steps_cost_and_saving(replaced):
    record = replaced[0].record
    delta, saved = report_figure(record).axes
    assert "ΔPPL" in delta.get_ylabel() and "(thousands)" in saved.get_ylabel() and "step" in delta.get_xlabel()
    assert [t.get_text() for t in saved.get_xticklabels()] == ["model", "+1", "+0"]
    heights = [bar.get_height() for bar in saved.patches]
    assert heights == pytest.approx([s["params_saved"] / 1e3 for s in record["steps"]], rel=1e-12)
    budgeted = {**record, "selection": {**record["selection"], "max_delta_ppl": 1e4}}  # far above: named, no line
    labels = [t.get_text() for t in report_figure(budgeted).axes[0].get_legend().get_texts()]
    assert "budget 1e+04 (above)" in labels and "budget" not in labels
    points = delta.lines[0].get_ydata()  # the kept steps' joint ΔPPL
    assert list(points) == pytest.approx([s["delta_ppl"] for s in record["steps"]], rel=1e-12)


def test_the_round_trip_is_exact(replaced, texts):
    result, out = replaced
    for load in (load_replaced, linrec.load_model):
        model, tokenizer = load(out)
        for b, fitted in result.maps.items():
            loaded = model.transformer.h[b].mlp
            assert type(loaded) is type(fitted)
            state, expected = loaded.state_dict(), fitted.state_dict()
            assert state.keys() == expected.keys() and all(torch.equal(state[k], expected[k]) for k in state)
        ppl = independent_ppl(model, texts[1])
        assert ppl == pytest.approx(result.record["ppl"]["replaced"], rel=1e-4)
        assert ppl != pytest.approx(result.record["ppl"]["base"], rel=1e-4)  # the maps are in
        ids = tokenizer("the model", return_tensors="pt").input_ids
        assert model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).shape[1] == ids.shape[1] + 4
        with pytest.raises(LinrecError, match="replacement directory"):
            model.save_pretrained(out / "nope")


@pytest.mark.slow
def test_greedy_replace_records_every_candidate_and_step(base_dir, texts, tmp_path):
    model, _ = load_model(str(base_dir))
    result = replace(model, *texts, kind="affine", max_ppl_increase="1000%", folds=4, progress=False)
    record = result.record
    assert record["selection"]["candidates"] == [0, 1]
    assert sorted(c["block"] for c in record["selection"]["single"]) == [0, 1]
    assert record["selection"]["max_ppl_increase"] == "1000%" and "greedy" in record["selection"]["rule"]
    assert sorted(result.maps) == [0, 1] and record["fit_text"]["name"] == "(not recorded)"
    assert model.transformer.h[0].mlp.__class__.__name__ == "GPT2MLP"  # the model is left as it was
    trained = planted_model(texts[0], steps=150)  # removing any of its blocks costs perplexity
    none = replace(trained, *texts, kind="zero", max_ppl_increase="0.001", folds=4, progress=False)
    assert none.maps == {} and none.record["blocks"] == [] and not none.record["steps"][1]["kept"]
    assert none.record["ppl"]["replaced"] == none.record["ppl"]["base"] and none.record["selection"]["single"]
    message = r"no block fits the budget --max-ppl-increase 0.001: the cheapest, block \d, costs ΔPPL \+"
    assert re.match(message, none.none_fits) and result.none_fits is None
    with pytest.raises(LinrecError, match=message):
        none.save(tmp_path / "none")
    assert not (tmp_path / "none").exists()


def _equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.slow
def test_refit_fits_later_blocks_on_what_the_modified_model_feeds_them(base_dir, texts):
    model, _ = load_model(str(base_dir))
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
    from linrec.interventions import replace as module

    monkeypatch.setattr(module.Measurement, "capture", lambda *a, **k: pytest.fail("captured"))
    model, _ = load_model(str(base_dir))
    with pytest.raises(LinrecError, match=message):
        replace(model, *texts, **{"blocks": [0], **options})


def test_an_ffn_of_two_modules_and_fit_text_as_eval_text_are_refused(model_dirs, texts):
    opt, _ = load_model(str(model_dirs["opt"]))
    with pytest.raises(LinrecError, match="'opt' model's FFN spans two modules"):
        replace(opt, *texts, blocks=[0])
    gpt2, _ = load_model(str(model_dirs["gpt2"]))
    with pytest.raises(LinrecError, match="same tokens"):
        replace(gpt2, texts[0], texts[0], blocks=[0])


def test_a_base_given_by_a_relative_path_is_found_from_elsewhere(base_dir, texts, tmp_path, monkeypatch):
    monkeypatch.chdir(base_dir.parent)
    model, _ = load_model("gpt2")
    out = replace(model, *texts, blocks=[0], folds=4, progress=False, name="gpt2").save(tmp_path / "relative")
    monkeypatch.chdir(tmp_path)  # where no "gpt2" is
    loaded, _ = load_replaced(out)
    assert json.loads((out / RECORD).read_text())["base"]["model"] == "gpt2"
    assert type(loaded.transformer.h[0].mlp).__name__ == "AffineFFN"


def test_a_different_base_is_refused_naming_both_hashes(replaced, tmp_path):
    result, out = replaced
    base = tmp_path / "base"
    shutil.copytree(result.record["base"]["model"], base)
    record = json.loads((out / RECORD).read_text())
    record["base"]["model"] = str(base)
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    (moved / RECORD).write_text(json.dumps(record))
    load_replaced(moved)  # the same files elsewhere: the same weights
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**config, "n_positions": 48}))
    changed = weights_id(str(base))
    with pytest.raises(
        LinrecError, match=f"its weights are {changed}, the record in .* names {record['base']['weights']}"
    ):
        load_replaced(moved)


def _damage(out, tmp_path, change):
    copy = shutil.copytree(out, tmp_path / "copy")
    change(copy)
    return copy


def _edit_record(edit):
    def change(directory):
        record = json.loads((directory / RECORD).read_text())
        edit(record)
        (directory / RECORD).write_text(json.dumps(record))

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / MAPS).unlink(), "lacks replacements.safetensors"),
        (lambda d: (d / RECORD).unlink(), "lacks linrec-replacement.json"),
        (lambda d: (d / RECORD).write_text("{"), "cannot read the replacement record"),
        (lambda d: (d / MAPS).write_bytes((d / MAPS).read_bytes()[:200]), "replacements.safetensors is damaged"),
        (_edit_record(lambda r: r.update(format=7)), "of format 7, not 1"),
        (_edit_record(lambda r: r.pop("base")), "is damaged"),
        (_edit_record(lambda r: r["blocks"][0].update(kind="lowrank:4")), "does not hold block 1's lowrank:4 map"),
        (_edit_record(lambda r: r["blocks"][0].update(kind="lowrank:40")), "below the block's width 32"),
        (_edit_record(lambda r: r["blocks"].pop()), r"holds maps of blocks \['0'\] that"),
    ],
)
def test_a_damaged_directory_is_refused_before_the_base_loads(replaced, tmp_path, change, message, monkeypatch):
    from linrec.interventions import replaced as module

    monkeypatch.setattr(module.loading, "load_model", lambda *a, **k: pytest.fail("the base was loaded"))
    damaged = _damage(replaced[1], tmp_path, change)
    with pytest.raises(LinrecError, match=message):
        load_replaced(damaged)


def test_read_replaced_gives_the_maps_in_their_order(replaced):
    record, maps = read_replaced(replaced[1])
    assert list(maps) == [1, 0] and record["kind"] == "lowrank:8"
    assert [depth_third(b, 30) for b in (0, 9, 10, 19, 20, 29)] == ["lower"] * 2 + ["middle"] * 2 + ["upper"] * 2


def test_low_rank_budgets_parse_resolve_and_refuse():
    from linrec.core.replacements import Kind

    kind = Kind.parse("lowrank:25%")
    assert (kind.share, str(kind)) == (0.25, "lowrank:25%")
    assert kind.within(3 * 576 * 1536, 576, 576) == Kind("lowrank", 575)  # 575·1152 + 576 ≤ 25 %, capped at d - 1
    assert Kind.parse("lowrank:5%").within(3 * 576 * 1536, 576, 576) == Kind("lowrank", 114)
    assert Kind.parse("affine").within(10, 4, 4) == Kind("affine")
    for bad in ("lowrank:0%", "lowrank:100%", "lowrank:x%", "lowrank:nan%"):
        with pytest.raises(LinrecError, match="must be a number of percent"):
            Kind.parse(bad)
    with pytest.raises(LinrecError, match="leaves no rank: a rank-1 map stores 1728 numbers"):
        Kind.parse("lowrank:0.01%").within(3 * 576 * 1536, 576, 576)
