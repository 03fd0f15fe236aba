"""`linrec profile` end to end on every supported architecture, its error paths, and torchrun scale-out."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import FAMILIES
from linrec.cli import main

ROWS = ["--max-rows", "384", "--seq-len", "16", "--folds", "3", "--no-progress"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("family", FAMILIES)
def test_every_architecture_through_the_cli(family, model_dirs, text_file, tmp_path, capsys):
    out = tmp_path / "r.csv"
    assert (
        main(["profile", "--model", str(model_dirs[family]), "--text-file", str(text_file), *ROWS, "--out", str(out)])
        == 0
    )
    table = pd.read_csv(out)
    assert list(table.block) == [0, 1]
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
                "profile",
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


def _fails(args, capsys, *patterns):
    assert main(args) == 2
    err = capsys.readouterr().err
    for p in patterns:
        assert p in err, err
    return err


def test_unknown_architecture(tmp_path, tokenizer, text_file, capsys):
    from transformers import GPTJConfig, GPTJForCausalLM

    GPTJForCausalLM(
        GPTJConfig(vocab_size=320, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64)
    ).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _fails(
        ["profile", "--model", str(tmp_path), "--text-file", str(text_file), *ROWS],
        capsys,
        "unsupported architecture 'gptj'",
        "gpt2, gpt_neox, llama",
        "blocks=[(input_module_name",
    )


def test_bad_inputs_have_clear_errors(model_dirs, text_file, tmp_path, capsys):
    model = ["profile", "--model", str(model_dirs["gpt2"])]
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
    _fails(["profile", "--text-file", str(text_file)], capsys, "give --model")


@pytest.mark.parametrize("offline", ["1", ""])
def test_unreachable_hub_fails_in_seconds(offline, text_file, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: unreachable
    start = time.perf_counter()
    _fails(
        ["profile", "--model", "no-such-org/no-such-model", "--text-file", str(text_file)],
        capsys,
        "could not load 'no-such-org/no-such-model'",
        "--profile offline",
    )
    assert time.perf_counter() - start < 15


def test_torchrun_two_processes_give_the_single_process_table(model_dirs, text_file, tmp_path):
    args = [
        "profile",
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
                "profile",
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
                "profile",
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


@pytest.fixture
def no_measuring(monkeypatch):
    """Any measurement fails the test: the errors below must come before the work."""
    import linrec.core.measure

    def measure(*args, **kwargs):
        raise AssertionError("measured before the error")

    monkeypatch.setattr(linrec.core.measure, "measure", measure)


def test_bad_out_fails_before_measuring(model_dirs, text_file, tmp_path, capsys, no_measuring):
    model = ["profile", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS]
    (tmp_path / "existing.csv").mkdir()
    _fails([*model, "--out", str(tmp_path / "existing.csv")], capsys, "is a directory; give a file in it")
    _fails(
        [*model, "--out", str(tmp_path)], capsys, f"is a directory; give a file in it, e.g. {tmp_path / 'table.csv'}"
    )
    (tmp_path / "plain").write_text("a file")
    _fails([*model, "--out", str(tmp_path / "plain" / "sub" / "r.csv")], capsys, "plain is a file, not a directory")
    _fails([*model, "--out", str(tmp_path / "r.txt")], capsys, "--out must end in .csv or .json")


def test_unwritable_out_fails_before_measuring(model_dirs, text_file, tmp_path, capsys, monkeypatch, no_measuring):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() == 0:  # root writes anywhere: let the permission check see what a user would
        access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked and access(path, mode))
    _fails(
        [
            "profile",
            "--model",
            str(model_dirs["gpt2"]),
            "--text-file",
            str(text_file),
            *ROWS,
            "--out",
            str(locked / "new" / "r.csv"),
        ],
        capsys,
        "no write permission in",
    )


def test_out_in_a_missing_directory_is_created_and_written_whole(model_dirs, text_file, tmp_path, monkeypatch, capsys):
    out = tmp_path / "new" / "dir" / "r.csv"
    args = ["profile", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)]
    assert main(args) == 0
    before = out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["r.csv"]  # no temporary file left beside it

    def half_written(self, path, **kwargs):
        Path(path).write_text("block,r2")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_written)
    _fails(args, capsys, f"could not write {out}", "No space left on device")
    assert out.read_text() == before and [p.name for p in out.parent.iterdir()] == ["r.csv"]


@pytest.mark.parametrize("device", ["cuda", "mps", "tpu"])
def test_missing_device_fails_first(device, model_dirs, tmp_path, monkeypatch, capsys, no_measuring):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    _fails(
        [
            "profile",
            "--model",
            str(model_dirs["gpt2"]),
            "--text-file",
            str(tmp_path / "not-read.txt"),
            "--device",
            device,
        ],
        capsys,
        f"device '{device}' is not available on this machine; available: cpu",
    )


def test_model_directory_problems_are_one_message(model_dirs, text_file, tmp_path, capsys, no_measuring):
    """Missing weights, a truncated safetensors file, no tokenizer, no such directory: a message, never a traceback."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(model_dirs["gpt2"], broken)
    args = ["profile", "--model", str(broken), "--text-file", str(text_file), *ROWS]
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    _fails(args, capsys, f"{weights} is truncated or corrupt")
    weights.unlink()
    _fails(args, capsys, "has a config but no weights")
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(model_dirs["gpt2"] / name, bare / name)
    _fails(["profile", "--model", str(bare), "--text-file", str(text_file), *ROWS], capsys, "has no usable tokenizer")
    _fails(["profile", "--model", str(tmp_path / "nope"), "--text-file", str(text_file)], capsys, "no such directory")


def test_version_and_plain_help(capsys):
    import linrec

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"linrec {linrec.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", linrec.__version__)
    for argv in (["--help"], ["profile", "--help"], ["bench", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert "``" not in out and "(default: None)" not in out
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for expected in (
        "one of: paper, offline, smoke",
        "stdlib-prose, stdlib-code",
        "wikitext-2",
        "one of: float32, fp32, bfloat16",
        "sequences per forward pass (default: the profile's, else 8)",
        "(default: 0)",
    ):
        assert expected in help_text, expected


def test_bench_checks_its_arguments_before_timing(tmp_path, capsys, monkeypatch):
    import linrec.bench

    monkeypatch.setattr(linrec.bench, "run_bench", lambda *a: (_ for _ in ()).throw(AssertionError("timed")))
    (tmp_path / "t.csv").mkdir()
    _fails(["bench", "--out", str(tmp_path / "t.csv")], capsys, "is a directory")
    with pytest.raises(SystemExit):
        main(["bench", "--peak-tokens", "20000,-5"])
    assert "expected a positive integer; got '-5'" in capsys.readouterr().err


def test_profile_options_are_honoured_or_refused(model_dirs, text_file, monkeypatch, capsys, no_measuring):
    import linrec.experiment.resolve

    for option in (["--revision", "step1000"], ["--device-map", "auto"], ["--trust-remote-code"]):
        _fails(["profile", "--profile", "smoke", *option], capsys, f"{option[0]} apply to --model", "Drop them")
    _fails(
        ["profile", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--revision", "main"],
        capsys,
        "--revision selects a hub revision",
        "is a local directory",
    )
    import linrec.data.tokens
    from linrec.models.loading import load_model

    seen = {}

    def load_profile_model(profile, model, checkpoint="final", **kwargs):
        seen.update(device=profile.device, dtype=profile.dtype)
        return load_model(str(model_dirs["gpt2"]))

    def make_batches(*args, batch_size, **kwargs):
        seen["batch_size"] = batch_size
        raise AssertionError("stop before measuring")

    monkeypatch.setattr(linrec.experiment.resolve, "load_profile_model", load_profile_model)
    monkeypatch.setattr(linrec.data.tokens, "make_batches", make_batches)
    with pytest.raises(AssertionError, match="stop before"):
        main(["profile", "--profile", "offline", "--dtype", "bfloat16", "--device", "cpu", "--no-progress"])
    assert seen == {"device": "cpu", "dtype": "bfloat16", "batch_size": 16}  # the offline profile's batch size


def test_top_level_help_imports_no_command_and_no_torch():
    probe = (
        "import sys\nfrom linrec.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m in ('torch', 'pandas') or m.startswith('linrec.commands')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"
    assert all(name in done.stdout for name in ("profile", "plot", "zoo", "bench"))


def test_profile_table_names_its_versions_prints_short_names_and_help_explains_every_column(
    model_dirs, text_file, tmp_path, capsys
):
    import datetime

    import torch
    import transformers

    import linrec

    out = tmp_path / "r.csv"
    assert (
        main(["profile", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert str(model_dirs["gpt2"]) not in printed and model_dirs["gpt2"].name in printed
    assert str(text_file) not in printed and text_file.name in printed
    table = pd.read_csv(out)
    assert table.model.iloc[0] == str(model_dirs["gpt2"])  # the file keeps the model as given
    assert (table.linrec_version == linrec.__version__).all() and (table.torch_version == torch.__version__).all()
    assert (table.transformers_version == transformers.__version__).all()
    age = datetime.datetime.now(datetime.UTC) - datetime.datetime.fromisoformat(table.measured_at.iloc[0])
    assert datetime.timedelta(0) <= age < datetime.timedelta(minutes=10)
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    help_lines = capsys.readouterr().out.splitlines()
    described = {line.split()[0] for line in help_lines if line.startswith("  ") and not line.startswith("   ")}
    assert set(table.columns) <= described, set(table.columns) - described


def test_plot_draws_a_profile_table_one_panel_per_model(model_dirs, text_file, tmp_path, capsys, monkeypatch):
    import linrec.plots.pretrained as pretrained

    out = tmp_path / "r.csv"
    assert (
        main(["profile", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)])
        == 0
    )
    two = tmp_path / "two.csv"
    table = pd.read_csv(out)
    pd.concat([table, table.assign(model="other/model", r2_lin=0.5)]).to_csv(two, index=False)
    drawn, real = [], pretrained.profile_figure
    monkeypatch.setattr(pretrained, "profile_figure", lambda t, title: drawn.append(t) or real(t, title))
    figure = tmp_path / "fig" / "profile.png"
    assert main(["plot", str(two), "--out", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(dict.fromkeys(drawn[-1].model)) == [model_dirs["gpt2"].name, "other/model"]  # short names, in order
    assert main(["plot", str(two), "--out", str(figure), "--model", "other/model"]) == 0
    assert set(drawn[-1].model) == {"other/model"}
    capsys.readouterr()
    _fails(["plot", str(two), "--out", str(figure), "--model", "nosuch"], capsys, "no model ['nosuch']", "other/model")
    _fails(["plot", str(two), "--out", str(tmp_path / "f.jpg")], capsys, "--out must end in .png or .pdf or .svg")
    _fails(["plot", str(tmp_path / "missing.csv"), "--out", str(figure)], capsys, "cannot read the table")
