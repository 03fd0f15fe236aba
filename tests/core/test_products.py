"""linrec.core.products: the product schemes of a capture (linrec.core.schemes), each against float64 moments of the
same rows, in the sums and in held-out R²_lin; the default arithmetic unchanged; the option refused and recorded by
the command line.

The planted rows are what an FFN block behind a LayerNorm sees, rounded to the model's dtype: correlated features,
three of them ten times the rest before the normalisation (each row's normalised features sum to zero: a null
direction), gains from 0.1 to 10 and a common offset of about 20 (so the shift matters), outputs about 60 from zero.
Their input condition number is about 1e8 (1e6 from bfloat16 rows) and R²_lin about 0.8. What each scheme gave on
them (``pytest -s`` prints it; the bounds below are a few times these):

=========  =====================================  ==========================  ==========================
scheme     sums vs float64, error / largest       R²_lin vs float64,          R²_lin vs float64,
           entry (XᵀX, XᵀY, YᵀY; 4,000 rows)      float32 rows (rcond 1e-10)  bfloat16 rows (rcond 6e-5)
=========  =====================================  ==========================  ==========================
float32    3.0e-7, 3.6e-7, 4.2e-7                 2.5e-6                      1.4e-8
ozaki:3    5.4e-8, 2.9e-7, 4.1e-7                 5.6e-7                      1.7e-7
ozaki:4    6.7e-10, 2.6e-9, 3.0e-9                2.9e-10                     2.5e-9
ozaki:5    5.9e-12, 3.1e-11, 2.8e-11              1.3e-12                     8.7e-12
ozaki:6    5.4e-14, 2.5e-13, 3.1e-13              1.8e-13                     3.4e-13
=========  =====================================  ==========================  ==========================

Where the rows are float32, the fit's cutoff (1e-10 of the largest eigenvalue) sits at about the error the schemes
below ``ozaki:5`` leave along the LayerNorm's null direction: here it comes out negative and is dropped, as from
float64 products, but from harsher rows of this kind (gains from 0.01, outliers 30 times the rest; other seeds) it
was kept on some draws, and float32 and ``ozaki:3`` were off by up to 8e-6 and 2e-4, ``ozaki:4`` by up to 8e-7
(``ozaki:5`` by at most 2e-9, its null direction always dropped).
"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import torch

from conftest import tiny_model
from linrec.cli import main
from linrec.core.accumulator import MomentAccumulator
from linrec.core.fit import kfold, rcond_for
from linrec.core.measure import Measurement
from linrec.core.moments import FIELDS, add_gram
from linrec.core.products import MAX_TERMS, add_ozaki
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from support.cli import ROWS

FOLDS, CHUNK = 5, 500
SCHEMES_TRIED = ("float32", "ozaki:3", "ozaki:4", "ozaki:5", "ozaki:6")


def layernorm_fed(dtype: torch.dtype, n: int = 10_000, d: int = 128, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Planted (x, y) rows of width ``d`` in ``dtype`` (the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    mix = torch.randn(d, d, generator=g, dtype=f64) / d**0.5 + 0.3 * torch.eye(d, dtype=f64)
    z = torch.randn(n, d, generator=g, dtype=f64) @ mix
    z[:, :3] *= 10
    normed = (z - z.mean(1, keepdim=True)) / z.std(1, keepdim=True)
    gain = torch.logspace(-1, 1, d, dtype=f64)[torch.randperm(d, generator=g)]
    x = normed * gain + 20 + torch.randn(d, generator=g, dtype=f64)
    up, down = torch.randn(d, 2 * d, generator=g, dtype=f64) / d**0.5, torch.randn(2 * d, d, generator=g, dtype=f64)
    y = torch.nn.functional.gelu((normed * gain) @ up + 0.5) @ (down / d**0.5) + 60
    y = y + 0.05 * torch.randn(n, d, generator=g, dtype=f64)
    return x.to(dtype), y.to(dtype)


def accumulate(x: torch.Tensor, y: torch.Tensor, products: str, shift: bool = True, full_output: bool = False):
    """``x``, ``y`` streamed in chunks of :data:`CHUNK` rows, dealt to the folds in turn; ``shift=False``: about zero,
    not the first rows' mean (what the shift saves)."""
    acc = MomentAccumulator(x.shape[1], y.shape[1], folds=FOLDS, products=products, full_output=full_output)
    if not shift:
        acc.shift_x, acc.shift_y = (torch.zeros(t.shape[1], dtype=torch.float64) for t in (x, y))
    for i, start in enumerate(range(0, x.shape[0], CHUNK)):
        acc.add(x[start : start + CHUNK], y[start : start + CHUNK], i % FOLDS)
    return acc


def held_out_r2(acc: MomentAccumulator, rcond: float) -> float:
    return kfold(0, [acc.moments(f) for f in range(FOLDS)], rcond).r2_lin


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def planted(request):
    """The planted rows in float32 or bfloat16, and their held-out R²_lin from float64 products at that dtype's
    cutoff."""
    x, y = layernorm_fed(request.param)
    rcond = rcond_for(request.param)
    return x, y, rcond, held_out_r2(accumulate(x, y, "float64"), rcond)


@pytest.mark.parametrize(
    "products, bound",
    [("float32", 1.5e-6), ("ozaki:3", 1.5e-6), ("ozaki:4", 1e-8), ("ozaki:5", 1e-10), ("ozaki:6", 1e-12)],
)
def test_each_scheme_s_sums_are_float64_s_to_its_precision(products, bound):
    """The shifted float32 rows' XᵀX (its upper triangle, all the fit reads), XᵀY and whole YᵀY against float64
    products of the same rows; the diagonal of YᵀY, summed apart, is float64's bit for bit."""
    x, y = layernorm_fed(torch.float32, n=4_000)
    exact, got = accumulate(x, y, "float64", full_output=True), accumulate(x, y, products, full_output=True)
    diagonal, exact_diagonal = accumulate(x, y, products), accumulate(x, y, "float64")
    for f in range(FOLDS):
        s, w = got._sums[f], exact._sums[f]
        errors = [relative(s.sxx.triu(), w.sxx.triu()), relative(s.sxy, w.sxy), relative(s.syy.triu(), w.syy.triu())]
        print(products, "fold", f, "XᵀX, XᵀY, YᵀY relative errors", [f"{e:.1e}" for e in errors])
        assert 0 < max(errors) < bound
        assert torch.equal(diagonal._sums[f].syy, exact_diagonal._sums[f].syy)


BOUNDS = {
    "float32": {"float32": 1e-5, "ozaki:3": 2e-6, "ozaki:4": 1e-9, "ozaki:5": 5e-12, "ozaki:6": 1e-12},
    "bfloat16": {"float32": 5e-8, "ozaki:3": 5e-7, "ozaki:4": 1e-8, "ozaki:5": 3e-11, "ozaki:6": 1.5e-12},
}
"""The largest error of held-out R²_lin allowed each scheme, per dtype of the rows: a few times what it gave (the
module docstring)."""


@pytest.mark.parametrize("products", SCHEMES_TRIED)
def test_held_out_r2_of_each_scheme_is_float64_s(planted, products):
    x, y, rcond, exact = planted
    error = abs(held_out_r2(accumulate(x, y, products), rcond) - exact)
    print(f"{products}, {x.dtype} rows: R²_lin {exact:.4f}, error {error:.1e}")
    bound = BOUNDS[str(x.dtype).removeprefix("torch.")][products]
    assert error <= bound


def test_without_the_shift_float32_products_lose_what_the_centring_cancels(planted):
    """About zero instead of the first rows' mean, float32 products of rows 20 and 60 from zero lose R²_lin to the
    cancellation of n x̄ x̄ᵀ, where float64 products lose next to nothing without it. How much more depends on the
    CPU's float32 kernels (their order of summation): from float32 rows 440 times the error with the shift on the
    machine this was first measured on (1.1e-3), 147 times on an AMD EPYC (1.4e-4); from bfloat16 rows, whose own
    rounding is the larger error there, 65 and 6 times. The bounds hold on both, with room."""
    x, y, rcond, exact = planted
    shifted = abs(held_out_r2(accumulate(x, y, "float32"), rcond) - exact)
    unshifted = abs(held_out_r2(accumulate(x, y, "float32", shift=False), rcond) - exact)
    float64 = abs(held_out_r2(accumulate(x, y, "float64", shift=False), rcond) - exact)
    print(f"float32 products, {x.dtype} rows: error {shifted:.1e} shifted, {unshifted:.1e} not ({float64:.1e} float64)")
    assert unshifted > (20 if x.dtype == torch.float32 else 3) * shifted and float64 < shifted


@pytest.mark.parametrize("shape", [(1000, 200, 72), (37, 13, 5), (MAX_TERMS // 8 + 100, 24, 16)])
def test_the_int8_kernel_and_its_float64_emulation_give_the_same_sums(shape):
    """torch._int_mm (run here on the CPU) and float64 products of the integer slices are both exact: the same sums
    bit for bit, at widths it takes and ones it does not (below 17 rows of the product, not a multiple of 8), and for
    a chunk longer than one piece of rows (8 slices: 65,528 rows), which agrees with float64 products."""
    n, d_in, d_out = shape
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(n, d_in, generator=g, dtype=torch.float64) * torch.logspace(-3, 2, d_in, dtype=torch.float64)
    ys = torch.randn(n, d_out, generator=g, dtype=torch.float64)
    slices = 8 if n > MAX_TERMS // 8 else 4
    sums = {}
    for kernel in ("int8", "float64"):
        sums[kernel] = [
            torch.zeros(a, b, dtype=torch.float64) for a, b in ((d_in, d_in), (d_in, d_out), (d_out, d_out))
        ]
        add_ozaki(*sums[kernel], xs, ys, slices=slices, kernel=kernel)
    assert all(torch.equal(a, b) for a, b in zip(sums["int8"], sums["float64"], strict=True))
    xx, xy, yy = sums["int8"]
    bound = 1e-13 if slices == 8 else 1e-6
    assert relative(xx.triu(), (xs.T @ xs).triu()) < bound and relative(yy.triu(), (ys.T @ ys).triu()) < bound
    assert relative(xy, xs.T @ ys) < bound


def test_by_default_the_products_are_float64_s_as_before():
    """The default accumulator adds add_gram and addmm_ of the shifted rows, bit for bit what it added before the
    option; so does products="float64"."""
    x, y = layernorm_fed(torch.float32, n=2_000, d=96)
    for acc in (MomentAccumulator(96, 96), MomentAccumulator(96, 96, products="float64")):
        rows = acc.shifted(x, y)
        acc.add_shifted(rows)
        sxx, sxy = torch.zeros(96, 96, dtype=torch.float64), torch.zeros(96, 96, dtype=torch.float64)
        add_gram(sxx, rows.x)
        sxy.addmm_(rows.x.T, rows.y)
        assert torch.equal(acc._live(0).sxx, sxx) and torch.equal(acc._live(0).sxy, sxy)


def test_a_capture_says_how_it_multiplied_and_the_default_is_unchanged(tokenizer, text, tmp_path):
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 48, batch_size=8)
    bare = Measurement.capture(model, batches, folds=4, progress=False)
    named = Measurement.capture(model, batches, folds=4, progress=False, products="float64")
    ozaki = Measurement.capture(model, batches, folds=4, progress=False, products="ozaki:5")
    assert bare.provenance.products == named.provenance.products == "float64"
    for block in bare.blocks:
        for f, g in zip(bare.positions.later[block], named.positions.later[block], strict=True):
            assert all(torch.equal(getattr(f, name), getattr(g, name)) for name in FIELDS)
    assert Measurement.load(ozaki.save(tmp_path / "ozaki")).provenance.products == "ozaki:5"
    assert not torch.equal(ozaki.positions.later[0][0].cxx, bare.positions.later[0][0].cxx)  # (the scheme ran)
    error = (ozaki.table().r2_lin - bare.table().r2_lin).abs().max()
    print(f"tiny GPT-2, ozaki:5: R²_lin within {error:.1e} of float64's")
    assert error < 1e-8
    with pytest.raises(LinrecError, match="unknown products 'int4'"):
        Measurement.capture(model, batches, folds=4, progress=False, products="int4")


def test_the_command_line_refuses_an_unknown_scheme_before_torch_loads():
    probe = (
        "import sys\nfrom linrec.cli import main\n"
        "try:\n    main(['measure', '--model', 'm', '--text-file', 't', '--products', 'float16'])\n"
        "except SystemExit as done:\n"
        "    print(done.code, sorted({'torch', 'transformers', 'pandas'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "2 []"
    assert "argument --products: unknown products 'float16': choose from float64" in done.stderr


def test_the_command_line_records_the_scheme_in_its_table(model_dirs, text_file, tmp_path):
    out = tmp_path / "table.csv"
    argv = ["measure", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), *ROWS, "--out", str(out)]
    assert main([*argv, "--products", "ozaki:5"]) == 0
    table = pd.read_csv(out)
    assert (table.products == "ozaki:5").all() and list(table.columns).index("products") == list(table.columns).index(
        "extras"
    ) + 1
