"""Float64 sufficient statistics of (X, Y) rows: everything the closed-form fit and R² need.

Rows are never kept. Each :class:`Moments` holds the row count, the means and the *centred*
sums of products (Cxx = Σ (x-x̄)(x-x̄)ᵀ, and likewise Cxy, Cyy), where Cyy may be its diagonal
alone (the output sums of squares: all the fit and its R² read; the whole matrix only where asked,
:mod:`linrec.core.extras`). Centring each chunk about its
own mean and merging chunks with Chan's pairwise update keeps cancellation from eating
precision even when a few residual-stream dimensions are hundreds of times larger than the
rest. Memory is O(d²) whatever the number of rows, and moments of disjoint streams add with
``+``; they also all-reduce across processes. Streaming rows into them is
:class:`linrec.core.accumulator.MomentAccumulator`; saving them is :mod:`linrec.core.moment_files`.

All products run in float64, so TF32 (a float32-only mode) and bf16 never touch them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from linrec.core.pinned import to_pinned_host
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from linrec.core.scores import StreamScores
    from linrec.core.tails import Tails

FIELDS = ("mean_x", "mean_y", "cxx", "cxy", "cyy")
"""The tensor fields of :class:`Moments`, in the order they are packed and saved."""


@dataclass
class Moments:
    """Row count, means and centred product sums of a stream of (x, y) rows."""

    n: int
    mean_x: torch.Tensor
    mean_y: torch.Tensor
    cxx: torch.Tensor
    cxy: torch.Tensor
    cyy: torch.Tensor  # (d_out, d_out), or (d_out,): its diagonal alone (full_output False)

    @classmethod
    def zeros(cls, d_in: int, d_out: int, device: torch.device | str = "cpu", full_output: bool = True) -> Moments:
        """The moments of no rows: the identity of ``+`` (``full_output``: Cyy whole, else its diagonal)."""
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        return cls(0, z(d_in), z(d_out), z(d_in, d_in), z(d_in, d_out), z(d_out, d_out) if full_output else z(d_out))

    @property
    def full_output(self) -> bool:
        """Whether Cyy is held whole (else only its diagonal, the output sums of squares)."""
        return self.cyy.ndim == 2

    @property
    def output_ss(self) -> torch.Tensor:
        """The diagonal of Cyy: each output dimension's sum of squares about its mean (what R² divides by)."""
        return self.cyy.diagonal() if self.full_output else self.cyy

    @classmethod
    def from_rows(cls, x: torch.Tensor, y: torch.Tensor, full_output: bool = True) -> Moments:
        """Moments of the rows of ``x`` (n, d_in) and ``y`` (n, d_out), computed in float64 (Cxx and Cyy exactly
        symmetric, as the streamed ones are; ``full_output=False``: Cyy's diagonal alone)."""
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
            raise LinrecError(
                f"expected x (n, d_in) and y (n, d_out) with equal n; got {tuple(x.shape)} and {tuple(y.shape)}"
            )
        x = x.detach().to(torch.float64)
        y = y.detach().to(torch.float64)
        n = x.shape[0]
        if n == 0:
            return cls.zeros(x.shape[1], y.shape[1], x.device, full_output)
        mean_x, mean_y = x.mean(0), y.mean(0)
        xc, yc = x - mean_x, y - mean_y
        cyy = symmetric(yc.T @ yc) if full_output else yc.square().sum(0)
        return cls(n, mean_x, mean_y, symmetric(xc.T @ xc), xc.T @ yc, cyy)

    @property
    def d_in(self) -> int:
        return self.mean_x.shape[0]

    @property
    def d_out(self) -> int:
        return self.mean_y.shape[0]

    def __add__(self, other: Moments) -> Moments:
        """Moments of the union of both streams (Chan et al.'s pairwise merge)."""
        if (self.d_in, self.d_out) != (other.d_in, other.d_out):
            raise LinrecError(
                f"cannot merge moments of widths {(self.d_in, self.d_out)} and {(other.d_in, other.d_out)}"
            )
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        dx = other.mean_x - self.mean_x
        dy = other.mean_y - self.mean_y
        w = self.n * other.n / n
        if self.full_output and other.full_output:
            cyy = self.cyy + other.cyy + w * torch.outer(dy, dy)
        else:  # one of them holds the diagonal alone: so does their union
            cyy = self.output_ss + other.output_ss + w * dy * dy
        return Moments(
            n=n,
            mean_x=self.mean_x + dx * (other.n / n),
            mean_y=self.mean_y + dy * (other.n / n),
            cxx=self.cxx + other.cxx + w * torch.outer(dx, dx),
            cxy=self.cxy + other.cxy + w * torch.outer(dx, dy),
            cyy=cyy,
        )

    def to(self, device: torch.device | str) -> Moments:
        return Moments(self.n, *(getattr(self, f).to(device) for f in FIELDS))

    def flat(self) -> torch.Tensor:
        """All fields in one float64 vector (count first), for collective communication."""
        n = torch.tensor([float(self.n)], dtype=torch.float64, device=self.mean_x.device)
        return torch.cat([n, self.packed()])

    def packed(self) -> torch.Tensor:
        """Every field but the count in one float64 vector (the count is a host integer)."""
        return torch.cat([getattr(self, f).reshape(-1) for f in FIELDS])

    @classmethod
    def from_flat(cls, v: torch.Tensor, d_in: int, d_out: int) -> Moments:
        """The moments :meth:`flat` wrote into ``v`` (views of it, not copies)."""
        return cls.from_packed(int(round(v[0].item())), v[1:], d_in, d_out)

    @classmethod
    def from_packed(cls, n: int, v: torch.Tensor, d_in: int, d_out: int) -> Moments:
        """The moments of ``n`` rows whose fields :meth:`packed` wrote into ``v`` (views of it, not copies; Cyy whole
        or its diagonal, as ``v``'s length says)."""
        full = v.numel() == d_in + d_out + d_in * d_in + d_in * d_out + d_out * d_out
        shapes = [(d_in,), (d_out,), (d_in, d_in), (d_in, d_out), (d_out, d_out) if full else (d_out,)]
        parts, i = [], 0
        for s in shapes:
            size = math.prod(s)
            parts.append(v[i : i + size].reshape(s))
            i += size
        return cls(n, *parts)

    def to_pinned(self) -> Moments:
        """A copy in pinned host memory, queued on a side stream of the GPU while the capture goes on, the host not
        waiting (:func:`linrec.core.pinned.to_pinned_host`): read it only after ``torch.cuda.synchronize()``. One
        transfer, not a blocking copy into pageable memory per field."""
        return Moments.from_packed(self.n, to_pinned_host(self.packed()), self.d_in, self.d_out)


def _gram_pieces(d: int) -> list[tuple[int, int]]:
    """Column ranges for :func:`add_gram`: up to 4, each at least 64 wide (narrower ones cost more than they save)."""
    k = max(1, min(4, d // 64))
    bounds = [d * i // k for i in range(k + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def add_gram(out: torch.Tensor, a: torch.Tensor) -> None:
    """Add aᵀa to the upper block triangle of ``out`` (d, d): the blocks on and above the diagonal.

    aᵀa is symmetric, so the blocks below the diagonal are never computed (with 4 column blocks,
    10 of 16 block products: about 40 % less arithmetic than one full product, measured on CPU);
    :func:`symmetric` rebuilds the whole matrix from the upper triangle. torch has no SYRK.
    """
    for lo, hi in _gram_pieces(a.shape[1]):
        out[lo:hi, lo:].addmm_(a[:, lo:hi].T, a[:, lo:])


@functools.cache
def _on_or_above_diagonal(d: int, device: torch.device) -> torch.Tensor:
    return torch.ones(d, d, dtype=torch.bool, device=device).triu()


def symmetric(upper: torch.Tensor) -> torch.Tensor:
    """The symmetric matrix whose upper triangle (diagonal included) is that of ``upper`` (one pass over it)."""
    return torch.where(_on_or_above_diagonal(upper.shape[0], upper.device), upper, upper.T)


BlockMoments = dict[int, list[Moments]]
"""Moments per block index, one entry per fold (rows go to folds by sequence)."""


@dataclass
class PositionMoments:
    """Per block and fold, the moments of the rows at each window's first captured position (``first``: where
    the attention sink sits) and of every later row (``later``): what a fit that leaves the sink out sees.

    The moments of every row are the two parts merged (Chan's update, no cancellation), made per block when asked
    for (:meth:`every`), so they are never held beside both parts for every block at once."""

    first: Mapping[int, list[Moments]]
    later: Mapping[int, list[Moments]]
    tails: Mapping[int, Tails] = field(default_factory=dict)  # per block, its largest rows (linrec.core.tails)
    scores: Mapping[int, StreamScores] = field(default_factory=dict)  # per block, linrec.core.scores

    @classmethod
    def together(cls, moments: Mapping[int, list[Moments]]) -> PositionMoments:
        """The moments of every row with no position kept apart (``first`` holds no block): what a store that keeps
        only merged moments reads back; a table from them leaves the first-position columns NaN."""
        return cls({}, moments)

    def merged(self, block: int) -> list[Moments]:
        """The moments of every row of ``block``, per fold (``later``'s alone where the first position was not kept
        apart)."""
        if block not in self.first:
            return list(self.later[block])
        return [f + g for f, g in zip(self.first[block], self.later[block], strict=True)]

    def first_folds(self, block: int) -> Iterator[Moments]:
        """The moments of ``block``'s first rows, fold by fold, each made when it is reached where ``first`` makes them
        from rows (an ``each_fold`` method, as :class:`linrec.core.moment_sink.MomentSink`'s have): a caller that
        merges them one at a time never holds every fold's at once."""
        each_fold = getattr(self.first, "each_fold", None)
        return each_fold(block) if callable(each_fold) else iter(self.first[block])

    def every(self) -> Mapping[int, list[Moments]]:
        """The moments of every row, per block and fold: a view that merges a block's parts when it is read."""
        return _Merged(self)

    def merge(self) -> BlockMoments:
        """The moments of every row as one dict, emptying ``later`` block by block as it goes: for a caller that
        keeps only them (the memory of the later parts is given back as the merged moments are made)."""
        out: BlockMoments = {}
        for block in sorted(self.later):
            out[block] = self.merged(block)
            if isinstance(self.later, dict):
                del self.later[block]
        return out


class _Merged(Mapping[int, list[Moments]]):
    """Block -> :meth:`PositionMoments.merged`, made at each read and not kept."""

    def __init__(self, parts: PositionMoments) -> None:
        self._parts = parts

    def __getitem__(self, block: int) -> list[Moments]:
        if block not in self._parts.later:
            raise KeyError(block)
        return self._parts.merged(block)

    def __iter__(self) -> Iterator[int]:
        return iter(self._parts.later)

    def __len__(self) -> int:
        return len(self._parts.later)


def merge_folds(folds: list[Moments]) -> Moments:
    """The moments of all folds together."""
    total = folds[0]
    for m in folds[1:]:
        total = total + m
    return total


def all_reduce_moments(moments: BlockMoments) -> BlockMoments:
    """Merge every process's moments (torch.distributed must be initialised); all ranks get the result.

    Moments are gathered and merged in rank order with Chan's update rather than summed as raw
    sums, so the merged result is as precise as a single process's.
    """
    import torch.distributed as dist

    world = dist.get_world_size()
    out: BlockMoments = {}
    for block in sorted(moments):
        merged = []
        for m in moments[block]:
            v = m.flat()
            gathered = [torch.empty_like(v) for _ in range(world)]
            dist.all_gather(gathered, v)
            merged.append(merge_folds([Moments.from_flat(g, m.d_in, m.d_out) for g in gathered]))
        out[block] = merged
    return out
