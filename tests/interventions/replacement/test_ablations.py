"""Replacement kinds side by side: numbers stored by each kind's formula, removal scored against a hook written
out here, the second text, thirds of depth, and decoding speed per kind."""

from __future__ import annotations

import pytest
import torch

import linrec
from conftest import local_text
from linrec.core.replacements import Kind
from linrec.data.tokens import make_batches
from linrec.interventions.perplexity import swap_deltas
from linrec.interventions.replacement.ablations import ablations, depth_third
from linrec.interventions.replacement.replace import first_prompt
from linrec.interventions.surgery import ffn_site, n_stored
from linrec.models.loading import load_pretrained
from support.replace import independent_ppl

KINDS = ["zero", "mean", "affine", "lowrank:4", "lowrank:50%"]


@pytest.fixture(scope="module")
def setup(model_dirs, tokenizer, text):
    model, _ = load_pretrained(str(model_dirs["gpt2"]))
    fit = make_batches(tokenizer, text, seq_len=32, max_rows=1536, batch_size=16)
    evals, second = (
        make_batches(tokenizer, local_text(3000, seed=s), seq_len=32, max_rows=768, batch_size=16) for s in (1, 2)
    )
    measured = linrec.Measurement.capture(model, fit, folds=4, progress=False)
    table = ablations(model, evals, measured, KINDS, second_batches=second, prompt=first_prompt(evals), progress=False)
    return model, measured, evals, second, table


def test_each_kind_stores_what_its_formula_says(setup):
    model, _, _, _, table = setup
    d, ffn = 32, n_stored(ffn_site(model, 0)[2])
    half = Kind.parse("lowrank:50%").within(ffn, d, d)
    expected = {"zero": 0, "mean": d, "affine": d * d + d, "lowrank:4": 2 * d * 4 + d, str(half): 2 * d * half.rank + d}
    assert dict(zip(table.kind, table.params)) == expected
    assert table.ablation.tolist() == [k for k in KINDS for _ in (0, 1)] and table.block.tolist() == [0, 1] * 5
    assert (table.params[table.ablation == "lowrank:50%"] <= ffn / 2).all()


def test_removal_is_the_block_zeroed_by_a_hook(setup):
    model, _, evals, _, table = setup
    for block in (0, 1):
        hook = model.transformer.h[block].mlp.register_forward_hook(lambda m, i, out: torch.zeros_like(out))
        try:
            ppl = independent_ppl(model, evals)
        finally:
            hook.remove()
        row = table[(table.kind == "zero") & (table.block == block)].iloc[0]
        assert ppl == pytest.approx(row.ppl, rel=1e-5) and row.delta_ppl_low <= row.delta_ppl <= row.delta_ppl_high


def test_the_second_text_thirds_and_speed(setup):
    model, measured, _, second, table = setup
    again = swap_deltas(model, second, measured.replacements("affine"), progress=False)
    affine = table[table.kind == "affine"]
    assert affine.second_delta_ppl.tolist() == again.delta_ppl.tolist()
    assert affine.second_delta_ppl.tolist() != affine.delta_ppl.tolist()  # another text, other numbers
    assert table.depth.tolist() == [depth_third(b, 2) for b in table.block] == ["lower", "middle"] * 5
    speeds = table.groupby("ablation").tokens_per_s.nunique()
    assert (speeds == 1).all() and (table.tokens_per_s > 0).all()


def test_a_rank_at_the_width_is_refused_before_any_swap(setup):
    model, measured, evals, _, _ = setup
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("linrec.interventions.replacement.ablations.swap_deltas", lambda *a, **k: pytest.fail("swapped"))
        with pytest.raises(linrec.LinrecError, match="below the block's width 32"):
            ablations(model, evals, measured, ["affine", "lowrank:32"], progress=False)


def test_whole_block_removal_is_an_ablation_timed_where_a_model_is_left(setup):
    model, measured, evals, _, _ = setup
    prompt = first_prompt(evals)
    every = ablations(model, evals, measured, ["remove"], prompt=prompt, progress=False)
    layer = sum(p.numel() for p in model.transformer.h[0].parameters())
    assert every.params.tolist() == [0, 0] and every.original_params.tolist() == [layer, layer]
    assert every.tokens_per_s.isna().all()  # both blocks removed would leave no model to time
    one = ablations(model, evals, measured, ["remove"], [1], prompt=prompt, progress=False)
    assert one.ppl.tolist() == every.ppl[every.block == 1].tolist() and (one.tokens_per_s > 0).all()
