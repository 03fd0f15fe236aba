"""How a capture multiplies its rows (``products``): the command line's ``--products`` and the library's
``products=`` name the schemes alike; :mod:`linrec.core.products` holds their arithmetic.

By default every product of the capture runs in float64 (``float64``), exact to float64 rounding, as before this
option. Where float64 is slow (a T4 has 0.25 TFLOPS of it against 65 of float16; bf16 models on an H100 or H200
spend their capture in float64 products), a scheme computes each chunk's XᵀX and XᵀY of the *shifted* rows (the
mean of the first rows subtracted, :class:`linrec.core.accumulator.MomentAccumulator`) in cheaper arithmetic and
adds them into the same float64 sums: ``float32`` (IEEE float32, TF32 off) or ``ozaki:S`` (Ozaki scheme I: S int8
slices per operand, the slice products exact in integers). The sums of the rows, the diagonal of YᵀY and everything
after the sums stay float64 whatever the scheme.

Its own module, free of torch, so that the command line refuses a name it does not know before torch loads.
"""

from __future__ import annotations

from linrec.errors import LinrecError

FLOAT64 = "float64"
FLOAT32 = "float32"
OZAKI = "ozaki"

SLICES = range(3, 9)
"""The int8 slices per operand ``ozaki:S`` takes: 7 bits each, so 8 carry float64's 53 bits and more."""

SCHEMES = {
    FLOAT64: "exact float64 products (the default)",
    FLOAT32: "each chunk's products in float32 (TF32 off), added into float64 sums: held-out R²_lin within 1.4e-8 "
    "(bfloat16 rows) to 2.5e-6 (float32 rows) of float64's on planted ill-conditioned inputs",
    f"{OZAKI}:S": f"Ozaki scheme I, S int8 slices per operand ({SLICES.start} to {SLICES.stop - 1}; int8 tensor "
    "cores on a GPU), the slice products exact: R²_lin within 5.6e-7 of float64's with 3 slices, 2.5e-9 with 4, "
    "1e-11 with 5 (the fewest for a float32 capture)",
}
"""Each scheme a capture's products can use, and what it gives (the errors: tests/core/test_products.py)."""


def parse_products(value: str | None) -> str:
    """The scheme ``value`` names, spelt as :data:`SCHEMES` spells it (``float64``, ``float32``, ``ozaki:S``; None:
    the default, ``float64``), or a LinrecError naming the choices."""
    if value is None:
        return FLOAT64
    name = value.strip().lower()
    if name in (FLOAT64, FLOAT32):
        return name
    kind, _, slices = name.partition(":")
    if kind == OZAKI and slices.strip().isdigit() and int(slices) in SLICES:
        return f"{OZAKI}:{int(slices)}"
    raise LinrecError(
        f"unknown products '{value}': choose from {FLOAT64} (exact, the default), {FLOAT32}, or {OZAKI}:S with S "
        f"int8 slices from {SLICES.start} to {SLICES.stop - 1} (e.g. {OZAKI}:4)"
    )


def ozaki_slices(name: str) -> int | None:
    """The slices of an ``ozaki:S`` scheme as :func:`parse_products` spells it; None for any other scheme."""
    kind, _, slices = name.partition(":")
    return int(slices) if kind == OZAKI else None
