"""linrec.interventions.surgery: Block surgery: put a fitted map where an FFN was, for a scope or for good, and count
what it stores."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import tiny_model
from linrec.core.capture import capture_moments, capture_with_sample
from linrec.core.moments import Moments
from linrec.core.replacements import ZeroFFN, fit_replacements
from linrec.errors import LinrecError
from linrec.interventions.perplexity import (
    swap_deltas,
)
from linrec.interventions.probes import ProbeConfig, seeded_poly
from linrec.interventions.surgery import n_stored, swapped


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
    moments, sample = capture_with_sample(model, fit_text, sample_rows=2000, blocks=[1], folds=4, progress=False)
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
