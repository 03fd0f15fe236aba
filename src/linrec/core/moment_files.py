"""Moments on disk: per-block, per-fold :class:`linrec.core.moments.Moments` in safetensors files.

:func:`save_moments` writes one file (Cxx and Cyy as their upper triangles), :func:`load_moments` reads it
back bit for bit, whole or only some blocks, and :class:`SpilledMoments` keeps a capture's finished folds
on disk while it goes on, for models whose moments would not fit in memory.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from linrec.core.moments import FIELDS, BlockMoments, Moments, symmetric
from linrec.core.tensorfile import write_tensors


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
                for name in FIELDS:
                    value = getattr(m, name)
                    if name in _SYMMETRIC and value.ndim == 2:  # the upper triangle only: a third less to write, read
                        yield f"{block}.{f}.{name}_upper", value[_upper(value.shape[0], value.device)]
                    else:
                        yield f"{block}.{f}.{name}", value

    write_tensors(path, tensors, metadata)


_SYMMETRIC = ("cxx", "cyy")
"""The fields :func:`save_moments` writes as their upper triangle (row by row, diagonal included); a Cyy held as its
diagonal alone (:attr:`Moments.full_output`) is written as it is."""


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
            out.setdefault(block, []).append(Moments(n, *(_read_field(f, key, name) for name in FIELDS)))
    return out


def saved_blocks(path: str | Path) -> list[int]:
    """The blocks a file written by :func:`save_moments` or :func:`linrec.core.sample.save_rows` holds
    (read from its header only)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return sorted({int(k.split(".")[0]) for k in f.keys()})
