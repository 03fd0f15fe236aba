"""linrec.core.replacements: Replacement kinds: the map each kind puts where an FFN block was, fitted from the block's
moments alone."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from conftest import tiny_model
from linrec.core.capture import CaptureOptions, capture_positions
from linrec.core.fit import fit_affine, held_out
from linrec.core.measure import Measurement
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.core.replacements import (
    AffineFFN,
    FirstApartFFN,
    Kind,
    LowRankFFN,
    MeanFFN,
    ZeroFFN,
    empty_replacement,
    first_apart_replacements,
    low_rank_ffn,
)
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.surgery import n_stored, param_table, swapped


def test_every_kind_and_its_numbers(measured):
    d = 32
    sets = {kind: measured.replacements(kind) for kind in ("zero", "mean", "affine", "lowrank:4")}
    for kind, cls, numbers in [
        ("zero", ZeroFFN, 0),
        ("mean", MeanFFN, d),
        ("affine", AffineFFN, d * d + d),
        ("lowrank:4", LowRankFFN, 4 * (d + d) + d),
    ]:
        assert sorted(sets[kind]) == [0, 1]
        for module in sets[kind].values():
            assert type(module) is cls and sum(t.numel() for t in module.state_dict().values()) == numbers
    x = torch.randn(5, d)
    train = merge_folds(measured.moments[1])
    assert torch.equal(sets["mean"][1](x), train.mean_y.float().expand(5, d))
    assert str(Kind.parse("lowrank:4")) == "lowrank:4" and Kind.parse("mean") == Kind("mean")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("poly", "unknown replacement kind 'poly'"),
        ("lowrank", "unknown replacement kind 'lowrank'"),
        ("affine:3", "unknown replacement kind"),
        ("lowrank:0", "positive integer"),
        ("lowrank:x", "positive integer"),
        ("lowrank:32", "below the block's width 32"),
        ("lowrank:20%", "chooses a rank from the FFN's own numbers, which a measurement does not hold"),
    ],
)
def test_bad_kinds_are_refused(measured, kind, message):
    with pytest.raises(LinrecError, match=message):
        measured.replacements(kind)


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


# --- the first position apart (first-apart:mean, first-apart:own) ---


def _with_first_token(batches, token: int = 7):
    """``batches`` with every window starting with ``token`` (as after a BOS token)."""
    ids = batches.input_ids.clone()
    ids[:, 0] = token
    return TokenBatches(ids, batches.attention_mask, batches.batch_size)


def _logits(model, batches):
    with torch.no_grad():
        return torch.cat([model(input_ids=c.input_ids, attention_mask=c.attention_mask).logits for c in batches])


@pytest.fixture(scope="module")
def bos_measured(batches):
    fit = _with_first_token(batches)
    model = tiny_model("llama")
    return model, fit, Measurement.capture(model, fit, folds=4, progress=False)


def test_the_later_map_is_the_least_squares_fit_of_the_later_rows(bos_measured):
    """Against torch.linalg.lstsq on the rows after position 0, and the constant against their plain mean."""
    model, fit, m = bos_measured
    rows: dict[str, list] = {"x": [], "y": []}
    ffn = model.model.layers[1].mlp

    def keep(_m, args, out):
        rows["x"].append(args[0])
        rows["y"].append(out)

    handle = ffn.register_forward_hook(keep)
    _logits(model, fit)
    handle.remove()
    x, y = (torch.cat(rows[k]).double() for k in ("x", "y"))
    mask = fit.attention_mask.bool().clone()
    later, first = mask.clone(), torch.zeros_like(mask)
    later[:, 0], first[:, 0] = False, True
    ones = lambda t: torch.cat([t, torch.ones(len(t), 1, dtype=t.dtype)], 1)  # noqa: E731
    expected = torch.linalg.lstsq(ones(x[later]), y[later], driver="gelsd").solution
    (block,) = m.replacements("first-apart:mean", [1]).values()
    assert isinstance(block, FirstApartFFN)
    probe = torch.randn(50, 32, dtype=torch.float64)
    torch.testing.assert_close(block.later(probe.float()).double(), ones(probe) @ expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(block.mean.double(), y[first].mean(0), rtol=1e-5, atol=1e-6)


def test_own_is_the_block_itself_at_the_first_position_and_the_later_map_after(bos_measured):
    model, fit, m = bos_measured
    (own,) = m.replacements("first-apart:own", [0]).values()
    seen = {}
    with swapped(model, {0: own}):
        handle = own.register_forward_hook(lambda _m, args, out: seen.update(x=args[0], y=out))
        _logits(model, TokenBatches(fit.input_ids[:4], fit.attention_mask[:4]))
        handle.remove()
        original = own.borrowed
        assert original is not None and n_stored(own) == n_stored(original) + 32 * 32 + 32
    assert own.borrowed is original  # (kept: the module runs it wherever it is placed again)
    with torch.no_grad():
        # (the block on the first rows alone: the same arithmetic to rounding as on every row)
        torch.testing.assert_close(seen["y"][:, 0], original(seen["x"])[:, 0], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(seen["y"][:, 1:], own.later(seen["x"][:, 1:]), rtol=0, atol=0)


def test_with_one_first_token_the_constant_is_exact(bos_measured):
    """Every window starting with one token: the first position's output is the same in every window, so its mean
    is the block's own output there and both kinds give the same model."""
    model, fit, m = bos_measured
    evals = TokenBatches(fit.input_ids[:8], fit.attention_mask[:8])
    with swapped(model, m.replacements("first-apart:mean", [0, 1])):
        constant = _logits(model, evals)
    with swapped(model, m.replacements("first-apart:own", [0, 1])):
        own = _logits(model, evals)
    torch.testing.assert_close(constant, own, rtol=1e-4, atol=1e-4)
    with swapped(model, m.replacements("affine", [0, 1])):
        assert not torch.allclose(_logits(model, evals), own, atol=1e-4)  # (the all-rows map is another model)


def test_cached_steps_have_no_first_position(bos_measured):
    """Decoding with a cache gives the logits of one pass over the whole sequence: a step that continues cached
    sequences puts the later map at its column 0, and the call that starts them the first position's output."""
    model, fit, m = bos_measured
    ids = fit.input_ids[:2, :12]
    with swapped(model, m.replacements("first-apart:own", [0, 1])), torch.no_grad():
        whole = model(input_ids=ids).logits
        out = model(input_ids=ids[:, :6], use_cache=True)
        steps = [out.logits]
        cache = out.past_key_values
        for t in range(6, 12):
            out = model(input_ids=ids[:, t : t + 1], past_key_values=cache, use_cache=True)
            steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), whole, rtol=1e-4, atol=1e-4)


def test_the_first_kept_column_of_each_row_is_its_first_position(bos_measured):
    model, _, m = bos_measured
    (block,) = m.replacements("first-apart:mean", [1]).values()
    mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
    with swapped(model, {1: block}), torch.no_grad():
        model(input_ids=torch.ones(2, 4, dtype=torch.long), attention_mask=mask)
        assert block.starts.tolist() == [0, 2]
    model(input_ids=torch.ones(1, 4, dtype=torch.long))  # (the original back in place: nothing watches)
    assert block.starts.tolist() == [0, 2]


def test_first_apart_maps_save_and_load(bos_measured, tmp_path):
    from safetensors.torch import load_file, save_file

    _, _, m = bos_measured
    for at_first, keys in [("mean", {"later.weight", "later.bias", "mean"}), ("own", {"later.weight", "later.bias"})]:
        (block,) = m.replacements(f"first-apart:{at_first}", [1]).values()
        assert set(block.state_dict()) == keys  # (own: the FFN's weights are the base model's, not saved again)
        save_file(block.state_dict(), tmp_path / f"{at_first}.safetensors")
        empty = empty_replacement(Kind.parse(f"first-apart:{at_first}"), 32, 32)
        empty.load_state_dict(load_file(tmp_path / f"{at_first}.safetensors"), strict=True)
        x = torch.randn(3, 5, 32)
        if at_first == "mean":
            torch.testing.assert_close(empty(x), block(x), rtol=0, atol=0)
        else:
            with pytest.raises(LinrecError, match="put it in a model"):
                empty(x)


@pytest.mark.parametrize(
    ("kind", "message"),
    [("first-apart", "unknown replacement kind"), ("first-apart:zero", "unknown replacement kind")],
)
def test_bad_first_apart_kinds_are_refused(measured, kind, message):
    with pytest.raises(LinrecError, match=message):
        measured.replacements(kind)


def test_first_apart_needs_the_first_position_kept_apart(batches):
    model = tiny_model("gpt2")
    skipped = Measurement.capture(model, batches, folds=4, progress=False, skip_first=1)
    with pytest.raises(LinrecError, match="left out"):
        skipped.replacements("first-apart:mean")
    merged = PositionMoments.together(skipped.moments)
    with pytest.raises(LinrecError, match="without their first position kept apart"):
        first_apart_replacements(merged, "mean", [0])
    one = TokenBatches(batches.input_ids.reshape(-1, 1), batches.attention_mask.reshape(-1, 1), batch_size=256)
    with pytest.raises(LinrecError, match="one token long"):
        first_apart_replacements(
            capture_positions(model, one, options=CaptureOptions(folds=2, progress=False)), "own", [0]
        )


def test_generate_decodes_as_one_pass_over_the_growing_sequence_does(bos_measured):
    """generate() with its cache against greedy decoding that runs the whole sequence again at every step."""
    model, fit, m = bos_measured
    prompt = fit.input_ids[:1, :8]
    with swapped(model, m.replacements("first-apart:mean", [0, 1])), torch.no_grad():
        cached = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
        ids = prompt
        for _ in range(6):
            ids = torch.cat([ids, model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(cached, ids)
