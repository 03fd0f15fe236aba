"""Float64 sufficient statistics of (X, Y) rows: everything the closed-form fit and R² need.

Rows are never kept. Each :class:`Moments` holds the row count, the means and the *centred*
sums of products (Cxx = Σ (x-x̄)(x-x̄)ᵀ, and likewise Cxy, Cyy). Centring each chunk about its
own mean and merging chunks with Chan's pairwise update keeps cancellation from eating
precision even when a few residual-stream dimensions are hundreds of times larger than the
rest. Memory is O(d²) whatever the number of rows, and moments of disjoint streams add with
``+``; they also save to safetensors and all-reduce across processes.

All products run in float64, so TF32 (a float32-only mode) and bf16 never touch them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from linrec.core.tensorfile import write_tensors
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from linrec.core.tails import Tails

_FIELDS = ("mean_x", "mean_y", "cxx", "cxy", "cyy")


@dataclass
class Moments:
    """Row count, means and centred product sums of a stream of (x, y) rows."""

    n: int
    mean_x: torch.Tensor
    mean_y: torch.Tensor
    cxx: torch.Tensor
    cxy: torch.Tensor
    cyy: torch.Tensor

    @classmethod
    def zeros(cls, d_in: int, d_out: int, device: torch.device | str = "cpu") -> Moments:
        """The moments of no rows: the identity of ``+``."""
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        return cls(0, z(d_in), z(d_out), z(d_in, d_in), z(d_in, d_out), z(d_out, d_out))

    @classmethod
    def from_rows(cls, x: torch.Tensor, y: torch.Tensor) -> Moments:
        """Moments of the rows of ``x`` (n, d_in) and ``y`` (n, d_out), computed in float64 (Cxx and Cyy exactly
        symmetric, as the streamed ones are)."""
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
            raise LinrecError(
                f"expected x (n, d_in) and y (n, d_out) with equal n; got {tuple(x.shape)} and {tuple(y.shape)}"
            )
        x = x.detach().to(torch.float64)
        y = y.detach().to(torch.float64)
        n = x.shape[0]
        if n == 0:
            return cls.zeros(x.shape[1], y.shape[1], x.device)
        mean_x, mean_y = x.mean(0), y.mean(0)
        xc, yc = x - mean_x, y - mean_y
        return cls(n, mean_x, mean_y, symmetric(xc.T @ xc), xc.T @ yc, symmetric(yc.T @ yc))

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
        return Moments(
            n=n,
            mean_x=self.mean_x + dx * (other.n / n),
            mean_y=self.mean_y + dy * (other.n / n),
            cxx=self.cxx + other.cxx + w * torch.outer(dx, dx),
            cxy=self.cxy + other.cxy + w * torch.outer(dx, dy),
            cyy=self.cyy + other.cyy + w * torch.outer(dy, dy),
        )

    def to(self, device: torch.device | str) -> Moments:
        return Moments(self.n, *(getattr(self, f).to(device) for f in _FIELDS))

    def flat(self) -> torch.Tensor:
        """All fields in one float64 vector (count first), for collective communication."""
        n = torch.tensor([float(self.n)], dtype=torch.float64, device=self.mean_x.device)
        return torch.cat([n, self.packed()])

    def packed(self) -> torch.Tensor:
        """Every field but the count in one float64 vector (the count is a host integer)."""
        return torch.cat([getattr(self, f).reshape(-1) for f in _FIELDS])

    @classmethod
    def from_flat(cls, v: torch.Tensor, d_in: int, d_out: int) -> Moments:
        """The moments :meth:`flat` wrote into ``v`` (views of it, not copies)."""
        return cls.from_packed(int(round(v[0].item())), v[1:], d_in, d_out)

    @classmethod
    def from_packed(cls, n: int, v: torch.Tensor, d_in: int, d_out: int) -> Moments:
        """The moments of ``n`` rows whose fields :meth:`packed` wrote into ``v`` (views of it, not copies)."""
        shapes = [(d_in,), (d_out,), (d_in, d_in), (d_in, d_out), (d_out, d_out)]
        parts, i = [], 0
        for s in shapes:
            size = math.prod(s)
            parts.append(v[i : i + size].reshape(s))
            i += size
        return cls(n, *parts)

    def to_pinned(self) -> Moments:
        """A copy in pinned host memory, queued on the current CUDA stream without the host waiting: read it only
        after ``torch.cuda.synchronize()``. One transfer, not a blocking copy into pageable memory per field."""
        packed = self.packed()
        host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
        host.copy_(packed, non_blocking=True)
        return Moments.from_packed(self.n, host, self.d_in, self.d_out)


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
    memory, not all ``folds`` of them.
    """

    def __init__(self, d_in: int, d_out: int, device: torch.device | str = "cpu", folds: int = 1) -> None:
        self.d_in, self.d_out, self.device = d_in, d_out, torch.device(device)
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
            self._sums[fold] = (z(d_in), z(d_out), z(d_in, d_in), z(d_in, d_out), z(d_out, d_out))
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
        add_gram(sxx, xs)
        sxy.addmm_(xs.T, ys)
        add_gram(syy, ys)

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
            return Moments.zeros(self.d_in, self.d_out, self.device)
        assert self.shift_x is not None and self.shift_y is not None  # set by the first add of rows
        sx, sy, sxx, sxy, syy = self._sums[fold]
        mx, my = sx / n, sy / n
        return Moments(
            n,
            self.shift_x + mx,
            self.shift_y + my,
            symmetric(torch.addr(sxx, mx, mx, alpha=-n)),
            torch.addr(sxy, mx, my, alpha=-n),
            symmetric(torch.addr(syy, my, my, alpha=-n)),
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
        memory without the host waiting (:meth:`Moments.to_pinned`): synchronise before reading them."""
        if fold in self._closed or fold in self._released:
            return
        if fold in self._sums:
            sx, sy = self._sums[fold][:2]
            self._closed_finite.append(torch.isfinite(sx).all() & torch.isfinite(sy).all())
        m = self.moments(fold)
        self._closed[fold] = m.to_pinned() if self.device.type == "cuda" else m
        self._sums.pop(fold, None)


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


class SpilledMoments(Mapping[int, list[Moments]]):
    """Block -> per-fold moments kept on disk, one file per block and fold in a temporary directory made under
    ``where`` (removed when this mapping is dropped or :meth:`remove` is called), read back when a block is asked
    for and not kept: a capture whose finished folds would not fit in memory (a 1.5B model's moments of every block
    are 8 GB) holds only its live folds. The file's float64 values are the moments' own, so reading one back changes
    no bit."""

    def __init__(self, where: str | Path, folds: int) -> None:
        import tempfile

        Path(where).mkdir(parents=True, exist_ok=True)
        self._dir = tempfile.TemporaryDirectory(dir=where, prefix=".linrec-spill-")
        self.folds = folds
        self._kept: dict[int, set[int]] = {}

    @property
    def path(self) -> Path:
        return Path(self._dir.name)

    def put(self, block: int, fold: int, moments: Moments) -> None:
        """Write ``fold``'s moments of ``block`` (on CPU) to disk."""
        save_moments({block: [moments]}, self.path / f"{block}.{fold}.safetensors")
        self._kept.setdefault(block, set()).add(fold)

    def folds_of(self, block: int) -> set[int]:
        """The folds of ``block`` on disk so far."""
        return self._kept.get(block, set())

    def __getitem__(self, block: int) -> list[Moments]:
        if self._kept.get(block) != set(range(self.folds)):
            raise KeyError(block)
        return [load_moments(self.path / f"{block}.{f}.safetensors")[block][0] for f in range(self.folds)]

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(b for b, folds in self._kept.items() if folds == set(range(self.folds))))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def remove(self) -> None:
        """Delete the files now (reading a block afterwards fails)."""
        self._dir.cleanup()
        self._kept.clear()


def merge_folds(folds: list[Moments]) -> Moments:
    """The moments of all folds together."""
    total = folds[0]
    for m in folds[1:]:
        total = total + m
    return total


def save_moments(
    moments: Mapping[int, list[Moments]], path: str | Path, metadata: dict[str, str] | None = None
) -> None:
    """Write per-block, per-fold moments to one safetensors file (metadata: free-form strings), one block at a time
    (:func:`linrec.core.tensorfile.write_tensors`): a mapping that makes each block's moments when read is never
    held whole."""

    def tensors() -> Iterator[tuple[str, torch.Tensor]]:
        for block in moments:
            for f, m in enumerate(moments[block]):
                yield f"{block}.{f}.n", torch.tensor([m.n], dtype=torch.int64)
                for name in _FIELDS:
                    value = getattr(m, name)
                    if name in _SYMMETRIC:  # the upper triangle only: a third less to write and read
                        yield f"{block}.{f}.{name}_upper", value[_upper(value.shape[0], value.device)]
                    else:
                        yield f"{block}.{f}.{name}", value

    write_tensors(path, tensors, metadata)


_SYMMETRIC = ("cxx", "cyy")
"""The fields :func:`save_moments` writes as their upper triangle (row by row, diagonal included)."""


@functools.cache
def _upper(d: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = torch.triu_indices(d, d, device=device)
    return rows, cols


def _read_field(f: Any, key: str, name: str) -> torch.Tensor:
    """One field of one fold as :func:`save_moments` wrote it (a whole matrix, from files written before
    triangles were)."""
    if name not in _SYMMETRIC or f"{key}.{name}" in f.keys():
        return f.get_tensor(f"{key}.{name}")
    packed = f.get_tensor(f"{key}.{name}_upper")
    d = math.isqrt(8 * packed.numel() + 1) // 2  # packed holds d(d+1)/2 values
    upper = torch.zeros(d, d, dtype=packed.dtype)
    upper[_upper(d, upper.device)] = packed
    return symmetric(upper)


def load_moments(path: str | Path, blocks: Iterable[int] | None = None) -> BlockMoments:
    """Read what :func:`save_moments` wrote: every block, or only ``blocks`` (the rest is never read)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        names = list(f.keys())
        wanted = None if blocks is None else set(blocks)
        keys = sorted({tuple(int(p) for p in k.split(".")[:2]) for k in names})
        out: BlockMoments = {}
        for block, fold in keys:
            if wanted is not None and block not in wanted:
                continue
            key = f"{block}.{fold}"
            n = int(f.get_tensor(f"{key}.n").item())
            out.setdefault(block, []).append(Moments(n, *(_read_field(f, key, name) for name in _FIELDS)))
    return out


def saved_blocks(path: str | Path) -> list[int]:
    """The blocks a file written by :func:`save_moments` or :func:`linrec.core.sample.save_rows` holds
    (read from its header only)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return sorted({int(k.split(".")[0]) for k in f.keys()})


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
