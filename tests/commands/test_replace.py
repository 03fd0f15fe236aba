"""`linrec replace` end to end: the directory it writes, an independent round trip, profile on the result, and every
bad input as one error line before the model loads."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from linrec.cli import main
from linrec.core.measure import Measurement
from linrec.data.tokens import make_batches
from linrec.interventions.replacement.directory import MAPS, RECORD, REPORT, load_replaced
from linrec.interventions.replacement.report import FIGURE
from support.tasks import datasets_cache  # noqa: F401  (autouse)

FAST = ["--max-rows", "384", "--seq-len", "16", "--folds", "3", "--eval-rows", "256", "--no-progress"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("text") / "notes.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def replaced_dir(model_dirs, text_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "replaced"
    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--blocks", "1,0"]
    assert main([*argv, "--kind", "affine", "--out", str(out), *FAST]) == 0
    return out


def held_out_windows(path, tokenizer, seq_len=16, rows=256) -> torch.Tensor:
    """The evaluation windows by the rule the help states, written out: the text from the first line break after
    80 % of its characters, cut into windows of ``seq_len`` tokens (this tokenizer adds no BOS)."""
    raw = path.read_text(encoding="utf-8")
    held = raw[raw.index("\n", round(0.8 * len(raw))) + 1 :]
    ids = torch.tensor(tokenizer(held, add_special_tokens=False)["input_ids"])
    windows = ids[: len(ids) // seq_len * seq_len].reshape(-1, seq_len)
    return windows[: math.ceil(rows / seq_len)]


def test_replace_writes_a_directory_whose_round_trip_is_exact(replaced_dir, text_file, tokenizer, capsys):
    assert sorted(p.name for p in replaced_dir.iterdir()) == sorted([FIGURE, MAPS, RECORD, REPORT])
    record = json.loads((replaced_dir / RECORD).read_text())
    assert [b["block"] for b in record["blocks"]] == [1, 0]
    assert record["fit_text"]["name"] == record["eval_text"]["name"] == str(text_file)
    assert record["fit_text"]["part"].startswith("its first") and "held out" in record["eval_text"]["part"]
    model, _ = load_replaced(replaced_dir)
    windows = held_out_windows(text_file, tokenizer)
    with torch.no_grad():  # perplexity by the model's own loss, window by window (all full, no padding)
        nll = sum(float(model(w[None], labels=w[None]).loss) * (len(w) - 1) for w in windows)
    assert math.exp(nll / (windows.numel() - len(windows))) == pytest.approx(record["ppl"]["replaced"], rel=1e-4)
    assert record["eval_text"]["windows"] == len(windows)


@pytest.mark.parametrize("at_first", ["own", "mean"])
def test_the_first_position_apart_saves_loads_and_scores_as_recorded(
    at_first, model_dirs, text_file, tokenizer, tmp_path, capsys
):
    """Saved, loaded and scored by the model's own loss (not linrec's perplexity); own stores the FFN besides its map,
    mean warns that windows beginning with different tokens make its constant inexact, with the measured cost."""
    out = tmp_path / at_first
    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--blocks", "0,1"]
    assert main([*argv, "--kind", f"first-apart:{at_first}", "--out", str(out), *FAST]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "first-apart:mean puts one constant" in line]
    record = json.loads((out / RECORD).read_text())
    assert [b["kind"] for b in record["blocks"]] == [f"first-apart:{at_first}"] * 2
    model, _ = load_replaced(out)
    windows = held_out_windows(text_file, tokenizer)
    with torch.no_grad():
        nll = sum(float(model(w[None], labels=w[None]).loss) * (len(w) - 1) for w in windows)
    assert math.exp(nll / (windows.numel() - len(windows))) == pytest.approx(record["ppl"]["replaced"], rel=1e-4)
    ffn = 3 * 32 * 128  # the tiny Llama's gated FFN
    saved = [b["original_params"] - b["params"] for b in record["blocks"]]
    assert saved == ([-(32 * 32 + 32)] * 2 if at_first == "own" else [ffn - (32 * 32 + 2 * 32)] * 2)
    assert (len(warned) == 1 and f"ΔPPL {record['ppl']['delta_ppl']:+.4g}" in warned[0]) == (at_first == "mean")


def test_profile_measures_the_replaced_model(replaced_dir, text_file, tmp_path, capsys):
    out = tmp_path / "t.csv"
    argv = ["measure", "--model", str(replaced_dir), "--text-file", str(text_file), "--out", str(out)]
    assert main([*argv, "--max-rows", "384", "--seq-len", "16", "--folds", "3", "--no-progress"]) == 0
    table = pd.read_csv(out)
    assert table.r2_lin.tolist() == pytest.approx([1.0, 1.0], abs=1e-6)  # an affine map is exactly linear


@pytest.mark.slow
def test_greedy_replace_prints_and_records_each_step(model_dirs, text_file, tmp_path, capsys):
    out = tmp_path / "greedy"
    argv = ["replace", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--kind", "lowrank:4"]
    assert main([*argv, "--max-ppl-increase", "1000%", "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / RECORD).read_text())
    assert len(record["steps"]) == 3 and "single_delta_ppl" in printed and f"wrote {out}" in printed
    assert all(isinstance(c["delta_ppl"], float) for c in record["selection"]["single"])
    assert main([*argv, "--max-ppl-increase", "1000%", "--out", str(out), *FAST]) == 2  # no overwriting...
    assert main([*argv, "--blocks", "0", "--out", str(out), "--force", *FAST]) == 0  # ...unless asked
    assert [b["block"] for b in json.loads((out / RECORD).read_text())["blocks"]] == [0]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert main([*argv, "--max-ppl-increase", "1000%", "--refit", "--out", str(out), "--force", *FAST]) == 0
    record = json.loads((out / RECORD).read_text())
    assert "one_shot_delta_ppl" in capsys.readouterr().out and record["selection"]["refit"]
    first, second = record["steps"][1:]  # a block above the first kept one is re-fitted; one below needs no re-fit
    assert (second["one_shot_delta_ppl"] != second["delta_ppl"]) == (second["block"] > first["block"])
    assert (record["blocks"][1]["r2_lin_refit"] is None) == (second["block"] < first["block"])


def test_a_score_orders_the_candidates_without_measuring_each_alone(model_dirs, text_file, tmp_path, capsys):
    """--order block_influence: the steps follow the record's scores, cheapest by their reading first, and no block
    is swapped alone first; --order without a budget is one line before the model loads."""
    out = tmp_path / "ordered"
    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file)]
    assert main([*argv, "--max-ppl-increase", "1000%", "--order", "ffn_block_influence", "--out", str(out), *FAST]) == 0
    record = json.loads((out / RECORD).read_text())
    assert record["selection"]["order"] == "ffn_block_influence" and record["selection"]["single"] is None
    assert "ffn_block_influence, read as a cost" in record["selection"]["rule"]
    model = AutoModelForCausalLM.from_pretrained(model_dirs["llama"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dirs["llama"])
    raw = text_file.read_text(encoding="utf-8")  # the fit text as the help states it, captured again: the same scores
    fit = make_batches(tokenizer, raw[: raw.index("\n", round(0.8 * len(raw)))], seq_len=16, max_rows=384, batch_size=8)
    table = Measurement.capture(model, fit, folds=3, progress=False, extras="scores").table()
    assert [s["block"] for s in record["steps"][1:]] == table.sort_values("ffn_block_influence").block.tolist()
    capsys.readouterr()
    assert main([*argv, "--blocks", "0", "--order", "r2_lin", "--out", str(tmp_path / "o"), *FAST]) == 2
    assert "--order says how --max-ppl-increase" in capsys.readouterr().err


def test_device_map_auto_replaces_as_a_single_device_does(replaced_dir, model_dirs, text_file, tmp_path):
    """accelerate's device_map (everything on the CPU on a CPU-only machine): the same steps and maps as the
    plain load, and the directory loads back through a device_map too."""
    out = tmp_path / "mapped"
    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--blocks", "1,0"]
    assert main([*argv, "--kind", "affine", "--device-map", "auto", "--out", str(out), *FAST]) == 0
    mapped, plain = (json.loads((d / RECORD).read_text()) for d in (out, replaced_dir))
    assert [s["ppl"] for s in mapped["steps"]] == pytest.approx([s["ppl"] for s in plain["steps"]], rel=1e-12)
    model, _ = load_replaced(out, device_map="auto")
    assert [type(model.model.layers[b].mlp).__name__ for b in (0, 1)] == ["AffineFFN"] * 2


@pytest.mark.slow
def test_a_second_text_and_decoding_speed_are_scored_and_reported(model_dirs, text_file, tmp_path, tokenizer):
    """The second text's perplexities equal the model's own loss over its windows, before and after (the base model
    loaded by transformers alone, the replaced one from the directory); decoding is timed before and after."""
    from transformers import AutoModelForCausalLM

    from conftest import local_text

    second = tmp_path / "other.txt"
    second.write_text(local_text(4000, seed=7), encoding="utf-8")
    out = tmp_path / "r"
    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--blocks", "0"]
    assert main([*argv, "--second-text-file", str(second), "--ablate", "zero,affine", "--out", str(out), *FAST]) == 0
    record = json.loads((out / RECORD).read_text())
    ids = torch.tensor(tokenizer(second.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"])
    windows = ids[: len(ids) // 16 * 16].reshape(-1, 16)[:16]  # --eval-rows 256 of 16-token windows

    def ppl(model) -> float:
        with torch.no_grad():
            nll = sum(float(model(w[None], labels=w[None]).loss) * (len(w) - 1) for w in windows)
        return math.exp(nll / (windows.numel() - len(windows)))

    found = record["second_text"]
    assert found["name"] == str(second) and found["windows"] == len(windows)
    assert ppl(AutoModelForCausalLM.from_pretrained(model_dirs["llama"]).eval()) == pytest.approx(
        found["base_ppl"], rel=1e-4
    )
    assert ppl(load_replaced(out)[0]) == pytest.approx(found["replaced_ppl"], rel=1e-4)
    assert found["delta_ppl_low"] <= found["delta_ppl"] <= found["delta_ppl_high"]
    latency = record["latency"]
    assert latency["base_tokens_per_s"] > 0 and latency["replaced_tokens_per_s"] > 0
    assert (latency["batch"], latency["prompt_tokens"], latency["new_tokens"]) == (1, 16, 32)  # 16-token windows
    report = (out / REPORT).read_text()
    assert "Second text, another domain" in report and "tokens/s, median [slowest, fastest] of 5 runs" in report
    ablated = pd.DataFrame(record["ablations"])
    assert ablated[["ablation", "block", "depth"]].values.tolist() == [["zero", 0, "lower"], ["affine", 0, "lower"]]
    affine = ablated[ablated.ablation == "affine"].iloc[0]  # the same map as the chosen one, on the same texts
    assert affine.delta_ppl == record["steps"][1]["delta_ppl"] and affine.second_delta_ppl == found["delta_ppl"]
    assert "## Ablations" in report and "zero: second text ΔPPL" in report and "the FFN removed" in report


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--kind", "cubic", "--blocks", "0"], "unknown replacement kind 'cubic'"),
        (["--kind", "lowrank:32", "--blocks", "0"], "needs a rank below the block's width 32"),
        (["--kind", "lowrank:0", "--blocks", "0"], "must be a positive integer"),
        (["--max-ppl-increase", "0"], "a perplexity budget .* must be a finite number above 0"),
        (["--max-ppl-increase", "nan"], "finite number above 0"),
        (["--max-ppl-increase=-5%"], "finite number above 0"),
        (["--blocks", "0,0"], "--blocks must name each block once; got 0,0"),
        (["--blocks", "0", "--ablate", "zero,cubic"], "unknown replacement kind 'cubic'"),
        (["--blocks", "0", "--ablate", "zero,mean,zero"], "name each kind once; got zero,mean,zero"),
        (["--blocks", "0", "--ablate", "affine,lowrank:32"], "needs a rank below the block's width 32"),
        (["--blocks", "0,7"], "no FFN block 7; this model has blocks 0..1"),
        ([], "say which blocks to replace"),
        (["--blocks", "0", "--folds", "1"], "--folds must be at least 2"),
        (["--blocks", "0", "--text-file", "/dev/null"], "the text /dev/null is empty"),
        (["--blocks", "0", "--max-ppl-increase", "-5%"], r"\(5%\); got '-5%'"),
        (["--blocks", "0", "--second-text-file", "/nowhere/x.txt"], "cannot read --second-text-file /nowhere/x.txt"),
        (["--max-accuracy-drop", "0.02"], "--max-accuracy-drop is a budget on task scores; say which with --tasks"),
        (["--tasks", "humaneval", "--max-accuracy-drop", "-1"], r"a task budget \(--max-accuracy-drop\) must be"),
        (["--blocks", "0", "--task-dir", "TASKS"], "--task-dir set\\(s\\) how --tasks are scored; give --tasks too"),
    ],
)
def test_bad_input_is_one_line_before_the_model_loads(
    options, message, model_dirs, text_file, tmp_path, capsys, no_weights
):
    argv = ["replace", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--out", str(tmp_path / "o")]
    (tmp_path / "tasks").mkdir()
    options = [str(tmp_path / "tasks") if o == "TASKS" else o for o in options]
    assert main([*argv, *options, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("linrec: error: ") and err.count("\n") == 1, err
    assert re.search(message, err), err
    assert not (tmp_path / "o").exists()


def test_out_model_and_directory_problems_are_one_line(
    model_dirs, text_file, replaced_dir, tmp_path, capsys, no_weights
):
    common = ["--text-file", str(text_file), "--blocks", "0", "--no-progress"]
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    cases = [
        (["--model", str(model_dirs["gpt2"]), "--out", str(full)], "exists and is not empty; .* --force"),
        (["--model", str(model_dirs["opt"]), "--out", str(tmp_path / "o")], "'opt' model's FFN spans two modules"),
        (["--model", str(replaced_dir), "--out", str(tmp_path / "o")], "is a replacement directory; replace blocks"),
    ]
    for options, message in cases:
        assert main(["replace", *options, *common]) == 2
        err = capsys.readouterr().err
        assert err.startswith("linrec: error: ") and err.count("\n") == 1 and re.search(message, err), err
    assert (full / "keep.txt").read_text() == "mine"
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / RECORD).write_text("{}")
    assert main(["measure", "--model", str(damaged), "--text-file", str(text_file), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("linrec: error: ") and "lacks replacements.safetensors" in err


def test_a_low_rank_budget_chooses_the_largest_rank_within_it(model_dirs, text_file, tmp_path):
    out = tmp_path / "budget"
    argv = ["replace", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--blocks", "0,1"]
    assert main([*argv, "--kind", "lowrank:10%", "--out", str(out), *FAST]) == 0
    record = json.loads((out / RECORD).read_text())
    assert record["kind"] == "lowrank:10%"
    for block in record["blocks"]:
        rank = int(block["kind"].removeprefix("lowrank:"))
        assert block["params"] == rank * (32 + 32) + 32 <= 0.1 * block["original_params"]
        assert (rank + 1) * (32 + 32) + 32 > 0.1 * block["original_params"]  # the largest that fits
    assert load_replaced(out)[0] is not None  # the directory names ranks, which load


def test_no_block_within_the_budget_is_one_line_and_writes_nothing(
    model_dirs, text_file, tmp_path, capsys, monkeypatch
):
    from linrec.interventions.replacement.replace import Replacement

    steps = [
        {"block": None, "ppl": 20.0, "delta_ppl": 0.0, "kept": True},
        {"block": 1, "delta_ppl": 2.0, "kept": False},
        {"block": 0, "delta_ppl": 1.5, "kept": False},
    ]
    record = {"steps": steps, "selection": {"max_ppl_increase": "5%", "max_delta_ppl": 1.0}, "ppl": {"base": 20.0}}
    none = Replacement({}, record, None)  # type: ignore[arg-type]
    monkeypatch.setattr("linrec.interventions.replacement.replace.replace", lambda *a, **k: none)
    argv = ["replace", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--max-ppl-increase", "5%"]
    assert main([*argv, "--out", str(tmp_path / "o"), *FAST]) == 2
    err = capsys.readouterr().err
    assert err == (
        "linrec: error: no block fits the budget --max-ppl-increase 5% (ΔPPL at most 1 on the model's perplexity 20): "
        "each block alone raises the perplexity by more, the cheapest block 0 +1.5, block 1 +2; raise the budget or "
        "give --blocks\n"
    )
    assert not (tmp_path / "o").exists()


def test_replace_on_a_corpus_measures_what_profile_measures_to_the_last_digit(model_dirs, tmp_path):
    import pandas as pd

    model = str(model_dirs["gpt2"])
    same = ["--model", model, "--corpus", "kjv-bible", "--max-rows", "384", "--seq-len", "16", "--folds", "3"]
    assert main(["measure", *same, "--no-progress", "--out", str(tmp_path / "t.csv")]) == 0
    assert (
        main(["replace", *same, "--blocks", "1,0", "--eval-rows", "256", "--no-progress", "--out", str(tmp_path / "r")])
        == 0
    )
    table = pd.read_csv(tmp_path / "t.csv").set_index("block")
    record = json.loads((tmp_path / "r" / RECORD).read_text())
    assert record["measurement"]["tokens_sha256"] == record["fit_text"]["tokens_sha256"]
    for block in record["blocks"]:  # windows inside one book each, books dealt to folds whole, as profile deals them
        assert repr(block["r2_lin"]) == repr(float(table.r2_lin[block["block"]]))


def test_replace_from_a_saved_profile_measurement_is_a_fresh_capture_to_the_last_bit(model_dirs, tmp_path, capsys):
    import pandas as pd
    from safetensors.torch import load_file

    from linrec.interventions.replacement.directory import MAPS

    model = str(model_dirs["gpt2"])
    same = ["--model", model, "--corpus", "kjv-bible", "--max-rows", "384", "--seq-len", "16", "--folds", "3"]
    saved, table = tmp_path / "measured", tmp_path / "t.csv"
    assert main(["measure", *same, "--no-progress", "--out", str(table), "--save", str(saved)]) == 0
    assert main(["measure", *same, "--no-progress", "--out", str(tmp_path / "plain.csv")]) == 0
    assert (
        pd.read_csv(table)
        .drop(columns=["measured_at"])
        .equals(pd.read_csv(tmp_path / "plain.csv").drop(columns=["measured_at"]))
    )  # --save measures what profile measures
    replace = ["replace", *same, "--blocks", "1,0", "--eval-rows", "256", "--no-progress"]
    assert main([*replace, "--out", str(tmp_path / "fresh")]) == 0
    assert main([*replace, "--measurement", str(saved), "--out", str(tmp_path / "reused")]) == 0
    fresh, reused = (load_file(tmp_path / d / MAPS) for d in ("fresh", "reused"))
    assert fresh.keys() == reused.keys() and all(torch.equal(fresh[k], reused[k]) for k in fresh)
    records = [json.loads((tmp_path / d / RECORD).read_text()) for d in ("fresh", "reused")]
    assert [r["steps"] for r in records[:1]] == [r["steps"] for r in records[1:]]
    capsys.readouterr()
    other_rows = [a if a != "384" else "512" for a in replace]
    assert main([*other_rows, "--measurement", str(saved), "--out", str(tmp_path / "x")]) == 2
    assert "the measurement was made on other tokens" in capsys.readouterr().err
    other_model = [a if a != model else str(model_dirs["llama"]) for a in replace]
    assert main([*other_model, "--measurement", str(saved), "--out", str(tmp_path / "y")]) == 2
    assert "made of other weights" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_task_scores_are_printed_and_reported_before_and_after(model_dirs, text_file, text, tmp_path, capsys):
    from linrec.interventions.tasks.continuation import continuation_items, write_choice_task

    write_choice_task(tmp_path / "tasks", "linrec_lines", continuation_items(text, items=12, context=1))
    out = tmp_path / "o"
    argv = ["replace", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--out", str(out),
            "--blocks", "0", *FAST, "--tasks", "linrec_lines", "--task-dir", str(tmp_path / "tasks")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / RECORD).read_text())
    [change] = record["tasks"]["changes"]
    assert f"linrec_lines acc {change['before']:.4g} -> {change['after']:.4g} (change" in printed
    report = (out / "report.md").read_text()
    assert "## Task scores" in report and "- linrec_lines (acc): " in report and "no budget was set on them" in report
