"""linrec.interventions.removal: whole blocks removed, a model of fewer decoder layers that transformers itself
builds, caches and reloads."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from conftest import tiny_config
from linrec.core.replacements import RemovedBlock
from linrec.core.resume import decoder_layers, passing
from linrec.errors import LinrecError
from linrec.interventions.removal import per_layer_fields, remove, removed
from linrec.interventions.surgery import install, param_table, swapped
from linrec.models.arch import ffn_blocks
from support.removal import four_layers

CAUSAL = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "gemma3_text")


IDS = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", CAUSAL)
def test_removed_layers_run_as_passed_through_caches_work_and_all_comes_back(family):
    model = four_layers(family)
    base = model(IDS).logits
    layers = decoder_layers(model, ffn_blocks(model))
    with passing([layers[1], layers[2]]):
        expected = model(IDS).logits
    with removed(model, [2, 1]):
        assert torch.equal(model(IDS).logits, expected)
        assert model.config.num_hidden_layers == 2 and len(ffn_blocks(model)) == 2
        cached = model.generate(IDS[:1, :5], max_new_tokens=6, do_sample=False)
        uncached = model.generate(IDS[:1, :5], max_new_tokens=6, do_sample=False, use_cache=False)
        assert torch.equal(cached, uncached)  # each kept layer writes its own (renumbered) cache slot
    assert torch.equal(model(IDS).logits, base) and model.config.num_hidden_layers == 4
    assert [layer.self_attn.layer_idx for layer in layers if hasattr(layer, "self_attn")] in ([0, 1, 2, 3], [])


@pytest.mark.parametrize("family", CAUSAL)
def test_a_model_with_blocks_removed_saves_and_reloads_as_a_plain_checkpoint(family, tmp_path):
    model = four_layers(family)
    with removed(model, [1]):
        expected = model(IDS).logits
    remove(model, [1]).save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.num_hidden_layers == 3 and torch.equal(reloaded(IDS).logits, expected)
    if family == "gemma3_text":
        assert reloaded.config.layer_types == ["sliding_attention", "sliding_attention", "full_attention"]


def test_surgery_removes_a_block_whose_replacement_is_removed_block_and_counts_the_whole_layer():
    model = four_layers("llama")
    layers = decoder_layers(model, ffn_blocks(model))
    with passing([layers[3]]):
        expected = model(IDS).logits
    with swapped(model, {3: RemovedBlock()}):
        assert torch.equal(model(IDS).logits, expected)
    table = param_table(model, {3: RemovedBlock()})
    layer_numbers = sum(p.numel() for p in layers[3].parameters())
    assert table.params.tolist() == [0] and table.original_params.tolist() == [layer_numbers]
    install(model, {3: RemovedBlock()})
    assert torch.equal(model(IDS).logits, expected) and len(model.model.layers) == 3


def test_per_layer_fields_are_the_lists_of_one_entry_per_layer():
    config = tiny_config("gemma3_text")
    assert per_layer_fields(config, 2) == ["layer_types"]
    assert per_layer_fields(tiny_config("gpt2"), 2) == []


def test_removing_every_block_or_one_out_of_range_is_refused_and_changes_nothing():
    model = four_layers("gpt2")
    with pytest.raises(LinrecError, match="leaves no model"):
        remove(model, [0, 1, 2, 3])
    with pytest.raises(LinrecError, match="no FFN block 4"):
        with removed(model, [4]):
            pass
    assert len(model.transformer.h) == 4 and model.config.num_hidden_layers == 4
    with pytest.raises(LinrecError, match="has no FFN to run"):
        RemovedBlock()(torch.zeros(1, 4))
