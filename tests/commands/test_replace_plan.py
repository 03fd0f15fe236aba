"""linrec.commands.replace_plan: What ``linrec replace`` says it understood and is about to do, on stderr before the
work."""

from __future__ import annotations

import re

import pytest

from linrec.cli import main

FAST = ["--max-rows", "384", "--seq-len", "16", "--folds", "3", "--eval-rows", "256"]  # (progress on: it is said then)


@pytest.mark.parametrize(
    "options, held, second",
    [
        (["--blocks", "1,0"], 3, 0),  # the model, then a joint step per block
        (["--max-ppl-increase", "1000%"], 4, 0),  # the model, each block alone, the second step (the first: alone)
        (["--max-ppl-increase", "1000%", "--refit", "--ablate", "zero", "--second-text-file", "SECOND"], 7, 4),
    ],
)
def test_replace_says_what_it_understood_and_the_passes_it_then_runs(
    options, held, second, model_dirs, text_file, tmp_path, monkeypatch, capsys
):
    """Before the work, on stderr: the budget or blocks as read, the candidates and kind, the perplexity passes (an
    upper bound, counted here by the evaluation batches they score) and an estimate of their time."""
    import linrec.interventions.perplexity as perplexity
    import linrec.interventions.replacement.replace as replacing

    scored = []
    window_nll = perplexity.window_nll

    def counting(model, batches, progress=False):
        scored.append(batches)  # (the batches kept: their ids stay theirs)
        return window_nll(model, batches, progress)

    monkeypatch.setattr(perplexity, "window_nll", counting)
    monkeypatch.setattr(replacing, "window_nll", counting)
    options = [str(text_file) if o == "SECOND" else o for o in options]
    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), *options]
    assert main([*argv, "--out", str(tmp_path / "out"), *FAST]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("replace: ")]
    if "--blocks" in options:
        assert said[0] == "replace: --blocks 1,0 -> these blocks replaced by affine maps, in this order"
    else:
        assert said[0].startswith("replace: --max-ppl-increase 1000% -> ΔPPL at most 1000% of the model's own")
    ablate = "; first each alone as zero" if "--ablate" in options else ""
    assert said[1] == f"replace: candidates: blocks 0-1 (all 2), kind affine{ablate}"
    passes = re.fullmatch(r"replace: perplexity passes: at most (\d+) over 256 held-out rows \(1 of the model.*\)"
                          r"(?:, and (\d+) over the second text's 256)?; then decoding is timed before and after",
                          said[2])  # fmt: skip
    assert passes is not None, said[2]
    assert (int(passes.group(1)), int(passes.group(2) or 0)) == (held, second)
    assert re.fullmatch(r"replace: estimate: at most about \d+ s for these passes \(one batch of 8 windows .*", said[3])
    timed, *run = scored  # the estimate's one batch first, then the passes, the held-out text's first
    assert len(timed.input_ids) == 8 and all(len(b.input_ids) == 16 for b in run)
    counted = [sum(b is run[0] for b in run), sum(b is not run[0] for b in run)]
    # --refit scores a step with the one-shot map too only where its block lies above a kept one: at most one here
    assert counted == [held, second] or ("--refit" in options and counted == [held - 1, second])


def test_the_task_budget_is_said_beside_the_perplexity_budget_or_alone(capsys):
    import argparse

    from linrec.commands.replace_plan import echo_request

    both = argparse.Namespace(tasks="piqa", max_accuracy_drop="0.02", max_ppl_increase="5%", order="measured")
    echo_request(both)
    said = capsys.readouterr().err.splitlines()
    assert said[0] == (
        "replace: --tasks piqa -> scored on the model before and after, and at every step within the perplexity "
        "budget (--max-accuracy-drop)"
    )
    assert said[1].startswith("replace: --max-ppl-increase 5% -> ΔPPL at most 5% of the model's own perplexity")
    assert "; --max-accuracy-drop 0.02 -> each task's score at most 0.02 below the model's own" in said[1]
    echo_request(argparse.Namespace(tasks="piqa", max_accuracy_drop="2%", max_ppl_increase=None, order="measured"))
    [first, alone] = capsys.readouterr().err.splitlines()
    assert alone.startswith("replace: --max-accuracy-drop 2% -> each task's score at most 2% of the model's own")
    assert alone.endswith("candidates tried cheapest first by their own ΔPPL, each swapped alone first")
