"""linrec.interventions.replacement.directory: a replaced model on disk, the replacement directory that
``linrec replace`` writes and :func:`load_replaced` reads."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch

import linrec
from linrec.errors import LinrecError, LinrecWarning
from linrec.interventions.replacement.ablations import depth_third
from linrec.interventions.replacement.directory import MAPS, RECORD, REPORT, load_replaced, read_replaced
from linrec.interventions.replacement.replace import replace
from linrec.interventions.replacement.report import FIGURE
from linrec.models.loading import load_pretrained
from linrec.models.weights_identity import weights_id
from support.replace import independent_ppl


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


def _flip_bytes(directory):
    """Overwrite bytes inside the maps' numbers, the file's size unchanged (as a bad disk or copy would)."""
    data = bytearray((directory / MAPS).read_bytes())
    data[-64:-32] = bytes(255 - b for b in data[-64:-32])
    (directory / MAPS).write_bytes(bytes(data))


def test_a_format_1_directory_loads_with_a_warning_that_nothing_can_be_checked(replaced, tmp_path):
    damaged = _damage(replaced[1], tmp_path, _edit_record(lambda r: (r.update(format=1), r.pop("files"))))
    with pytest.warns(LinrecWarning, match="records no hash of its files"):
        record, maps = read_replaced(damaged)
    assert list(maps) == [1, 0]


@pytest.mark.slow
def test_the_directory_records_what_was_done(replaced, base_dir, texts):
    result, out = replaced
    assert sorted(p.name for p in out.iterdir()) == sorted([FIGURE, MAPS, RECORD, REPORT])
    record = json.loads((out / RECORD).read_text())
    assert record["files"] == {MAPS: hashlib.sha256((out / MAPS).read_bytes()).hexdigest()}
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
    monkeypatch.setattr("linrec.interventions.replacement.directory.can_draw", lambda: False)
    out = result.save(tmp_path / "plain")
    assert not (out / FIGURE).exists() and "pip install 'linrec[notebook]'" in (out / REPORT).read_text()
    assert read_replaced(out)[0] == json.loads((out / RECORD).read_text())


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


def test_a_base_given_by_a_relative_path_is_found_from_elsewhere(base_dir, texts, tmp_path, monkeypatch):
    monkeypatch.chdir(base_dir.parent)
    model, _ = load_pretrained("gpt2")
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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / MAPS).unlink(), "lacks replacements.safetensors"),
        (lambda d: (d / RECORD).unlink(), "lacks linrec-replacement.json"),
        (lambda d: (d / RECORD).write_text("{"), "cannot read the replacement record"),
        (lambda d: (d / MAPS).write_bytes((d / MAPS).read_bytes()[:200]), "replacements.safetensors is damaged"),
        (_edit_record(lambda r: r.update(format=7)), "of format 7, not 1 or 2"),
        (_edit_record(lambda r: r.pop("files")), "is damaged"),
        (_flip_bytes, r"^\S+/replacements.safetensors is damaged: its sha256 is not the one"),  # named, not wrapped
        (_edit_record(lambda r: r.pop("base")), "is damaged"),
        (_edit_record(lambda r: r["blocks"][0].update(kind="lowrank:4")), "does not hold block 1's lowrank:4 map"),
        (_edit_record(lambda r: r["blocks"][0].update(kind="lowrank:40")), "below the block's width 32"),
        (_edit_record(lambda r: r["blocks"].pop()), r"holds maps of blocks \['0'\] that"),
    ],
)
def test_a_damaged_directory_is_refused_before_the_base_loads(replaced, tmp_path, change, message, monkeypatch):
    from linrec.interventions.replacement import directory as module

    monkeypatch.setattr(module.loading, "load_pretrained", lambda *a, **k: pytest.fail("the base was loaded"))
    damaged = _damage(replaced[1], tmp_path, change)
    with pytest.raises(LinrecError, match=message):
        load_replaced(damaged)


def test_read_replaced_gives_the_maps_in_their_order(replaced):
    record, maps = read_replaced(replaced[1])
    assert list(maps) == [1, 0] and record["kind"] == "lowrank:8"
    assert [depth_third(b, 30) for b in (0, 9, 10, 19, 20, 29)] == ["lower"] * 2 + ["middle"] * 2 + ["upper"] * 2
