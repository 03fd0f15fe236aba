"""The residual-stream scores (linrec.core.scores), as linrec.core.residual.ResidualSink computes them in the capture's
pass, against a direct computation from hooks on the same forward, on tiny models of every family that has them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from conftest import tiny_model
from linrec.core.capture import CaptureOptions, capture_positions
from linrec.core.measure import DIGESTS, Measurement, measure
from linrec.core.scores import COLUMNS
from linrec.errors import LinrecError
from linrec.models.arch import ffn_blocks, ffn_norm, residual_sites

FOLDS = 4


def _r2(y: np.ndarray, predicted: np.ndarray) -> float:
    return r2_score(y, predicted, multioutput="variance_weighted")


def direct(model, batches, folds: int = FOLDS, seed: int = 0) -> dict[int, dict[str, float]]:
    """Every score of every block from plain hooks: the layer's input and output, and the stream the FFN's output is
    added to read where the model holds it (the FFN norm's input; for a parallel-residual NeoX, the layer's output
    less the FFN's), numpy float64 over every row but padding, the layer linearity by scikit-learn."""
    parallel = getattr(model.config, "use_parallel_residual", False)
    seen: dict[str, list] = {}

    def stream(args, kwargs):
        return args[0] if args else kwargs["hidden_states"]

    def entering(key):
        return lambda _m, args, kwargs: seen.setdefault(key, []).append(stream(args, kwargs))

    def leaving(key):
        return lambda _m, _args, output: seen.setdefault(key, []).append(output)

    modules = dict(model.named_modules())
    handles = []
    for b in ffn_blocks(model):
        layer, added = residual_sites(model, [b.index])[b.index]
        handles.append(modules[layer].register_forward_pre_hook(entering(f"in{b.index}"), with_kwargs=True))
        handles.append(modules[layer].register_forward_hook(leaving(f"out{b.index}")))
        if parallel:
            handles.append(modules[added].register_forward_hook(leaving(f"ffn{b.index}")))
        else:
            norm = ffn_norm(model, b.index)
            handles.append(norm.register_forward_pre_hook(entering(f"before{b.index}"), with_kwargs=True))
    fold_of_sequence = batches.folds(folds, seed)
    masks, fold_rows = [], []
    with torch.no_grad():
        for chunk in batches:
            model(input_ids=chunk.input_ids, attention_mask=chunk.attention_mask, use_cache=False)
            mask = chunk.attention_mask.bool()
            masks.append(mask)
            fold_rows.append(fold_of_sequence[chunk.seq_index][:, None].expand_as(mask)[mask])
    for h in handles:
        h.remove()
    fold = torch.cat(fold_rows).numpy()

    def rows(key):
        return torch.cat([t[m] for t, m in zip(seen[key], masks, strict=True)]).double().numpy()

    def cos(u, v):
        return (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)

    out = {}
    for b in ffn_blocks(model):
        h, after = rows(f"in{b.index}"), rows(f"out{b.index}")
        before = after - rows(f"ffn{b.index}") if parallel else rows(f"before{b.index}")
        a = after - before
        layer, ffn = cos(h, after), cos(before, after)
        fitted = [LinearRegression().fit(h[fold != f], after[fold != f]) for f in range(folds)]
        held = [_r2(after[fold == f], fitted[f].predict(h[fold == f])) for f in range(folds)]
        out[b.index] = {
            "block_influence": 1 - layer.mean(),
            "angular_distance": (np.arccos(np.clip(layer, -1, 1)) / math.pi).mean(),
            "ffn_block_influence": 1 - ffn.mean(),
            "ffn_angular_distance": (np.arccos(np.clip(ffn, -1, 1)) / math.pi).mean(),
            "output_energy": (a**2).sum() / (before**2).sum(),
            "spread": ((a - a.mean(0)) ** 2).sum() / (before**2).sum(),
            "layer_linearity": float(np.mean(held)),
            "layer_linearity_in_sample": _r2(after, LinearRegression().fit(h, after).predict(h)),
        }
    return out


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox", "llama", "gemma3_text"])
def test_every_score_against_a_direct_computation(family, batches):
    """The sample holds every row here (fewer rows than it keeps), so scikit-learn sees the same rows."""
    model = tiny_model(family)
    table = measure(model, batches, folds=FOLDS, progress=False, extras="scores").set_index("block")
    for block, expected in direct(model, batches).items():
        row = table.loc[block]
        spread = expected.pop("spread")
        assert row.unexplained_energy == pytest.approx((1 - row.r2_lin) * spread, rel=1e-5)
        for column, value in expected.items():
            assert row[column] == pytest.approx(value, rel=1e-5, abs=1e-9), (family, block, column)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_scores_are_the_host_s_to_rounding(batches):
    """The sums and the layer-linearity fits run where the rows are (a GPU's float64 solvers), not on the host."""
    model = tiny_model("llama")
    columns = list(COLUMNS)
    host = measure(model, batches, folds=FOLDS, progress=False, extras="scores")[columns]
    gpu = measure(model.to("cuda"), batches, folds=FOLDS, progress=False, extras="scores")[columns]
    assert np.allclose(gpu.to_numpy(float), host.to_numpy(float), rtol=1e-6, atol=1e-9, equal_nan=True)


def test_a_block_that_adds_nothing_scores_zero(batches):
    model = tiny_model("gpt2")
    proj = model.transformer.h[1].mlp.c_proj
    proj.weight.zero_()
    proj.bias.zero_()
    row = measure(model, batches, folds=FOLDS, progress=False, extras="scores").set_index("block").loc[1]
    assert row.ffn_block_influence == pytest.approx(0, abs=1e-12)
    assert row.ffn_angular_distance == pytest.approx(0, abs=1e-6)  # (arccos near 1 magnifies rounding: √ε)
    assert row.output_energy == 0 and row.unexplained_energy == 0
    assert row.block_influence > 0  # the layer's attention still writes


def test_the_scores_ask_for_no_later_layer(batches):
    """Stopping after the deepest layer, not its FFN, costs the few operations after the FFN: no later layer runs."""
    model = tiny_model("llama")
    calls = []
    model.model.layers[1].self_attn.register_forward_hook(lambda *_: calls.append(1))
    options = CaptureOptions(folds=FOLDS, progress=False, extras=frozenset({"scores"}))
    split = capture_positions(model, batches, blocks=[0], options=options)
    assert not calls and sorted(split.scores) == [0]


def test_saved_and_loaded_with_the_measurement(batches, tmp_path):
    m = Measurement.capture(tiny_model("gpt_neox"), batches, folds=FOLDS, progress=False, extras="scores")
    assert sorted(m.positions.scores) == [0, 1]
    loaded = Measurement.load(m.save(tmp_path / "m"))
    assert loaded.positions.scores == m.positions.scores
    assert loaded.table()[list(COLUMNS)].equals(m.table()[list(COLUMNS)])


def test_a_measurement_of_format_2_loads_without_scores(batches, tmp_path):
    path = Measurement.capture(tiny_model("gpt2"), batches, folds=FOLDS, progress=False, extras="scores").save(
        tmp_path / "m"
    )
    (path / DIGESTS).unlink()  # format 2 recorded no digests
    record = json.loads((path / "measurement.json").read_text())
    (path / "measurement.json").write_text(json.dumps({**record, "format": 2}))
    (path / "scores.json").unlink()
    table = Measurement.load(path).table()
    assert table[list(COLUMNS)].isna().all().all() and table.r2_lin.notna().all()


def test_a_damaged_scores_record_is_refused(batches, tmp_path):
    path = Measurement.capture(tiny_model("gpt2"), batches, folds=FOLDS, progress=False, extras="scores").save(
        tmp_path / "m"
    )
    (path / DIGESTS).unlink()  # the record's own checks (with it, the changed file is refused by its sha256 first)
    (path / "scores.json").write_text('{"0": {"rows": 3}}')
    with pytest.raises(LinrecError, match="damaged"):
        Measurement.load(path)
    (path / "scores.json").unlink()
    with pytest.raises(LinrecError, match="scores record"):
        Measurement.load(path)


@pytest.mark.parametrize("family", ["bert", "opt"])
def test_a_stream_the_library_cannot_see_leaves_the_scores_unknown(family, batches):
    model = tiny_model(family)
    with pytest.raises(LinrecError, match=f"'{family}'.*residual add"):
        residual_sites(model, [0])
    table = measure(model, batches, folds=FOLDS, progress=False, extras="scores")
    assert table[list(COLUMNS)].isna().all().all() and table.r2_lin.notna().all()


def test_blocks_named_by_hand_leave_the_scores_unknown(batches):
    model = tiny_model("gpt2")
    spec = [(b.input, b.output) for b in ffn_blocks(model)]
    with pytest.raises(LinrecError, match="spec"):
        residual_sites(model, [0], spec)
    table = measure(model, batches, folds=FOLDS, spec=spec, progress=False, extras="scores")
    assert table[list(COLUMNS)].isna().all().all()


def test_without_the_scores_the_rest_of_the_table_is_the_same_bit_for_bit(batches, tmp_path):
    """Without the ``scores`` extra (the default) the residual sink is left out only: every other column is unchanged,
    and the measurement saves and loads with its scores unknown."""
    model = tiny_model("llama")
    full = Measurement.capture(model, batches, folds=FOLDS, progress=False, extras="scores")
    bare = Measurement.capture(model, batches, folds=FOLDS, progress=False)
    others = [c for c in full.table().columns if c not in COLUMNS]
    assert bare.table()[others].equals(full.table()[others])
    assert full.table()[list(COLUMNS)].notna().all().all()
    loaded = Measurement.load(bare.save(tmp_path / "m")).table()
    assert loaded[list(COLUMNS)].isna().all().all() and loaded[others].equals(full.table()[others])


@pytest.mark.parametrize(("dtype", "bound"), [(torch.bfloat16, 1e-10), (torch.float16, 1e-10), (torch.float32, 1e-10)])
def test_the_stream_sums_are_float64_s_without_a_float64_row(dtype, bound):
    """Rows of a layer that changes its stream little (cosines within about 1e-4 of 1, where an angle is ill-conditioned
    in its cosine): the sums from float32 products of the rows equal those of rows cast to float64 and
    ``cosine_similarity`` there, to float64 rounding (the angles' 1e-12 are float64's own, through the arccos): 16-bit
    rows from their float32 products, which are exact, float32 rows cast."""
    import torch.nn.functional as F

    from linrec.core.residual import stream_sums

    g = torch.Generator().manual_seed(0)
    h = (torch.randn(512, 256, generator=g) * torch.linspace(0.1, 8, 256)).to(dtype)
    a = (torch.randn(512, 256, generator=g) * 1e-2).to(dtype)
    out = (h.double() + torch.randn(512, 256, generator=g, dtype=torch.float64) * 1e-2).to(dtype)
    sums, added = stream_sums(h, a, out)
    h64, a64, o64 = h.double(), a.double(), out.double()
    before = o64 - a64
    layer, ffn = F.cosine_similarity(h64, o64, dim=1), F.cosine_similarity(before, o64, dim=1)
    angle = lambda c: torch.arccos(c.clamp(-1, 1)) / math.pi  # noqa: E731
    expected = torch.stack([layer.sum(), angle(layer).sum(), ffn.sum(), angle(ffn).sum(), a64.square().sum(),
                            before.square().sum()])  # fmt: skip
    assert 0 < 1 - layer.mean() < 1e-3 and sums.dtype == torch.float64
    scores = lambda s: torch.stack([1 - s[0] / 512, s[1], 1 - s[2] / 512, *s[3:]])  # noqa: E731 (influences: 1 - cos)
    error = ((scores(sums) - scores(expected)) / scores(expected)).abs().max()
    print(f"{dtype}: every score within {error:.1e} (relative) of float64 rows'")
    assert error < bound
    assert torch.allclose(added, a64.sum(0), rtol=1e-12, atol=1e-12)


def test_a_stream_that_all_but_vanishes_before_the_ffn_scores_finite():
    """Where the FFN's output is nearly the whole stream leaving (b = o − a some 1e-7 of o), ‖b‖² from o·o − 2 a·o + a·a
    is rounding, and may come out below zero: it is held at zero, so the sums stay finite, never NaN."""
    from linrec.core.residual import stream_sums

    g = torch.Generator().manual_seed(1)
    a = torch.randn(2000, 64, generator=g) * torch.logspace(0, 3, 64)
    out = a + torch.randn(2000, 64, generator=g) * 1e-7
    sums, _ = stream_sums(out, a, out)
    assert torch.isfinite(sums).all() and sums[5] >= 0
    assert (sums[2] / 2000).abs() <= 1  # the FFN cosines' mean, a cosine's range
