"""linrec.core.extras: a capture sums only what the fit needs unless a caller asks for more, and the rest of the
table is the same either way."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import tiny_model
from linrec.cli import main
from linrec.core.accumulator import MomentAccumulator
from linrec.core.columns import COLUMNS
from linrec.core.extras import EXTRAS, parse_extras
from linrec.core.measure import Measurement, measure
from linrec.core.moments import _gram_pieces
from linrec.core.scores import COLUMNS as SCORES
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError


def test_extras_are_read_by_name_all_or_none():
    assert parse_extras(None) == parse_extras("") == parse_extras([]) == frozenset()
    assert parse_extras("all") == parse_extras(["scores", "output_covariance"]) == frozenset(EXTRAS)
    assert parse_extras(" scores ,") == frozenset({"scores"})
    with pytest.raises(LinrecError, match="unknown extras cyy: choose from output-covariance, scores"):
        parse_extras("scores,cyy")


def test_an_unknown_extra_is_refused_by_the_command_line(capsys):
    with pytest.raises(SystemExit):
        main(["measure", "--model", "m", "--text-file", "t", "--extras", "everything"])
    assert "unknown extras everything" in capsys.readouterr().err


class _MatmulFlops(TorchDispatchMode):
    """Floating-point operations of every matrix product the dispatcher sees (2 m k n each), in place or not
    (torch's own FlopCounterMode does not count the in-place ``addmm_``)."""

    PRODUCTS = {torch.ops.aten.addmm_.default, torch.ops.aten.addmm.default, torch.ops.aten.mm.default}

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.PRODUCTS:
            a, b = args[-2:] if func != torch.ops.aten.mm.default else args
            self.flops += 2 * a.shape[0] * a.shape[1] * b.shape[1]
        return func(*args, **(kwargs or {}))


def _flops_per_row(d_in: int, d_out: int, full_output: bool, n: int = 512) -> float:
    x, y = torch.randn(n, d_in), torch.randn(n, d_out)
    acc = MomentAccumulator(d_in, d_out, full_output=full_output)
    acc.add(x, y)  # the first rows set the shift: count a later chunk, as every chunk but the first
    with _MatmulFlops() as counter:
        acc.add(x, y)
    return counter.flops / n


@pytest.mark.parametrize("d", [256, 576])
def test_the_default_products_are_the_fit_s_and_the_extra_adds_the_output_gram(d):
    """Counted by torch's dispatcher: per row, XᵀX's upper block triangle and XᵀY, (1 + 1/k) d² + 2 d² with k column
    blocks (3.25 d² at k = 4), not the 4.5 d² that summing YᵀY's block triangle too costs."""
    k = len(_gram_pieces(d))
    triangle = (1 + 1 / k) * d * d
    assert _flops_per_row(d, d, full_output=False) == pytest.approx(triangle + 2 * d * d)
    assert _flops_per_row(d, d, full_output=True) == pytest.approx(2 * triangle + 2 * d * d)
    assert _flops_per_row(d, d, full_output=False) <= 3.25 * d * d


@pytest.fixture(scope="module")
def tables(tokenizer, text):
    model = tiny_model("llama")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 48, batch_size=8)
    return {extras: measure(model, batches, folds=4, progress=False, extras=extras) for extras in ("", "all")}


def test_without_extras_their_columns_are_nan_and_every_other_is_the_same(tables):
    bare, every = tables[""], tables["all"]
    extra = ["effective_rank_out", *SCORES]
    assert bare[extra].isna().all().all() and every[extra].notna().all().all()
    numbers = [c for c in COLUMNS if c not in extra and c not in ("r2_lin_folds", "r2_lin_after_first_folds")]
    np.testing.assert_allclose(bare[numbers].to_numpy(float), every[numbers].to_numpy(float), rtol=1e-12, atol=1e-12)
    for column in ("r2_lin_folds", "r2_lin_after_first_folds"):
        np.testing.assert_allclose(np.stack(bare[column]), np.stack(every[column]), rtol=1e-12, atol=1e-12)


def test_a_saved_measurement_says_what_it_computed_and_loads_as_it_was(tokenizer, text, tmp_path):
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 48, batch_size=8)
    for extras, name in (((), "bare"), (("output-covariance",), "cyy")):
        m = Measurement.capture(model, batches, folds=4, progress=False, extras=extras)
        assert m.provenance.extras == extras
        loaded = Measurement.load(m.save(tmp_path / name))
        assert loaded.provenance.extras == extras
        assert all(f.full_output == bool(extras) for f in loaded.positions.later[0])
        assert loaded.table().equals(m.table())
        assert math.isnan(loaded.table().effective_rank_out[0]) != bool(extras)
