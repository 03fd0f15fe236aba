"""Streaming (X, Y) rows into float64 moments in place, fold by fold, without keeping the rows.

The sums are taken about one fixed shift (the shifted-data algorithm) and converted to centred
:class:`linrec.core.moments.Moments` when asked for; a finished fold's sums are freed and only its
moments kept, so a capture that hands folds over one after the other holds one fold's sums at a time.

By default all products run in float64, so TF32 (a float32-only mode) and bf16 never touch them; ``products``
chooses a cheaper scheme for the products of the shifted rows (:mod:`linrec.core.schemes`).
"""

from __future__ import annotations

import torch

from linrec.core.moments import Moments, symmetric
from linrec.core.products import products_for
from linrec.core.schemes import FLOAT64
from linrec.errors import LinrecError


class MomentAccumulator:
    """Streams rows into float64 sums about one fixed shift, in place, for ``folds`` disjoint row sets.

    The shifted-data algorithm: with K close to the mean, Σ(x-K)(x-K)ᵀ - n(x̄-K)(x̄-K)ᵀ loses
    almost nothing to cancellation, and each chunk costs one in-place product per sum with no
    per-chunk O(d²) merge. The shift is the mean of the first rows and is shared by every fold, so
    a chunk holding several folds is cast and shifted once (one fused kernel per operand) and each
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
    of YᵀY are float64 whatever it is.
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
    ) -> None:
        self.d_in, self.d_out, self.device, self.keep_on_gpu = d_in, d_out, torch.device(device), keep_on_gpu
        self.full_output = full_output
        self._products = products_for(products)
        self.n = [0] * folds
        self.shift_x: torch.Tensor | None = None
        self.shift_y: torch.Tensor | None = None
        self._sums: dict[int, tuple[torch.Tensor, ...]] = {}  # live folds: sx, sy, sxx, sxy, syy
        self._closed: dict[int, Moments] = {}
        self._released: set[int] = set()  # closed folds handed over by release()
        self._closed_finite: list[torch.Tensor] = []  # one device flag per closed fold

    @property
    def live_folds(self) -> list[int]:
        """The folds whose sums are held now (rows came, :meth:`close` not yet called)."""
        return sorted(self._sums)

    def _live(self, fold: int) -> tuple[torch.Tensor, ...]:
        if fold in self._closed or fold in self._released:
            raise LinrecError(f"rows for fold {fold} came after it was closed: add every row of a fold before close()")
        if fold not in self._sums:
            z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=self.device)  # noqa: E731
            d_in, d_out = self.d_in, self.d_out
            syy = z(d_out, d_out) if self.full_output else z(d_out)
            self._sums[fold] = (z(d_in), z(d_out), z(d_in, d_in), z(d_in, d_out), syy)
        return self._sums[fold]

    def shifted(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x - Kx, y - Ky) in float64 as rows (n, d), each a cast to a new tensor and a subtraction in place (the
        numbers of ``torch.sub(x, K)``, whose mixed-dtype path takes twice as long); the first call sets K to its rows'
        mean. ``x`` and ``y`` may have more leading dimensions (a strided view of windows), which the cast's
        contiguous result flattens for free."""
        if self.shift_x is None or self.shift_y is None:  # the first rows: both are set together
            self.shift_x = x.detach().reshape(-1, self.d_in).mean(0, dtype=torch.float64)
            self.shift_y = y.detach().reshape(-1, self.d_out).mean(0, dtype=torch.float64)
        xs = x.detach().to(torch.float64, copy=True).sub_(self.shift_x)
        ys = y.detach().to(torch.float64, copy=True).sub_(self.shift_y)
        return xs.reshape(-1, self.d_in), ys.reshape(-1, self.d_out)

    def add_shifted(self, xs: torch.Tensor, ys: torch.Tensor, fold: int = 0) -> None:
        """Merge rows already returned by :meth:`shifted` into ``fold``."""
        sx, sy, sxx, sxy, syy = self._live(fold)
        self.n[fold] += xs.shape[0]
        sx += xs.sum(0)
        sy += ys.sum(0)
        self._products(sxx, sxy, syy if self.full_output else None, xs, ys)
        if not self.full_output:
            syy += ys.square().sum(0)

    def add(self, x: torch.Tensor, y: torch.Tensor, fold: int = 0) -> None:
        """Merge the rows of ``x`` (n, d_in) and ``y`` (n, d_out), cast to float64, into ``fold``."""
        if x.shape[0] == 0:
            return
        self.add_shifted(*self.shifted(x, y), fold)

    def finite(self) -> torch.Tensor:
        """A device bool scalar: whether every row so far was finite (a NaN or Inf makes its fold's sums so)."""
        flags = [torch.isfinite(s[0]).all() & torch.isfinite(s[1]).all() for s in self._sums.values()]
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
        sx, sy, sxx, sxy, syy = self._sums[fold]
        mx, my = sx / n, sy / n
        return Moments(
            n,
            self.shift_x + mx,
            self.shift_y + my,
            symmetric(torch.addr(sxx, mx, mx, alpha=-n)),
            torch.addr(sxy, mx, my, alpha=-n),
            symmetric(torch.addr(syy, my, my, alpha=-n)) if self.full_output else syy - n * my * my,
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
            sx, sy = self._sums[fold][:2]
            self._closed_finite.append(torch.isfinite(sx).all() & torch.isfinite(sy).all())
        m = self.moments(fold)
        self._closed[fold] = m.to_pinned() if self.device.type == "cuda" and not self.keep_on_gpu else m
        self._sums.pop(fold, None)
