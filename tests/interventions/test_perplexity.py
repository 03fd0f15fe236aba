"""linrec.interventions.perplexity: Perplexity with FFN blocks swapped out: per-block ΔPPL and the compression
frontier."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest
import torch
from torch import nn

from conftest import local_text, tiny_model
from linrec.core.capture import capture_moments
from linrec.core.replacements import ZeroFFN, fit_replacements
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.interventions.perplexity import (
    WindowNLL,
    compression_frontier,
    delta_ppl_interval,
    greedy_selection,
    perplexity,
    removal_deltas,
    swap_deltas,
    variant_deltas,
    window_nll,
)
from linrec.interventions.surgery import install, n_stored, param_table, swapped
from support.planted_models import planted_model


@pytest.fixture(scope="module")
def setup(tokenizer, text):
    fit = make_batches(tokenizer, text, seq_len=32, max_rows=4096, batch_size=16)
    model = planted_model(fit, steps=150)
    evals = make_batches(tokenizer, local_text(4000, seed=1), seq_len=32, max_rows=1024, batch_size=16)
    maps = fit_replacements(capture_moments(model, fit, folds=4, progress=False), "affine")
    return model, evals, maps


def loss_ppl(model: nn.Module, batches) -> float:
    """Perplexity from the model's own loss (an independent path: no window_nll), token-weighted over batches."""
    total, tokens = 0.0, 0
    for batch in batches:
        n = batch.input_ids.numel() - batch.input_ids.shape[0]  # no padding: every pair is scored
        total += float(model(batch.input_ids, labels=batch.input_ids).loss) * n
        tokens += n
    return math.exp(total / tokens)


def order_of(steps) -> list[int]:
    return [b for b, _, _ in steps]


def hand_rolled_greedy(model, evals, maps, budget):
    """The rule written out: order by single ΔPPL, add each block whose joint ΔPPL with those kept stays within the
    budget, skip the others."""
    base = loss_ppl(model, evals)

    def cost(blocks):
        with swapped(model, {b: maps[b] for b in blocks}):
            return loss_ppl(model, evals) - base

    single = {b: cost([b]) for b in maps}
    order = sorted(maps, key=lambda b: (single[b], b))
    kept, steps = [], []
    for b in order:
        joint = cost([*kept, b])
        steps.append((b, joint, joint <= budget))
        if joint <= budget:
            kept.append(b)
    return single, steps, kept, cost


@pytest.mark.slow
def test_greedy_selection_agrees_with_the_rule_written_out_on_a_planted_model(setup):
    model, evals, maps = setup
    single, steps, kept, cost = hand_rolled_greedy(model, evals, maps, math.inf)
    base = loss_ppl(model, evals)
    assert steps[0][0] == 1 and abs(single[1]) < 1e-6 * base  # the planted block: exactly affine, free, first
    assert all(single[b] > 1e-3 * base for b in (0, 2, 3))  # the trained nonlinear blocks cost
    first, second, third = (b for b, _, _ in steps[:3])
    budget = (steps[1][1] + steps[2][1]) / 2  # between the joint cost of the first two and of the first three
    _, steps, kept, _ = hand_rolled_greedy(model, evals, maps, budget)
    table = greedy_selection(model, evals, maps, budget, progress=False)
    assert kept[:2] == [first, second] and third not in kept and list(table.block[1:]) == order_of(steps)
    assert list(table.kept) == [
        True,
        *(fits for _, _, fits in steps),
    ]  # a block over the budget is skipped, not the end
    for (b, joint, _), row in zip(steps, table.iloc[1:].itertuples(), strict=True):
        assert row.block == b and row.delta_ppl == pytest.approx(joint, rel=1e-4, abs=1e-6)
        assert row.single_delta_ppl == pytest.approx(single[b], rel=1e-4, abs=1e-6)
        assert row.delta_ppl_low <= row.delta_ppl <= row.delta_ppl_high
    saved = {b: n_stored(model.transformer.h[b].mlp) - n_stored(maps[b]) for b in maps}
    assert list(table.params_saved[:4]) == [0, saved[first], saved[first] + saved[second],
                                            saved[first] + saved[second] + saved[third]]  # fmt: skip
    assert cost([0, 2, 3]) > 1.1 * (single[0] + single[2] + single[3])  # blocks interact: joint is no sum


def test_a_relative_budget_is_a_share_of_the_models_perplexity(setup):
    model, evals, maps = setup
    base = window_nll(model, evals)
    relative = greedy_selection(model, evals, maps, "100%", progress=False, base=base)
    absolute = greedy_selection(model, evals, maps, base.ppl, progress=False, base=base)
    assert relative.equals(absolute)


@pytest.mark.parametrize("budget", [0, -1, "0%", "nan", float("nan"), "inf", "x%", "", "5%%"])
def test_a_budget_must_be_a_finite_number_above_zero(budget, setup):
    model, evals, maps = setup
    with pytest.raises(LinrecError, match="finite number above 0"):
        greedy_selection(model, evals, maps, budget, progress=False)


def test_install_is_for_good_and_save_pretrained_refuses_while_replacements_are_in(setup, tmp_path):
    model = planted_model()
    ids = setup[1].input_ids[:2]
    with swapped(model, {0: ZeroFFN()}):
        with pytest.raises(LinrecError, match=r"FFN blocks 0 of this model are replaced.*replacement directory"):
            model.save_pretrained(tmp_path / "inside")
        with swapped(model, {2: ZeroFFN()}):
            with pytest.raises(LinrecError, match="FFN blocks 0, 2 of this model"):
                model.save_pretrained(tmp_path / "nested")
        with pytest.raises(LinrecError, match="FFN blocks 0 of this model"):
            model.save_pretrained(tmp_path / "inside")
    model.save_pretrained(tmp_path / "after")  # restored: the model saves as transformers saves it
    assert (tmp_path / "after" / "config.json").is_file() and not (tmp_path / "inside").exists()
    replacement = ZeroFFN()
    install(model, {3: replacement})
    assert model.transformer.h[3].mlp is replacement
    with pytest.raises(LinrecError, match="FFN blocks 3 of this model"):
        model.save_pretrained(tmp_path / "installed")
    out = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert out.shape == (2, ids.shape[1] + 3)


def test_perplexity_matches_the_models_own_loss(eval_text):
    model = tiny_model("gpt2")
    losses = [float(model(b.input_ids, labels=b.input_ids).loss) for b in eval_text]  # equal batches, no padding
    assert perplexity(model, eval_text) == pytest.approx(math.exp(sum(losses) / len(losses)), rel=1e-5)
    model.train()
    with pytest.raises(LinrecError, match="eval"):
        perplexity(model, eval_text)


def test_a_batch_whose_logits_are_too_large_is_scored_a_window_at_a_time_with_the_same_result(eval_text, monkeypatch):
    from linrec.interventions import perplexity as ppl

    model = tiny_model("gpt2")
    whole = window_nll(model, eval_text)
    calls = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda **k: (calls.append(k["input_ids"].shape[0]), forward(**k))[1])
    monkeypatch.setattr(ppl, "LOGITS_BYTES", 1)  # less than one window's logits: one window per forward
    parts = window_nll(model, eval_text)
    assert set(calls) == {1} and len(calls) == len(eval_text.input_ids)
    assert torch.allclose(parts.nll, whole.nll, rtol=1e-6) and torch.equal(parts.tokens, whole.tokens)


def test_the_perplexity_bar_counts_its_forward_calls_against_their_total(eval_text, monkeypatch, capsys):
    """Its calls come from a generator, which tqdm cannot count: the bar read "n/?" until given their number."""
    from linrec.interventions import perplexity as ppl

    monkeypatch.setattr(ppl, "LOGITS_BYTES", 1)  # one window per forward call: more calls than batches
    window_nll(tiny_model("gpt2"), eval_text, progress=True)
    windows = len(eval_text.input_ids)
    lines = capsys.readouterr().err.splitlines()  # (a log: one line as the stage starts, one as it ends)
    assert lines[0].startswith(f"perplexity: 0/{windows} batch")
    assert lines[-1].startswith(f"perplexity: {windows}/{windows} batch")


def test_window_nll_sums_each_windows_token_losses(eval_text):
    model = tiny_model("gpt2")
    windows = window_nll(model, eval_text)
    ids = eval_text.input_ids[:5]
    logp = torch.log_softmax(model(ids).logits.double(), -1)[:, :-1]
    by_hand = -logp.gather(2, ids[:, 1:, None])[..., 0].sum(1)  # an independent per-window sum, no padding here
    assert torch.allclose(windows.nll[:5], by_hand, rtol=1e-5)
    assert windows.tokens.tolist() == [eval_text.seq_len - 1] * len(eval_text.input_ids)
    assert windows.ppl == pytest.approx(perplexity(model, eval_text), rel=1e-12)


def test_several_variants_of_a_block_score_as_each_set_apart_bit_for_bit_in_the_order_given(setup, monkeypatch):
    from linrec.interventions import prefix

    model, evals, maps = setup
    blocks = sorted(maps)[-2:]
    zeros = {b: ZeroFFN() for b in blocks}
    apart = [swap_deltas(model, evals, {b: kind[b] for b in blocks}, progress=False) for kind in (maps, zeros)]
    recorded = []
    original = prefix.LayerPrefix._record
    monkeypatch.setattr(prefix.LayerPrefix, "_record", lambda self, b: (recorded.append(b), original(self, b))[1])
    variants = [(b, kind[b]) for kind in (zeros, maps) for b in reversed(blocks)]  # neither by kind nor by depth
    together = variant_deltas(model, evals, variants, progress=False)
    expected = pd.concat([apart[1].iloc[::-1], apart[0].iloc[::-1]], ignore_index=True)
    pd.testing.assert_frame_equal(together, expected, check_exact=True)
    assert recorded == blocks  # the layers below each block once, in depth order, for both of its variants


def test_a_swap_that_changes_nothing_costs_zero_with_a_zero_width_interval(eval_text):
    model = tiny_model("gpt2")
    itself = copy.deepcopy(model.transformer.h[1].mlp)
    table = swap_deltas(model, eval_text, {1: itself}, progress=False)
    assert (table.delta_ppl[0], table.delta_ppl_low[0], table.delta_ppl_high[0]) == (0.0, 0.0, 0.0)


def test_delta_ppl_interval_is_a_seeded_paired_bootstrap():
    tokens = torch.full((6,), 10)
    base = WindowNLL(torch.full((6,), 20.0, dtype=torch.float64), tokens)  # every window at 2 nats per token
    shifted = WindowNLL(base.nll + 5.0, tokens)  # every window 0.5 nats per token worse: a known ΔPPL
    expected = math.exp(2.5) - math.exp(2.0)
    assert shifted.ppl - base.ppl == pytest.approx(expected, rel=1e-12)
    low, high = delta_ppl_interval(base, shifted)
    assert low == pytest.approx(expected, rel=1e-12) and high == pytest.approx(expected, rel=1e-12)
    flat = WindowNLL(torch.full((40,), 20.0, dtype=torch.float64), torch.full((40,), 10))
    noisy = WindowNLL(torch.linspace(15.0, 30.0, 40, dtype=torch.float64), flat.tokens)
    point = noisy.ppl - flat.ppl
    low, high = delta_ppl_interval(flat, noisy, seed=3)
    assert low < point < high  # windows differ: a real interval around the point estimate
    assert (low, high) == delta_ppl_interval(flat, noisy, seed=3) != delta_ppl_interval(flat, noisy, seed=4)
    with pytest.raises(LinrecError, match="same windows"):
        delta_ppl_interval(base, WindowNLL(base.nll[:5], tokens[:5]))


def test_compression_frontier_swaps_in_order_of_r2(fit_text, eval_text):
    model = tiny_model("gpt2")
    moments = capture_moments(model, fit_text, folds=4, progress=False)
    replacements = {**fit_replacements(moments, "affine", blocks=[1]), **fit_replacements(moments, "mean", blocks=[0])}
    frontier = compression_frontier(model, eval_text, replacements, {0: 0.5, 1: 0.9}, progress=False)
    assert list(frontier.block[1:]) == [1, 0] and frontier.delta_ppl[0] == 0
    assert frontier.delta_ppl_low[0] == frontier.delta_ppl_high[0] == 0  # step 0 is the model itself
    assert (frontier.delta_ppl_low <= frontier.delta_ppl).all()
    assert (frontier.delta_ppl <= frontier.delta_ppl_high).all()
    saved = param_table(model, replacements).set_index("block").saved
    assert list(frontier.params_saved) == [0, saved[1], saved[1] + saved[0]]
    total = sum(p.numel() for p in model.parameters())
    assert frontier.model_saved_fraction.iloc[-1] == pytest.approx((saved[0] + saved[1]) / total)
    alone = swap_deltas(model, eval_text, {1: replacements[1]}, progress=False)
    assert frontier.ppl[1] == pytest.approx(alone.ppl[0], rel=1e-12)  # step 1 = the first block alone
    with swapped(model, replacements):
        assert frontier.ppl.iloc[-1] == pytest.approx(perplexity(model, eval_text), rel=1e-12)
    with pytest.raises(LinrecError, match="no R²_lin for blocks"):
        compression_frontier(model, eval_text, replacements, {0: 0.5}, progress=False)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_removing_a_whole_block_is_the_model_without_that_layer(family, eval_text):
    """Against the model rebuilt without the layer (its ModuleList one entry shorter), scored by its own loss."""
    model = tiny_model(family)
    table = removal_deltas(model, eval_text, [0, 1], progress=False).set_index("block")
    layers = model.transformer.h if family == "gpt2" else model.model.layers
    for b in (0, 1):
        shorter = copy.deepcopy(model)
        kept = nn.ModuleList([layer for i, layer in enumerate(layers) if i != b])
        if family == "gpt2":
            shorter.transformer.h = copy.deepcopy(kept)
        else:
            shorter.model.layers = copy.deepcopy(kept)
        with torch.no_grad():
            assert table.ppl[b] == pytest.approx(loss_ppl(shorter, eval_text), rel=1e-5)
        assert table.params[b] == n_stored(layers[b])
    assert (table.base_ppl == perplexity(model, eval_text)).all()
    assert [type(layer).forward for layer in layers] == [layer.forward.__func__ for layer in layers]  # put back


def test_a_budget_nothing_fits_costs_only_the_single_swaps(setup, monkeypatch):
    from linrec.interventions import perplexity

    model, evals, every = setup
    maps = {b: every[b] for b in (0, 2, 3)}  # the trained blocks, each costly (block 1 is planted free)
    base = window_nll(model, evals)
    single = swap_deltas(model, evals, maps, progress=False, base=base)
    passes = []
    real = perplexity.window_nll
    monkeypatch.setattr(perplexity, "window_nll", lambda *a, **k: passes.append(1) or real(*a, **k))
    table = greedy_selection(model, evals, maps, 1e-9, progress=False, base=base, single=single)
    assert passes == [] and not table.kept[1:].any()  # each step is a block alone: its single swap, no pass again
    alone = single.set_index("block")
    assert all(row.delta_ppl == alone.delta_ppl[row.block] for row in table.iloc[1:].itertuples())


def test_a_step_counts_the_ffn_its_kind_keeps_in_use(tokenizer, text):
    """A first-apart:own map never placed before its step still runs the block's FFN at the first position: the step
    saves the FFN's numbers less the map's and the FFN's, i.e. minus the map's (it was counted before placement)."""
    from linrec.core.measure import Measurement
    from linrec.interventions.perplexity import joint_steps

    fit = make_batches(tokenizer, text, seq_len=32, max_rows=1536, batch_size=16)
    evals = make_batches(tokenizer, local_text(2000, seed=1), seq_len=32, max_rows=256, batch_size=16)
    model = tiny_model("gpt2")
    maps = Measurement.capture(model, fit, folds=4, progress=False).replacements("first-apart:own", [1])
    steps = joint_steps(model, evals, maps, [1], window_nll(model, evals), progress=False)
    assert int(steps.params_saved.iloc[1]) == -(32 * 32 + 32)
