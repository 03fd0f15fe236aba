"""Surgery and perplexity: exact affine blocks swap for free, restore is bitwise, counts are exact."""

import copy
import math

import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from conftest import local_text, tiny_model
from linrec.core.capture import capture_moments
from linrec.core.fit import fit_affine, held_out
from linrec.core.moments import Moments
from linrec.core.replacements import AffineFFN, LowRankFFN, MeanFFN, ZeroFFN, fit_replacements, low_rank_ffn
from linrec.core.sample import capture_with_sample
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from linrec.interventions.perplexity import (
    WindowNLL,
    compression_frontier,
    delta_ppl_interval,
    perplexity,
    swap_deltas,
    window_nll,
)
from linrec.interventions.probes import ProbeConfig, seeded_poly
from linrec.interventions.surgery import n_stored, param_table, swapped


@pytest.fixture(scope="module")
def fit_text(tokenizer, text) -> TokenBatches:
    """The text whose rows fit the replacements: its first windows."""
    return make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=16, layout="head")


@pytest.fixture(scope="module")
def eval_text(tokenizer) -> TokenBatches:
    """Held-out evaluation text: another seed's text, never used for fitting (its first windows)."""
    return make_batches(tokenizer, local_text(4000, seed=1), seq_len=32, max_rows=1024, batch_size=16, layout="head")


class Ones(nn.Module):
    """An activation that is 1 everywhere: a gated FFN down(act(gate(x)) * up(x)) becomes down(up(x))."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(x)


AFFINE_BLOCK_1 = {  # FFN module of block 1, and the activation that makes it exactly affine
    "gpt2": ("transformer.h.1.mlp", "act", nn.Identity),  # c_proj(c_fc(x))
    "gpt_neox": ("gpt_neox.layers.1.mlp", "act", nn.Identity),  # dense_4h_to_h(dense_h_to_4h(x))
    "gemma3_text": ("model.layers.1.mlp", "act_fn", Ones),  # down_proj(up_proj(x)), then the post-FFN RMSNorm
}


@pytest.mark.parametrize("kind", list(AFFINE_BLOCK_1))
def test_an_exactly_affine_block_swaps_for_free(kind, fit_text, eval_text):
    model = tiny_model(kind)
    ffn, activation, replacement = AFFINE_BLOCK_1[kind]
    setattr(model.get_submodule(ffn), activation, replacement())  # block 1 is now exactly affine
    moments = capture_moments(model, fit_text, blocks=[1], folds=4, progress=False)
    affine = fit_replacements(moments, "affine")
    table = swap_deltas(model, eval_text, affine, progress=False)
    assert abs(table.delta_ppl[0]) <= 1e-4 * table.base_ppl[0]
    removed = swap_deltas(model, eval_text, fit_replacements(moments, "zero"), progress=False)
    assert abs(removed.delta_ppl[0]) > 5e-4 * removed.base_ppl[0]  # the swap does reach the model


def test_a_seeded_poly_swaps_in(fit_text, eval_text):
    model = tiny_model("gpt2")
    model.transformer.h[1].mlp.act = nn.Identity()
    moments, sample = capture_with_sample(model, fit_text, max_rows=2000, blocks=[1], folds=4, progress=False)
    poly = seeded_poly(sample.rows(1), moments[1], config=ProbeConfig(rank=4, steps=300), block=1).probe
    d, r = 32, 4
    assert n_stored(poly) == (d * d + d) + 1 + r * (2 * d + d) + (2 * d + d + 1)  # affine, gate, U V P, standardisation
    table = swap_deltas(model, eval_text, {1: poly}, progress=False)
    assert abs(table.delta_ppl[0]) <= 1e-3 * table.base_ppl[0]  # the gate shrank: the block stays affine


def test_restore_is_bitwise_even_after_an_error(fit_text, eval_text):
    model = tiny_model("llama")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ids = eval_text.input_ids[:4]
    before = model(ids).logits
    original = model.model.layers[1].mlp
    moments = capture_moments(model, fit_text, folds=4, progress=False)
    replacement = fit_replacements(moments, "mean", blocks=[1])[1]
    with pytest.raises(RuntimeError, match="inside"):
        with swapped(model, {0: ZeroFFN(), 1: replacement}):
            assert model.model.layers[1].mlp is replacement
            assert not torch.equal(model(ids).logits, before)
            raise RuntimeError("inside the swap")
    assert model.model.layers[1].mlp is original
    after = model.state_dict()
    assert after.keys() == state.keys() and all(torch.equal(after[k], state[k]) for k in state)
    assert torch.equal(model(ids).logits, before)


def test_parameter_counts_for_a_gpt2_shaped_ffn():
    model = GPT2LMHeadModel(GPT2Config(vocab_size=8, n_positions=8, n_embd=768, n_layer=1, n_head=12)).eval()
    d, hidden, k = 768, 3072, 64
    original = d * hidden + hidden + hidden * d + d
    assert original == 4_722_432
    replacements = {0: AffineFFN(torch.zeros(d, d), torch.zeros(d))}
    table = param_table(model, replacements)
    assert table.original_params[0] == original and table.params[0] == d * d + d == 590_592
    assert table.ratio[0] == original / 590_592 and round(table.ratio[0]) == 8
    others = [
        (LowRankFFN(torch.zeros(d, k), torch.zeros(k, d), torch.zeros(d)), k * (d + d) + d),
        (MeanFFN(torch.zeros(d)), d),
        (ZeroFFN(), 0),
    ]
    for module, expected in others:
        assert n_stored(module) == expected
    assert param_table(model, {0: ZeroFFN()}).ratio[0] == math.inf
    llama = tiny_model("llama")
    assert param_table(llama, {0: ZeroFFN()}).original_params[0] == 3 * 32 * 128  # gate, up, down; no biases


def test_low_rank_truncation_is_the_best_rank_k_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3000, 12, generator=g, dtype=torch.float64) @ torch.randn(12, 12, generator=g, dtype=torch.float64)
    y = x @ torch.randn(12, 10, generator=g, dtype=torch.float64) + torch.randn(
        3000, 10, generator=g, dtype=torch.float64
    )
    train = Moments.from_rows(x, y)
    fit = fit_affine(train)
    full_sse = held_out(fit, train).sse.sum()
    predicted = torch.linalg.eigvalsh(fit.weight.T @ train.cxx @ fit.weight)  # ascending
    for k in (1, 4, 10):
        sse = {}
        for weighted in (True, False):
            module = low_rank_ffn(fit, train, k, weighted, dtype=torch.float64)
            sse[weighted] = float(((module(x) - y) ** 2).sum())
        # reduced-rank regression loses exactly the prediction variance outside its top k directions
        assert sse[True] == pytest.approx(float(full_sse + predicted[: 10 - k].sum()), rel=1e-8)
        assert sse[True] <= sse[False] * (1 + 1e-12)
    assert sse[True] == pytest.approx(float(full_sse), rel=1e-10)  # full rank: the affine map itself
    with pytest.raises(LinrecError, match="between 1 and 10"):
        low_rank_ffn(fit, train, 11)


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


def test_window_nll_sums_each_windows_token_losses(eval_text):
    model = tiny_model("gpt2")
    windows = window_nll(model, eval_text)
    ids = eval_text.input_ids[:5]
    logp = torch.log_softmax(model(ids).logits.double(), -1)[:, :-1]
    by_hand = -logp.gather(2, ids[:, 1:, None])[..., 0].sum(1)  # an independent per-window sum, no padding here
    assert torch.allclose(windows.nll[:5], by_hand, rtol=1e-5)
    assert windows.tokens.tolist() == [eval_text.seq_len - 1] * len(eval_text.input_ids)
    assert windows.ppl == pytest.approx(perplexity(model, eval_text), rel=1e-12)


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


def test_surgery_errors():
    model = tiny_model("gpt2")
    with pytest.raises(LinrecError, match="one module"):
        with swapped(model, {0: ZeroFFN()}, spec=[("transformer.h.0.ln_2", "transformer.h.0.mlp")]):
            pass
    with pytest.raises(LinrecError, match="blocks 0..1"):
        with swapped(model, {3: ZeroFFN()}):
            pass
    moments = {0: [Moments.zeros(4, 4)]}
    with pytest.raises(LinrecError, match="affine, lowrank, mean, zero"):
        fit_replacements(moments, "poly")
    with pytest.raises(LinrecError, match="rank=k"):
        fit_replacements(moments, "lowrank")
