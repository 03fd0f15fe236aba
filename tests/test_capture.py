"""Capture: each architecture's FFN points, early stop, padding, batching, dtype and bad activations."""

import re

import pytest
import torch
import torch.nn.functional as F

from conftest import FAMILIES, tiny_model
from linrec.core.capture import capture_moments, rows_needed, run_capture
from linrec.core.fit import recoverability, report_table
from linrec.core.measure import measure
from linrec.core.sample import RowSample
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from linrec.models.arch import SUPPORTED, BlockSpec, ffn_blocks, select_blocks


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
    keeper = RowSample(max_rows=10**9)  # keeps every row
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


@pytest.mark.parametrize(
    ("dtype", "advice"),
    [
        (torch.float32, "already computes in float32, so this is no low-precision overflow: its weights hold NaN/Inf"),
        (torch.bfloat16, "A bfloat16 model can lose range: load it in float32"),
    ],
)
def test_nan_activations_name_the_block_and_advice_fits_the_dtype(tokenizer, text, dtype, advice):
    model = tiny_model("gpt2").to(dtype)
    with torch.no_grad():
        model.transformer.h[1].ln_2.weight[0] = float("nan")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=128)
    with pytest.raises(LinrecError, match="block 1: NaN or Inf") as err:
        capture_moments(model, batches, folds=2, progress=False)
    assert advice in str(err.value)


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


def test_block_selection_errors():
    blocks = [BlockSpec(i, "a", "a") for i in range(3)]
    assert [b.index for b in select_blocks(blocks, [2, 0])] == [0, 2]
    with pytest.raises(LinrecError, match="0..2"):
        select_blocks(blocks, [5])


def _advised_rows(err: pytest.ExceptionInfo) -> int:
    return int(re.search(r"max_rows=(\d+)", str(err.value)).group(1))


@pytest.mark.parametrize(
    ("max_rows", "seq_len", "folds", "advised"),
    [
        (32, 16, 5, 80),  # 2 sequences cannot fill 5 folds; 5 of 16 tokens leave 4 (64 rows) to train on
        (40, 8, 5, 56),  # 5 sequences: each training split has 4 x 8 = 32 rows, 33 are needed
        (48, 48, 2, 96),  # 48 rows exceed width + 1, but one sequence cannot fill 2 folds
    ],
)
def test_too_few_rows_for_width_advice_works_when_followed(tokenizer, text, max_rows, seq_len, folds, advised):
    """Folds are whole sequences: the advised max_rows, followed, gives every training split width + 1 rows."""
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=seq_len, max_rows=max_rows)
    with pytest.raises(LinrecError, match="are too few for width 32 .* folds are whole sequences") as err:
        capture_moments(model, batches, folds=folds, progress=False)
    assert _advised_rows(err) == advised
    followed = make_batches(tokenizer, text, seq_len=seq_len, max_rows=advised)
    table = report_table(recoverability(capture_moments(model, followed, folds=folds, progress=False)))
    assert (table.n_train >= 33).all()


def test_rows_needed_is_the_fewest_whole_sequences():
    """Against brute force over the balanced round-robin split: n sequences, smallest training split n - ceil(n / k)."""
    for width, seq_len, folds in [(256, 64, 5), (32, 16, 5), (32, 1, 3), (7, 4, 2), (100, 128, 10)]:
        n = next(n for n in range(folds, 10_000) if (n - -(-n // folds)) * seq_len >= width + 1)
        assert rows_needed(width, folds, seq_len) == n * seq_len
    assert rows_needed(256, 5, 64) == 448  # the case: 322 rows (6 sequences) left 256 training rows
    assert rows_needed(256, 5) == 322  # one row per sequence: the old bound


@pytest.mark.parametrize("folds", [1, 0])
def test_measure_refuses_fewer_than_two_folds(tokenizer, text, folds):
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    with pytest.raises(LinrecError, match=f"folds must be at least 2; got {folds}"):
        measure(tiny_model("gpt2"), batches, folds=folds, progress=False)


@pytest.mark.parametrize("max_rows", [-100, 0])
def test_make_batches_refuses_non_positive_max_rows(tokenizer, text, max_rows):
    with pytest.raises(LinrecError, match=f"max_rows \\(token rows per block\\) must be positive.*got {max_rows}"):
        make_batches(tokenizer, text, seq_len=16, max_rows=max_rows)


def test_an_empty_tokenizer_is_named_not_a_short_text(tmp_path, text):
    from transformers import AutoTokenizer

    tiny_model("gpt2").save_pretrained(tmp_path)  # no tokenizer files: transformers builds an empty one
    empty = AutoTokenizer.from_pretrained(tmp_path)
    with pytest.raises(LinrecError, match="turned .* characters into no tokens: it is empty"):
        make_batches(empty, text, seq_len=16, max_rows=256)


def test_text_too_short_and_context_too_long(tokenizer):
    with pytest.raises(LinrecError, match="sequences .* are needed"):
        make_batches(tokenizer, "a short text", seq_len=16, max_rows=1000)
    with pytest.raises(LinrecError, match="exceeds the model's context of 64"):
        make_batches(tokenizer, "a short text", seq_len=128, max_context=64)


def test_measure_and_perplexity_refuse_a_model_in_training_mode(tokenizer, text):
    """Dropout in training mode lowers R² at random; both refuse, with the same advice, before any forward pass."""
    from linrec.interventions.perplexity import perplexity

    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    model = tiny_model("gpt2").train()
    for run in (lambda: measure(model, batches, progress=False), lambda: perplexity(model, batches)):
        with pytest.raises(LinrecError, match=r"training mode .*call model\.eval\(\) first"):
            run()
    assert measure(model.eval(), batches, folds=2, progress=False)["r2_lin"].notna().all()


@pytest.mark.parametrize("rcond", [float("nan"), float("inf"), -1e-10, "1e-10"])
def test_a_bad_rcond_is_refused_before_the_capture(tokenizer, text, rcond, monkeypatch):
    """A NaN cutoff compares false with every eigenvalue and would drop every direction (R² near 0) unnoticed."""
    from linrec.core import measure as measure_module
    from linrec.core.fit import fit_affine
    from linrec.core.moments import Moments

    batches = make_batches(tokenizer, text, seq_len=16, max_rows=256)
    monkeypatch.setattr(measure_module, "capture_positions", lambda *a, **k: pytest.fail("captured before the check"))
    with pytest.raises(LinrecError, match=r"rcond \(the null-direction cutoff.*must be a finite number at least 0"):
        measure(tiny_model("gpt2"), batches, rcond=rcond, progress=False)
    x = torch.randn(50, 3, dtype=torch.float64)
    with pytest.raises(LinrecError, match="rcond .*must be a finite number"):
        fit_affine(Moments.from_rows(x, x), rcond)


def test_a_text_file_gives_the_tokens_of_its_text(tokenizer, text, tmp_path):
    """The file is cut into the same chunks as the string it holds, so both give the same windows."""
    from linrec.data.textfile import TextFile, text_chunks

    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    for chunk_chars in (2, 97, 5_000, len(text), len(text) + 1):
        assert list(text_chunks(TextFile(path), chunk_chars)) == list(text_chunks(text, chunk_chars))
        assert "".join(text_chunks(text, chunk_chars)) == text
    assert [len(c) for c in text_chunks("ab\ncd\nef", 4)] == [3, 3, 2]  # cut after the last newline of each window
    from_file = make_batches(tokenizer, TextFile(path), seq_len=16, max_rows=2000)
    assert torch.equal(from_file.input_ids, make_batches(tokenizer, text, seq_len=16, max_rows=2000).input_ids)
    import hashlib

    assert TextFile(path).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(LinrecError, match=f"cannot read {path} as UTF-8"):
        make_batches(tokenizer, TextFile(path), seq_len=16, max_rows=64)


def test_a_large_text_file_is_read_only_as_far_as_the_rows_need(tokenizer, text, tmp_path):
    """A ~50 MB file at a 1024-row budget: Python's peak allocation stays far below the file's size."""
    import tracemalloc

    from linrec.data.textfile import TextFile

    path = tmp_path / "large.txt"
    block = text.encode()
    with path.open("wb") as f:
        for _ in range(50_000_000 // len(block) + 1):
            f.write(block)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        batches = make_batches(tokenizer, TextFile(path), seq_len=64, max_rows=1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batches.n_rows == 1024 and size > 50_000_000
    assert peak < size / 8, f"peak {peak / 1e6:.1f} MB reading a {size / 1e6:.0f} MB file"


@pytest.mark.parametrize(
    "config, settings",
    [
        ("probe", {"lr": float("nan")}),
        ("probe", {"val_fraction": 1.0}),
        ("baseline", {"lr_factors": (1.0, float("nan"))}),
        ("baseline", {"momentum": float("inf")}),
    ],
)
def test_training_settings_that_nan_would_silently_change_are_refused(config, settings):
    from linrec.interventions.baseline import BaselineConfig
    from linrec.interventions.probes import ProbeConfig

    with pytest.raises(LinrecError, match=f"{next(iter(settings))}.* must be a finite number"):
        (ProbeConfig if config == "probe" else BaselineConfig)(**settings)
    (ProbeConfig if config == "probe" else BaselineConfig)()  # the defaults pass
