"""linrec.models.arch: Where each architecture keeps its FFN blocks: an input point and an output point per layer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import FAMILIES, tiny_model
from linrec.core.capture import capture_moments, run_capture
from linrec.core.sample import RowSample
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.models.arch import SUPPORTED, ffn_blocks


def own_ffn(model, family, i):
    """The block's own FFN computation, written from each architecture's module structure."""
    if family in ("bert", "roberta"):
        layer = model.encoder.layer[i]
        return lambda x: layer.output.dense(layer.intermediate(x))
    if family == "opt":
        layer = model.model.decoder.layers[i]
        return lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))
    layers = (
        model.transformer.h
        if family == "gpt2"
        else (model.gpt_neox.layers if family == "gpt_neox" else model.model.layers)
    )
    return layers[i].mlp


@pytest.mark.parametrize("family", FAMILIES)
def test_captured_x_through_own_ffn_reproduces_y(family, tokenizer, text):
    model = tiny_model(family)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256, batch_size=4)
    keeper = RowSample(sample_rows=10**9)  # keeps every row
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
    keeper = RowSample(sample_rows=10**9)  # keeps every row
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=64, batch_size=4)
    run_capture(model, batches, ffn_blocks(model)[1:], [keeper], batches.folds(2, 0), progress=False)
    h.remove()
    x = keeper.rows(1).x.double()
    first_batch = layer.post_attention_layernorm(seen["h"]).reshape(-1, 32).double()
    assert torch.allclose(x[: first_batch.shape[0]], first_batch, atol=1e-6)


def test_gemma_ffn_is_read_between_its_two_norms(tokenizer, text):
    """Gemma 3: X is the pre-FFN RMSNorm's output and Y the GeGLU's own output, before the post-FFN RMSNorm, as a
    manual forward of the layer's FFN half computes them from the residual stream it reads; and that half is the
    whole layer after attention (layer output = residual + post-norm(Y)). Gemma's RMSNorm scales by 1 + weight."""
    model = tiny_model("gemma3_text")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # trained-like norms (they start at zero, a gain of exactly 1)
        for name, weight in model.named_parameters():
            if "layernorm" in name:
                weight.copy_(0.5 * torch.randn(weight.shape, generator=g))
    layer = model.model.layers[1]
    pre, post, mlp = layer.pre_feedforward_layernorm, layer.post_feedforward_layernorm, layer.mlp
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256, batch_size=4)
    residuals, outputs = [], []
    hook = pre.register_forward_hook(lambda _m, args, _out: residuals.append(args[0].flatten(0, 1)))
    keeper = RowSample(sample_rows=10**9)  # keeps every row
    run_capture(model, batches, ffn_blocks(model)[1:], [keeper], batches.folds(2, 0), progress=False)
    hook.remove()

    def rms_norm(v, weight):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + model.config.rms_norm_eps) * (1 + weight)

    def geglu(x):
        return (
            F.gelu(x @ mlp.gate_proj.weight.T, approximate="tanh") * (x @ mlp.up_proj.weight.T)
        ) @ mlp.down_proj.weight.T

    x = rms_norm(torch.cat(residuals), pre.weight)
    rows = keeper.rows(1)
    assert rows.x.shape == x.shape == (256, 32)
    assert torch.allclose(rows.x.double(), x.double(), atol=1e-5)
    assert torch.allclose(rows.y.double(), geglu(x).double(), atol=1e-5)
    assert not torch.allclose(rows.y, rms_norm(geglu(x), post.weight), atol=1e-2)  # read before the post-FFN norm
    hooks = [  # a full forward: the layer's output is its residual stream plus the post-normed FFN output
        pre.register_forward_hook(lambda _m, args, _out: residuals.append(args[0])),
        layer.register_forward_hook(lambda _m, _a, out: outputs.append(out[0] if isinstance(out, tuple) else out)),
    ]
    with torch.no_grad():
        model(batches.input_ids[:4])
    for h in hooks:
        h.remove()
    residual = residuals[-1]
    assert torch.allclose(
        outputs[0], residual + rms_norm(geglu(rms_norm(residual, pre.weight)), post.weight), atol=1e-5
    )


def test_unknown_architecture_lists_supported_and_spec_works(tokenizer, text):
    from transformers import GPTJConfig, GPTJForCausalLM

    model = GPTJForCausalLM(
        GPTJConfig(vocab_size=320, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64)
    ).eval()
    with pytest.raises(LinrecError, match="gpt2, gpt_neox, llama.*blocks=\\[\\(input_module_name"):
        ffn_blocks(model)
    spec = [(f"transformer.h.{i}.mlp", f"transformer.h.{i}.mlp") for i in range(2)]
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=512)
    moments = capture_moments(model, batches, spec=spec, folds=2, progress=False)
    assert sorted(moments) == [0, 1]
    with pytest.raises(LinrecError, match="no module named 'nope'"):
        ffn_blocks(model, [("nope", "nope")])
