"""Swaps scored without recomputing the layers below them (linrec.interventions.prefix): the same numbers, bit for
bit, as a full forward pass per swap, on every causal architecture linrec supports."""

from __future__ import annotations

import pytest
import torch

import linrec.interventions.perplexity as perplexity
from conftest import tiny_model
from linrec.core.fit import fit_affine
from linrec.core.moments import Moments
from linrec.core.replacements import AffineFFN
from linrec.core.resume import decoder_layers
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.interventions.prefix import LayerPrefix
from linrec.interventions.surgery import swapped
from linrec.models.arch import CAUSAL, ffn_blocks


def _replacements(model, blocks) -> dict:
    """A deliberately poor affine map per block (fitted to random rows), so every swap changes the numbers."""
    g = torch.Generator().manual_seed(0)
    width = model.config.hidden_size
    fit = fit_affine(Moments.from_rows(torch.randn(400, width, generator=g), torch.randn(400, width, generator=g)))
    return {b: AffineFFN(fit.weight, fit.bias) for b in blocks}


@pytest.mark.parametrize("family", [f for f in CAUSAL if f != "opt"])  # (OPT's FFN is two modules: no swaps)
@pytest.mark.parametrize("chosen", ["every", "some"])
def test_each_swap_scores_as_a_full_pass_would(family, chosen, tokenizer, text, monkeypatch):
    model = tiny_model(family)
    batches = make_batches(tokenizer, text, seq_len=12, max_rows=12 * 10, batch_size=4)
    n = len(ffn_blocks(model))
    blocks = list(range(n)) if chosen == "every" else [1, n - 1]
    maps = _replacements(model, blocks)
    monkeypatch.setattr(perplexity, "LOGITS_BYTES", 3 * 12 * model.config.vocab_size * 4)  # 2 calls per batch
    assert decoder_layers(model, ffn_blocks(model)) is not None
    replayed = perplexity.swap_deltas(model, batches, maps, progress=False)
    base = perplexity.window_nll(model, batches)
    for row in replayed.itertuples():
        with swapped(model, {row.block: maps[row.block]}):
            full = perplexity.window_nll(model, batches)  # every layer computed
        assert row.ppl == full.ppl  # bit for bit
        assert row.delta_ppl == full.ppl - base.ppl
    assert not any("forward" in layer.__dict__ for layer in decoder_layers(model, ffn_blocks(model)))  # restored


def test_blocks_must_come_in_depth_order():
    model = tiny_model("gpt2")
    prefix = LayerPrefix(decoder_layers(model, ffn_blocks(model)), lambda: None)
    prefix.depth = 2
    with pytest.raises(LinrecError, match="depth order"):
        prefix.below(1)


def test_a_forward_already_set_on_a_layer_is_put_back(tokenizer, text):
    """accelerate's device hooks (device_map="auto") wrap a layer's forward as an instance attribute: the replay
    must leave that wrapper in place, not the class's forward."""
    model = tiny_model("llama")
    batches = make_batches(tokenizer, text, seq_len=12, max_rows=12 * 4, batch_size=4)
    layer = model.model.layers[0]
    calls = []
    plain = layer.forward
    layer.forward = lambda *args, **kwargs: calls.append(1) or plain(*args, **kwargs)
    wrapper = layer.__dict__["forward"]
    perplexity.swap_deltas(model, batches, _replacements(model, [1]), progress=False)
    assert layer.__dict__["forward"] is wrapper and calls  # the wrapper ran (base pass, recording) and is back
