"""Streaming (X, Y) rows into float64 moments in place, fold by fold, without keeping the rows.

The sums are taken about one fixed shift (the shifted-data algorithm) and converted to centred
:class:`linrec.core.moments.Moments` when asked for; a finished fold's sums are freed and only its
moments kept, so a capture that hands folds over one after the other holds one fold's sums at a time.

By default all products run in float64, so TF32 (a float32-only mode) and bf16 never touch them; ``products``
chooses a cheaper scheme for the products of the shifted rows (:mod:`linrec.core.schemes`).

Two layouts of the sums, with the same moments to float64 rounding: *split* (XᵀX's upper block triangle, XᵀY, the
sums of the rows and the diagonal of YᵀY, each its own product or reduction: the fewest operations, the default) and
*one product* (the rows written once as [x | 1 | y] and one product of it with [x | 1] giving XᵀX, YᵀX and both sums
of rows at once: about 4 d² operations per row instead of 3.25 d², one kernel where the split layout launches about
ten, and d_in + 1 numbers more per fold), which a GPU takes at small widths (:func:`one_product`), where the
launches, not the arithmetic, set the time. The whole YᵀY, where asked, is its own product in either.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linrec.core.moments import Moments, add_gram, symmetric
from linrec.core.products import products_for
from linrec.core.schemes import FLOAT64
from linrec.errors import LinrecError

ONE_PRODUCT_WIDTH = 2048
"""The widest [x | 1 | y] (d_in + 1 + d_out) a GPU sums in the one-product layout (GPT-2's 1,537 among them): wider
blocks spend their time in the arithmetic, which the split layout keeps about a fifth lower."""


def one_product(device: torch.device, d_in: int, d_out: int, products: str = FLOAT64) -> bool:
    """Whether a capture on ``device`` sums blocks of these widths in the one-product layout (module docstring): on a
    GPU, with float64 products, up to :data:`ONE_PRODUCT_WIDTH`; the CPU, whose launches cost little, never does."""
    return device.type == "cuda" and products == FLOAT64 and d_in + 1 + d_out <= ONE_PRODUCT_WIDTH


def _shift_into(out: torch.Tensor, rows: torch.Tensor, shift: torch.Tensor) -> None:
    """``out`` = rows − shift in float64: on a GPU one kernel that casts and subtracts; on the CPU a cast and a
    subtraction in place (its mixed-dtype subtraction takes twice as long). The same numbers either way: the cast is
    exact and the subtraction rounded once."""
    if out.device.type == "cuda":
        torch.sub(rows, shift, out=out)
    else:
        out.copy_(rows).sub_(shift)


@dataclass(frozen=True)
class Shifted:
    """A chunk's rows with the shift subtracted, float64: ``x`` (n, d_in) and ``y`` (n, d_out); in the one-product
    layout both are column views of ``joined``, the rows [x | 1 | y] that one product sums whole."""

    x: torch.Tensor
    y: torch.Tensor
    joined: torch.Tensor | None = None

    @classmethod
    def of_joined(cls, joined: torch.Tensor, d_in: int) -> Shifted:
        return cls(joined[:, :d_in], joined[:, d_in + 1 :], joined)

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, rows: slice) -> Shifted:
        """The rows ``rows`` (a slice: views, no copy)."""
        if self.joined is None:
            return Shifted(self.x[rows], self.y[rows])
        return Shifted.of_joined(self.joined[rows], self.x.shape[1])

    def index_select(self, index: torch.Tensor) -> Shifted:
        """The rows at ``index`` (a copy)."""
        if self.joined is None:
            return Shifted(self.x.index_select(0, index), self.y.index_select(0, index))
        return Shifted.of_joined(self.joined.index_select(0, index), self.x.shape[1])


@dataclass(frozen=True)
class _Sums:
    """One live fold's float64 sums about the shift: Σx, Σy, XᵀX (its upper block triangle, or whole), XᵀY, YᵀY (or
    its diagonal); in the one-product layout all but YᵀY's diagonal are views of ``joined``, the one product's sum."""

    sx: torch.Tensor
    sy: torch.Tensor
    sxx: torch.Tensor
    sxy: torch.Tensor
    syy: torch.Tensor
    joined: torch.Tensor | None = None


class MomentAccumulator:
    """Streams rows into float64 sums about one fixed shift, in place, for ``folds`` disjoint row sets.

    The shifted-data algorithm: with K close to the mean, Σ(x-K)(x-K)ᵀ - n(x̄-K)(x̄-K)ᵀ loses
    almost nothing to cancellation, and each chunk costs one in-place product per sum with no
    per-chunk O(d²) merge. The shift is the mean of the first rows and is shared by every fold, so
    a chunk holding several folds is cast and shifted once (one fused kernel per operand on a GPU) and each
    fold's rows are a slice of it. Nothing here reads a device value on the host: a chunk's row
    count is the host's own integer, so a GPU never waits. :meth:`moments` converts to centred
    :class:`Moments`.

    A fold's sums are allocated when its first rows come and freed by :meth:`close`, which keeps its
    finished moments (on a GPU, in pinned host memory): when folds come one after the other, as
    :func:`linrec.core.capture.run_capture` hands them over, only the live fold's sums take device
    memory, not all ``folds`` of them. ``keep_on_gpu`` keeps them on the GPU instead, for a caller
    that fits them there and has planned the room (:class:`linrec.core.plan.Footprint`): no copy out
    and back, no pinned memory.

    ``full_output``: sum the whole YᵀY (for ``effective_rank_out``); by default only its diagonal, the output sums of
    squares that the fit and its R² read: per row d_in² + 2 d_in d_out floating-point operations of products (XᵀX's
    upper block triangle, XᵀY) instead of about 4.5 d² with the whole YᵀY.

    ``products``: how each chunk's XᵀX, XᵀY (and whole YᵀY) of the shifted rows are multiplied
    (:mod:`linrec.core.schemes`; by default in float64); the sums they go into, the sums of the rows and the diagonal
    of YᵀY are float64 whatever it is. ``joined``: the layout of the sums (module docstring): the one-product layout
    where True, the split one where False; None: :func:`one_product`'s choice for the device and widths.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        device: torch.device | str = "cpu",
        folds: int = 1,
        keep_on_gpu: bool = False,
        full_output: bool = False,
        products: str = FLOAT64,
        joined: bool | None = None,
    ) -> None:
        self.d_in, self.d_out, self.device, self.keep_on_gpu = d_in, d_out, torch.device(device), keep_on_gpu
        self.full_output = full_output
        if joined and products != FLOAT64:
            raise ValueError(f"the one-product layout multiplies in float64; products={products!r} is the split one's")
        self.joined = one_product(self.device, d_in, d_out, products) if joined is None else joined
        self._products = products_for(products)
        self.n = [0] * folds
        self.shift_x: torch.Tensor | None = None
        self.shift_y: torch.Tensor | None = None
        self._sums: dict[int, _Sums] = {}  # live folds
        self._closed: dict[int, Moments] = {}
        self._released: set[int] = set()  # closed folds handed over by release()
        self._closed_finite: list[torch.Tensor] = []  # one device flag per closed fold

    @property
    def live_folds(self) -> list[int]:
        """The folds whose sums are held now (rows came, :meth:`close` not yet called)."""
        return sorted(self._sums)

    def _live(self, fold: int) -> _Sums:
        if fold in self._closed or fold in self._released:
            raise LinrecError(f"rows for fold {fold} came after it was closed: add every row of a fold before close()")
        if fold not in self._sums:
            z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=self.device)  # noqa: E731
            d_in, d_out = self.d_in, self.d_out
            syy = z(d_out, d_out) if self.full_output else z(d_out)
            if self.joined:  # one product: [x | 1 | y]ᵀ [x | 1]
                p = z(d_in + 1 + d_out, d_in + 1)
                below = p[d_in + 1 :]
                self._sums[fold] = _Sums(p[:d_in, d_in], below[:, d_in], p[:d_in, :d_in], below[:, :d_in].T, syy, p)
            else:
                self._sums[fold] = _Sums(z(d_in), z(d_out), z(d_in, d_in), z(d_in, d_out), syy)
        return self._sums[fold]

    def shifted(self, x: torch.Tensor, y: torch.Tensor) -> Shifted:
        """The rows minus the shift in float64 (:class:`Shifted`), cast and shifted into a new tensor in one pass per
        operand (:func:`_shift_into`); the first call sets the shift to its rows' mean. ``x`` and ``y`` may have more
        leading dimensions (a strided view of windows), which the result, rows (n, d), flattens for free."""
        x, y = x.detach(), y.detach()
        if self.shift_x is None or self.shift_y is None:  # the first rows: both are set together
            self.shift_x = x.reshape(-1, self.d_in).mean(0, dtype=torch.float64)
            self.shift_y = y.reshape(-1, self.d_out).mean(0, dtype=torch.float64)
        n, f64 = x.numel() // self.d_in, torch.float64
        if not self.joined:
            xs, ys = torch.empty(x.shape, dtype=f64, device=x.device), torch.empty(y.shape, dtype=f64, device=y.device)
            _shift_into(xs, x, self.shift_x)
            _shift_into(ys, y, self.shift_y)
            return Shifted(xs.view(n, self.d_in), ys.view(n, self.d_out))
        joined = torch.empty(n, self.d_in + 1 + self.d_out, dtype=f64, device=x.device)
        joined[:, self.d_in].fill_(1.0)
        rows = Shifted.of_joined(joined, self.d_in)
        _shift_into(rows.x.view(x.shape), x, self.shift_x)
        _shift_into(rows.y.view(y.shape), y, self.shift_y)
        return rows

    def add_shifted(self, rows: Shifted, fold: int = 0) -> None:
        """Merge rows already returned by :meth:`shifted` into ``fold``."""
        sums = self._live(fold)
        self.n[fold] += len(rows)
        if sums.joined is not None:
            if rows.joined is None:
                raise ValueError("rows of the split layout for sums of the one-product layout: shift them here")
            sums.joined.addmm_(rows.joined.T, rows.joined[:, : self.d_in + 1])
            if self.full_output:
                add_gram(sums.syy, rows.y)
        else:
            sums.sx.add_(rows.x.sum(0))
            sums.sy.add_(rows.y.sum(0))
            self._products(sums.sxx, sums.sxy, sums.syy if self.full_output else None, rows.x, rows.y)
        if not self.full_output:
            sums.syy.add_(rows.y.square().sum(0))

    def add(self, x: torch.Tensor, y: torch.Tensor, fold: int = 0) -> None:
        """Merge the rows of ``x`` (n, d_in) and ``y`` (n, d_out), cast to float64, into ``fold``."""
        if x.shape[0] == 0:
            return
        self.add_shifted(self.shifted(x, y), fold)

    def finite(self) -> torch.Tensor:
        """A device bool scalar: whether every row so far was finite (a NaN or Inf makes its fold's sums so)."""
        flags = [torch.isfinite(s.sx).all() & torch.isfinite(s.sy).all() for s in self._sums.values()]
        flags += self._closed_finite
        return torch.stack(flags).all() if flags else torch.ones((), dtype=torch.bool, device=self.device)

    def moments(self, fold: int = 0) -> Moments:
        """The centred moments of everything added to ``fold`` so far (once closed, where :meth:`close` put them)."""
        if fold in self._closed:
            return self._closed[fold]
        if fold in self._released:
            raise LinrecError(f"fold {fold}'s moments were released: read them where they were kept")
        n = self.n[fold]
        if n == 0:
            return Moments.zeros(self.d_in, self.d_out, self.device, self.full_output)
        assert self.shift_x is not None and self.shift_y is not None  # set by the first add of rows
        s = self._sums[fold]
        mx, my = s.sx / n, s.sy / n
        return Moments(
            n,
            self.shift_x + mx,
            self.shift_y + my,
            symmetric(torch.addr(s.sxx, mx, mx, alpha=-n)),
            torch.addr(s.sxy, mx, my, alpha=-n).contiguous(),  # (a transposed view's, in the one-product layout)
            symmetric(torch.addr(s.syy, my, my, alpha=-n)) if self.full_output else s.syy - n * my * my,
        )

    def release(self, fold: int) -> Moments:
        """A closed fold's moments, handed over and no longer held here (:meth:`moments` of it then refuses): for a
        caller that keeps them elsewhere, e.g. on disk."""
        if fold not in self._closed:
            raise LinrecError(f"fold {fold} is not closed (or was released already): close() it first")
        m = self._closed.pop(fold)
        self._released.add(fold)
        return m

    def close(self, fold: int) -> None:
        """No more rows for ``fold``: keep its moments and free its sums. From a GPU the moments go to pinned host
        memory without the host waiting (:meth:`Moments.to_pinned`): synchronise before reading them; with
        ``keep_on_gpu`` they stay on the GPU."""
        if fold in self._closed or fold in self._released:
            return
        if fold in self._sums:
            s = self._sums[fold]
            self._closed_finite.append(torch.isfinite(s.sx).all() & torch.isfinite(s.sy).all())
        m = self.moments(fold)
        self._closed[fold] = m.to_pinned() if self.device.type == "cuda" and not self.keep_on_gpu else m
        self._sums.pop(fold, None)
