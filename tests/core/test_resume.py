"""Running a model from the middle (linrec.core.resume): the decoder layers found only where they are the model's
own list, and a forward resumed from a kept residual stream equal, bit for bit, to the full forward."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_model
from linrec.core.capture import forward_until_stopped
from linrec.core.resume import decoder_layers, recording, skipping
from linrec.models.arch import CAUSAL, ffn_blocks


def test_layers_are_found_only_where_they_are_a_model_s_own_list():
    model = tiny_model("llama")
    layers = decoder_layers(model, ffn_blocks(model))
    assert layers == list(model.model.layers)
    assert decoder_layers(model, ffn_blocks(model, [("model.embed_tokens", "model.norm")])) is None  # no list
    assert decoder_layers(model, ffn_blocks(model)[1:]) is None  # block 1 is not the list's entry 0


@pytest.mark.parametrize("family", CAUSAL)
@pytest.mark.parametrize("on_host", [True, False])
def test_a_forward_resumed_from_a_kept_stream_is_the_full_forward(family, on_host):
    model = tiny_model(family)
    layers = decoder_layers(model, ffn_blocks(model))
    assert layers is not None and len(layers) == 2
    g = torch.Generator().manual_seed(0)
    calls = [torch.randint(5, model.config.vocab_size, (3, 10), generator=g) for _ in range(3)]
    full = [model(input_ids=ids).logits for ids in calls]
    kept: list = []
    with recording(layers[0], kept, on_host=on_host):
        for ids in calls:
            forward_until_stopped(model, input_ids=ids)  # ends at layer 0: nothing above it runs
    assert len(kept) == 3
    ran = []
    handle = layers[0].register_forward_pre_hook(lambda *_: ran.append(1))
    inner = next(m for n, m in layers[0].named_children() if "mlp" in n or "fc1" in n)
    inner_ran = []
    inner.register_forward_pre_hook(lambda *_: inner_ran.append(1))
    with skipping(layers[:1], kept):
        resumed = [model(input_ids=ids).logits for ids in calls]
    handle.remove()
    assert ran and not inner_ran  # layer 0 was called, its computation skipped
    for a, b in zip(full, resumed, strict=True):
        assert torch.equal(a, b)  # bit for bit
    assert not any("forward" in layer.__dict__ for layer in layers)  # the class's forward is back
    again = model(input_ids=calls[0]).logits
    assert torch.equal(again, full[0])
