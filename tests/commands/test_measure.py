"""linrec.commands.measure: ``linrec measure``: measure R²_lin of every FFN block of a model, or of a profile's models,
on a text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from conftest import FAMILIES
from linrec.cli import main
from support.cli import ROWS, _fails


@pytest.fixture
def no_measuring(monkeypatch):
    """Any measurement fails the test: the errors below must come before the work."""
    import linrec.core.measure

    def measure(*args, **kwargs):
        raise AssertionError("measured before the error")

    monkeypatch.setattr(linrec.core.measure, "measure", measure)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Training a zoo or loading a profile's model fails the test."""
    import linrec.experiment.resolve
    import linrec.models.zoo

    def refuse(*args, **kwargs):
        raise AssertionError("started the work before the error")

    monkeypatch.setattr(linrec.models.zoo, "build_zoo", refuse)
    monkeypatch.setattr(linrec.experiment.resolve, "load_profile_model", refuse)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_architecture_through_the_cli(family, model_dirs, text_file, tmp_path, capsys):
    out = tmp_path / "r.csv"
    assert (
        main(
            [
                "measure",
                "--model",
                str(model_dirs[family]),
                "--text-file",
                str(text_file),
                *ROWS,
                "--out",
                str(out),
                "--extras",
                "output-covariance",
            ]
        )  # fmt: skip
        == 0
    )
    table = pd.read_csv(out)
    assert list(table.block) == [0, 1] and (table.extras == "output-covariance").all()
    for column in (
        "r2_lin",
        "r2_lin_std",
        "r2_feature_median",
        "effective_rank_out",
        "input_condition",
        "null_dims",
        "n_train",
        "n_test",
    ):
        assert table[column].notna().all(), column
    assert (table.n_train + table.n_test == 384).all()
    assert table.corpus_sha256.nunique() == 1
    assert "r2_lin" in capsys.readouterr().out


def test_block_subset_and_json(model_dirs, text_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "measure",
                "--model",
                str(model_dirs["gpt2"]),
                "--text-file",
                str(text_file),
                *ROWS,
                "--blocks",
                "1",
                "--dtype",
                "bfloat16",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_json(out)
    assert list(table.block) == [1]
    assert list(table.dtype) == ["bfloat16"] and list(table.device) == ["cpu"]  # what was captured, and where
    err = capsys.readouterr().err  # a 16-bit capture says what it means for condition numbers, as the CLI speaks
    assert "linrec: warning: the activations were captured in bfloat16" in err and "cli.py" not in err


def test_unknown_architecture(tmp_path, tokenizer, text_file, capsys):
    from transformers import GPTJConfig, GPTJForCausalLM

    GPTJForCausalLM(
        GPTJConfig(vocab_size=320, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64)
    ).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _fails(
        ["measure", "--model", str(tmp_path), "--text-file", str(text_file), *ROWS],
        capsys,
        "unsupported architecture 'gptj'",
        "gpt2, gpt_neox, llama",
        "blocks=[(input_module_name",
    )


def test_bad_inputs_have_clear_errors(model_dirs, text_file, tmp_path, capsys):
    model = ["measure", "--model", str(model_dirs["gpt2"])]
    err = _fails(
        [*model, "--text-file", str(text_file), "--max-rows", "40", "--seq-len", "8"],
        capsys,
        "folds are whole sequences",
        "--max-rows 56",
    )
    assert (
        "--max-rows 56" in err
        and main([*model, "--text-file", str(text_file), "--max-rows", "56", "--seq-len", "8", "--no-progress"]) == 0
    )
    short = tmp_path / "short.txt"
    short.write_text("just a few words", encoding="utf-8")
    _fails(
        [*model, "--text-file", str(short), "--max-rows", "400", "--seq-len", "16"],
        capsys,
        "are needed for max_rows=400",
    )
    _fails([*model, "--text-file", str(text_file), "--seq-len", "128"], capsys, "exceeds the model's context of 64")
    _fails([*model, "--text-file", str(tmp_path / "missing.txt")], capsys, "cannot read --text-file")
    _fails([*model, "--text-file", str(text_file), "--out", "r.xlsx"], capsys, "--out must end in .csv or .json")
    _fails(["measure", "--text-file", str(text_file)], capsys, "give --model")


def test_default_rows_follow_the_width_and_a_short_text_warns(model_dirs, text_file, tmp_path, capsys):
    """Without --max-rows the CLI asks for 64 rows per input dimension (2,048 at width 32); a text that has fewer
    gives all it has, with a warning that names both counts."""
    model = ["measure", "--model", str(model_dirs["gpt2"]), "--seq-len", "16", "--folds", "3", "--no-progress"]
    out = tmp_path / "r.csv"
    assert main([*model, "--text-file", str(text_file), "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert (table.n_train + table.n_test == 64 * 32).all()
    assert "warning" not in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text(" ".join(text_file.read_text(encoding="utf-8").split()[:250]), encoding="utf-8")
    assert main([*model, "--text-file", str(short), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    rows = int(pd.read_csv(out).pipe(lambda t: t.n_train + t.n_test).iloc[0])
    assert 99 < rows < 64 * 32 and f"linrec: warning: the text gives {rows:,} rows per block" in err
    assert "the default is 64 per dimension (2,048 rows)" in err


def test_skip_first_leaves_positions_out_and_is_checked_before_loading(
    model_dirs, text_file, tmp_path, capsys, monkeypatch
):
    """--skip-first 1 measures what the full table's r2_lin_after_first says; one that keeps no position is one
    error line before any model loads."""
    model = ["measure", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), *ROWS]
    full, skipped = tmp_path / "full.csv", tmp_path / "skipped.csv"
    assert main([*model, "--out", str(full)]) == 0 and main([*model, "--skip-first", "1", "--out", str(skipped)]) == 0
    a, b = pd.read_csv(full), pd.read_csv(skipped)
    assert (a.skip_first == 0).all() and (b.skip_first == 1).all()
    assert (b.r2_lin - a.r2_lin_after_first).abs().max() <= 1e-9
    assert ((a.first_position_share > 0) & (a.first_position_share < 1)).all()
    assert [len(json.loads(folds)) for folds in a.r2_lin_folds] == [3, 3]
    printed = capsys.readouterr()
    assert "r2_lin_after_first" in printed.out and "r2_lin_folds" not in printed.out
    assert "Loading weights" not in printed.err  # --no-progress hides transformers' bars too

    def no_loading(*_args, **_kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("linrec.models.loading.load_pretrained", no_loading)
    _fails([*model, "--skip-first", "16"], capsys, "from 0 to seq_len - 1 = 15")


@pytest.mark.parametrize("offline", ["1", ""])
def test_unreachable_hub_fails_in_seconds(offline, text_file, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: unreachable
    start = time.perf_counter()
    _fails(
        ["measure", "--model", "no-such-org/no-such-model", "--text-file", str(text_file)],
        capsys,
        "could not load 'no-such-org/no-such-model'",
        "--profile offline",
    )
    assert time.perf_counter() - start < 15


@pytest.mark.slow
def test_torchrun_two_processes_give_the_single_process_table(model_dirs, text_file, tmp_path):
    args = [
        "measure",
        "--model",
        str(model_dirs["llama"]),
        "--text-file",
        str(text_file),
        "--max-rows",
        "1024",
        "--seq-len",
        "16",
        "--folds",
        "5",
        "--device",
        "cpu",
        "--no-progress",
        "--extras",
        "output-covariance",
    ]
    assert main([*args, "--out", str(tmp_path / "one.csv")]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            "29531",
            "-m",
            "linrec",
            *args,
            "--out",
            str(tmp_path / "two.csv"),
        ],
        check=True,
        env=env,
        timeout=300,
    )
    one, two = pd.read_csv(tmp_path / "one.csv"), pd.read_csv(tmp_path / "two.csv")
    for column in ("r2_lin", "r2_lin_std", "r2_feature_median", "effective_rank_out", "effective_rank_map"):
        assert (one[column] - two[column]).abs().max() <= 1e-9, column
    assert (one.n_train == two.n_train).all()


def test_device_map_auto_loads_and_measures(model_dirs, text_file, tmp_path):
    """Large models load through accelerate's device_map; on a CPU-only machine everything lands on the CPU."""
    out = tmp_path / "r.csv"
    assert (
        main(
            [
                "measure",
                "--model",
                str(model_dirs["llama"]),
                "--text-file",
                str(text_file),
                *ROWS,
                "--device-map",
                "auto",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    reference = tmp_path / "ref.csv"
    assert (
        main(
            [
                "measure",
                "--model",
                str(model_dirs["llama"]),
                "--text-file",
                str(text_file),
                *ROWS,
                "--out",
                str(reference),
            ]
        )
        == 0
    )
    assert (pd.read_csv(out).r2_lin - pd.read_csv(reference).r2_lin).abs().max() <= 1e-10


def test_bad_out_fails_before_measuring(model_dirs, text_file, tmp_path, capsys, no_measuring):
    model = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS]
    (tmp_path / "existing.csv").mkdir()
    _fails([*model, "--out", str(tmp_path / "existing.csv")], capsys, "is a directory; give a file in it")
    _fails(
        [*model, "--out", str(tmp_path)], capsys, f"is a directory; give a file in it, e.g. {tmp_path / 'table.csv'}"
    )
    (tmp_path / "plain").write_text("a file")
    _fails([*model, "--out", str(tmp_path / "plain" / "sub" / "r.csv")], capsys, "plain is a file, not a directory")
    _fails([*model, "--out", str(tmp_path / "r.txt")], capsys, "--out must end in .csv or .json")


@pytest.fixture
def full_disk(monkeypatch):
    """Every probe file lands on /dev/full, where the kernel answers a write with ENOSPC as a full disk does."""
    import tempfile

    mkstemp = tempfile.mkstemp

    def on_full_disk(*args, **kwargs):
        fd, name = mkstemp(*args, **kwargs)
        os.close(fd)
        return os.open("/dev/full", os.O_WRONLY), name

    monkeypatch.setattr(tempfile, "mkstemp", on_full_disk)


def test_unwritable_out_fails_before_measuring(model_dirs, text_file, tmp_path, capsys, no_measuring, request):
    """Tried, not asked: os.access says yes to root whatever the place, and nothing but a write finds a full disk."""
    model = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS]
    _fails([*model, "--out", "/proc/nope/x.csv"], capsys, "cannot write --out /proc/nope/x.csv", "choose another")
    long_name = tmp_path / ("x" * 300 + ".csv")
    _fails([*model, "--out", str(long_name)], capsys, "File name too long", "choose another name")
    if os.geteuid() != 0:  # root writes into a read-only directory
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        _fails([*model, "--out", str(locked / "r.csv")], capsys, f"cannot write --out {locked / 'r.csv'}")
    request.getfixturevalue("full_disk")
    _fails([*model, "--out", str(tmp_path / "r.csv")], capsys, "No space left on device")
    assert list(tmp_path.iterdir()) == []  # the probe files are gone


def test_out_is_written_through_a_fresh_temporary_and_stale_ones_go(model_dirs, text_file, tmp_path, capsys):
    """The temporary has an unpredictable name (a symlink planted at the old predictable one is left alone);
    the temporaries of a dead writer are removed at the next start, those of a live one kept."""
    out = tmp_path / "r.csv"
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    (tmp_path / f".r.csv.{os.getpid()}.tmp").symlink_to(target)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".r.csv.{int(dead.stdout)}.abcd_123.tmp"
    live = tmp_path / f".r.csv.{os.getppid()}.abcd_123.tmp"
    stale.write_text("half")
    live.write_text("being written")
    args = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)]
    assert main(args) == 0
    assert target.read_text() == "untouched" and pd.read_csv(out).shape[0] == 2
    assert not stale.exists() and live.exists()


def test_out_in_a_missing_directory_is_created_and_written_whole(model_dirs, text_file, tmp_path, monkeypatch, capsys):
    out = tmp_path / "new" / "dir" / "r.csv"
    args = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)]
    assert main(args) == 0
    before = out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["r.csv"]  # no temporary file left beside it

    def half_written(self, file, **kwargs):
        file.write("block,r2")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_written)
    _fails(args, capsys, f"could not write {out}", "No space left on device")
    assert out.read_text() == before and [p.name for p in out.parent.iterdir()] == ["r.csv"]


@pytest.mark.parametrize("device", ["cuda", "mps", "tpu"])
def test_missing_device_fails_before_the_model_loads(device, model_dirs, text_file, monkeypatch, capsys, no_weights):
    """Once torch is in (it says which devices there are), and after what is checked without it (the text)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    _fails(
        ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--device", device],
        capsys,
        f"device '{device}' is not available on this machine; available: cpu",
    )


def test_model_directory_problems_are_one_message(model_dirs, text_file, tmp_path, capsys, no_measuring):
    """Missing weights, a truncated safetensors file, no tokenizer, no such directory: a message, never a traceback."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(model_dirs["gpt2"], broken)
    args = ["measure", "--model", str(broken), "--text-file", str(text_file), *ROWS]
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    _fails(args, capsys, f"{weights} is truncated or corrupt")
    weights.unlink()
    _fails(args, capsys, "has a config but no weights")
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(model_dirs["gpt2"] / name, bare / name)
    _fails(["measure", "--model", str(bare), "--text-file", str(text_file), *ROWS], capsys, "has no usable tokenizer")
    _fails(["measure", "--model", str(tmp_path / "nope"), "--text-file", str(text_file)], capsys, "no such directory")


def test_profile_options_are_honoured_or_refused(model_dirs, text_file, monkeypatch, capsys, no_measuring):
    import linrec.experiment.resolve

    for option in (["--revision", "step1000"], ["--device-map", "auto"], ["--trust-remote-code"]):
        _fails(["measure", "--profile", "smoke", *option], capsys, f"{option[0]} apply to --model", "Drop them")
    _fails(
        ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--revision", "main"],
        capsys,
        "--revision selects a hub revision",
        "is a local directory",
    )
    import linrec.data.tokens
    from linrec.models.loading import load_pretrained

    seen = {}

    def load_profile_model(profile, model, checkpoint="final", before_weights=None, **kwargs):
        seen.update(device=profile.device, dtype=profile.dtype)
        return load_pretrained(str(model_dirs["gpt2"]), before_weights=before_weights)

    def make_batches(*args, batch_size, **kwargs):
        seen["batch_size"] = batch_size
        raise AssertionError("stop before measuring")

    monkeypatch.setattr(linrec.experiment.resolve, "load_profile_model", load_profile_model)
    monkeypatch.setattr(linrec.data.tokens, "make_batches", make_batches)
    with pytest.raises(AssertionError, match="stop before"):
        main(["measure", "--profile", "offline", "--dtype", "bfloat16", "--device", "cpu", "--no-progress"])
    assert seen == {"device": "cpu", "dtype": "bfloat16", "batch_size": 16}  # the offline profile's batch size


def test_token_ids_beyond_the_vocabulary_are_refused_by_measure(tokenizer, text):
    """The library's own check, for a model whose tokenizer came from elsewhere: no IndexError from the embedding."""
    from conftest import tiny_model
    from linrec import measure
    from linrec.data.tokens import make_batches
    from linrec.errors import LinrecError

    model = tiny_model("gpt2")
    model.resize_token_embeddings(100)
    with pytest.raises(LinrecError, match=r"token id \d+, but the model's vocabulary has 100 ids"):
        measure(model, make_batches(tokenizer, text, seq_len=16, max_rows=384), folds=3, progress=False)


@pytest.mark.parametrize(
    "option, message",
    [
        (["--device-map", "bogus"], "device_map must be one of auto, balanced"),
        (["--device", "cpu", "--device-map", "auto"], "device 'cpu' and device_map 'auto' both say"),
    ],
)
def test_device_map_is_checked_first(option, message, model_dirs, text_file, capsys, no_weights):
    _fails(["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *option], capsys, message)


@pytest.mark.parametrize("argv", [["zoo", "--profile", "smoke"], ["measure", "--profile", "smoke", "--no-progress"]])
def test_a_cache_that_cannot_hold_entries_fails_first(argv, tmp_path, monkeypatch, capsys, nothing_runs, request):
    plain = tmp_path / "plain"
    plain.write_text("a file")
    too_long = tmp_path / ("c" * 300)
    for cache, message in (
        (plain, f"{plain} is a file, not a directory"),
        (plain / "sub", "is a file"),
        (too_long / "sub", "File name too long"),
    ):
        monkeypatch.setenv("LINREC_CACHE", str(cache))
        _fails(argv, capsys, f"cannot write the cache {cache}", message, "set LINREC_CACHE to a writable directory")
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    request.getfixturevalue("full_disk")
    _fails(argv, capsys, f"cannot write the cache {tmp_path / 'cache'}: No space left on device")


def test_an_interrupt_is_one_line_and_leaves_the_old_table(model_dirs, text_file, tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM, which linrec.cli.main turns into one) while the table is written: status 130, one line,
    the previous table intact and no temporary beside it."""
    out = tmp_path / "r.csv"
    out.write_text("old")

    def interrupted(self, file, **kwargs):
        file.write("block,r2")
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", interrupted)
    args = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)]
    assert main(args) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "linrec: interrupted"
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.csv"]


def test_a_profile_s_blocks_and_context_are_checked_from_its_zoo_spec(capsys, nothing_runs):
    """Before any zoo model is trained or loaded: the spec gives each model's depth and context."""
    from linrec.experiment.profiles import get_profile

    profile = get_profile("smoke")
    assert profile.zoo is not None
    depth = min(profile.zoo.entry(m).depth for m in profile.models)
    context = min(profile.zoo.entry(m).seq_len for m in profile.models)
    smoke = ["measure", "--profile", "smoke", "--no-progress"]
    _fails([*smoke, "--blocks", str(depth)], capsys, f"no FFN block {depth}")
    _fails([*smoke, "--seq-len", str(context + 1)], capsys, f"exceeds the model's context of {context}")


def test_a_memory_budget_is_read_planned_and_refused_before_the_weights(model_dirs, text_file, capsys, no_weights):
    model = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--seq-len", "16"]
    _fails([*model, "--memory", "lots"], capsys, "cannot read the memory budget 'lots'", "12GB")
    _fails([*model, "--memory", "1KB"], capsys, "too small for one block at a time", "smallest budget that works")


def test_a_budget_that_groups_the_blocks_gives_the_one_pass_table(model_dirs, text_file, tmp_path, capsys):
    """The plan is printed before the work, and the table is the single pass's to the last digit."""
    from linrec.models.loading import load_pretrained

    model = ["measure", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--folds", "12"]
    model += ["--seq-len", "16", "--max-rows", "768"]
    assert main([*model, "--out", str(tmp_path / "one.csv")]) == 0
    err = capsys.readouterr().err
    assert "plan: 1 group of 2 blocks" in err
    import torch
    from transformers import AutoConfig

    from linrec.core.plan import footprint

    config = AutoConfig.from_pretrained(model_dirs["llama"])
    sizes = {"windows": 48, "seq_len": 16, "batch_size": 8}
    weights = (sum(p.numel() for p in load_pretrained(str(model_dirs["llama"]))[0].parameters()) * 4, 0)
    fp = footprint(config, blocks=2, folds=12, **sizes, dtype=torch.float32, on_gpu=False, weights=weights,
                   extras=frozenset())  # (the command's default)  # fmt: skip
    assert main([*model, "--memory", str(fp.host(1, 2)), "--out", str(tmp_path / "grouped.csv")]) == 0
    assert "plan: 2 groups of 1 block (0, 1)" in capsys.readouterr().err
    one, grouped = (pd.read_csv(tmp_path / f"{n}.csv").drop(columns="measured_at") for n in ("one", "grouped"))
    pd.testing.assert_frame_equal(one, grouped, check_exact=True)


def test_a_profile_s_own_model_named_with_model_is_measured_as_the_profile_does(monkeypatch, capsys, no_measuring):
    """--profile P --model M, M one of P's models or of its scale series: P's loader, budget and text."""
    import linrec.experiment.resolve

    seen = {}

    def load_profile_model(profile, model, checkpoint="final", **kwargs):
        seen.update(profile=profile.name, model=model, models=profile.models, dtype=profile.dtype)
        raise AssertionError("stop before loading")

    monkeypatch.setattr(linrec.experiment.resolve, "load_profile_model", load_profile_model)
    for name in ("EleutherAI/pythia-160m", "EleutherAI/pythia-6.9b"):
        with pytest.raises(AssertionError, match="stop before"):
            main(["measure", "--profile", "shapes", "--model", name, "--dtype", "bfloat16", "--no-progress"])
        assert seen["profile"] == "shapes" and seen["model"] == name and name in seen["models"]
        assert seen["dtype"] == "bfloat16"
