"""Choosing blocks under a perplexity budget (joint ΔPPL, ordered by single ΔPPL), and replacements for good."""

import math

import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from conftest import VOCAB, local_text
from linrec.core.capture import capture_moments
from linrec.core.replacements import ZeroFFN, fit_replacements
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.interventions.perplexity import budget_ppl, greedy_selection, parse_budget, window_nll
from linrec.interventions.surgery import install, n_stored, swapped


def planted_model(batches=None, steps: int = 0) -> nn.Module:
    """A 4-block GPT-2 whose block 1 is exactly affine (its activation removed), trained ``steps`` steps on
    ``batches`` so that its blocks matter to its predictions."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_layer=4, n_head=4, n_embd=32, n_positions=64))
    model.transformer.h[1].mlp.act = nn.Identity()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        ids = batches.input_ids[(step * 16) % len(batches.input_ids) :][:16]
        model(ids, labels=ids).loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    return model.eval().requires_grad_(False)


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


def hand_rolled_greedy(model, evals, maps, budget):
    """The rule written out: order by single ΔPPL, add while the joint ΔPPL stays within the budget."""
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
        if joint > budget:
            break
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
    assert kept == [first, second] and list(table.block[1:]) == [first, second, third]
    assert list(table.kept) == [True, True, True, False]
    for (b, joint, _), row in zip(steps, table.iloc[1:].itertuples(), strict=True):
        assert row.block == b and row.delta_ppl == pytest.approx(joint, rel=1e-4, abs=1e-6)
        assert row.single_delta_ppl == pytest.approx(single[b], rel=1e-4, abs=1e-6)
        assert row.delta_ppl_low <= row.delta_ppl <= row.delta_ppl_high
    saved = [n_stored(model.transformer.h[b].mlp) - n_stored(maps[b]) for b in (first, second, third)]
    assert list(table.params_saved) == [0, saved[0], saved[0] + saved[1], sum(saved)]
    assert cost([0, 2, 3]) > 1.1 * (single[0] + single[2] + single[3])  # blocks interact: joint is no sum


def test_a_relative_budget_is_a_share_of_the_models_perplexity(setup):
    model, evals, maps = setup
    base = window_nll(model, evals)
    relative = greedy_selection(model, evals, maps, "100%", progress=False, base=base)
    absolute = greedy_selection(model, evals, maps, base.ppl, progress=False, base=base)
    assert relative.equals(absolute)
    assert budget_ppl("5%", 200.0) == pytest.approx(10.0) and budget_ppl(2.5, 200.0) == 2.5
    assert parse_budget(" 5% ") == (5.0, True) and parse_budget("0.5") == (0.5, False)


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
