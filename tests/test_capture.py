"""Capture: each architecture's FFN points, early stop, padding, batching, dtype and bad activations."""

import pytest
import torch

from conftest import FAMILIES, tiny_model
from linrec.models.arch import SUPPORTED, BlockSpec, ffn_blocks, select_blocks
from linrec.core.capture import capture_moments, run_capture
from linrec.errors import LinrecError
from linrec.core.fit import recoverability, report_table
from linrec.core.sample import RowSample
from linrec.data.tokens import TokenBatches, make_batches


def own_ffn(model, family, i):
    """The block's own FFN computation, written from each architecture's module structure."""
    if family in ("bert", "roberta"):
        layer = model.encoder.layer[i]
        return lambda x: layer.output.dense(layer.intermediate(x))
    if family == "opt":
        layer = model.model.decoder.layers[i]
        return lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))
    layers = model.transformer.h if family == "gpt2" else (model.gpt_neox.layers if family == "gpt_neox" else model.model.layers)
    return layers[i].mlp


@pytest.mark.parametrize("family", FAMILIES)
def test_captured_x_through_own_ffn_reproduces_y(family, tokenizer, text):
    model = tiny_model(family)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256, batch_size=4)
    keeper = RowSample(max_rows=10**9)  # keeps every row
    blocks = ffn_blocks(model)
    assert len(blocks) == 2 and set(SUPPORTED) >= {family}
    run_capture(model, batches, blocks, [keeper], batches.folds(2, 0), progress=False)
    for i in range(2):
        rows = keeper.rows(i)
        x, y = rows.x.double(), rows.y.double()
        assert x.shape == (256, 32)
        with torch.no_grad():
            assert torch.allclose(own_ffn(model, family, i)(x.float()).double(), y, atol=1e-5)


def test_parallel_residual_mlp_reads_the_normed_block_input(tokenizer, text):
    """NeoX's MLP input is post_attention_layernorm(block input), not the attention output."""
    model = tiny_model("gpt_neox")
    layer = model.gpt_neox.layers[1]
    assert model.config.use_parallel_residual
    seen = {}

    def observe(_module, args, kwargs):
        seen.setdefault("h", args[0] if args else kwargs["hidden_states"])

    h = layer.register_forward_pre_hook(observe, with_kwargs=True)
    keeper = RowSample(max_rows=10**9)  # keeps every row
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=64, batch_size=4)
    run_capture(model, batches, ffn_blocks(model)[1:], [keeper], batches.folds(2, 0), progress=False)
    h.remove()
    x = keeper.rows(1).x.double()
    first_batch = layer.post_attention_layernorm(seen["h"]).reshape(-1, 32).double()
    assert torch.allclose(x[: first_batch.shape[0]], first_batch, atol=1e-6)


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


def test_nan_activations_name_the_block(tokenizer, text):
    model = tiny_model("gpt2")
    with torch.no_grad():
        model.transformer.h[1].ln_2.weight[0] = float("nan")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=128)
    with pytest.raises(LinrecError, match="block 1: NaN or Inf"):
        capture_moments(model, batches, folds=2, progress=False)


def test_unknown_architecture_lists_supported_and_spec_works(tokenizer, text):
    from transformers import GPTJConfig, GPTJForCausalLM

    model = GPTJForCausalLM(GPTJConfig(vocab_size=320, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64)).eval()
    with pytest.raises(LinrecError, match="gpt2, gpt_neox, llama.*blocks=\\[\\(input_module_name"):
        ffn_blocks(model)
    spec = [(f"transformer.h.{i}.mlp", f"transformer.h.{i}.mlp") for i in range(2)]
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=512)
    moments = capture_moments(model, batches, spec=spec, folds=2, progress=False)
    assert sorted(moments) == [0, 1]
    with pytest.raises(LinrecError, match="no module named 'nope'"):
        ffn_blocks(model, [("nope", "nope")])


def test_block_selection_errors():
    blocks = [BlockSpec(i, "a", "a") for i in range(3)]
    assert [b.index for b in select_blocks(blocks, [2, 0])] == [0, 2]
    with pytest.raises(LinrecError, match="0..2"):
        select_blocks(blocks, [5])


def test_too_few_rows_for_width(tokenizer, text):
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=32)
    with pytest.raises(LinrecError, match="at least 42 rows"):
        capture_moments(model, batches, folds=5, progress=False)


def test_text_too_short_and_context_too_long(tokenizer):
    with pytest.raises(LinrecError, match="sequences .* are needed"):
        make_batches(tokenizer, "a short text", seq_len=16, max_rows=1000)
    with pytest.raises(LinrecError, match="exceeds the model's context of 64"):
        make_batches(tokenizer, "a short text", seq_len=128, max_context=64)
