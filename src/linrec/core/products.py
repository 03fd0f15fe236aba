"""The arithmetic of each product scheme (:mod:`linrec.core.schemes`): one chunk's XᵀX and XᵀY of shifted float64
rows, added into float64 sums.

Every function here takes the float64 sums ``sxx`` (d_in, d_in; only its upper block triangle is added to, as
:func:`linrec.core.moments.add_gram` adds, and only it is read, by :func:`linrec.core.moments.symmetric`), ``sxy``
(d_in, d_out) and ``syy`` (d_out, d_out, the whole YᵀY; None where only its diagonal is summed, which the
accumulator sums exactly itself), and a chunk's rows ``xs`` (n, d_in) and ``ys`` (n, d_out) with the shift already
subtracted: without it the low-precision schemes lose what the centring cancels (tests/core/test_products.py).

``float64`` is the core's own arithmetic, unchanged. ``float32`` rounds the shifted rows to float32 and multiplies
them with TF32 off. ``ozaki:S`` is Ozaki scheme I: each operand's column i is scaled by a power of two 2^e_i above
its largest entry and split into S int8 slices of 7 bits each, x ≈ 2^(e-6) Σ_s q_s 2^(-7 s) with every q_s an
integer from -64 to 64; the slice products q_sᵀ p_t with s + t < S (the scheme's truncation: the pairs it drops are
below the last slice kept) are integers, exact in int32 (``torch._int_mm``, int8 tensor cores, on a GPU) or in
float64 (products of integer-valued matrices whose sums stay far below 2^53: the emulation on the CPU), and are
summed level by level in float64. The diagonals of XᵀX and YᵀY are summed exactly instead (:func:`_add_gram_levels`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Literal

import torch

from linrec.core.moments import _gram_pieces, add_gram
from linrec.core.schemes import FLOAT32, FLOAT64, ozaki_slices, parse_products

Products = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor], None]
"""A scheme's function: ``(sxx, sxy, syy, xs, ys)``, adding the chunk's products into the sums (module docstring)."""

Kernel = Literal["int8", "float64"]
"""How ``ozaki:S`` multiplies its slices: int8 x int8 -> int32 (``torch._int_mm``), or float64 products of the
integer-valued slices; both exact, so both give the same sums bit for bit."""

BITS = 7
"""Bits per int8 slice: every entry is an integer from -64 to 64 (rounded to nearest, so what is left is at most half
of the last one kept, and unbiased)."""

MAX_TERMS = (2**31 - 1) // 64**2
"""The most slice products one int32 sum holds without overflow (524,287, each at most 64 x 64 in size): the longest
contraction of an integer product, so a chunk is taken in pieces of at most ``MAX_TERMS // S`` rows (a level stacks
up to S slices' rows)."""


def add_float64(
    sxx: torch.Tensor, sxy: torch.Tensor, syy: torch.Tensor | None, xs: torch.Tensor, ys: torch.Tensor
) -> None:
    """The default: float64 products (XᵀX's and YᵀY's upper block triangle by :func:`add_gram`, XᵀY whole)."""
    add_gram(sxx, xs)
    sxy.addmm_(xs.T, ys)
    if syy is not None:
        add_gram(syy, ys)


@contextmanager
def ieee_float32() -> Iterator[None]:
    """Float32 products in IEEE float32 within the block (TF32, or bf16 on a CPU, off), the setting restored after."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _add_gram_float32(out: torch.Tensor, a: torch.Tensor) -> None:
    """Add aᵀa of float32 ``a`` to the upper block triangle of float64 ``out``, block by block as :func:`add_gram`."""
    for lo, hi in _gram_pieces(a.shape[1]):
        out[lo:hi, lo:] += a[:, lo:hi].T @ a[:, lo:]


def add_float32(
    sxx: torch.Tensor, sxy: torch.Tensor, syy: torch.Tensor | None, xs: torch.Tensor, ys: torch.Tensor
) -> None:
    """``float32``: the shifted rows rounded to float32, each product of the chunk in IEEE float32 (TF32 off, whatever
    the caller set), added into the float64 sums."""
    with ieee_float32():
        xf, yf = xs.to(torch.float32), ys.to(torch.float32)
        _add_gram_float32(sxx, xf)
        sxy += xf.T @ yf
        if syy is not None:
            _add_gram_float32(syy, yf)


def powers_of_two(k: torch.Tensor) -> torch.Tensor:
    """2^k in float64 for integers k from -1022 to 1023, exactly: built from its bits (a device's ``pow`` need not
    promise an exact power)."""
    return ((k.to(torch.int64).clamp(-1022, 1023) + 1023) << 52).view(torch.float64)


def int8_slices(a: torch.Tensor, slices: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` (n, d) float64 as ``slices`` int8 slices per column: ``(q, scale)``, q (d, slices, n8) with n8 = n rounded
    up to a multiple of 8 (zero rows, as ``torch._int_mm`` needs), and scale (d,) powers of two, such that
    a[:, i] ≈ scale_i Σ_s q[i, s] 2^(-7 s) to within 2^(-7 slices) 2^e_i, 2^e_i the power of two above its largest
    entry. Every step is exact in float64: a scaling by a power of two, a rounding to an integer, a subtraction."""
    n, d = a.shape
    _, exponent = torch.frexp(a.abs().amax(0))  # every |a[:, i]| < 2^e_i
    rest = a.T * powers_of_two(BITS - 1 - exponent)[:, None]  # |rest| < 2^6
    q = torch.zeros(d, slices, -(-n // 8) * 8, dtype=torch.int8, device=a.device)
    whole = torch.empty_like(rest)
    for s in range(slices):
        torch.round(rest, out=whole)  # at most 64 in size; what is left at most 1/2
        q[:, s, :n] = whole
        rest.sub_(whole).mul_(2**BITS)  # the next 7 bits
    return q, powers_of_two(exponent + 1 - BITS)


def _integer_product(a: torch.Tensor, b: torch.Tensor, kernel: Kernel) -> torch.Tensor:
    """a @ bᵀ of int8 ``a`` (m, k) and ``b`` (p, k), exactly, in float64: by ``torch._int_mm`` (``a`` row-major, ``b``
    column-major, its own layout) where ``kernel`` is int8 and the shapes are ones it takes (m above 16, k and p
    multiples of 8), else a float64 product of the integers."""
    if kernel == "int8" and a.shape[0] > 16 and a.shape[1] % 8 == 0 and b.shape[0] % 8 == 0:
        return torch._int_mm(a.contiguous(), b.contiguous().T).to(torch.float64)
    return a.to(torch.float64) @ b.to(torch.float64).T


def _levels(
    qa: torch.Tensor, scale_a: torch.Tensor, qb: torch.Tensor, scale_b: torch.Tensor, kernel: Kernel
) -> torch.Tensor:
    """aᵀb from the slices of a and b (:func:`int8_slices`): for each level l < S, Σ_{s+t=l} q_sᵀ p_t as one integer
    product of the slices stacked along the rows ([q_0 … q_l] against [p_l … p_0]), weighted by 2^(-7 l) and summed in
    float64 (the smallest first), then scaled by each row's and column's power of two."""
    total = torch.zeros(qa.shape[0], qb.shape[0], dtype=torch.float64, device=qa.device)
    for level in reversed(range(qa.shape[1])):
        a = qa[:, : level + 1].reshape(qa.shape[0], -1)
        b = qb[:, : level + 1].flip(1).reshape(qb.shape[0], -1)
        total.add_(_integer_product(a, b, kernel), alpha=2.0 ** (-BITS * level))
    return total.mul_(scale_a[:, None]).mul_(scale_b)


def _add_gram_levels(out: torch.Tensor, a: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, kernel: Kernel) -> None:
    """Add aᵀa to the upper block triangle of ``out`` from the slices ``q``, ``scale`` of ``a``
    (:func:`int8_slices`), in :func:`add_gram`'s column blocks, its diagonal exact in float64: the slice pairs the
    truncation drops include q_sᵀq_s, sums of squares, which would bias it low (by about 1e-7 with 4 slices), not
    only blur it."""
    squares = a.square().sum(0)
    for lo, hi in _gram_pieces(a.shape[1]):
        block = _levels(q[lo:hi], scale[lo:hi], q[lo:], scale[lo:], kernel)
        block[:, : hi - lo].diagonal().copy_(squares[lo:hi])
        out[lo:hi, lo:] += block


def add_ozaki(
    sxx: torch.Tensor,
    sxy: torch.Tensor,
    syy: torch.Tensor | None,
    xs: torch.Tensor,
    ys: torch.Tensor,
    *,
    slices: int,
    kernel: Kernel | None = None,
) -> None:
    """``ozaki:S``: the chunk's products by Ozaki scheme I with ``slices`` int8 slices per operand (module docstring),
    in pieces of rows short enough for int32 sums (:data:`MAX_TERMS`); ``kernel``: int8 (``torch._int_mm``) or
    float64 (None: int8 on a GPU, float64 on the CPU)."""
    kernel = kernel or ("int8" if xs.is_cuda else "float64")
    rows = MAX_TERMS // slices // 8 * 8
    for start in range(0, xs.shape[0], rows):
        x, y = xs[start : start + rows], ys[start : start + rows]
        (qx, sx), (qy, sy) = int8_slices(x, slices), int8_slices(y, slices)
        _add_gram_levels(sxx, x, qx, sx, kernel)
        sxy += _levels(qx, sx, qy, sy, kernel)
        if syy is not None:
            _add_gram_levels(syy, y, qy, sy, kernel)


def products_for(products: str) -> Products:
    """The function of the scheme ``products`` names (:func:`linrec.core.schemes.parse_products`)."""
    name = parse_products(products)
    slices = ozaki_slices(name)
    if slices is not None:
        return partial(add_ozaki, slices=slices)
    return {FLOAT64: add_float64, FLOAT32: add_float32}[name]
