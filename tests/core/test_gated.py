"""linrec.core.gated: Gated replacement: each row goes through the block's affine map or through its own FFN, as a
gate decides."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from torch import nn

from conftest import WIDTH, tiny_model
from linrec.core.gated import (
    GatedFFN,
    LogisticGate,
    NormGate,
    fit_logistic,
    fit_logistic_gate,
    gate_of,
    threshold_for,
)
from linrec.core.kinds import Kind
from linrec.core.measure import Measurement
from linrec.core.replacements import AffineFFN, empty_replacement
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.gating import gated_replacements, route
from linrec.interventions.surgery import swapped
from support.gating import logits, random_batches

# --- the gates and their fits ---


def labelled_rows(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of very different scales and offsets (float64), labelled by a noisy logistic rule of their own."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.linspace(0.5, 20, d, dtype=torch.float64)
    x = torch.randn(n, d, generator=g, dtype=torch.float64) * scale + torch.linspace(-5, 5, d, dtype=torch.float64)
    logit = (x - x.mean(0)) @ (torch.randn(d, generator=g, dtype=torch.float64) / scale) + 0.4
    return x, torch.rand(n, generator=g, dtype=torch.float64) < torch.sigmoid(logit)


def standardised(x: torch.Tensor) -> np.ndarray:
    """(x - mean) / std per column, std with n - 1 (numpy's own, not the module's)."""
    rows = x.numpy()
    return (rows - rows.mean(0)) / rows.std(0, ddof=1)


def sklearn_fit(z: np.ndarray, target: torch.Tensor) -> LogisticRegression:
    return LogisticRegression(C=1.0, solver="lbfgs", tol=1e-14, max_iter=100_000).fit(z, target.numpy())


@pytest.mark.parametrize(("n", "d", "seed"), [(600, 8, 0), (300, 3, 1), (2000, 16, 2)])
def test_fit_logistic_is_scikit_learns_logistic_regression(n, d, seed):
    x, target = labelled_rows(n, d, seed)
    z = standardised(x)
    reference = sklearn_fit(z, target)
    w, b = fit_logistic(torch.from_numpy(z), target)
    np.testing.assert_allclose(w.numpy(), reference.coef_[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(float(b), reference.intercept_[0], rtol=1e-6, atol=1e-9)
    gate = fit_logistic_gate(x, target)  # (standardised inside, folded back to raw inputs)
    logits = reference.decision_function(z)
    np.testing.assert_allclose(gate(x).double().numpy(), logits, rtol=0, atol=1e-5 * np.abs(logits).max())
    # the penalty is on the standardised weights: scaling an input column scales its raw weight inversely
    stretched = x * torch.linspace(1, 1000, d, dtype=torch.float64)
    np.testing.assert_allclose(fit_logistic_gate(stretched, target)(stretched).double().numpy(), logits, atol=1e-4)


def test_a_feature_without_spread_is_left_unscaled_and_weightless():
    x, target = labelled_rows(500, 4, 3)
    with_constant = torch.cat([x[:, :2], torch.full((500, 1), 7.0, dtype=torch.float64), x[:, 2:]], 1)
    gate = fit_logistic_gate(with_constant, target)
    assert torch.isfinite(gate.weight).all() and float(gate.weight[2]) == 0.0
    without = fit_logistic_gate(x, target)
    torch.testing.assert_close(gate.weight[[0, 1, 3, 4]], without.weight, rtol=1e-6, atol=0)
    torch.testing.assert_close(gate.bias, without.bias, rtol=1e-6, atol=0)


def test_a_logistic_fit_needs_rows_of_both_classes_and_convergence():
    x, target = labelled_rows(50, 3, 0)
    for same in (torch.ones(50, dtype=torch.bool), torch.zeros(50, dtype=torch.bool)):
        with pytest.raises(LinrecError, match="rows of both classes"):
            fit_logistic(x, same)
        with pytest.raises(LinrecError, match="rows of both classes"):
            fit_logistic_gate(x, same)
    with pytest.raises(LinrecError, match="needs rows and one target per row; got 0 and 0"):
        fit_logistic(torch.zeros(0, 3), torch.zeros(0, dtype=torch.bool))
    with pytest.raises(LinrecError, match="got 50 and 49"):
        fit_logistic(x, target[:49])
    with pytest.raises(LinrecError, match="did not converge in 1 Newton steps"):
        fit_logistic(x, target, max_iter=1)


def test_threshold_for_routes_the_share_asked():
    scores = torch.randn(37, generator=torch.Generator().manual_seed(0))
    for share in (0.01, 0.1, 0.25, 0.5, 0.9, 0.99):
        threshold = threshold_for(scores, share)
        assert int((scores <= threshold).sum()) == math.ceil(share * 37)
        assert threshold in scores.tolist()  # (a score itself: the share's empirical quantile)
    assert threshold_for(scores, 0) == -math.inf and threshold_for(scores, 1) == math.inf
    assert threshold_for(torch.zeros(0), 0) == -math.inf  # (no rows needed for none or all)
    hundred = torch.arange(100.0)
    assert int((hundred <= threshold_for(hundred, 0.07)).sum()) == 7  # (0.07 x 100 rounds above 7 in floating point)
    with pytest.raises(LinrecError, match="no scores"):
        threshold_for(torch.zeros(0), 0.5)
    for share in (-0.1, 1.5, math.nan):
        with pytest.raises(LinrecError, match=r"must lie in \[0, 1\]"):
            threshold_for(scores, share)


def test_the_gates_score_rows_in_float32():
    x = torch.randn(4, 5, 6, dtype=torch.float64)
    norm = NormGate()(x)
    assert norm.dtype == torch.float32 and norm.shape == (4, 5)
    torch.testing.assert_close(norm.double(), x.norm(dim=-1), rtol=1e-6, atol=0)
    w, b = torch.randn(6, dtype=torch.float64), torch.tensor(0.5)
    logit = LogisticGate(w, b)(x)
    assert logit.dtype == torch.float32
    torch.testing.assert_close(logit.double(), x @ w + 0.5, rtol=1e-5, atol=1e-5)
    assert isinstance(gate_of("norm", 6), NormGate) and not gate_of("norm", 6).state_dict()
    empty = gate_of("logistic", 6)
    assert isinstance(empty, LogisticGate) and empty.weight.shape == (6,) and empty.bias.shape == ()
    with pytest.raises(LinrecError, match="unknown gate 'first'; choose one of norm, logistic"):
        gate_of("first", 6)


# --- the gated FFN in a model ---


def varied_norms(model: nn.Module, norms: list[nn.Module]) -> nn.Module:
    """``model`` with the weights of ``norms`` (the norms before its FFNs) varied, so that the FFN input norms
    vary: with unit weights a LayerNorm's or RMSNorm's output has the same norm on every row."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for norm in norms:
            norm.weight.copy_(0.3 + 2 * torch.rand(norm.weight.shape, generator=g))
    return model


@pytest.fixture(scope="module")
def gpt2():
    model = tiny_model("gpt2")
    model = varied_norms(model, [block.ln_2 for block in model.transformer.h])
    return model, random_batches(48, seed=0), random_batches(12, seed=1)


def test_share_0_is_the_model_itself(gpt2):
    model, fit, evals = gpt2
    maps = gated_replacements(model, fit, "gated:norm:0", [0, 1], progress=False)
    assert all(float(m.threshold) == -math.inf for m in maps.values())
    base = logits(model, evals)
    with swapped(model, maps):
        assert torch.equal(logits(model, evals), base)


def test_share_1_is_the_plain_affine_swap(gpt2):
    """Both fits are the closed form of every fit row, the gated one from the routed sink's bands and the plain one
    from the measurement's folds: in float64 they agree to 1e-10 (1e-14 as measured), so their float32 maps to
    float32 rounding (bit for bit as measured), and so do the models."""
    model, fit, evals = gpt2
    measured = Measurement.capture(model, fit, folds=4, progress=False)
    routing = route(model, fit, ["norm"], [1.0], [0, 1], progress=False)[("norm", 0.5)]  # (share 1 needs no cut)
    for b, exact in measured.fits([0, 1]).items():
        every = routing.fit(b, 1.0, measured.rcond)
        torch.testing.assert_close(every.weight, exact.weight, rtol=1e-10, atol=1e-10 * float(exact.weight.abs().max()))
        torch.testing.assert_close(every.bias, exact.bias, rtol=1e-10, atol=1e-10 * float(exact.bias.abs().max()))
    gated = gated_replacements(model, fit, "gated:norm:1", [0, 1], progress=False)
    plain = measured.replacements("affine", [0, 1])
    for b in (0, 1):
        assert float(gated[b].threshold) == math.inf and isinstance(plain[b], AffineFFN)
        torch.testing.assert_close(gated[b].linear.weight, plain[b].weight, rtol=1e-6, atol=1e-9)
        torch.testing.assert_close(gated[b].linear.bias, plain[b].bias, rtol=1e-6, atol=1e-9)
    with swapped(model, gated):
        through_gate = logits(model, evals)
    with swapped(model, plain):
        affine = logits(model, evals)
    torch.testing.assert_close(through_gate, affine, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(affine, logits(model, evals), atol=1e-4)  # (the swap changes the model)


def test_mixed_rows_each_go_through_the_map_or_the_ffn(gpt2):
    model, fit, evals = gpt2
    (gated,) = gated_replacements(model, fit, "gated:norm:0.5", [1], progress=False).values()
    seen = {}
    with swapped(model, {1: gated}):
        handle = gated.register_forward_hook(lambda _m, args, out: seen.update(x=args[0], y=out))
        logits(model, TokenBatches(evals.input_ids[:4], evals.attention_mask[:4]))
        handle.remove()
        own = gated.borrowed
    assert own is model.transformer.h[1].mlp and own is not gated  # (the original back in place, still handed over)
    x, y = seen["x"], seen["y"]
    routed = NormGate()(x) <= float(gated.threshold)
    assert torch.equal(gated.routed(x), routed) and 0.2 < float(routed.double().mean()) < 0.8
    with torch.no_grad():
        by_map, by_ffn = gated.linear(x), own(x)
    assert float((by_map - by_ffn).abs().max()) > 1e-3  # (the two paths differ, so the comparisons below tell)
    torch.testing.assert_close(y[routed], by_map[routed], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(y[~routed], by_ffn[~routed], rtol=1e-5, atol=1e-7)
    assert y.shape == x.shape and y.dtype == x.dtype


class Constant(nn.Module):
    """An FFN whose output is 5 everywhere, in the input's dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full_like(x, 5.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_scoring_at_most_the_threshold_go_to_the_map(dtype):
    """Planted: rows of norms 1, 2, 3 and 4 at a threshold of exactly 2 (the norm of a row of the call): the first
    two rows go to the map (x·2 + 1), the others to the FFN (5), in the input's dtype; every call routed one way
    takes that path alone."""
    x = torch.zeros(1, 4, 3, dtype=dtype)
    x[0, :, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    gated = GatedFFN(AffineFFN(2 * torch.eye(3), torch.ones(3)), NormGate(), 2.0)
    assert gated.attach(nn.Identity(), Constant()) is None
    y = gated(x)
    assert y.dtype == dtype and y.shape == x.shape
    expected = torch.full((1, 4, 3), 5.0, dtype=dtype)
    expected[0, :2] = 2 * x[0, :2] + 1
    assert torch.equal(y, expected)
    assert torch.equal(gated(x[:, :2]), 2 * x[:, :2] + 1) and torch.equal(gated(x[:, 2:]), torch.full_like(x[:, 2:], 5))


def test_an_unplaced_gated_ffn_has_no_ffn_to_run():
    gated = empty_replacement(Kind.parse("gated:norm:0.5"), WIDTH, WIDTH)
    assert isinstance(gated, GatedFFN) and gated.borrowed is None
    with pytest.raises(LinrecError, match="put it in a model"):
        gated(torch.randn(2, 3, WIDTH))


@pytest.mark.parametrize("kind", ["gated:norm:0.9", "gated:logistic:0.5"])
def test_gated_maps_save_and_load(gpt2, tmp_path, kind):
    from safetensors.torch import load_file, save_file

    model, fit, evals = gpt2
    (gated,) = gated_replacements(model, fit, kind, [1], rows=800, progress=False).values()
    keys = {"linear.weight", "linear.bias", "threshold"} | (
        {"gate.weight", "gate.bias"} if "logistic" in kind else set()
    )
    assert set(gated.state_dict()) == keys  # (the FFN's weights are the base model's, not saved again)
    save_file(gated.state_dict(), tmp_path / "gated.safetensors")
    empty = empty_replacement(Kind.parse(kind), WIDTH, WIDTH)
    empty.load_state_dict(load_file(tmp_path / "gated.safetensors"), strict=True)
    assert float(empty.threshold) == float(gated.threshold) != 0.0
    ffn = model.transformer.h[1].mlp
    with swapped(model, {1: gated}):
        handle = gated.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
        seen: list[torch.Tensor] = []
        logits(model, evals)
        handle.remove()
    x = torch.cat(seen)
    assert 0 < float(gated.routed(x).double().mean()) < 1  # (both paths run)
    empty.attach(model, ffn)
    with torch.no_grad():
        assert torch.equal(empty(x), gated(x))


def test_generate_decodes_as_one_pass_over_the_growing_sequence_does():
    """generate() with its cache against greedy decoding that runs the whole sequence again at every step, on a
    llama whose two blocks are gated: the prompt's call routes rows both ways, a cached step's two rows may go one
    way only."""
    model = tiny_model("llama")
    model = varied_norms(model, [layer.post_attention_layernorm for layer in model.model.layers])
    fit = random_batches(48, seed=0)
    routed: list[torch.Tensor] = []

    def watch(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        routed.append(module.routed(args[0]).flatten())

    for kind in ("gated:norm:0.5", "gated:logistic:0.5"):
        maps = gated_replacements(model, fit, kind, [0, 1], rows=800, progress=False)
        prompt = fit.input_ids[:2, :8]
        mask = torch.ones_like(prompt)  # (token 0, the pad id, occurs in the random prompt)
        routed.clear()
        with swapped(model, maps), torch.no_grad():
            hooks = [m.register_forward_pre_hook(watch) for m in maps.values()]
            cached = model.generate(prompt, attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0)
            for hook in hooks:
                hook.remove()
            ids = prompt
            for _ in range(8):
                ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
        assert torch.equal(cached, ids)
        assert len(routed) == 2 * 8 and all(len(r) == 2 for r in routed[2:])  # (a prompt call, seven cached steps)
        assert all(0 < float(r.double().mean()) < 1 for r in routed[:2])  # (the prompt: both paths)
        assert any(bool(r.all()) or not bool(r.any()) for r in routed[2:])  # (a step on one path only)
        share = float(torch.cat(routed).double().mean())
        assert 0.2 < share < 0.8
        with torch.no_grad():
            unswapped = model.generate(prompt, attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0)
        assert not torch.equal(unswapped, cached)  # (the gated maps change what is decoded)
