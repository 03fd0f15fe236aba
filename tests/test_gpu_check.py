"""book/gpu_check.py, the prepared GPU check: it refuses a machine without CUDA in one line before any work, and its
steps run end to end (here on the CPU, with small shapes) and write what they measured."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

SCRIPT = ROOT / "book" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_it_says_so_in_one_line_and_does_nothing(tmp_path):
    """As `make gpu-check` runs it: the system's python3 with PYTHONPATH=src, no virtual environment needed."""
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "out")], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=300)  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        "gpu-check: no CUDA device is visible here; run it on a machine with a GPU"
    ]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_its_steps_run_and_write_what_they_measured(tmp_path):
    out = tmp_path / "out"
    small = ["--device", "cpu", "--large", "EleutherAI/pythia-70m", "--small", "EleutherAI/pythia-70m"]
    small += ["--large-dtype", "float32"]  # a CPU without bfloat16 instructions: 175 s, 89 here
    steps = ["--steps", "cpu_vs_gpu,grams,layouts,products,profile,large", "--gram-rows", "256"]
    steps += ["--profile-blocks", "2"]
    sizes = ["--small-tokens", "4096", "--tokens", "4096", "--memory", "2GB"]  # the fewest the sample and folds need
    code = _module().main([str(out), *small, *sizes, *steps])
    results = json.loads((out / "gpu-check.json").read_text())
    assert code == 0, results
    same = results["steps"]["cpu_vs_gpu"]
    assert same["status"] == "ok" and same["r2_lin_max_abs_difference"] == 0  # the CPU against itself
    products = results["steps"]["grams"]
    assert products["status"] == "ok" and products["rows"] == 256
    for width in (768, 512):  # GPT-2's width and the large shape's: the three ways give the same sums
        assert products[f"largest_difference_{width}"] < 1e-12
        assert all(products[f"{way}_{width}_tokens_per_s"] > 0 for way in ("core", "whole", "joined"))
    layouts = results["steps"]["layouts"]
    assert layouts["status"] == "ok" and all(layouts[f"taken_{w}"] == "split" for w in (256, 768, 1024, 2048))
    schemes = results["steps"]["products"]
    assert schemes["status"] == "ok" and schemes["rows"] == 256
    bounds = {"float32": 5e-6, "ozaki:3": 5e-5, "ozaki:4": 5e-7, "ozaki:5": 5e-9, "ozaki:6": 5e-11}  # (seen: a tenth)
    for width in (768, 512):  # each scheme timed against float64, its error below its bound
        assert schemes[f"float64_{width}_error"] == 0 and schemes[f"float64_{width}_vs_float64"] == 1
        assert all(schemes[f"{name}_{width}_s"] > 0 for name in schemes["schemes"])
        assert all(schemes[f"{name}_{width}_error"] < bound for name, bound in bounds.items())
    assert schemes["cublas_emulation"] == "not available: no CUDA device (the check runs on the CPU)"
    profiled = results["steps"]["profile"]
    assert profiled["status"] == "ok"
    for run in ("first", "second", "kept"):  # on the CPU the folds stay in host memory either way
        assert profiled[run]["plan"].startswith("plan: ") and profiled[run]["wall_s"] > 0
        assert "aten::addmm" in [e["op"] for e in profiled[run]["host"]]  # the moments' products, on the CPU
    large = results["steps"]["large"]
    assert large["status"] == "ok" and large["r2_lin"]["blocks"] == 6 and large["tokens"] >= 4096
    assert large["dtype"] == "float32"
    assert large["plan"].startswith("plan: ") and large["peak_host_gb"] > 0
    ratios = ("capture_vs_truncated_forward", "all_extras_vs_truncated_forward", "ozaki5_vs_truncated_forward")
    assert all(large[ratio] > 0 for ratio in ratios)
    assert "## large" in (out / "gpu-check.md").read_text()


def test_the_layouts_step_times_both_layouts_and_says_which_the_core_takes():
    out = _module().layouts(torch.device("cpu"), [16, 40], rows=64, repeats=2)
    assert out["rows"] == 64 and out["one_product_width"] >= 1537  # (GPT-2's [x | 1 | y] among the narrow)
    for width in (16, 40):
        assert out[f"split_{width}_s"] > 0 and out[f"one_product_{width}_s"] > 0
        assert out[f"one_product_{width}_vs_split"] > 0 and out[f"taken_{width}"] == "split"  # (the CPU's)
