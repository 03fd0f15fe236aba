"""linrec.core.capture: One frozen forward pass over token batches, streaming each FFN block's (X, Y) rows to sinks."""

from __future__ import annotations

import re

import pytest
import torch

from conftest import tiny_model
from linrec.core.capture import capture_moments, rows_needed
from linrec.core.fit import recoverability, report_table
from linrec.core.measure import measure
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from linrec.models.arch import BlockSpec, select_blocks


def _advised_rows(err: pytest.ExceptionInfo) -> int:
    return int(re.search(r"max_rows=(\d+)", str(err.value)).group(1))


def test_forward_stops_after_deepest_block(tokenizer, text):
    model = tiny_model("gpt2")
    calls = []
    model.lm_head.register_forward_hook(lambda *a: calls.append("head"))
    model.transformer.h[1].register_forward_hook(lambda *a: calls.append("block1"))
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=128)
    capture_moments(model, batches, blocks=[0], folds=2, progress=False)
    assert calls == []
    capture_moments(model, batches, blocks=[1], folds=2, progress=False)
    assert "head" not in calls


def test_results_do_not_depend_on_batch_size(tokenizer, text):
    model = tiny_model("llama")
    tables = []
    for batch_size in (1, 3, 16):
        batches = make_batches(tokenizer, text, seq_len=16, max_rows=1024, batch_size=batch_size)
        tables.append(report_table(recoverability(capture_moments(model, batches, progress=False))))
    for t in tables[1:]:
        assert (t.r2_lin - tables[0].r2_lin).abs().max() <= 1e-10
        assert (t.r2_feature_median - tables[0].r2_feature_median).abs().max() <= 1e-10


def test_padding_positions_are_excluded(tokenizer, text):
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=512, batch_size=4)
    padded_ids = torch.cat([batches.input_ids, torch.zeros(32, 4, dtype=torch.long)], 1)
    mask = torch.cat([batches.attention_mask, torch.zeros(32, 4, dtype=torch.long)], 1)
    padded = TokenBatches(padded_ids, mask, 4)
    a = capture_moments(model, batches, folds=2, progress=False)
    b = capture_moments(model, padded, folds=2, progress=False)  # right padding: causal rows unchanged
    for blk in a:
        for ma, mb in zip(a[blk], b[blk]):
            assert ma.n == mb.n and torch.allclose(ma.cxx, mb.cxx, atol=1e-6)


def test_bfloat16_model_gives_float64_moments(tokenizer, text):
    model = tiny_model("llama").to(torch.bfloat16)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    moments = capture_moments(model, batches, folds=2, progress=False)
    assert all(m.cxx.dtype == torch.float64 for folds in moments.values() for m in folds)


def test_block_selection_errors():
    blocks = [BlockSpec(i, "a", "a") for i in range(3)]
    assert [b.index for b in select_blocks(blocks, [2, 0])] == [0, 2]
    with pytest.raises(LinrecError, match="0..2"):
        select_blocks(blocks, [5])


@pytest.mark.parametrize(
    ("max_rows", "seq_len", "folds", "advised"),
    [
        (32, 16, 5, 80),  # 2 sequences cannot fill 5 folds; 5 of 16 tokens leave 4 (64 rows) to train on
        (40, 8, 5, 56),  # 5 sequences: each training split has 4 x 8 = 32 rows, 33 are needed
        (48, 48, 2, 96),  # 48 rows exceed width + 1, but one sequence cannot fill 2 folds
    ],
)
def test_too_few_rows_for_width_advice_works_when_followed(tokenizer, text, max_rows, seq_len, folds, advised):
    """Folds are whole sequences: the advised max_rows, followed, gives every training split width + 1 rows."""
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=seq_len, max_rows=max_rows)
    with pytest.raises(LinrecError, match="are too few for width 32 .* folds are whole sequences") as err:
        capture_moments(model, batches, folds=folds, progress=False)
    assert _advised_rows(err) == advised
    followed = make_batches(tokenizer, text, seq_len=seq_len, max_rows=advised)
    table = report_table(recoverability(capture_moments(model, followed, folds=folds, progress=False)))
    assert (table.n_train >= 33).all()


def test_rows_needed_is_the_fewest_whole_sequences():
    """Against brute force over the balanced round-robin split: n sequences, smallest training split n - ceil(n / k)."""
    for width, seq_len, folds in [(256, 64, 5), (32, 16, 5), (32, 1, 3), (7, 4, 2), (100, 128, 10)]:
        n = next(n for n in range(folds, 10_000) if (n - -(-n // folds)) * seq_len >= width + 1)
        assert rows_needed(width, folds, seq_len) == n * seq_len
    assert rows_needed(256, 5, 64) == 448  # the case: 322 rows (6 sequences) left 256 training rows
    assert rows_needed(256, 5) == 322  # one row per sequence: the old bound


@pytest.mark.parametrize("folds", [1, 0])
def test_measure_refuses_fewer_than_two_folds(tokenizer, text, folds):
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    with pytest.raises(LinrecError, match=f"folds must be at least 2; got {folds}"):
        measure(tiny_model("gpt2"), batches, folds=folds, progress=False)


def test_measure_and_perplexity_refuse_a_model_in_training_mode(tokenizer, text):
    """Dropout in training mode lowers R² at random; both refuse, with the same advice, before any forward pass."""
    from linrec.interventions.perplexity import perplexity

    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    model = tiny_model("gpt2").train()
    for run in (lambda: measure(model, batches, progress=False), lambda: perplexity(model, batches)):
        with pytest.raises(LinrecError, match=r"training mode .*call model\.eval\(\) first"):
            run()
    assert measure(model.eval(), batches, folds=2, progress=False)["r2_lin"].notna().all()


@pytest.mark.parametrize("rcond", [float("nan"), float("inf"), -1e-10, "1e-10"])
def test_a_bad_rcond_is_refused_before_the_capture(tokenizer, text, rcond, monkeypatch):
    """A NaN cutoff compares false with every eigenvalue and would drop every direction (R² near 0) unnoticed."""
    from linrec.core import measure as measure_module
    from linrec.core.fit import fit_affine
    from linrec.core.moments import Moments

    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    monkeypatch.setattr(measure_module, "capture_positions", lambda *a, **k: pytest.fail("captured before the check"))
    with pytest.raises(LinrecError, match=r"rcond \(the null-direction cutoff.*must be a finite number at least 0"):
        measure(tiny_model("gpt2"), batches, rcond=rcond, progress=False)
    x = torch.randn(50, 3, dtype=torch.float64)
    with pytest.raises(LinrecError, match="rcond .*must be a finite number"):
        fit_affine(Moments.from_rows(x, x), rcond)


@pytest.mark.parametrize(
    "config, settings",
    [
        ("probe", {"lr": float("nan")}),
        ("probe", {"val_fraction": 1.0}),
        ("baseline", {"lr_factors": (1.0, float("nan"))}),
        ("baseline", {"momentum": float("inf")}),
    ],
)
def test_training_settings_that_nan_would_silently_change_are_refused(config, settings):
    from linrec.interventions.baseline import BaselineConfig
    from linrec.interventions.probes import ProbeConfig

    with pytest.raises(LinrecError, match=f"{next(iter(settings))}.* must be a finite number"):
        (ProbeConfig if config == "probe" else BaselineConfig)(**settings)
    (ProbeConfig if config == "probe" else BaselineConfig)()  # the defaults pass


def test_a_spec_out_of_depth_order_captures_every_block(tokenizer, text):
    """The forward stops after the block that runs last, whatever the spec numbers it."""
    model = tiny_model("llama")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 64, batch_size=8)
    spec = [("model.layers.1.mlp", "model.layers.1.mlp"), ("model.layers.0.mlp", "model.layers.0.mlp")]
    moments = capture_moments(model, batches, folds=3, spec=spec, progress=False)
    in_order = capture_moments(model, batches, folds=3, progress=False)
    assert sorted(moments) == [0, 1]
    assert torch.equal(moments[0][0].cxy, in_order[1][0].cxy) and torch.equal(moments[1][0].cxy, in_order[0][0].cxy)


def test_a_block_whose_modules_never_run_is_named(tokenizer, text):
    model = tiny_model("gpt2")
    model.unused = torch.nn.Linear(32, 32)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 64, batch_size=8)
    with pytest.raises(LinrecError, match=r"blocks \[1\] got no rows: their modules never ran"):
        capture_moments(
            model, batches, folds=3, spec=[("transformer.h.0.mlp",) * 2, ("unused", "unused")], progress=False
        )
